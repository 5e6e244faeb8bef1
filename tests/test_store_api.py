"""The store's public API (issue 11): typed records, explicit keywords, one addressing, guards."""

from __future__ import annotations

import gc
import inspect
import textwrap
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mypykit import mypy_strict
from storekit import SCHEMA, VALUES, Post, aio, like, post2

from opendata_kv import RecordType, Schema, Store, SyncStore
from opendata_kv import fields as F
from opendata_kv.collections import RecordCollection, default_schema
from opendata_kv.errors import (
    ArgumentTypeError,
    CursorError,
    InvalidArgumentError,
    KeyEncodeError,
    OpendataKvError,
    SchemaError,
    StoreClosedError,
    StoreExistsError,
    StoreLocationError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from opendata_kv.keys import Key
from opendata_kv.objstore.deadline import READER_TIMEOUT
from opendata_kv.store import RawRecord, Record
from opendata_kv.store.opening import set_block_cache

UNKNOWN_KEY = b"\x09\xf0stray"  # version 9, record type 0xF: no RecordType owns it


# --- typed records ------------------------------------------------------------------------------


@aio
async def test_scans_yield_typed_records_and_raw_rows_apart() -> None:
    async with Store.open("memory://typed", SCHEMA, values=VALUES) as store:
        await store.put(post2, ("did:a", "r1"), Post("hi"))
        await store.put_raw(UNKNOWN_KEY, b"\x00raw")
        [record] = await store.scan(post2).to_list()
        assert type(record) is Record and isinstance(record.key, Key)
        assert record.key.rkey == "r1" and record.value == Post("hi")
        rows = await store.scan_all(on_unknown="raw").to_list()
        assert [type(r) for r in rows] == [Record, RawRecord]
        assert rows[1] == RawRecord(UNKNOWN_KEY, b"\x00raw", UNKNOWN_KEY)
        assert [type(r) for r in await store.scan_all(on_unknown="skip").to_list()] == [Record]


def test_types_check_and_typos_fail_under_mypy(tmp_path: Path, mypy_cache: Path) -> None:
    """`record.key.rkey` type-checks; misspelt keywords and a raw row's key do not."""
    source = tmp_path / "client.py"
    source.write_text(
        textwrap.dedent(
            """
            from opendata_kv import RecordType, Schema, Store, SyncStore, fields

            post = RecordType("post", 2, [("repo", fields.string), ("rkey", fields.string)])
            schema = Schema(post)

            async def typed(store: Store) -> str:
                async for record in store.scan("post", "did:a"):
                    return str(record.key.rkey)
                return ""

            async def raw(store: Store) -> None:
                async for row in store.scan_all(on_unknown="raw"):
                    row.key.rkey  # E1: a raw row's key is bytes

            def sync(s: SyncStore) -> None:
                for record in s.scan(post):
                    record.key.rkey
                s.scan(post, revrse=True)  # E2
                s.scan_all(limt=3)  # E3
                SyncStore.open("memory://", schema, check_expiri=False)  # E4
                SyncStore.open_reader("memory://", schema, pol_interval=1)  # E5
                s.migrate("post", batch=3)  # E6

            async def aio(store: Store) -> None:
                store.scan(post, revrse=True)  # E7
                Store.open("memory://", schema, check_expiri=False)  # E8
                await store.put(post, ("a", "b"))  # E9: no value
            """
        )
    )
    status, out = mypy_strict(tmp_path, [source.name], mypy_cache)
    lines = [line for line in out.splitlines() if ": error:" in line]
    flagged = {line.split(":")[1] for line in lines}
    expected = {
        str(i + 1) for i, text in enumerate(source.read_text().splitlines()) if "# E" in text
    }
    assert flagged == expected, out
    assert status == 1


# --- one addressing -----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 2**64 - 1), how=st.sampled_from(["type", "name", "key"]))
def test_every_call_takes_a_record_type_a_name_or_a_key(n: int, how: str) -> None:
    def target() -> tuple[object, ...]:
        if how == "type":
            return (like, (n,))
        if how == "name":
            return ("like", (n,))
        return (like.key(n),)

    with SyncStore.open("memory://addressing", SCHEMA, values=VALUES) as store:
        if how == "key":
            store.put(like.key(n), "v")
        else:
            store.put(*target(), "v")  # type: ignore[call-overload]
        assert store.get(*target()) == "v"  # type: ignore[arg-type]
        assert store.exists(*target())  # type: ignore[arg-type]
        [record] = store.scan("like").to_list()
        assert record.key == like.key(n) and record.raw_key == like.encode(n)
        assert store.scan(like).to_list() == [record]
        store.delete(*target())  # type: ignore[arg-type]
        assert not store.exists(like.key(n))


# --- guards -------------------------------------------------------------------------------------

# same name, record type and fields as `like`, but not the schema's object: its prefix collides
lookalike = RecordType("like", 3, [("n", F.u64)])
stranger = RecordType("stranger", 9, [("n", F.u64)])


@aio
async def test_put_without_a_value_is_a_type_error() -> None:
    async with Store.open("memory://novalue", SCHEMA, values=VALUES) as store:
        calls = [
            lambda: store.put(like, (1,)),  # type: ignore[call-overload]
            lambda: store.put("like", (1,)),  # type: ignore[call-overload]
            lambda: store.put(like.key(1)),  # type: ignore[call-overload]
        ]
        for call in calls:
            with pytest.raises(ArgumentTypeError, match="needs a value") as info:
                await call()
            assert isinstance(info.value, TypeError) and isinstance(info.value, OpendataKvError)
            assert (info.value.record, info.value.field) == ("like", "value")
        async with store.batch() as batch:
            with pytest.raises(ArgumentTypeError):
                batch.put(like, (1,))  # type: ignore[call-overload]
        async with store.transaction() as tx:
            with pytest.raises(ArgumentTypeError):
                await tx.put(like, (1,))  # type: ignore[call-overload]
        assert not await store.exists(like, (1,))
    with (
        SyncStore.open("memory://novalue", SCHEMA, values=VALUES) as sync,
        pytest.raises(ArgumentTypeError),
    ):
        sync.put(like, (1,))  # type: ignore[call-overload]


@aio
async def test_a_record_type_outside_the_schema_is_refused_by_name() -> None:
    async with Store.open("memory://foreign", SCHEMA, values=VALUES) as store:
        await store.put(like, (1,), "mine")
        for rt in (lookalike, stranger):
            attempts: list[Callable[[RecordType], Awaitable[object]]] = [
                lambda t: store.put(t, (1,), "x"),
                lambda t: store.put(t.key(1), "x"),
                lambda t: store.get(t, (1,)),
                lambda t: store.get(t.key(1)),
                lambda t: store.exists(t, (1,)),
                lambda t: store.delete(t, (1,)),
                lambda t: store.scan(t).to_list(),
            ]
            for attempt in attempts:
                with pytest.raises(SchemaError, match=f"record type {rt.name!r}") as info:
                    await attempt(rt)
                assert info.value.record == rt.name
            async with store.batch() as batch:
                with pytest.raises(SchemaError):
                    batch.put(rt, (1,), "x")
                with pytest.raises(SchemaError):
                    batch.delete(rt, (1,))
            async with store.transaction() as tx:
                with pytest.raises(SchemaError):
                    await tx.put(rt, (1,), "x")
                with pytest.raises(SchemaError):
                    await tx.get(rt, (1,))
        with pytest.raises(SchemaError, match="owns that prefix"):
            await store.get(lookalike, (1,))
        with pytest.raises(SchemaError, match="no record type named 'nope'"):
            await store.get("nope", (1,))
        assert [r.value for r in await store.scan(like).to_list()] == ["mine"]


class _Holder:
    def __init__(self) -> None:
        self.schema = SCHEMA
        self.values = VALUES


def test_open_takes_the_schema_forms_the_cli_takes(tmp_path: Path) -> None:
    forms: list[object] = [SCHEMA, like, [like, post2], (like,), VALUES, _Holder()]
    for form in forms:
        with SyncStore.open("memory://forms", form) as store:  # type: ignore[arg-type]
            store.put(like, (1,), "v")
            assert store.get("like", (1,)) == "v"
    with SyncStore.open("memory://forms", VALUES) as store:
        assert store.values is VALUES
    with SyncStore.open("memory://forms", _Holder()) as store:  # type: ignore[arg-type]
        assert store.values is VALUES
    for bad in (None, "schema", 5, [], [like, 5], {"like": like}, Schema):
        with pytest.raises(SchemaError, match="schema must be"):
            SyncStore.open(tmp_path / "never", bad)  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="values was built for"):
        SyncStore.open(tmp_path / "never", Schema(like), values=VALUES)
    assert not (tmp_path / "never").exists()


def test_a_closed_sync_store_raises_store_closed_and_leaks_no_coroutine() -> None:
    store = SyncStore.open("memory://closed", SCHEMA, values=VALUES)
    scan = store.scan(like)
    store.close()
    store.close()  # idempotent
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calls = [
            lambda: store.put(like, (1,), "x"),
            lambda: store.get(like, (1,)),
            lambda: store.exists(like, (1,)),
            lambda: store.delete(like, (1,)),
            lambda: store.flush(),
            lambda: store.scan(like).to_list(),
            lambda: scan.to_list(),
            lambda: store.migrate("post"),
        ]
        for call in calls:
            with pytest.raises(StoreClosedError, match="memory://closed"):
                call()
        gc.collect()


_FULL = st.tuples(st.sampled_from("abc"), st.text("xyz", max_size=3))
_BOUND = st.none() | st.tuples(st.sampled_from("abcd")) | _FULL


@settings(max_examples=40, deadline=None)
@given(
    keys=st.sets(_FULL, max_size=12),
    start=_BOUND,
    end=_BOUND,
    as_key=st.booleans(),
    reverse=st.booleans(),
)
def test_scan_bounds_take_keys_and_field_tuples(
    keys: set[tuple[str, str]],
    start: tuple[str, ...] | None,
    end: tuple[str, ...] | None,
    as_key: bool,
    reverse: bool,
) -> None:
    """start is inclusive and end exclusive, compared as field tuples (end=("b",) stops before
    every key whose first field is "b"), whether given as a tuple, a Key or key bytes."""

    def bound(b: tuple[str, ...] | None) -> object:
        if as_key and b is not None and len(b) == 2:
            return post2.key(*b)
        return b

    expected = sorted(
        (k for k in keys if (start is None or k >= start) and (end is None or k < end)),
        reverse=reverse,
    )
    with SyncStore.open("memory://bounds", SCHEMA, values=VALUES) as store:
        for repo, rkey in keys:
            store.put(post2, (repo, rkey), Post(rkey))
        got = store.scan(
            post2,
            start=bound(start),
            end=bound(end),
            reverse=reverse,  # type: ignore[arg-type]
        )
        assert [tuple(r.key) for r in got] == expected
        raw = store.scan(
            "post",
            start=None if start is None else post2.prefix(*start),
            end=None if end is None else post2.prefix(*end),
            reverse=reverse,
        )
        assert [tuple(r.key) for r in raw] == expected


@aio
async def test_a_cursor_outside_the_scan_range_is_refused() -> None:
    async with Store.open("memory://cursor", SCHEMA, values=VALUES) as store:
        for repo in "ab":
            for rkey in "xyz":
                await store.put(post2, (repo, rkey), Post(rkey))
        await store.put(like, (1,), "v")
        first = await store.scan(post2, "a", limit=1).to_list()
        rest = await store.scan(post2, "a", after=first[0].raw_key).to_list()
        assert [r.key.rkey for r in rest] == ["y", "z"]
        again = await store.scan(post2, "a", after=first[0].key).to_list()  # a Key works too
        assert again == rest
        for cursor in (like.encode(1), post2.encode("b", "x"), b"", b"\xff"):
            with pytest.raises(CursorError, match="outside the scan's range") as info:
                store.scan(post2, "a", after=cursor)
            assert info.value.value == cursor and info.value.field == "after"
        with pytest.raises(CursorError):
            store.scan_all(prefix=post2.prefix("a"), after=post2.encode("b", "x"))
        # a cursor before `start` is inside the record's range: start still wins
        late = store.scan(post2, "a", start=("a", "y"), after=first[0].raw_key)
        assert await late.to_list() == rest


@aio
async def test_errors_a_caller_causes_are_opendata_errors(tmp_path: Path) -> None:
    async with Store.open("memory://errors", SCHEMA, values=VALUES) as store:
        checks: list[tuple[Callable[[], Awaitable[object]], str]] = [
            (lambda: store.put(like, (1,), "x", ttl=-1), "ttl"),
            (lambda: store.put(like, (1,), "x", ttl=float("nan")), "ttl"),
            (lambda: store.scan(like, limit=-1).to_list(), "limit"),
            (lambda: store.scan_all(batch_size=0).to_list(), "batch_size"),
            (lambda: store.migrate("post", batch_size=0), "batch_size"),
        ]
        for call, field in checks:
            with pytest.raises(InvalidArgumentError) as info:
                await call()
            assert isinstance(info.value, ValueError) and info.value.field == field
        with pytest.raises(InvalidArgumentError, match="isolation"):
            async with store.transaction("bogus"):
                pass
        with pytest.raises(KeyEncodeError, match="a one-field key"):
            await store.get(like, 5)  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError):
            store.scan(5)  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError, match="start must be"):
            store.scan(like, start=5)  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError, match="needs a record type"):
            store.scan_all(start=("a",))  # type: ignore[arg-type]
    for kwargs in ({"object_store_max_retries": -1}, {"timeout": 0}, {"timeout": float("inf")}):
        with pytest.raises(InvalidArgumentError):
            await Store.open("memory://x", SCHEMA, **kwargs)  # type: ignore[arg-type]
    a_file = tmp_path / "file"
    a_file.write_text("not a database")
    for opening in (Store.open, Store.open_reader):
        with pytest.raises(StoreLocationError, match="is a file") as located:
            await opening(a_file, SCHEMA)
        assert isinstance(located.value, ValueError)
    with SyncStore.open("memory://coll", default_schema()) as sync:
        with pytest.raises(ArgumentTypeError, match="SyncStore wraps one") as wrong:
            RecordCollection(sync)  # type: ignore[arg-type]
        assert isinstance(wrong.value, TypeError)
        RecordCollection(sync.store)  # what the message says to do


# --- what plyvel, rocksdict and lmdb users reach for (issue 14) ---------------------------------


@aio
async def test_scan_takes_a_raw_prefix_inside_the_record_range() -> None:
    async with Store.open("memory://prefix", SCHEMA, values=VALUES) as store:
        for repo in ("a", "ab", "b"):
            await store.put(post2, (repo, "x"), Post(repo))
        by_fields = await store.scan(post2, "a").to_list()
        assert await store.scan(post2, prefix=post2.prefix("a")).to_list() == by_fields
        partial = await store.scan(post2, prefix=post2.prefix(partial="a")).to_list()
        assert [r.key.repo for r in partial] == ["a", "ab"]
        assert await store.scan(post2, prefix=like.prefix()).to_list() == []  # disjoint: empty
    with SyncStore.open("memory://prefix", SCHEMA, values=VALUES) as sync:
        sync.put(post2, ("a", "x"), Post("a"))
        assert [r.key.repo for r in sync.scan("post", prefix=post2.prefix("a"))] == ["a"]


@settings(max_examples=20, deadline=None)
@given(
    rows=st.sets(st.tuples(st.sampled_from("abc"), st.text("xy", max_size=3)), max_size=15),
    doomed=st.sampled_from("abc"),
)
def test_delete_range_removes_exactly_the_scanned_records(
    rows: set[tuple[str, str]], doomed: str
) -> None:
    with SyncStore.open("memory://delrange", SCHEMA, values=VALUES) as store:
        for repo, rkey in rows:
            store.put(post2, (repo, rkey), Post(rkey))
        store.put(like, (1,), "kept")
        gone = store.delete_range("post", doomed)
        assert gone == sum(1 for repo, _ in rows if repo == doomed)
        assert {tuple(r.key) for r in store.scan(post2)} == {r for r in rows if r[0] != doomed}
        assert store.get(like, (1,)) == "kept"
        assert store.delete_range(prefix=post2.prefix()) == len(rows) - gone
        assert store.scan(post2).to_list() == [] and store.exists(like, (1,))


@aio
async def test_delete_range_is_atomic_bounded_and_never_unscoped() -> None:
    async with Store.open("memory://delrange2", SCHEMA, values=VALUES) as store:
        for n in range(10):
            await store.put(like, (n,), f"v{n}")
        async with store.batch() as batch:
            assert await batch.delete_range(like, start=(3,), end=(7,)) == 4
            batch.put(like, (100,), "new")
        assert [r.key.n for r in await store.scan(like).to_list()] == [0, 1, 2, 7, 8, 9, 100]
        with pytest.raises(InvalidArgumentError, match="max_keys=3") as info:
            await store.delete_range(like, max_keys=3)
        assert info.value.field == "max_keys"
        assert len(await store.scan(like).to_list()) == 7  # nothing deleted
        with pytest.raises(InvalidArgumentError, match="needs a record, a prefix"):
            await store.delete_range()
        with pytest.raises(SchemaError):
            await store.delete_range(lookalike)
        assert await store.delete_range(like, max_keys=7) == 7


@aio
async def test_create_if_missing_and_error_if_exists(tmp_path: Path) -> None:
    path = tmp_path / "typo"
    with pytest.raises(StoreNotFoundError, match="no database here") as missing:
        await Store.open(path, SCHEMA, create_if_missing=False)
    assert isinstance(missing.value, FileNotFoundError) and not path.exists()
    path.mkdir()
    with pytest.raises(StoreNotFoundError):  # an empty directory holds no database either
        await Store.open(path, SCHEMA, create_if_missing=False)
    with pytest.raises(StoreNotFoundError, match="memory:// always starts empty"):
        await Store.open("memory://m", SCHEMA, create_if_missing=False)
    async with Store.open(path, SCHEMA, error_if_exists=True) as store:  # creates it
        await store.put(like, (1,), "v")
    with pytest.raises(StoreExistsError, match="already exists") as exists:
        await Store.open(path, SCHEMA, error_if_exists=True)
    assert isinstance(exists.value, FileExistsError)
    async with Store.open(path, SCHEMA, create_if_missing=False) as store:
        assert await store.get(like, (1,)) == "v"


@settings(max_examples=25, deadline=None)
@given(count=st.integers(0, 30), limit=st.integers(1, 8), reverse=st.booleans())
def test_pages_know_whether_more_follow(count: int, limit: int, reverse: bool) -> None:
    """Paging by `after` + `has_more` returns every record once, in order, with one scan per
    page and no empty page at the end (the sync scan's next_chunk is used here too)."""
    with SyncStore.open("memory://pages", SCHEMA, values=VALUES) as store:
        for n in range(count):
            store.put(like, (n,), n)
        seen: list[int] = []
        cursor: bytes | None = None
        pages = 0
        while True:
            scan = store.scan(like, after=cursor, limit=limit, reverse=reverse)
            pages += 1
            while chunk := scan.next_chunk(3):
                seen += [r.value for r in chunk]
            cursor = scan.cursor
            if not scan.has_more():
                break
        assert seen == sorted(range(count), reverse=reverse)
        assert pages == max(1, -(-count // limit))
        unlimited = store.scan(like)
        assert unlimited.has_more() == (count > 0)
        assert len(unlimited.to_list()) == count and not unlimited.has_more()


@aio
async def test_limit_zero_means_no_rows_in_scans_and_collections() -> None:
    async with Store.open("memory://zero", default_schema(*SCHEMA), values=None) as store:
        await store.put(like, (1,), "v")
        scan = store.scan(like, limit=0)
        assert await scan.to_list() == [] and await scan.has_more()
        assert await store.scan_all(limit=0).to_list() == []
        repo = RecordCollection(store)
        await repo.put("did:plc:a", "app.x.y", "k1", {"v": 1})
        page = await repo.list("did:plc:a", "app.x.y", limit=0)
        assert (page.records, page.has_more) == ([], True)
        full = await repo.list("did:plc:a", "app.x.y", limit=1)
        assert (len(full), full.cursor, full.has_more) == (1, None, False)
        with pytest.raises(InvalidArgumentError, match="limit"):
            await repo.list("did:plc:a", "app.x.y", limit=-1)


@aio
async def test_a_reader_open_is_bounded_and_names_the_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conftest import free_port

    assert inspect.signature(Store.open_reader).parameters["timeout"].default == READER_TIMEOUT
    assert inspect.signature(SyncStore.open_reader).parameters["timeout"].default == READER_TIMEOUT
    endpoint = f"http://127.0.0.1:{free_port()}"  # nobody listens: connections are refused
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for opening in (Store.open_reader, Store.open):
        with pytest.raises(StoreUnavailableError, match=r"no answer within 0\.5 s") as info:
            await opening("s3://some-bucket/db", SCHEMA, timeout=0.5)
        assert "'some-bucket'" in str(info.value) and endpoint in str(info.value)


@aio
async def test_argument_errors_of_feed_checkpoints_and_codecs_are_opendata_errors(
    tmp_path: Path,
) -> None:
    from opendata_kv.values import DataclassCodec, DecodeLimits, Values

    async with Store.open(tmp_path / "db", SCHEMA, values=VALUES) as store:
        await store.put(like, (1,), "v")
        await store.flush()
        for bad in (
            lambda: store.changes(limit=-1).__anext__(),
            lambda: store.changes(poll_interval=0).__anext__(),
            lambda: store.checkpoint(name=""),
            lambda: store.checkpoint(lifetime=-1),
        ):
            with pytest.raises(InvalidArgumentError) as info:
                await bad()
            assert isinstance(info.value, ValueError) and info.value.field is not None
        with pytest.raises(InvalidArgumentError, match="on_unknown"):
            store.scan_all(on_unknown="ignore")
    with pytest.raises(InvalidArgumentError, match="max_objects"):
        DecodeLimits(max_objects=0)
    with pytest.raises(ArgumentTypeError, match="dataclass"):
        DataclassCodec(int)
    with pytest.raises(ArgumentTypeError, match="not a value codec") as info:
        Values(SCHEMA).register(like, 42)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)


# --- block cache size (issue 15 item 3) ----------------------------------------------------------


@aio
async def test_cache_bytes_sizes_or_disables_the_block_cache(tmp_path: Path) -> None:
    calls: list[tuple[str, object]] = []

    class Builder:  # records what set_block_cache asks of a slatedb builder
        def with_db_cache(self, cache: object, cache_id: int) -> None:
            calls.append(("cache", cache_id))

        def with_db_cache_disabled(self) -> None:
            calls.append(("disabled", None))

    for size in (None, 0, 8 << 20):
        set_block_cache(Builder(), size)
    assert calls == [("disabled", None), ("cache", 0)]
    url = tmp_path / "cached"
    async with Store.open(url, SCHEMA, values=VALUES, cache_bytes=8 << 20) as store:
        await store.put(post2, ("a", "x"), Post("a"))
        await store.flush()
    for size in (0, 1 << 20, None):  # an SST read through each kind of cache
        async with Store.open_reader(url, SCHEMA, values=VALUES, cache_bytes=size) as reader:
            assert [tuple(r.key) async for r in reader.scan(post2)] == [("a", "x")]
            assert await reader.get(post2, ("a", "x")) == Post("a")
    with SyncStore.open(tmp_path / "sync", SCHEMA, values=VALUES, cache_bytes=0) as sync:
        sync.put(post2, ("b", "y"), Post("b"))
        assert sync.get(post2, ("b", "y")) == Post("b")
    for bad in (-1, True, 1.5, "8MiB"):
        for opening in (Store.open, Store.open_reader):
            with pytest.raises(InvalidArgumentError, match="cache_bytes") as raised:
                await opening(url, SCHEMA, cache_bytes=bad)  # type: ignore[arg-type]
            assert raised.value.field == "cache_bytes" and raised.value.value == bad
