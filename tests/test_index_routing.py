"""Routed `using` indexes (library.index_route: the backlinks read one collection each) and
their entries encoded by the fields' compiled key plan give exactly the index rows of the
per-record path: every index called for every record, entries checked and encoded field by
field. Hypothesis drives random batches of puts, updates and deletes of every collection
(subjects with escapes, surrogates, other types) into two stores, one with the library's
backlinks and one with the same indexes over unrouted copies of their functions that yield
lists (so the checked path runs), and compares every record and index entry byte for byte,
after each batch; the routed store's indexes also equal a recount (check_indexes)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import Index, Store
from opendata_kv.collections import RECORDS, Backlinks, default_schema
from opendata_kv.collections import backlinks as bl
from opendata_kv.errors import OpendataKvError
from opendata_kv.native.slatedb import KeyRange
from opendata_kv.store import Batch
from opendata_kv.store.indexes.layout import META
from opendata_kv.store.scan import scan_options

ROUTED = (*Backlinks(RECORDS, covering=True).indexes, *Backlinks(RECORDS, prefix="p").indexes)


def _plain(function: Any) -> Any:
    """`function` without its route, yielding lists (no compiled plan): the checked path."""

    def plain(key: Any, value: Any) -> list[list[Any]]:
        return [list(item) for item in function(key, value)]

    plain.__qualname__ = plain.__name__ = f"plain_{function.__name__}"
    globals()[plain.__name__] = plain  # module-level, so its stored name resolves
    return plain


def _unrouted(index: Index) -> Index:
    return Index(
        index.name,
        index.records,
        index.fields,
        kind=index.kind,  # type: ignore[arg-type]
        using=_plain(index.using),
        covering=index.covering,
    )


UNROUTED = tuple(_unrouted(index) for index in ROUTED)

COLLECTIONS = [bl.LIKE, bl.REPOST, bl.FOLLOW, "app.bsky.feed.post", "com.example.thing"]
REPOS = ["did:plc:aaa", "did:plc:bbb"]
RKEYS = ["3kaaaaaaaaa22", "3kbbbbbbbbb22", "self"]
SUBJECTS = st.sampled_from(
    ["at://did:plc:aaa/app.bsky.feed.post/1", "did:plc:bbb", "a\x00b", "x\x01\x02", "é"]
) | st.text(max_size=6)
ODD = st.none() | st.integers(-3, 3) | st.lists(st.integers(), max_size=2) | st.just("\ud800")
BLANK = st.just("")
VALUES = st.one_of(
    st.fixed_dictionaries({"subject": SUBJECTS}),
    st.fixed_dictionaries(
        {"subject": st.fixed_dictionaries({"uri": SUBJECTS, "cid": st.just("")})}
    ),
    st.fixed_dictionaries({"subject": ODD}),
    st.fixed_dictionaries({"subject": st.fixed_dictionaries({"uri": ODD})}),
    st.fixed_dictionaries({"text": st.text(max_size=3)}),
)
OPS = st.tuples(
    st.sampled_from(REPOS),
    st.sampled_from(COLLECTIONS),
    st.sampled_from(RKEYS),
    st.none() | VALUES,  # None: a delete
)


async def _rows(store: Store) -> list[tuple[bytes, bytes]]:
    """Every row but the index metadata (which names the functions, different here)."""
    everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    iterator = await store._source.scan_with_options(everything, scan_options(False))
    rows: list[tuple[bytes, bytes]] = []
    while batch := await iterator.next_batch(1000):
        rows += [(kv.key, kv.value) for kv in batch if not kv.key.startswith(META)]
    return rows


async def _apply(store: Store, ops: list[tuple[str, str, str, Any]]) -> str | None:
    """One batch; the name of the error that refused it, if one did."""
    batch = Batch(store)
    record = RECORDS.record
    try:  # a value msgpack refuses (a surrogate) is refused by the put itself
        for repo, collection, rkey, value in ops:
            if value is None:
                batch.delete(record, (repo, collection, rkey))
            else:
                batch.put(record, (repo, collection, rkey), value)
        await store.write(batch)
    except OpendataKvError as exc:
        return type(exc).__name__
    return None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(OPS, min_size=1, max_size=12), min_size=1, max_size=5))
@aio
async def test_routed_entries_equal_the_per_record_path(
    batches: list[list[tuple[str, str, str, Any]]],
) -> None:
    schema = default_schema()
    name = uuid.uuid4().hex
    async with (
        Store.open(f"memory://routed-{name}", schema, indexes=ROUTED) as routed,
        Store.open(f"memory://plain-{name}", schema, indexes=UNROUTED) as plain,
    ):
        for ops in batches:
            assert await _apply(routed, ops) == await _apply(plain, ops)
            assert await _rows(routed) == await _rows(plain)
        assert await routed.check_indexes() == []


@aio
async def test_a_batch_of_new_records_routes_column_by_column() -> None:
    """put_many's case (new records only, one record type): each index gets the columns of
    its collection's records, the others none."""
    schema = default_schema()
    name = uuid.uuid4().hex
    ops = [
        (repo, coll, rkey, {"subject": {"uri": f"at://{rkey}"}} if n % 2 else {"subject": repo})
        for n, (repo, coll, rkey) in enumerate(
            (r, c, k) for r in REPOS for c in COLLECTIONS for k in RKEYS
        )
    ]
    async with (
        Store.open(f"memory://routed-{name}", schema, indexes=ROUTED) as routed,
        Store.open(f"memory://plain-{name}", schema, indexes=UNROUTED) as plain,
    ):
        assert await _apply(routed, ops) is None
        assert await _apply(plain, ops) is None
        rows = await _rows(routed)
        assert rows == await _rows(plain)
        assert len(rows) > len(ops)  # entries were written
        assert await routed.check_indexes() == []


def test_the_backlinks_declare_their_collection() -> None:
    routes = {index.name: index.route for index in ROUTED}
    assert routes["atproto_record.likes_links"] == ("collection", bl.LIKE)
    assert routes["p.follows_count"] == ("collection", bl.FOLLOW)
    assert all(index.route is None for index in UNROUTED)


@pytest.mark.parametrize("value", ["\ud800", "a\x00", 7])
@aio
async def test_a_subject_no_string_field_takes_is_refused_alike(value: Any) -> None:
    """A follow subject that is not a str has no entry; one UTF-8 cannot encode refuses the
    write on both paths (the compiled plan hands it to the checked encode)."""
    schema = default_schema()
    name = uuid.uuid4().hex
    op = [("did:plc:aaa", bl.FOLLOW, "3kaaaaaaaaa22", {"subject": value})]
    async with (
        Store.open(f"memory://routed-{name}", schema, indexes=ROUTED) as routed,
        Store.open(f"memory://plain-{name}", schema, indexes=UNROUTED) as plain,
    ):
        refused = await _apply(routed, op)
        assert refused == await _apply(plain, op)
        assert (refused is not None) == (value == "\ud800")
        assert await _rows(routed) == await _rows(plain)
