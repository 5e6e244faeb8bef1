"""The indexed write path's plan (maintain.index_ops_for): a batch of new records planned a
column at a time gives exactly the index ops of the record-by-record plan, for every
registered kind, key-reading and covering indexes included; and Batch.tracked, the old name
of Batch.indexed_ops, still answers with a DeprecationWarning (issue 44 point 4)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import run

from opendata_kv import Index, RecordType, fields
from opendata_kv.store import Store
from opendata_kv.store.batch import Batch
from opendata_kv.store.indexes import maintain
from opendata_kv.store.indexes.kinds import KINDS, kind_named
from opendata_kv.store.writes import FetchReads

item = RecordType("item", 1, [("rkey", fields.u32)])


def _indexes() -> list[Index]:
    """One index of every kind over a value field, plus one reading the key and a covering
    one (the column plan decodes keys and copies stored bytes for those)."""
    out = []
    for name in KINDS:
        kind = kind_named(name)
        options: dict[str, Any] = {"amount": "n"} if kind.takes_amount else {}
        # a unique index over the group would refuse a batch of two records in one group
        over = [("rkey", fields.u32)] if name == "unique" else [("group", fields.string)]
        out.append(Index(f"by_{name}", "item", over, kind=name, **options))
    out.append(Index("by_key", "item", [("rkey", fields.u32), ("group", fields.string)]))
    out.append(Index("covered", "item", [("group", fields.string)], covering=True))
    return out


async def _nothing(keys: list[bytes]) -> list[bytes | None]:
    return [None] * len(keys)


async def _plans(tmp: str, records: list[tuple[int, str, int]]) -> tuple[list[Any], list[Any]]:
    """(column plan, record-by-record plan) of one batch of new records."""
    async with Store.open(str(Path(tmp) / "s"), [item], indexes=_indexes()) as store:
        batch = Batch(store)
        for rkey, group, n in records:
            batch.put(item, (rkey,), {"group": group, "n": n})
        indexes = store._indexes
        assert indexes is not None
        writes = batch.indexed_ops(indexes)
        reads = FetchReads(_nothing, _nothing)
        columns = await maintain.index_ops_for(indexes, store.values, writes, reads)
        real = maintain._new_records
        maintain._new_records = lambda *args: None  # type: ignore[assignment]
        try:
            one_by_one = await maintain.index_ops_for(indexes, store.values, writes, reads)
        finally:
            maintain._new_records = real  # type: ignore[assignment]
        return columns, one_by_one


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.sampled_from(["a", "b", "é", ""]), st.integers(-5, 5)),
        min_size=1,
        max_size=30,
        unique_by=lambda r: r[0],
    )
)
def test_new_records_planned_by_columns_equal_the_plan_record_by_record(
    records: list[tuple[int, str, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        columns, one_by_one = run(_plans(tmp, records))
    assert columns == one_by_one
    assert len(columns) >= len(records)  # every record has entries (and there are groups)


def test_the_column_plan_is_taken_for_new_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above compares two plans, not one with itself."""
    taken: list[int] = []
    real = maintain._new_records

    def counted(*args: Any) -> Any:
        found = real(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(maintain, "_new_records", counted)
    with tempfile.TemporaryDirectory() as tmp:
        run(_plans(tmp, [(1, "a", 1), (2, "b", 2)]))
    assert taken == [True]


def test_batch_tracked_is_the_deprecated_name_of_indexed_ops() -> None:
    async def go(tmp: str) -> None:
        async with Store.open(str(Path(tmp) / "s"), [item], indexes=_indexes()) as store:
            batch = Batch(store)
            batch.put(item, (1,), {"group": "a", "n": 1})
            assert store._indexes is not None
            with pytest.warns(DeprecationWarning, match="indexed_ops"):
                old = batch.tracked(store._indexes)
            assert old == batch.indexed_ops(store._indexes)
            assert [key for key, _, _ in old] == [item.encode(1)]

    with tempfile.TemporaryDirectory() as tmp:
        run(go(tmp))


def test_an_index_of_two_record_types_keeps_both_types_changes_in_one_batch() -> None:
    """A batch holding records of both types an index covers: each type's entries are kept
    (the plan shares the index's change list between the types)."""
    user = RecordType("user", 2, [("name", fields.string)])
    tags = Index("tags", ["item", "user"], [("group", fields.string)])
    groups = Index("groups", ["item", "user"], [("group", fields.string)], kind="count")

    async def go(tmp: str) -> None:
        async with Store.open(str(Path(tmp) / "s"), [item, user], indexes=[tags, groups]) as store:
            await store.put_many(
                [
                    (item, (1,), {"group": "a"}),
                    (user, ("u",), {"group": "a"}),
                    (item, (2,), {"group": "b"}),
                ]
            )
            entries = await store.index_scan(tags, records=False).to_list()
            assert len(entries) == 3
            found = await store.index_scan(groups).to_list()
            counts = {tuple(e.values): e.records for e in found}
            assert counts == {("a",): 2, ("b",): 1}

    with tempfile.TemporaryDirectory() as tmp:
        run(go(tmp))
