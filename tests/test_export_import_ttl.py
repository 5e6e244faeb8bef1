"""Expiry through `opendata-kv export` and `import`: each record's absolute expiry (Unix ms, as
slatedb stores it) is a jsonl field / csv column / parquet column, written back by import;
a row already expired is skipped and counted. Raw rows are compared as test_clone_raw does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from clikit import json_lines
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import run
from test_clone_raw import _rows
from test_export_import import FORMATS, fails, ok

from opendata_kv import Index, RecordType, Schema, fields
from opendata_kv.store import Store
from opendata_kv.store.expiry import now_ms

user = RecordType("user", 1, [("id", fields.u32)])
by_name = Index("users_by_name", "user", [("name", fields.string)])
module = types.ModuleType("export_ttl_schema")
module.SCHEMA = Schema(user)  # type: ignore[attr-defined]
module.INDEXES = [by_name]  # type: ignore[attr-defined]
SPEC = ("--schema", "export_ttl_schema:SCHEMA")
INDEXES = ("--indexes", "export_ttl_schema:INDEXES")
EXAMPLES = int(os.environ.get("OPENDATA_KV_EXPORT_EXAMPLES", "6"))


@pytest.fixture(autouse=True)
def _schema_module() -> Any:
    sys.modules[module.__name__] = module
    yield
    del sys.modules[module.__name__]


def _fill(db: Path, puts: list[tuple[int, str, int | None]]) -> None:
    async def fill() -> None:
        async with Store.open(str(db), module.SCHEMA, indexes=[by_name]) as store:
            for n, name, ttl in puts:
                await store.put(user, (n,), {"name": name}, ttl=ttl)
            await store.flush()

    run(fill())


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    puts=st.lists(
        st.tuples(st.integers(0, 30), st.text(max_size=6), st.none() | st.integers(600, 9000)),
        min_size=1,
        max_size=12,
    ),
    fmt=st.sampled_from(FORMATS),
)
def test_export_import_keeps_each_expiry(
    tmp_path_factory: pytest.TempPathFactory, puts: list[tuple[int, str, int | None]], fmt: str
) -> None:
    """Records with and without a TTL, and their index rows, come back with the same key,
    value and expire_ts, in every format."""
    base = tmp_path_factory.mktemp("ttl")
    db, copy, out = base / "db", base / "copy", base / f"rows.{fmt}"
    _fill(db, puts)
    ok("export", str(db), *SPEC, "--output", str(out))
    ok("import", str(copy), str(out), *SPEC, *INDEXES, "--batch-size", "3")
    want, got = run(_rows(db)), run(_rows(copy))
    assert got == want
    last = {n: ttl for n, _, ttl in puts}  # the put that stands
    assert sum(expire is not None for _, _, expire in got) == 2 * sum(
        ttl is not None for ttl in last.values()
    )  # each record with a TTL and its index entry


def test_every_format_holds_expire_at_only_for_records_with_a_ttl(tmp_path: Path) -> None:
    db = tmp_path / "db"
    _fill(db, [(1, "a", None), (2, "b", 3600)])
    expire = {key: e for key, _, e in run(_rows(db)) if e is not None}
    (stamp,) = [e for k, e in expire.items() if not k.startswith(b"\x00")]  # the record's
    lines = json_lines(ok("export", str(db), *SPEC).stdout)
    assert ["expire_at" in row for row in lines] == [False, True]
    assert lines[1]["expire_at"] == stamp
    # the same as dump --json --values, with value_hex and expire_at beside
    dumped = json_lines(ok("dump", str(db), *SPEC, "--json", "--values").stdout)
    skip = ("value_hex", "expire_at")
    assert [{k: v for k, v in r.items() if k not in skip} for r in lines] == dumped
    csv_text = ok("export", str(db), *SPEC, "--format", "csv").stdout.splitlines()
    assert csv_text[0].endswith(",expire_at")
    assert csv_text[1].endswith(",") and csv_text[2].endswith(f",{stamp}")
    pq = pytest.importorskip("pyarrow.parquet")
    ok("export", str(db), *SPEC, "--output", str(tmp_path / "rows.parquet"))
    table = pq.read_table(tmp_path / "rows.parquet")  # typed: _expires is a UTC timestamp
    assert str(table.schema.field("_expires").type) == "timestamp[ms, tz=UTC]"
    import pyarrow as pa

    assert table.column("_expires").cast(pa.int64()).to_pylist() == [None, stamp]


def test_an_expired_row_is_skipped_and_counted(tmp_path: Path) -> None:
    db, copy, out = tmp_path / "db", tmp_path / "copy", tmp_path / "rows.jsonl"
    _fill(db, [(1, "a", None), (2, "b", 3600), (3, "c", 3600)])
    lines = json_lines(ok("export", str(db), *SPEC).stdout)
    lines[1]["expire_at"] = now_ms() - 1  # passed since the export
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    report = json_lines(ok("import", str(copy), str(out), *SPEC, "--json").stdout)
    assert report == [
        {"db": str(copy), "file": str(out), "imported": 2, "expired": 1, "resumed_after": 0}
    ]
    got = {k: e for k, _, e in run(_rows(copy))}
    assert set(got) == {bytes.fromhex(lines[0]["key_hex"]), bytes.fromhex(lines[2]["key_hex"])}
    assert got[bytes.fromhex(lines[2]["key_hex"])] == lines[2]["expire_at"]
    # a batch of expired rows only still counts toward the resume marker and the report
    result = ok("import", str(tmp_path / "c2"), str(out), *SPEC, "--batch-size", "1")
    assert result.stderr == "imported 2 records; 1 already expired, not written\n"


@pytest.mark.parametrize("bad", ["-5", '"soon"', "true", "1.5", '"12a"', str(1 << 63)])
def test_a_bad_expire_at_is_refused_naming_the_line(tmp_path: Path, bad: str) -> None:
    db, copy, out = tmp_path / "db", tmp_path / "copy", tmp_path / "rows.jsonl"
    _fill(db, [(1, "a", None)])
    (line,) = ok("export", str(db), *SPEC).stdout.splitlines()
    good = json.loads(line)
    out.write_text(line + "\n" + line[:-1] + f', "expire_at": {bad}}}\n')
    err = fails("import", str(copy), str(out), *SPEC, "--batch-size", "5")
    assert "rows.jsonl line 2: expire_at must be a Unix time in ms" in err
    assert bad in err
    assert good["key_hex"] not in {k.hex() for k, _, _ in run(_rows(copy))}  # nothing written


def test_csv_expire_at_is_read_back(tmp_path: Path) -> None:
    """A CSV cell holds the digits; an empty cell is no TTL."""
    db, copy, out = tmp_path / "db", tmp_path / "copy", tmp_path / "rows.csv"
    _fill(db, [(1, "a", None), (2, "b", 7200)])
    ok("export", str(db), *SPEC, "--output", str(out))
    ok("import", str(copy), str(out), *SPEC)
    assert run(_rows(copy)) == [r for r in run(_rows(db)) if not r[0].startswith(b"\x00")]


def test_a_scan_keeps_no_expiry_of_an_expired_row(tmp_path: Path) -> None:
    """The expiries a scan collects (export pops them row by row) hold live rows only: an
    expired row, filtered out, leaves nothing behind to pile up."""

    async def scan() -> tuple[list[Any], dict[bytes, int]]:
        async with Store.open(str(tmp_path / "db"), module.SCHEMA) as store:
            await store.put(user, (1,), {"name": "gone"}, ttl=0.001)
            await store.put(user, (2,), {"name": "kept"}, ttl=3600)
            await store.put(user, (3,), {"name": "plain"})
            await asyncio.sleep(0.01)  # the 1 ms TTL has passed
            reading = store.scan(user)
            reading.expiries = {}
            return await reading.to_list(), reading.expiries

    records, expiries = run(scan())
    assert [r.key.id for r in records] == [2, 3]
    assert list(expiries) == [records[0].raw_key]
