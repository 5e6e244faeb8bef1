"""How a covering backlink page reads (issue 39's page target, collections/covering.py): one
scan opened and one native batch of limit + 1 rows per page, a read-ahead sized by the rows
already read, and the index's bound plan decoding entries in C exactly as in Python (the
answers themselves are compared with a recount in test_appview_reads.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import Store
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RECORDS,
    RecordCollection,
    default_schema,
)
from opendata_kv.collections.covering import covering_plan
from opendata_kv.errors import StoreDataError
from opendata_kv.ids import tid
from opendata_kv.native import accel, calls
from opendata_kv.store import scan as scan_module
from opendata_kv.store.indexes.layout import encode_fields
from opendata_kv.values import Values

LIKE = "app.bsky.feed.like"
POST = f"at://did:plc:{'a' * 24}/app.bsky.feed.post/{tid.encode(1 << 52)}"
INDEXES = (*BACKLINKS.indexes, *(link.entries for link in COVERING_BACKLINKS))
LINKS = COVERING_BACKLINKS.likes.entries


def like(uri: str) -> dict[str, Any]:
    return {"$type": LIKE, "subject": {"uri": uri, "cid": "bafy"}, "createdAt": "2024-01-01Z"}


async def _likes(store: Store, count: int) -> None:
    records = RecordCollection(store, key_types=BSKY_KEY_TYPES)
    items = [
        (f"did:plc:{n:024d}", LIKE, tid.encode((1 << 52) + n), like(POST)) for n in range(count)
    ]
    await records.put_many(items)


class _Counted:
    """calls.scan and calls.next_columns wrapped: what each page opened and fetched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[int] = []  # read_ahead_bytes of each scan opened
        self.batches: list[int] = []  # rows asked for, per native batch
        scan, next_columns = calls.scan, calls.next_columns

        def counted_scan(source: Any, *args: Any) -> Any:
            self.opened.append(args[-1].read_ahead_bytes)
            return scan(source, *args)

        def counted_columns(iterator: Any, limit: int) -> Any:
            self.batches.append(limit)
            return next_columns(iterator, limit)

        monkeypatch.setattr(calls, "scan", counted_scan)
        monkeypatch.setattr(calls, "next_columns", counted_columns)


@pytest.mark.parametrize("flushed", [False, True])
def test_a_page_is_one_scan_and_one_native_batch(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, flushed: bool
) -> None:
    async def main() -> None:
        async with Store.open(str(tmp_path), default_schema(), indexes=INDEXES) as store:
            await _likes(store, 350)
            if flushed:
                await store.flush()
            covering = RecordCollection(store, backlinks=COVERING_BACKLINKS)
            counted = _Counted(monkeypatch)
            per_page = []
            cursor = None
            seen = []
            while True:
                before = (len(counted.opened), len(counted.batches))
                page = await covering.likes(POST, limit=100, cursor=cursor)
                seen += [record.repo for record in page]
                per_page.append(
                    (len(counted.opened) - before[0], counted.batches[before[1] :], len(page))
                )
                cursor = page.cursor
                if cursor is None:
                    break
            assert seen == [f"did:plc:{n:024d}" for n in range(350)]
            # each page opens one scan and fetches its 100 rows and the next page's first
            # in one batch; the last, short page asks once more to learn the range ended
            assert per_page == [
                (1, [101], 100),
                (1, [101], 100),
                (1, [101], 100),
                (1, [101, 101 - 50], 50),
            ]

    asyncio.run(main())


def _window(nbytes: int) -> int:
    """The smallest power-of-two read-ahead from 4 KiB holding `nbytes`, at most 256 KiB."""
    size = 4096
    while size < nbytes and size < 256 * 1024:
        size *= 2
    return size


def test_the_read_ahead_is_sized_by_the_rows_read(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with Store.open(str(tmp_path), default_schema(), indexes=INDEXES) as store:
            await _likes(store, 300)
            await store.flush()
            covering = RecordCollection(store, backlinks=COVERING_BACKLINKS)
            counted = _Counted(monkeypatch)
            plan = covering_plan(store.values, LINKS, RECORDS.record)
            plan.row_bytes = 0  # as before any page: the scan's own window
            first = await covering.likes(POST, limit=100)
            row_bytes = plan.row_bytes
            assert 100 < row_bytes < 1000
            await covering.likes(POST, limit=100, cursor=first.cursor)
            await covering.likes(POST, limit=10, cursor=first.cursor, reverse=True)
            sized = _window(101 * row_bytes * 5 // 4)
            small = _window(11 * plan.row_bytes * 5 // 4)
            assert counted.opened == [scan_module.READ_AHEAD_BYTES, sized, small]
            assert sized < scan_module.READ_AHEAD_BYTES

    asyncio.run(main())


def test_sized_read_ahead_rounds_up_to_a_power_of_two_within_bounds() -> None:
    async def main() -> None:
        async with Store.open("memory://sized", default_schema()) as store:
            for nbytes, want in [
                (0, scan_module.MIN_PAGE_READ_AHEAD),
                (4096, 4096),
                (4097, 8192),
                (40_000, 65_536),
                (10**9, scan_module.READ_AHEAD_BYTES),
            ]:
                for reverse in (False, True):
                    scan = store.scan_all(reverse=reverse, limit=10)
                    scan_module.sized_read_ahead(scan, nbytes)
                    options = scan._options
                    assert options.read_ahead_bytes == want
                    assert options.max_fetch_tasks == 1
                    assert (options.order == calls._B.IterationOrder.DESCENDING) is reverse

    asyncio.run(main())


def test_a_limited_scan_fetches_its_limit_in_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        async with Store.open("memory://limited", default_schema(), indexes=INDEXES) as store:
            await _likes(store, 300)
            counted = _Counted(monkeypatch)
            rows = await store.scan(RECORDS.record, limit=200, batch_size=1024).to_list()
            assert len(rows) == 200
            assert counted.batches == [200]
            counted.batches.clear()
            rows = await store.scan(RECORDS.record, batch_size=1024).to_list()
            assert len(rows) == 300 and counted.batches[0] == 64  # unlimited: first row soon

    asyncio.run(main())


DID = st.from_regex(r"did:plc:[a-z2-7]{1,24}", fullmatch=True)
RKEY = st.from_regex(r"[A-Za-z0-9._:~-]{1,20}", fullmatch=True).filter(
    lambda rkey: rkey not in (".", "..")  # reserved
)
SUBJECT = st.text(min_size=1, max_size=30)  # any text: \x00 and \x01 escaped in the key
VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(SUBJECT, RKEY, DID, VALUE), max_size=12))
def test_the_plan_decodes_entries_in_c_as_in_python(
    rows: list[tuple[str, str, str, Any]],
) -> None:
    values = Values(default_schema())
    plan = covering_plan(values, LINKS, RECORDS.record)
    keys, data = [], []
    for subject, rkey, did, value in rows:
        primary = RECORDS.record.encode(did, LIKE, rkey)
        keys.append(encode_fields(LINKS.name, LINKS.fields, (subject, rkey, did)) + primary)
        data.append(msgpack.packb(value))
    python = plan._python_rows(keys, data)
    assert [tuple(row) for row in python] == [
        ((subject, rkey, did, RECORDS.record.encode(did, LIKE, rkey)), value, key)
        for (subject, rkey, did, value), key in zip(rows, keys, strict=True)
    ]
    if accel.active_module() is not None:
        assert plan.native is not None
        native = plan.native(keys, data, True)
        assert native is not None and [tuple(r) for r in native] == [tuple(r) for r in python]
        assert all(type(row) is type(python[0]) for row in native)
    assert [tuple(row) for row in plan.rows(keys, data)] == [tuple(row) for row in python]


def test_a_malformed_entry_is_named() -> None:
    values = Values(default_schema())
    plan = covering_plan(values, LINKS, RECORDS.record)
    good = encode_fields(LINKS.name, LINKS.fields, ("at://x", "3k", "did:plc:x"))
    cut = good[:-3]  # the DID's terminator gone
    with pytest.raises(StoreDataError, match="likes_links") as raised:
        plan.rows([cut], [msgpack.packb({})])
    assert raised.value.value == cut


def test_page_records_are_the_records_the_constructor_makes() -> None:
    """_repo_records fills each RepoRecord's __dict__ instead of calling the frozen
    dataclass's __init__: this pins the shape that makes it the same object (four fields, a
    __dict__, no __slots__ or __post_init__), so a change to RepoRecord fails here, not
    silently in a page."""
    from dataclasses import fields

    from opendata_kv.collections.records import RepoRecord, _repo_records

    assert [f.name for f in fields(RepoRecord)] == ["repo", "collection", "rkey", "value"]
    assert "__slots__" not in vars(RepoRecord)
    assert not hasattr(RepoRecord, "__post_init__")
    did, rkey, value = f"did:plc:{'b' * 24}", tid.encode(1 << 50), {"a": [1]}
    (fast,) = _repo_records(LIKE, [((POST, rkey, did, b"k"), value, b"entry")])
    made = RepoRecord(repo=did, collection=LIKE, rkey=rkey, value=value)
    assert fast == made and repr(fast) == repr(made) and vars(fast) == vars(made)
    assert fast.uri == made.uri
    with pytest.raises(AttributeError):
        fast.rkey = "x"  # type: ignore[misc]
