"""One range value (ScanRange, issue 44 point 2): every scan form, count, delete_range and
Batch.delete_range read the same keys for the same range, given as `range=` or as keywords."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import Index, RecordType, Schema, Store, SyncStore, fields
from opendata_kv.errors import ArgumentTypeError, CursorError
from opendata_kv.store import ScanRange

row = RecordType("row", 1, [("a", fields.string), ("b", fields.u32)])
by_n = Index("rows_by_n", "row", [("n", fields.u32)])
SCHEMA = Schema(row)
KEYS = [(a, b) for a in ("x", "xa", "xb", "y") for b in range(6)]

letters = st.sampled_from(["x", "xa", "xb", "y", "z"])
bound = st.one_of(st.none(), st.tuples(letters), st.tuples(letters, st.integers(0, 7)))
ranges = st.builds(
    ScanRange,
    leading=st.one_of(st.just(()), st.tuples(letters)),
    partial=st.one_of(st.none(), st.sampled_from(["", "x", "xa"])),
    start=bound,
    end=bound,
).filter(lambda r: not (r.leading and r.partial is not None))  # a partial is of a string


async def fill(store: Store) -> None:
    async with store.batch() as batch:
        for a, b in KEYS:
            batch.put(row, (a, b), {"n": b})


def as_keywords(rng: ScanRange) -> dict[str, Any]:
    """The same range as keywords (leading values aside)."""
    out = {
        "partial": rng.partial,
        "version": rng.version,
        "prefix": rng.prefix,
        "start": rng.start,
        "end": rng.end,
        "after": rng.after,
    }
    return {name: value for name, value in out.items() if value is not None}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=ranges, reverse=st.booleans())
def test_every_form_reads_the_same_keys(rng: ScanRange, reverse: bool) -> None:
    """scan(range=), scan(*leading, **keywords), count, delete_range: one set of keys."""

    async def check() -> None:
        async with Store.open("memory://", SCHEMA) as store:
            await fill(store)
            by_range = await store.scan(row, range=rng, reverse=reverse).to_list()
            kw: Any = as_keywords(rng)
            by_keywords = await store.scan(row, *rng.leading, reverse=reverse, **kw).to_list()
            assert by_range == by_keywords
            expected = sorted((a, b) for a, b in KEYS if _in(rng, a, b))
            assert sorted(tuple(r.key) for r in by_range) == expected
            assert await store.count(row, range=rng) == len(expected)
            assert await store.count(row, *rng.leading, **kw) == len(expected)
            if by_range:  # a cursor in the range: count and delete_range resume after it
                after = rng.but(after=by_range[0].raw_key)
                rest = await store.scan(row, range=after, reverse=reverse).to_list()
                assert rest == by_range[1:]
                if not reverse:  # count reads forward: a cursor of a forward scan
                    assert await store.count(row, range=after) == len(rest)
            async with store.batch() as batch:
                assert await batch.delete_range(row, range=rng) == len(expected)
            left = sorted(tuple(r.key) for r in await store.scan(row).to_list())
            assert left == sorted(set(KEYS) - set(expected))

    aio(check)()


def _in(rng: ScanRange, a: str, b: int) -> bool:
    """Whether key (a, b) lies in `rng`, computed from its meaning, not from the store."""
    if rng.leading and a != rng.leading[0]:
        return False
    if rng.partial is not None and not a.startswith(rng.partial):
        return False
    if rng.start is not None and (a, b)[: len(rng.start)] < rng.start:
        return False
    return not (rng.end is not None and (a, b)[: len(rng.end)] >= rng.end)


@aio
async def test_count_and_delete_range_take_after() -> None:
    """count and delete_range take a cursor like scan (they had drifted: no after=)."""
    async with Store.open("memory://", SCHEMA) as store:
        await fill(store)
        scan = store.scan(row, "x", limit=2)
        await scan.to_list()
        assert scan.cursor is not None
        assert await store.count(row, "x", after=scan.cursor) == 4
        assert await store.delete_range(row, "x", after=scan.cursor) == 4
        assert [r.key.b for r in await store.scan(row, "x").to_list()] == [0, 1]
        with pytest.raises(CursorError):  # a cursor of another range
            await store.count(row, "y", after=scan.cursor)


@aio
async def test_leading_given_twice_is_refused() -> None:
    async with Store.open("memory://", SCHEMA) as store:
        with pytest.raises(ArgumentTypeError, match="both positionally and in range"):
            store.scan(row, "x", range=ScanRange(("y",)))
        with pytest.raises(ArgumentTypeError, match="must be a ScanRange"):
            await store.count(row, range=("x",))  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError, match="leading field values are a tuple"):
            ScanRange(leading=["x"])  # type: ignore[arg-type]


def test_keywords_win_over_the_range_and_it_pickles() -> None:
    rng = ScanRange(("x",), start=("x", 1), end=("x", 4), after="k1.AAAA")
    assert pickle.loads(pickle.dumps(rng)) == rng
    assert rng.but(end=None) == ScanRange(("x",), start=("x", 1), after="k1.AAAA")
    with SyncStore.open("memory://", SCHEMA, indexes=[by_n]) as db:
        with db.batch() as batch:
            for a, b in KEYS:
                batch.put(row, (a, b), {"n": b})
        middle = ScanRange(("x",), start=("x", 1), end=("x", 4))
        assert [r.key.b for r in db.scan(row, range=middle, end=("x", 3))] == [1, 2]
        assert db.count(row, range=middle, start=None) == 4
        # index_scan takes the same value: n in [2, 4), from the index's own fields
        entries = db.index_scan(by_n, range=ScanRange(start=(2,), end=(4,)), records=False)
        assert sorted(e.values[0] for e in entries) == [2] * 4 + [3] * 4
        with pytest.raises(ArgumentTypeError, match="version"):
            db.index_scan(by_n, version=1)
        # with no record, the range is of raw keys: index entries are left out as in scan_all
        assert db.count(prefix=row.head) == len(KEYS)
        assert db.count() == len(list(db.scan_all())) == len(KEYS)
