"""opendata_kv.split_reads, what every engine's task does, run in this process: the driver fixes
one Arrow schema (to_arrow's over the whole record) and every task converts its splits with it,
so partitions of plain msgpack maps agree even where a later split holds fields, or types, the
first batch did not; the tasks' rows together are one scan's."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from enginekit import SMALL_SSTS

import opendata_kv
from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError
from opendata_kv.split_reads import plan_reads, read_batches
from opendata_kv.store.arrow import value_columns, value_from_row

item = RecordType("item", 3, [("group", F.u16), ("id", F.u32)])
item_v2 = RecordType("item", 3, [("id", F.u32)], version=2)


@dataclasses.dataclass
class Note:
    text: str
    stars: int | None = None


note = RecordType("note", 4, [("id", F.u32)], value=Note)


def late_fields(n: int) -> dict[str, Any]:
    """Values whose later keys carry fields and types the first batch never sees."""
    value: dict[str, Any] = {
        "n": n,
        "flag": n % 2 == 0,
        "ratio": n / 7,
        "name": f"item {n}",
        "blob": bytes([n % 256]),
        "ints": [n, n + 1],
        "mixed": n if n % 2 else str(n),  # JSON text: two types in the first batch
    }
    if n >= 2500:
        value["late"] = {"deep": [n]}  # a field only later splits hold
        value["n"] = f"n{n}"  # a type change the first batch's column cannot hold
    return value


def build(url: str, count: int = 3000) -> None:
    with SyncStore.open(url, Schema(item, note), settings=SMALL_SSTS) as db:
        for start in range(0, count, 500):
            with db.batch() as batch:
                for n in range(start, min(count, start + 500)):
                    batch.put(item, (n // 100, n), late_fields(n))
                    batch.put(note, (n,), Note(f"note {n}", n % 5 or None))
            db.flush()


def plan(url: str, record: Any, schema: Any, pin: opendata_kv.Pinned, size: int = 16 << 10) -> Any:
    return plan_reads(
        url,
        record,
        schema,
        split_bytes=size,
        pin=pin,
        lifetime=60,
        store_options={},
        reader_options={},
    )


def rows(table: Any, schema: Any) -> list[tuple[Any, Any]]:
    columns = value_columns(schema)
    keys = [f.name for f in schema if (f.metadata or {}).get(b"opendata_kv.role") == b"key"]
    return [(tuple(r[k] for k in keys), value_from_row(r, columns)) for r in table.to_pylist()]


@pytest.mark.parametrize(("record", "schema"), [(item, Schema(item, note)), (note, Schema(note))])
def test_every_task_converts_with_the_schema_one_to_arrow_gives(
    tmp_path: Path, record: RecordType, schema: Schema
) -> None:
    url = str(tmp_path / "db")
    build(url)
    with SyncStore.open_reader(url, schema) as db:
        whole = db.scan(record).to_arrow().read_all()
    with opendata_kv.pinned(url) as pin:
        made = plan(url, record, schema, pin, 4096)
        assert len(made.tasks) >= 2  # several tasks (how many: the splits estimates)
        assert made.arrow_schema.equals(whole.schema, check_metadata=True)
        tables = []
        for task in pickle.loads(pickle.dumps(made.tasks)):  # as an engine ships them
            batches = list(read_batches(task))
            for batch in batches:
                assert batch.schema.equals(whole.schema, check_metadata=True)
            tables.append(pa.Table.from_batches(batches, schema=whole.schema))
    joined = pa.concat_tables(tables)
    assert joined.equals(whole)  # the splits' rows, in order, are the one scan's
    assert rows(joined, whole.schema) == rows(whole, whole.schema)


def test_a_later_splits_new_fields_go_to_extra_as_in_one_to_arrow(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build(url)
    schema = Schema(item, note)
    with opendata_kv.pinned(url) as pin:
        made = plan(url, item, schema, pin)
        last = list(read_batches(made.tasks[-1]))
        with pin.open_reader(schema=schema) as reader:
            alone = reader.scan(item, range=made.tasks[-1].ranges[0]).to_arrow().schema
    assert "late" in alone.names  # a split read alone would grow a column
    assert "late" not in made.arrow_schema.names
    table = pa.Table.from_batches(last)
    extra = [value_from_row(r, value_columns(table.schema)) for r in table.to_pylist()]
    assert extra[-1]["late"] == {"deep": [2999]} and extra[-1]["n"] == "n2999"


def test_a_record_of_two_versions_keeps_to_arrows_columns(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    schema = Schema(item, item_v2)
    with SyncStore.open(url, schema) as db:
        db.put(item, (1, 1), {"a": 1})
        db.put(item_v2, (2,), {"a": 2})
        db.flush()
        whole = db.scan("item").to_arrow().read_all()
    with opendata_kv.pinned(url) as pin:
        made = plan(url, "item", schema, pin)
        got = pa.Table.from_batches(
            [b for t in made.tasks for b in read_batches(t)], schema=whole.schema
        )
    assert made.arrow_schema.equals(whole.schema, check_metadata=True)
    assert got.equals(whole)


def test_projection_and_bad_arguments(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build(url, 200)
    schema = Schema(item, note)
    with opendata_kv.pinned(url) as pin:
        made = plan(url, item, schema, pin)
        (batch, *_) = read_batches(made.tasks[0], ["name", "id"])
        assert batch.schema.names == ["name", "id"]
        with pytest.raises(InvalidArgumentError, match="no column 'nope'"):
            next(read_batches(made.tasks[0], ["nope"]))
        with pytest.raises(InvalidArgumentError, match="split_bytes"):
            plan_reads(
                url,
                item,
                schema,
                split_bytes=0,
                pin=pin,
                lifetime=60,
                store_options={},
                reader_options={},
            )
        with pytest.raises(ArgumentTypeError, match="record must be"):
            plan(url, 3, schema, pin)
        with pytest.raises(InvalidArgumentError, match="module:attr"):
            plan(url, item, "no_colon", pin)
