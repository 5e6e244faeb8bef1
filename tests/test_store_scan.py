"""Scans: every version in version order, one version, leading fields, partial strings, bounds,
reverse, limit, and cursors that resume exactly where a scan stopped."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import SCHEMA, VALUES, Post, aio, event, like, post1, post2

from opendata_kv import Store, SyncStore
from opendata_kv.errors import SchemaError
from opendata_kv.store import Record, SyncScan
from opendata_kv.store.cursor import decode_cursor, encode_cursor

V1 = [("did:a", "3ka"), ("did:a", "3kb"), ("did:b", "3ka"), ("did:bb", "x")]
V2 = [("did:a", "3k1"), ("did:a", "3k2"), ("did:a", "4z"), ("did:b", "3k9"), ("did:c", "a")]


async def fill(store: Store) -> None:
    async with store.batch() as batch:
        for repo, rkey in V1:
            batch.put(post1, (repo, rkey), {"t": f"{repo}/{rkey}"})
        for repo, rkey in V2:
            batch.put(post2, (repo, rkey), Post(f"{repo}/{rkey}"))
        for n in range(20):
            batch.put(like, (n,), n)
        for seq in (1, 5, 3):
            batch.put(event, ("s", seq), seq)


def keys(records: list[Record]) -> list[tuple[int, str, str]]:
    out = []
    for record in records:
        assert not isinstance(record.key, bytes)
        out.append((record.key.record_type.version, *record.key))
    return out


@pytest.mark.parametrize("store_url", ["memory", "local", "s3"], indirect=True)
@aio
async def test_scan_shapes(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        await fill(store)
        v1 = [(1, r, k) for r, k in V1]
        v2 = [(2, r, k) for r, k in V2]

        # every version of a name: all of v1, then all of v2 (the version byte leads the key)
        everything = await store.scan("post").to_list()
        assert keys(everything) == v1 + v2
        # values decode per version; v1 values were upgraded to Post
        assert all(isinstance(r.value, Post) for r in everything)
        assert everything[0].value == Post("did:a/3ka")
        assert everything[0].raw_key == post1.encode("did:a", "3ka")
        assert keys(await store.scan("post", reverse=True).to_list()) == v2[::-1] + v1[::-1]

        # one version
        assert keys(await store.scan(post1).to_list()) == v1
        assert keys(await store.scan("post", version=2).to_list()) == v2
        with pytest.raises(SchemaError):
            store.scan(post1, version=2)
        raw = await store.scan(post1, upgrade=False).to_list()
        assert raw[0].value == {"t": "did:a/3ka"}

        # leading fields, partial strings (the terminated string is not a prefix of did:bb)
        assert keys(await store.scan("post", "did:b").to_list()) == [
            (1, "did:b", "3ka"),
            (2, "did:b", "3k9"),
        ]
        assert keys(await store.scan("post", "did:a", partial="3k").to_list()) == [
            (1, "did:a", "3ka"),
            (1, "did:a", "3kb"),
            (2, "did:a", "3k1"),
            (2, "did:a", "3k2"),
        ]
        assert keys(await store.scan(post2, partial="did:b").to_list()) == [(2, "did:b", "3k9")]
        assert keys(await store.scan(post1, partial="did:b").to_list()) == [
            (1, "did:b", "3ka"),
            (1, "did:bb", "x"),
        ]
        assert keys(await store.scan("post", "did:a", "3k1").to_list()) == [(2, "did:a", "3k1")]
        assert await store.scan("post", "did:zzz").to_list() == []

        # reverse + limit
        assert keys(await store.scan("post", "did:a", reverse=True, limit=2).to_list()) == [
            (2, "did:a", "4z"),
            (2, "did:a", "3k2"),
        ]
        assert await store.scan("post", limit=0).to_list() == []
        assert [r.key.n async for r in store.scan(like, limit=3)] == [0, 1, 2]

        # explicit [start, end) bounds intersect the record's range
        lo, hi = like.encode(5), like.encode(8)
        assert [r.key.n async for r in store.scan(like, start=lo, end=hi)] == [5, 6, 7]

        # a descending field scans newest first
        assert [r.key.seq async for r in store.scan(event, "s")] == [5, 3, 1]

        # cursors: resume after the last record yielded, as cursor, raw key or Key object
        scan = store.scan("post", limit=3)
        first = [r async for r in scan]
        assert scan.cursor == encode_cursor(first[-1].raw_key)
        assert scan.position == first[-1].raw_key
        rest = await store.scan("post", after=scan.cursor).to_list()
        assert keys(first + rest) == v1 + v2
        rest = await store.scan("post", after=first[-1].raw_key).to_list()
        assert keys(first + rest) == v1 + v2
        rest = await store.scan("post", after=first[-1].key).to_list()
        assert keys(first + rest) == v1 + v2
        back = store.scan("post", reverse=True, limit=6)
        head = await back.to_list()
        tail = await store.scan("post", reverse=True, after=back.cursor).to_list()
        assert keys(head + tail) == v2[::-1] + v1[::-1]

        # chunks
        scan = store.scan(like, batch_size=4)
        chunk = await scan.next_chunk(3)
        assert [r.key.n for r in chunk] == [0, 1, 2]
        assert scan.cursor == encode_cursor(like.encode(2))
        assert [r.key.n for r in await scan.to_list()] == list(range(3, 20))
        assert await scan.next_chunk() == []


@aio
async def test_scan_all_decodes_every_record_type() -> None:
    async with Store.open("memory://all", SCHEMA, values=VALUES) as store:
        await fill(store)
        records = await store.scan_all().to_list()
        assert len(records) == len(V1) + len(V2) + 20 + 3
        assert [r.raw_key for r in records] == sorted(r.raw_key for r in records)
        names = [r.key.record_type.name for r in records if not isinstance(r.key, bytes)]
        # key order is version-major: every v1 record type, then the v2 posts
        assert names == ["post"] * 4 + ["like"] * 20 + ["event"] * 3 + ["post"] * 5
        assert len(await store.scan_all(prefix=like.head).to_list()) == 20
        assert len(await store.scan_all(prefix=post1.head, limit=2).to_list()) == 2
        back = await store.scan_all(reverse=True, limit=4).to_list()
        assert [r.raw_key for r in back] == [r.raw_key for r in records[::-1][:4]]


# --- property: resuming from cursors equals the uninterrupted scan ------------------------------

_counter = itertools.count()


@pytest.fixture(scope="module")
def sync_store() -> Iterator[SyncStore]:
    with SyncStore.open("memory://hypothesis", SCHEMA, values=VALUES) as store:
        yield store


rkeys = st.text(alphabet="\x00\x01ab3kz\xff~", min_size=1, max_size=4)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    v1=st.sets(rkeys, max_size=12),
    v2=st.sets(rkeys, max_size=12),
    deleted=st.sets(rkeys, max_size=4),
    limits=st.lists(st.integers(1, 7), min_size=1, max_size=6),
    reverse=st.booleans(),
    batch_size=st.integers(1, 5),
    partial=st.sampled_from([None, "a", "3k", "\x00"]),
)
def test_cursor_resume_equals_uninterrupted_scan(
    sync_store: SyncStore,
    v1: set[str],
    v2: set[str],
    deleted: set[str],
    limits: list[int],
    reverse: bool,
    batch_size: int,
    partial: str | None,
) -> None:
    repo = f"repo{next(_counter)}"  # each example gets its own slice of the shared store
    with sync_store.batch() as batch:
        for rkey in v1:
            batch.put(post1, (repo, rkey), {"t": rkey})
        for rkey in v2:
            batch.put(post2, (repo, rkey), Post(rkey))
    with sync_store.batch() as batch:
        for rkey in deleted:
            batch.delete(post1, (repo, rkey))
    live = {post1.encode(repo, k) for k in v1 - deleted} | {post2.encode(repo, k) for k in v2}
    if partial is not None:
        live = {
            k
            for k in live
            if k.startswith(post1.prefix(repo, partial=partial))
            or k.startswith(post2.prefix(repo, partial=partial))
        }
    expected = sorted(live, reverse=reverse)

    def scan(**options: Any) -> SyncScan:
        return sync_store.scan(
            "post", repo, partial=partial, reverse=reverse, batch_size=batch_size, **options
        )

    whole = [r.raw_key for r in scan()]
    assert whole == expected

    resumed: list[bytes] = []
    cursor = None
    for limit in itertools.cycle(limits):
        page = scan(limit=limit, after=cursor)
        got = [r.raw_key for r in page]
        assert len(got) <= limit
        resumed += got
        if len(got) < limit:
            break
        cursor = page.cursor
        assert cursor is not None and decode_cursor(cursor) == got[-1]
    assert resumed == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.one_of(
            st.integers(1, 5).map(lambda n: ("for", n)),
            st.integers(1, 7).map(lambda n: ("chunk", n)),
            st.just(("anext", 1)),
            st.just(("has_more", 0)),
        ),
        max_size=12,
    ),
    batch_size=st.integers(1, 9),
)
def test_async_for_mixed_with_next_chunk_anext_and_has_more(
    steps: list[tuple[str, int]], batch_size: int
) -> None:
    """Every way of taking records from one scan, interleaved, yields each record once in
    order, and `cursor` is always the last one taken."""

    async def run() -> None:
        async with Store.open("memory://mixed", SCHEMA, values=VALUES) as store:
            for n in range(23):
                await store.put(like, (n,), {"n": n})
            scan = store.scan(like, batch_size=batch_size)
            rows = aiter(scan)
            taken: list[Any] = []
            for op, n in steps:
                if op == "for":
                    async for record in rows:
                        taken.append(record)
                        if len(taken) % n == 0:
                            break
                elif op == "chunk":
                    taken += await scan.next_chunk(n)
                elif op == "anext":
                    with contextlib.suppress(StopAsyncIteration):
                        taken.append(await scan.__anext__())
                else:
                    assert await scan.has_more() == (len(taken) < 23)
                assert scan.position == (taken[-1].raw_key if taken else None)
                assert scan.cursor == (encode_cursor(taken[-1].raw_key) if taken else None)
            taken += [record async for record in rows]
            assert [r.key.n for r in taken] == list(range(23))

    asyncio.run(run())
