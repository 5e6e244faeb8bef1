"""RecordCollection: key types on every write, create without overwrite (also under
concurrency and forced TID collisions), listing with cursors, collections(), count()."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import run, with_store

from opendata_kv import RecordType, Schema, Store, fields
from opendata_kv.collections import (
    BSKY_KEY_TYPES,
    RECORDS,
    RecordCollection,
    RecordsLayout,
    default_schema,
)
from opendata_kv.collections.records import SEEK_AFTER
from opendata_kv.errors import (
    IdError,
    InvalidInputError,
    RecordExistsError,
    RkeyError,
    SchemaError,
    TransactionConflictError,
)
from opendata_kv.ids import tid
from opendata_kv.ids.tid import TidGenerator
from opendata_kv.store.cursor import encode_cursor

T = TypeVar("T")

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
BOB = "did:web:bob.example.com"
POST = "app.bsky.feed.post"
LIKE = "app.bsky.feed.like"
PROFILE = "app.bsky.actor.profile"

KEY_TYPES = {**BSKY_KEY_TYPES, "com.example.byNsid": "nsid", "com.example.anything": "any"}


Body = Callable[[RecordCollection], Awaitable[None]]


def with_records(db_url: str, body: Body, **options: Any) -> None:
    with_store(
        db_url,
        default_schema(),
        lambda store: body(RecordCollection(store, key_types=KEY_TYPES, **options)),
    )


class FixedTids:
    """A TidSource handing out the given TIDs in order (then repeating the last one)."""

    def __init__(self, *tids: str) -> None:
        self.tids = list(tids)
        self.calls = 0

    def next(self) -> str:
        value = self.tids[min(self.calls, len(self.tids) - 1)]
        self.calls += 1
        return value


def clock(start_us: int = 1_700_000_000_000_000, step_us: int = 1) -> Callable[[], int]:
    state = [start_us * 1000]

    def time_ns() -> int:
        state[0] += step_us * 1000
        return state[0]

    return time_ns


# --- key types -----------------------------------------------------------------------------------


def test_key_type_enforced_on_create_put_and_delete(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        bad = [
            (POST, "not-a-tid"),  # tid
            (PROFILE, "other"),  # literal:self
            ("com.example.byNsid", "3jzfcijpj2z2a"),  # nsid
        ]
        for collection, rkey in bad:
            with pytest.raises(RkeyError):
                await rc.create(ALICE, collection, {"x": 1}, rkey=rkey)
            with pytest.raises(RkeyError):
                await rc.put(ALICE, collection, rkey, {"x": 1})
            with pytest.raises(RkeyError):
                await rc.delete(ALICE, collection, rkey)
        with pytest.raises(RkeyError):  # not a record key at all, whatever the type
            await rc.put(ALICE, "com.example.anything", "a/b", {})
        with pytest.raises(RkeyError):
            await rc.put(ALICE, "com.example.anything", "..", {})
        assert await rc.count(ALICE) == 0
        # the right types pass
        await rc.put(ALICE, POST, "3jzfcijpj2z2a", {"x": 1})
        await rc.put(ALICE, PROFILE, "self", {"x": 2})
        await rc.put(ALICE, "com.example.byNsid", "com.example.thing", {"x": 3})
        await rc.put(ALICE, "com.example.anything", "any:thing~ok", {"x": 4})
        assert await rc.count(ALICE) == 4
        await rc.delete(ALICE, POST, "3jzfcijpj2z2a")
        assert await rc.count(ALICE) == 3

    with_records(db_url, body)


def test_default_key_type_applies_to_unlisted_collections() -> None:
    async def main() -> None:
        async with Store.open("memory://", default_schema()) as store:
            rc = RecordCollection(store, default_key_type="tid")
            assert str(rc.key_type("com.example.unlisted")) == "tid"
            with pytest.raises(RkeyError):
                await rc.put(ALICE, "com.example.unlisted", "abc", {})
            created = await rc.create(ALICE, "com.example.unlisted", {})
            assert tid.is_valid(created.rkey)
            with pytest.raises(RkeyError):
                RecordCollection(store, default_key_type="bogus")
            with pytest.raises(IdError):
                RecordCollection(store, key_types={"not an nsid": "tid"})

    run(main())


def test_create_chooses_the_key_by_type(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        profile = await rc.create(ALICE, PROFILE, {"displayName": "A"})
        assert profile.rkey == "self"
        assert profile.uri == f"at://{ALICE}/{PROFILE}/self"
        post = await rc.create(ALICE, POST, {"text": "hi"})
        assert tid.is_valid(post.rkey)
        anything = await rc.create(ALICE, "com.example.anything", {})
        assert tid.is_valid(anything.rkey)
        with pytest.raises(InvalidInputError, match="explicit rkey"):
            await rc.create(ALICE, "com.example.byNsid", {})
        named = await rc.create(ALICE, "com.example.byNsid", {}, rkey="com.example.x")
        assert named.rkey == "com.example.x"
        assert await rc.get(ALICE, POST, post.rkey) == {"text": "hi"}

    with_records(db_url, body)


def test_repo_and_collection_are_validated(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        for repo in ("alice", "did:PLC:x", "did:plc:", "did:plc:x/", ""):
            with pytest.raises(IdError):
                await rc.create(repo, POST, {})
            with pytest.raises(IdError):
                await rc.put(repo, POST, "3jzfcijpj2z2a", {})
        for collection in ("post", "app.bsky", "app.bsky.feed.po-st", "app..feed.post"):
            with pytest.raises(IdError):
                await rc.create(ALICE, collection, {})
        with pytest.raises(InvalidInputError, match=r"\$type"):
            await rc.create(ALICE, POST, {"$type": LIKE})
        assert await rc.repos() == []

    with_records(db_url, body)


# --- create never overwrites ---------------------------------------------------------------------


def test_create_refuses_an_existing_key(db_url: str) -> None:
    taken = "3jzfcijpj2z2a"

    async def body(rc: RecordCollection) -> None:
        await rc.put(ALICE, POST, taken, {"text": "original"})
        with pytest.raises(RecordExistsError):
            await rc.create(ALICE, POST, {"text": "explicit"}, rkey=taken)
        rc.tids = FixedTids(taken)  # the generator hands out a TID that is taken
        with pytest.raises(RecordExistsError):
            await rc.create(ALICE, POST, {"text": "generated"})
        assert await rc.get(ALICE, POST, taken) == {"text": "original"}
        await rc.create(ALICE, PROFILE, {"n": 1})
        with pytest.raises(RecordExistsError):
            await rc.create(ALICE, PROFILE, {"n": 2})
        assert await rc.get(ALICE, PROFILE, "self") == {"n": 1}
        assert await rc.count(ALICE) == 2

    with_records(db_url, body)


def test_fifty_concurrent_creates_get_fifty_keys(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        made = await asyncio.gather(*(rc.create(ALICE, POST, {"n": i}) for i in range(50)))
        rkeys = [r.rkey for r in made]
        assert len(set(rkeys)) == 50
        assert await rc.count(ALICE, POST) == 50
        for record in made:
            assert await rc.get(ALICE, POST, record.rkey) == record.value

    with_records(db_url, body)


class _OverlappingStore:
    """Proxy of a Store whose transactions all pause after their first read until `parties`
    transactions have read: every create then reads "missing" before any of them commits."""

    def __init__(self, store: Store, parties: int) -> None:
        self._store = store
        self._parties = parties
        self._arrived = 0
        self._all_read = asyncio.Event()
        self.scans = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextlib.asynccontextmanager
    async def transaction(self, isolation: str = "serializable") -> AsyncIterator[Any]:
        async with self._store.transaction(isolation) as tx:
            yield _PausingTx(tx, self)

    async def _read_done(self) -> None:
        self._arrived += 1
        if self._arrived >= self._parties:
            self._all_read.set()
        await asyncio.wait_for(self._all_read.wait(), 5)


class _PausingTx:
    def __init__(self, tx: Any, owner: _OverlappingStore) -> None:
        self._tx = tx
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    async def exists(self, *args: Any) -> bool:
        found: bool = await self._tx.exists(*args)
        await self._owner._read_done()
        return found


def test_colliding_generators_never_overwrite(db_url: str) -> None:
    """Two writers whose generators produce the same TIDs, their transactions forced to
    overlap: one commits, the other conflicts and retries with its next TID."""
    same = TidGenerator(clock_id=5, time_ns=clock()), TidGenerator(clock_id=5, time_ns=clock())

    async def main() -> None:
        async with Store.open(db_url, default_schema()) as store:
            proxy: Any = _OverlappingStore(store, parties=2)
            writers = [RecordCollection(proxy, tids=gen) for gen in same]
            made = await asyncio.gather(
                writers[0].create(ALICE, POST, {"by": 0}),
                writers[1].create(ALICE, POST, {"by": 1}),
            )
            assert made[0].rkey != made[1].rkey
            assert {made[0].rkey, made[1].rkey} == {
                tid.from_parts(1_700_000_000_000_001, 5),
                tid.from_parts(1_700_000_000_000_002, 5),
            }
            reader = RecordCollection(store)
            for record in made:
                assert await reader.get(ALICE, POST, record.rkey) == record.value
            assert await reader.count(ALICE) == 2

    run(main())


def test_colliding_generators_without_forced_overlap(db_url: str) -> None:
    """Unforced interleaving: every create either succeeds with a key of its own or fails
    with RecordExistsError; no stored value was ever replaced."""
    gens = [TidGenerator(clock_id=9, time_ns=clock()) for _ in range(2)]

    async def main() -> None:
        async with Store.open(db_url, default_schema()) as store:
            writers = [RecordCollection(store, tids=gen) for gen in gens]
            results = await asyncio.gather(
                *(writers[i % 2].create(ALICE, POST, {"n": i}) for i in range(40)),
                return_exceptions=True,
            )
            ok = [r for r in results if not isinstance(r, BaseException)]
            failed = [r for r in results if isinstance(r, BaseException)]
            assert all(
                isinstance(e, (RecordExistsError, TransactionConflictError)) for e in failed
            ), failed
            assert len({r.rkey for r in ok}) == len(ok)
            listed = await writers[0].list(ALICE, POST)
            assert {(r.rkey, r.value["n"]) for r in listed} == {(r.rkey, r.value["n"]) for r in ok}

    run(main())


def test_create_gives_up_after_max_attempts() -> None:
    run(_always_conflicting())


async def _always_conflicting() -> None:
    """The retry loop: conflicts on every attempt -> TransactionConflictError after
    max_attempts, with a fresh TID each time."""

    class ConflictTx:
        async def exists(self, *args: Any) -> bool:
            return False

        async def put(self, *args: Any) -> None:
            return None

    class AlwaysConflicting:
        def __init__(self, store: Store) -> None:
            self._store = store
            self.attempts = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self._store, name)

        @contextlib.asynccontextmanager
        async def transaction(self, isolation: str = "serializable") -> AsyncIterator[Any]:
            self.attempts += 1
            yield ConflictTx()
            raise TransactionConflictError("simulated conflict at commit")

    async with Store.open("memory://", default_schema()) as store:
        proxy: Any = AlwaysConflicting(store)
        tids = FixedTids(*(tid.from_parts(1_700_000_000_000_000 + i, 1) for i in range(10)))
        rc = RecordCollection(proxy, tids=tids, max_attempts=3)
        with pytest.raises(TransactionConflictError, match="3 conflicting attempts"):
            await rc.create(ALICE, POST, {})
        assert proxy.attempts == 3
        assert tids.calls == 3
        assert await RecordCollection(store).count(ALICE) == 0


# --- listing -------------------------------------------------------------------------------------


async def _fill(rc: RecordCollection, n: int) -> list[str]:
    rc.tids = TidGenerator(clock_id=3, time_ns=clock(step_us=1000))
    rkeys = [(await rc.create(ALICE, POST, {"n": i})).rkey for i in range(n)]
    # neighbours that must not leak into the listing
    await rc.create(ALICE, "app.bsky.feed.postgate", {}, rkey=rkeys[0])
    await rc.create("did:plc:4q2vy7fjsmu4xkzrsjbtwpoex", POST, {}, rkey=rkeys[0])
    await rc.create(BOB, POST, {})
    return rkeys


def test_list_orders_by_rkey_and_reverse_is_newest_first(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        rkeys = await _fill(rc, 12)
        assert rkeys == sorted(rkeys)  # TIDs made later sort later
        listed = await rc.list(ALICE, POST)
        assert [r.rkey for r in listed] == rkeys
        assert [r.value["n"] for r in listed] == list(range(12))
        assert listed.cursor is None
        newest = await rc.list(ALICE, POST, reverse=True)
        assert [r.rkey for r in newest] == rkeys[::-1]
        first = await rc.list(ALICE, POST, reverse=True, limit=3)
        assert [r.rkey for r in first] == rkeys[::-1][:3]
        assert all(r.repo == ALICE and r.collection == POST for r in listed)

    with_records(db_url, body)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("limit", [1, 5, 7, 21, 22, 100])
def test_list_pages_resume_from_the_cursor(reverse: bool, limit: int) -> None:
    async def body(rc: RecordCollection) -> None:
        rkeys = await _fill(rc, 21)
        expected = rkeys[::-1] if reverse else rkeys
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await rc.list(ALICE, POST, reverse=reverse, limit=limit, cursor=cursor)
            pages += 1
            assert len(page) <= limit
            seen += [r.rkey for r in page]
            if page.cursor is None:
                break
            last = page.records[-1].rkey
            assert page.cursor == encode_cursor(rc.record.encode(ALICE, POST, last))
            # an older release's cursor (the record key) resumes at the same place
            old = await rc.list(ALICE, POST, reverse=reverse, limit=limit, cursor=last)
            new = await rc.list(ALICE, POST, reverse=reverse, limit=limit, cursor=page.cursor)
            assert (old.records, old.cursor, old.has_more) == (
                new.records,
                new.cursor,
                new.has_more,
            )
            cursor = page.cursor
        assert seen == expected
        assert pages == max(1, -(-21 // limit))

    with_records("memory://", body)


def test_list_rejects_bad_cursor_and_limit() -> None:
    async def body(rc: RecordCollection) -> None:
        with pytest.raises(RkeyError, match="cursor"):
            await rc.list(ALICE, POST, cursor="bad/cursor")
        for limit in (-1, True, 1.5):
            with pytest.raises(InvalidInputError):
                await rc.list(ALICE, POST, limit=limit)  # type: ignore[arg-type]
        # limit=0 is an empty page, as Store.scan(limit=0) yields nothing
        assert (await rc.list(ALICE, POST, limit=0)).records == []
        # a cursor need not name an existing record
        await rc.put(ALICE, POST, "3jzfcijpj2z2a", {})
        await rc.put(ALICE, POST, "3jzfcijpj2z2c", {})
        after = await rc.list(ALICE, POST, cursor="3jzfcijpj2z2b")
        assert [r.rkey for r in after] == ["3jzfcijpj2z2c"]

    with_records("memory://", body)


def test_scan_streams_records() -> None:
    async def body(rc: RecordCollection) -> None:
        await _fill(rc, 3)
        everything = await rc.scan().to_list()
        assert len(everything) == 6
        alice = [r async for r in rc.scan(ALICE)]
        assert {r.collection for r in alice} == {POST, "app.bsky.feed.postgate"}
        posts = await rc.scan(ALICE, POST, reverse=True).to_list()
        assert [r.value["n"] for r in posts] == [2, 1, 0]
        with pytest.raises(InvalidInputError):
            rc.scan(None, POST)

    with_records("memory://", body)


# --- collections(), repos(), count() ------------------------------------------------------------


class _CountingScans:
    """The store, its scans counted (the store's own, as distinct makes them)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.scans = 0
        scan = store.scan

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.scans += 1
            return scan(*args, **kwargs)

        store.scan = counted  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_collections_read_short_runs_and_seek_past_long_ones(db_url: str) -> None:
    """Issue 28.10: one keys-only scan reads through short runs; a run of SEEK_AFTER keys or
    more is left with one seek on the scan's own iterator (issue 43: no second scan), so
    repos() costs about a scan, not a seek per value."""
    names = [LIKE, POST, "app.bsky.feed.postgate", "app.bsky.graph.follow", "com.example.z"]
    long_run = SEEK_AFTER + 50

    async def main() -> None:
        async with Store.open(db_url, default_schema()) as store:
            writer = RecordCollection(store)
            for i, collection in enumerate(names):
                async with store.batch() as batch:
                    for j in range(long_run if i == 1 else 3):
                        batch.put(writer.record, (ALICE, collection, f"k{j:04d}"), {"j": j})
            await writer.put(BOB, PROFILE, "self", {})
            await writer.put("did:plc:4q2vy7fjsmu4xkzrsjbtwpoe0", "com.example.other", "k", {})
            counting = _CountingScans(store)
            rc = RecordCollection(counting)  # type: ignore[arg-type]
            assert await rc.collections(ALICE) == sorted(names)
            assert counting.scans == 1  # one scan, which seeks past the long run
            assert await rc.collections(BOB) == [PROFILE]
            assert await rc.collections("did:plc:nobody") == []
            assert await rc.repos() == sorted([ALICE, "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe0", BOB])
            assert await rc.count(ALICE) == long_run + 3 * 4
            assert await rc.count(ALICE, POST) == long_run
            assert await rc.count(ALICE, "app.bsky.feed.postgate") == 3
            assert await rc.count(BOB) == 1
            assert await rc.count("did:plc:nobody") == 0

    run(main())


def test_get_exists_put_delete_roundtrip(db_url: str) -> None:
    async def body(rc: RecordCollection) -> None:
        assert await rc.get(ALICE, POST, "3jzfcijpj2z2a") is None
        assert await rc.get(ALICE, POST, "3jzfcijpj2z2a", default="none") == "none"
        record = await rc.put(ALICE, POST, "3jzfcijpj2z2a", {"v": 1})
        assert record.uri == f"at://{ALICE}/{POST}/3jzfcijpj2z2a"
        assert await rc.exists(ALICE, POST, "3jzfcijpj2z2a")
        await rc.put(ALICE, POST, "3jzfcijpj2z2a", {"v": 2})  # put replaces
        assert await rc.get(ALICE, POST, "3jzfcijpj2z2a") == {"v": 2}
        await rc.delete(ALICE, POST, "3jzfcijpj2z2a")
        await rc.delete(ALICE, POST, "3jzfcijpj2z2a")  # idempotent
        assert not await rc.exists(ALICE, POST, "3jzfcijpj2z2a")

    with_records(db_url, body)


def test_records_survive_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "db")

    async def main() -> None:
        async with Store.open(path, default_schema()) as store:
            rc = RecordCollection(store, key_types=KEY_TYPES)
            made = [await rc.create(ALICE, POST, {"n": i}) for i in range(5)]
            await store.flush()
        async with Store.open(path, default_schema()) as store:
            rc = RecordCollection(store, key_types=KEY_TYPES)
            assert [r.rkey for r in await rc.list(ALICE, POST)] == [r.rkey for r in made]
            with pytest.raises(RecordExistsError):
                await rc.create(ALICE, POST, {}, rkey=made[0].rkey)

    run(main())


# --- binding to a user schema --------------------------------------------------------------------


def test_collection_needs_its_record_types_in_the_schema() -> None:
    mine = RecordType("session", 1, [("id", fields.string)])

    async def main() -> None:
        async with Store.open("memory://", Schema(mine)) as store:
            with pytest.raises(SchemaError, match="record_types"):
                RecordCollection(store)
        # a look-alike RecordType is not the layout's: the check is by identity
        twin = RecordType("atproto_record", 0xA, RECORDS.record.fields)
        async with Store.open("memory://", Schema(twin)) as store:
            with pytest.raises(SchemaError):
                RecordCollection(store)

    run(main())


def test_custom_layout_lives_next_to_user_types() -> None:
    mine = RecordType("session", 0xA, [("id", fields.string)])  # takes the default nibble
    with pytest.raises(SchemaError):
        default_schema(mine)
    layout = RecordsLayout(0x5, keyspace=b"\x07")
    schema = Schema(mine, *layout.record_types)

    async def main() -> None:
        async with Store.open("memory://", schema) as store:
            rc = RecordCollection(store, layout=layout)
            made = await rc.create(ALICE, POST, {"text": "hi"})
            await store.put(mine, ("s1",), {"user": ALICE})
            assert [r.rkey for r in await rc.list(ALICE, POST)] == [made.rkey]
            raw = [r.raw_key async for r in store.scan_all()]
            assert raw[0] == b"\x01\xa0s1\x00"
            assert raw[1].startswith(b"\x07\x01\x50did:plc:")

    run(main())


@settings(max_examples=12, deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.integers(0, 30),  # repo
            st.sampled_from([LIKE, POST, "app.bsky.graph.follow"]),
            st.sampled_from([1, 2, SEEK_AFTER - 1, SEEK_AFTER, SEEK_AFTER + 1, 600]),
        ),
        max_size=8,
    )
)
def test_repos_and_collections_list_every_value_whatever_the_runs(
    runs: list[tuple[int, str, int]],
) -> None:
    """Issue 28.10: the listing reads short runs and seeks past long ones; whatever the run
    lengths (around SEEK_AFTER), it lists exactly the distinct repos and collections."""

    async def main() -> None:
        async with Store.open("memory://", default_schema()) as store:
            rc = RecordCollection(store)
            expected: dict[str, set[str]] = {}
            async with store.batch() as batch:
                for repo_n, collection, length in runs:
                    repo = f"did:plc:{repo_n:024d}"
                    expected.setdefault(repo, set()).add(collection)
                    for j in range(length):
                        batch.put(rc.record, (repo, collection, f"k{j:05d}"), {})
            assert await rc.repos() == sorted(expected)
            for repo, collections in expected.items():
                assert await rc.collections(repo) == sorted(collections)

    run(main())
