"""Store: locations, typed put/get/delete/exists, TTL, batches, transactions, snapshots.

Most tests run against every backend (memory://, a local directory by absolute path, by
relative path and as file:///, and S3 on a moto server)."""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from pathlib import Path
from typing import Any

import pytest
from storekit import SCHEMA, VALUES, Post, aio, blob, like, post2

from opendata_kv import Store
from opendata_kv.errors import (
    InvalidInputError,
    KeyEncodeError,
    StoreClosedError,
    StoreDataError,
    StoreError,
    StoreNotFoundError,
    TransactionConflictError,
    ValueEncodeError,
)
from opendata_kv.objstore.location import parse_location, s3_config

# --- locations ----------------------------------------------------------------------------------


def test_parse_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_location("memory://x").store_url == "memory:///"
    monkeypatch.chdir(tmp_path)
    rel = parse_location("a/b")
    assert (rel.scheme, rel.store_url, rel.path) == ("file", "file:///", str(tmp_path / "a/b"))
    url = parse_location((tmp_path / "d").as_uri())
    assert url.path == str(tmp_path / "d")
    s3 = parse_location("s3://bucket/some/prefix/")
    assert (s3.scheme, s3.store_url, s3.path, s3.bucket) == (
        "s3",
        "s3://bucket",
        "some/prefix",
        "bucket",
    )
    assert parse_location("s3://bucket").path == "db"
    for bad in ("", "s3:///x", "gs://b/p", "file://host/x", "file:relative"):
        with pytest.raises(InvalidInputError):
            parse_location(bad)


def test_s3_config_from_environment() -> None:
    env = {
        "AWS_ENDPOINT": "http://other:1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_SESSION_TOKEN": "TOK",
    }
    assert s3_config("b", env) == {
        "bucket": "b",
        "endpoint": "http://127.0.0.1:9000",  # AWS_ENDPOINT_URL wins over AWS_ENDPOINT
        "region": "eu-west-1",
        "access_key_id": "AK",
        "secret_access_key": "SK",
        "token": "TOK",
        "allow_http": "true",  # implied by the http:// endpoint
    }
    assert s3_config("b", {"AWS_REGION": "r1", "AWS_DEFAULT_REGION": "r2"})["region"] == "r1"
    assert s3_config("b", {"AWS_ENDPOINT": "https://s3.example"}) == {
        "bucket": "b",
        "endpoint": "https://s3.example",
    }
    assert s3_config("b", {"AWS_ALLOW_HTTP": "1"})["allow_http"] == "true"
    options = s3_config("b", {"AWS_REGION": "r1"}, {"region": "r9", "allow_http": "false"})
    assert options == {"bucket": "b", "region": "r9", "allow_http": "false"}
    with pytest.raises(InvalidInputError, match="allow_http is false"):
        s3_config("b", {"AWS_ENDPOINT_URL": "http://h:1", "AWS_ALLOW_HTTP": "false"})
    with pytest.raises(InvalidInputError, match="not a boolean"):
        s3_config("b", {"AWS_ALLOW_HTTP": "maybe"})


@aio
async def test_s3_explicit_options_override_environment(s3_url: str) -> None:
    # A wrong endpoint in the environment, the right one passed explicitly.
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    try:
        options = {"endpoint": endpoint}
        async with Store.open(s3_url, SCHEMA, object_store_options=options) as store:
            await store.put(like, (1,), "x")
            await store.flush()
        async with Store.open(s3_url, SCHEMA, object_store_options=options) as store:
            assert await store.get(like, (1,)) == "x"
    finally:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
    with pytest.raises(StoreError, match="no_such_option"):
        await Store.open(s3_url, SCHEMA, object_store_options={"no_such_option": "1"})
    with pytest.raises(InvalidInputError):
        await Store.open("memory://x", SCHEMA, object_store_options={"region": "x"})


@aio
async def test_s3_missing_bucket_fails_when_retries_are_bounded(s3_env: object) -> None:
    # slatedb would retry forever by default; the S3 answer (404 NoSuchBucket) is an error at
    # once whatever the retry count (issue 20.2: an answer is not an outage)
    for opening in (
        Store.open("s3://no-such-bucket/db", SCHEMA, object_store_max_retries=1),
        Store.open_reader("s3://no-such-bucket/db", SCHEMA, object_store_max_retries=1),
        Store.open("s3://no-such-bucket/db", SCHEMA),
    ):
        with pytest.raises(StoreNotFoundError, match=r"no-such-bucket.*NoSuchBucket"):
            await asyncio.wait_for(opening.__aenter__(), timeout=30)
    with pytest.raises(ValueError, match="object_store_max_retries"):
        Store.open("memory://x", SCHEMA, object_store_max_retries=-1)


# --- typed put / get / delete / exists ----------------------------------------------------------


@aio
async def test_put_get_delete_exists(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        # RecordType + tuple, RecordType + mapping, Key object: the same record
        await store.put(post2, ("did:a", "3k1"), Post("hello"))
        assert await store.get(post2, ("did:a", "3k1")) == Post("hello")
        assert await store.get(post2, {"rkey": "3k1", "repo": "did:a"}) == Post("hello")
        key = post2.key("did:a", "3k1")
        assert await store.get(key) == Post("hello")
        assert await store.exists(key)
        await store.put(key, Post("again", "fr"))
        assert await store.get(post2, ("did:a", "3k1")) == Post("again", "fr")
        await store.put(post2, {"repo": "did:a", "rkey": "3k2"}, Post("two"))
        assert await store.get(post2.key(repo="did:a", rkey="3k2")) == Post("two")

        # absent records
        assert await store.get(post2, ("did:a", "nope")) is None
        assert await store.get(post2, ("did:a", "nope"), default="dflt") == "dflt"
        assert not await store.exists(post2, ("did:a", "nope"))

        # plain msgpack values of every shape, raw bytes
        for n, value in enumerate([{"a": [1, 2.5, None, True]}, "text", 7, b"\x00\xff"]):
            await store.put(like, (n,), value)
            assert await store.get(like, (n,)) == value
            assert await store.exists(like, (n,))
        with pytest.raises(ValueEncodeError, match="the value is None"):  # issue 20.6
            await store.put(like, (9,), None)
        await store.put(blob, (1,), b"\x00raw\xff")
        assert await store.get(blob, (1,)) == b"\x00raw\xff"
        assert await store.get_raw(blob.encode(1)) == b"\x00raw\xff"

        # delete, both forms; deleting twice is fine
        await store.delete(post2, ("did:a", "3k1"))
        await store.delete(post2.key("did:a", "3k2"))
        await store.delete(post2.key("did:a", "3k2"))
        assert not await store.exists(key)
        assert await store.get(key) is None
        assert await store.exists(like, (0,))


@aio
async def test_bad_arguments_write_nothing() -> None:
    async with Store.open("memory://bad", SCHEMA, values=VALUES) as store:
        with pytest.raises(KeyEncodeError):
            await store.put(like, 5, "x")  # fields must be a tuple
        with pytest.raises(KeyEncodeError):
            await store.put(like, ("not a number",), "x")
        with pytest.raises(KeyEncodeError):
            await store.put(post2.key("a", "b"), ("a", "b"), Post("x"))  # key and fields
        with pytest.raises(ValueEncodeError, match="post v2"):
            await store.put(post2, ("a", "b"), {"not": "a Post"})
        with pytest.raises(ValueEncodeError):
            await store.put(like, (1,), object())
        with pytest.raises(ValueError, match="ttl"):
            await store.put(like, (1,), "x", ttl=0)
        assert await store.scan_all().to_list() == []


@aio
async def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db", SCHEMA)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        await store.put(like, (1,), "x")
    with pytest.raises(StoreClosedError):
        await store.get(like, (1,))


# --- TTL ----------------------------------------------------------------------------------------


@aio
async def test_ttl_expires_from_get_and_scan(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA) as store:
        await store.put(like, (1,), "short", ttl=0.5)
        await store.put(like, (2,), "forever")
        await store.put(like, (3,), "long", ttl=datetime.timedelta(hours=1))
        async with store.batch() as batch:
            batch.put(like, (4,), "batched short", ttl=0.5)
        async with store.transaction() as tx:
            await tx.put(like, (5,), "transaction short", ttl=0.5)
        written = time.time()  # every short TTL ends by written + 0.5 s on this clock
        assert await store.get(like, (1,)) == "short"
        assert [r.key.n async for r in store.scan(like)] == [1, 2, 3, 4, 5]
        # no polling: once the clock is past every expiry, each read must already miss them
        await asyncio.sleep(max(0.0, written + 0.5 + 0.01 - time.time()))
        assert await store.get(like, (1,)) is None
        assert not await store.exists(like, (4,))
        assert await store.get_raw(like.encode(5)) is None
        assert [r.key.n async for r in store.scan(like)] == [2, 3]
        assert [r.key.n async for r in store.scan(like, reverse=True, limit=1)] == [3]
        assert len(await store.scan_all().to_list()) == 2
        # writing the key again without a ttl makes it permanent
        await store.put(like, (1,), "back")
        assert await store.get(like, (1,)) == "back"


@pytest.mark.parametrize("native", [True, False], ids=["native", "generated"])
def test_rows_past_their_ttl_read_as_absent_in_every_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """get / exists / get_raw on the store, a snapshot, a transaction and a reader hide a row
    whose expire_ts has passed, whether the row comes through the native driver or the
    binding's generated get_key_value. The clock the expiry check reads is moved, not waited
    for."""
    from opendata_kv.native import calls
    from opendata_kv.store import expiry

    async def read_all(view: Any, now_ms: int) -> list[Any]:
        monkeypatch.setattr(expiry.time, "time_ns", lambda: now_ms * 1_000_000)
        try:
            return [
                await view.get(like, (1,)),
                await view.get(like, (2,), default="gone"),
                await view.exists(like, (2,)),
                await view.get_raw(like.encode(2)),
                await view.get(like, (3,), default="never"),
            ]
        finally:
            monkeypatch.undo()

    async def main() -> None:
        path = tmp_path / "db"
        async with Store.open(path, SCHEMA) as store:
            assert calls.set_active(native).active is native
            await store.put(like, (1,), "forever")
            await store.put(like, (2,), "an hour", ttl=3600)
            await store.flush()
            now = time.time_ns() // 1_000_000
            async with (
                Store.open_reader(path, SCHEMA) as reader,
                store.snapshot() as snap,
                store.transaction() as tx,
            ):
                for view in (store, snap, tx, reader):
                    live = await read_all(view, now)
                    assert live[:2] == ["forever", "an hour"] and live[2] is True, view
                    assert live[3] is not None and live[4] == "never", view
                    later = await read_all(view, now + 2 * 3600 * 1000)
                    assert later == ["forever", "gone", False, None, "never"], view

    try:
        asyncio.run(main())
    finally:
        calls.set_active(True)


@pytest.mark.parametrize("native", [True, False], ids=["native", "generated"])
def test_gets_without_expiry_checks_in_every_view(tmp_path: Path, native: bool) -> None:
    """check_expiry=False reads with get (native, or the generated binding): present and
    absent records through the store, a snapshot, a transaction, a reader."""
    from opendata_kv.native import calls

    async def main() -> None:
        path = tmp_path / "db"
        async with Store.open(path, SCHEMA, values=VALUES, check_expiry=False) as store:
            assert calls.set_active(native).active is native
            await store.put(like, (1,), "one")
            await store.put(post2, ("did:x", "a"), Post(text="hi"))
            await store.flush()
            async with (
                Store.open_reader(path, SCHEMA, values=VALUES, check_expiry=False) as reader,
                store.snapshot() as snap,
                store.transaction() as tx,
            ):
                for view in (store, snap, tx, reader):
                    assert await view.get(like, (1,)) == "one", view
                    assert await view.get(post2, ("did:x", "a")) == Post(text="hi"), view
                    assert await view.get(like, (2,), default="none") == "none", view
                    assert await view.exists(like, (1,)) and not await view.exists(like, (2,))
                    assert await view.get_raw(like.encode(2)) is None, view

    try:
        asyncio.run(main())
    finally:
        calls.set_active(True)


@aio
async def test_check_expiry_off_refuses_ttl_writes() -> None:
    async with Store.open("memory://nottl", SCHEMA, check_expiry=False) as store:
        await store.put(like, (1,), "x")
        assert await store.get(like, (1,)) == "x"
        assert [r.value async for r in store.scan(like)] == ["x"]
        with pytest.raises(InvalidInputError, match="check_expiry"):
            await store.put(like, (2,), "x", ttl=5)


# --- batches ------------------------------------------------------------------------------------


class WriteSpy:
    """Counts the store's batch writes to slatedb (native.calls.write; lets them through)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from opendata_kv.native import calls

        self.calls = 0
        original = calls.write

        def write(db: Any, batch: Any) -> Any:
            self.calls += 1
            return original(db, batch)

        monkeypatch.setattr(calls, "write", write)


@aio
async def test_batch_is_one_atomic_write(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = WriteSpy(monkeypatch)
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        await store.put(like, (0,), "doomed")
        async with store.batch() as batch:
            for n in range(1, 51):
                batch.put(like, (n,), {"n": n})
            batch.put(post2.key("did:b", "1"), Post("in batch"))
            batch.put(post2, {"repo": "did:b", "rkey": "2"}, Post("mapping"))
            batch.delete(like, (0,))
            assert len(batch) == 53
            # nothing is visible before the block ends
            assert await store.get(like, (1,)) is None
        assert spy.calls == 1
        assert [r.key.n async for r in store.scan(like)] == list(range(1, 51))
        assert await store.get(post2, ("did:b", "2")) == Post("mapping")

        # an empty batch sends nothing
        async with store.batch():
            pass
        assert spy.calls == 1

        # a block that raises writes nothing
        with pytest.raises(RuntimeError):
            async with store.batch() as batch:
                batch.put(like, (100,), "never")
                raise RuntimeError("abort")
        assert spy.calls == 1
        assert await store.get(like, (100,)) is None

        # a bad value inside the block aborts the whole batch
        with pytest.raises(ValueEncodeError):
            async with store.batch() as batch:
                batch.put(like, (101,), "fine")
                batch.put(post2, ("x", "y"), "not a Post")
        assert spy.calls == 1
        assert await store.get(like, (101,)) is None

        # durable=True flushes
        async with store.batch(durable=True) as batch:
            batch.put(like, (102,), "durable")
        assert spy.calls == 2

        # a Batch is applied once
        with pytest.raises(StoreError, match="already written"):
            batch.put(like, (103,), "too late")
        with pytest.raises(StoreError, match="already written"):
            await store.write(batch)
        assert spy.calls == 2


# --- transactions -------------------------------------------------------------------------------


@aio
async def test_transactions(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        await store.put(like, (1,), 10)

        # commit: reads see the transaction's own writes, the store sees them after
        async with store.transaction() as tx:
            value = await tx.get(like, (1,))
            await tx.put(like, (1,), value + 1)
            await tx.put(post2.key("did:t", "1"), Post("tx"))
            assert await tx.get(like, (1,)) == 11
            assert await store.get(like, (1,)) == 10
        assert await store.get(like, (1,)) == 11
        assert await store.get(post2, ("did:t", "1")) == Post("tx")

        # rollback on exception
        with pytest.raises(RuntimeError):
            async with store.transaction() as tx:
                await tx.put(like, (1,), 999)
                await tx.delete(post2, ("did:t", "1"))
                raise RuntimeError("abort")
        assert await store.get(like, (1,)) == 11
        assert await store.exists(post2, ("did:t", "1"))

        # two serializable transactions: the inner commits first, the outer read a key the
        # inner then wrote, so the outer's commit fails
        with pytest.raises(TransactionConflictError, match="retry"):
            async with store.transaction() as outer:
                assert await outer.get(like, (1,)) == 11
                async with store.transaction() as inner:
                    await inner.put(like, (1,), await inner.get(like, (1,)) + 100)
                await outer.put(like, (1,), 12)
        assert await store.get(like, (1,)) == 111

        # snapshot isolation: only write-write conflicts count
        async with store.transaction("snapshot") as outer:
            await outer.get(like, (1,))
            async with store.transaction("snapshot") as inner:
                await inner.put(like, (1,), 0)
            await outer.put(like, (2,), "disjoint")
        assert await store.get(like, (2,)) == "disjoint"
        with pytest.raises(ValueError, match="isolation"):
            async with store.transaction("bogus"):
                pass


# --- snapshots ----------------------------------------------------------------------------------


@aio
async def test_snapshot_does_not_see_later_writes(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA) as store:
        for n in range(5):
            await store.put(like, (n,), f"v{n}")
        async with store.snapshot() as snap:
            await store.put(like, (0,), "changed")
            await store.put(like, (10,), "new")
            await store.delete(like, (1,))
            async with store.batch() as batch:
                batch.put(like, (11,), "new too")
            assert await snap.get(like, (0,)) == "v0"
            assert await snap.get(like, (1,)) == "v1"
            assert await snap.get(like, (10,)) is None
            assert [r.key.n async for r in snap.scan(like)] == [0, 1, 2, 3, 4]
            assert [r.value async for r in snap.scan(like, limit=1)] == ["v0"]
        assert [r.key.n async for r in store.scan(like)] == [0, 2, 3, 4, 10, 11]


# --- readers ------------------------------------------------------------------------------------


@aio
async def test_reader_of_a_missing_database_says_so(tmp_path: Path) -> None:
    for url in ("memory://nothing", str(tmp_path / "nothing")):
        with pytest.raises(StoreDataError, match="no database here"):
            await Store.open_reader(url, SCHEMA)


@pytest.mark.parametrize("store_url", ["local", "s3"], indirect=True)
@aio
async def test_reader_is_read_only(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA) as writer:
        await writer.put(like, (1,), "x")
        await writer.flush()
        async with Store.open_reader(store_url, SCHEMA, poll_interval=0.1) as reader:
            assert reader.readonly
            assert await reader.get(like, (1,)) == "x"
            # a reader has no write methods at all (and mypy flags them: test_store_sync_face)
            for name in (
                "put",
                "delete",
                "put_raw",
                "flush",
                "batch",
                "transaction",
                "snapshot",
                "delete_range",
                "put_many",
                "write",
                "migrate",
            ):
                assert not hasattr(reader, name), name
        await asyncio.sleep(0)


@aio
async def test_local_directory_with_awkward_characters_holds_the_whole_database(
    tmp_path: Path,
) -> None:
    # Through file:/// + path, slatedb percent-encodes such names and splits the files over two
    # directories; the store must keep everything in exactly the directory asked for.
    directory = tmp_path / "café %41 #1?x" / "db"
    async with Store.open(str(directory), SCHEMA) as store:
        await store.put(like, (1,), "x")
        await store.flush()
    assert sorted(os.listdir(tmp_path)) == ["café %41 #1?x"]
    assert {"manifest", "wal"} <= set(os.listdir(directory))
    async with Store.open(directory.as_uri(), SCHEMA) as store:
        assert await store.get(like, (1,)) == "x"
    async with Store.open_reader(str(directory), SCHEMA) as reader:
        assert await reader.get(like, (1,)) == "x"
