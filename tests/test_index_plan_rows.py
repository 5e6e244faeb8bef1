"""The indexed write plan a column at a time (maintain.index_rows_for: put_many's batches,
field values found once per plan for every index on a field, count groups counted per batch,
plain puts as columns) gives exactly the rows of a per-record reference: the same records
written one `put` or `delete` each, whose plans hold one record. Compared row by row (records,
entries, count and sum rows, covering copies) after every batch, and against a recount."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import run

from opendata_kv import Index, RecordType, Store, fields
from opendata_kv.native.slatedb import KeyRange
from opendata_kv.store.indexes.layout import META
from opendata_kv.store.scan import scan_options

item = RecordType("item", 1, [("owner", fields.string), ("rkey", fields.u32)])
INDEXES = [
    # three indexes on one field: the value, count and sum maintainers share its column
    Index("by_group", "item", [("group", fields.string)]),
    Index("per_group", "item", [("group", fields.string)], kind="count"),
    Index("sum_group", "item", [("group", fields.string)], kind="sum", amount="n"),
    Index("by_n", "item", [("n", fields.i64)]),  # not a string: the per-record way
    Index("by_owner_group", "item", [("owner", fields.string), ("group", fields.string)]),
    Index("covered", "item", [("group", fields.string)], covering=True),
]

#: group values: shared strings (the plan's string memory), escapes, odd types, absent
GROUPS = st.sampled_from(["a", "b", "é", "", "x\x00y", "\x01"]) | st.text(max_size=3)
VALUES = st.one_of(
    st.fixed_dictionaries({"group": GROUPS, "n": st.integers(-5, 5)}),
    st.fixed_dictionaries({"group": GROUPS}),  # no amount
    st.fixed_dictionaries({"n": st.integers(-5, 5)}),  # no group: no entry
    st.fixed_dictionaries({"group": st.none(), "n": st.integers(-2, 2)}),
)
#: (owner, rkey, value or None for a delete)
OPS = st.tuples(st.sampled_from(["o1", "o2"]), st.integers(0, 12), st.none() | VALUES)


async def _rows(store: Store) -> list[tuple[bytes, bytes]]:
    """Every row of the store but the index metadata."""
    everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    iterator = await store._source.scan_with_options(everything, scan_options(False))
    rows: list[tuple[bytes, bytes]] = []
    while batch := await iterator.next_batch(1000):
        rows += [(kv.key, kv.value) for kv in batch if not kv.key.startswith(META)]
    return rows


async def _batched(store: Store, ops: list[tuple[str, int, Any]]) -> str | None:
    """One batch: put_many when every op is a put (its column plan), else a Batch."""
    try:
        if all(value is not None for _, _, value in ops):
            await store.put_many([(item, (owner, rkey), value) for owner, rkey, value in ops])
        else:
            async with store.batch() as batch:
                for owner, rkey, value in ops:
                    if value is None:
                        batch.delete(item, (owner, rkey))
                    else:
                        batch.put(item, (owner, rkey), value)
    except Exception as exc:
        return type(exc).__name__
    return None


async def _one_by_one(store: Store, ops: list[tuple[str, int, Any]]) -> str | None:
    """The reference: the batch's last write of each key, one write each (a plan of one
    record), or nothing when the batch is refused (checked by the caller)."""
    last = {(owner, rkey): value for owner, rkey, value in ops}
    for (owner, rkey), value in last.items():
        if value is None:
            await store.delete(item, (owner, rkey))
        else:
            await store.put(item, (owner, rkey), value)
    return None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(OPS, min_size=1, max_size=25), min_size=1, max_size=4))
def test_the_column_plan_writes_the_rows_of_one_record_at_a_time(
    batches: list[list[tuple[str, int, Any]]],
) -> None:
    async def go() -> None:
        async with (
            Store.open(f"memory://{uuid.uuid4().hex}", [item], indexes=INDEXES) as columns,
            Store.open(f"memory://{uuid.uuid4().hex}", [item], indexes=INDEXES) as reference,
        ):
            for ops in batches:
                refused = await _batched(columns, ops)
                if refused is None:
                    await _one_by_one(reference, ops)
                assert await _rows(columns) == await _rows(reference)
                assert await columns.check_indexes() == []

    run(go())


def test_the_same_field_is_read_once_for_the_indexes_on_it() -> None:
    """put_many's plan finds a field's values once for the value, count and sum indexes on
    it (Maintainer.field_column), and their rows still equal the reference."""
    from opendata_kv.store.indexes import maintainers

    found: list[str] = []
    real = maintainers.Maintainer.field_column

    def counted(self: Any, single: str, key_objs: Any, values: Any) -> Any:
        before = len(self.fields)
        out = real(self, single, key_objs, values)
        if len(self.fields) > before:
            found.append(single)
        return out

    ops = [("o1", n, {"group": "abc"[n % 3], "n": n}) for n in range(9)]

    async def go() -> None:
        maintainers.Maintainer.field_column = counted  # type: ignore[method-assign]
        try:
            async with (
                Store.open(f"memory://{uuid.uuid4().hex}", [item], indexes=INDEXES) as a,
                Store.open(f"memory://{uuid.uuid4().hex}", [item], indexes=INDEXES) as b,
            ):
                await _batched(a, ops)
                in_batch = list(found)
                await _one_by_one(b, ops)
                assert await _rows(a) == await _rows(b)
                assert await a.index_count("per_group", "a") == 3
                # the group column once for by_group, per_group, sum_group and covered
                assert sorted(in_batch) == ["group", "n"]
        finally:
            maintainers.Maintainer.field_column = real  # type: ignore[method-assign]

    run(go())
