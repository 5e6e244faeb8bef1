"""opendata_kv.keyvalue against py-key-value's documented semantics (its protocol docstrings:
get/put/delete/ttl and the *_many forms, per-key TTLs, named collections, keys, collections,
destroy, cull), on memory://, a local directory and S3 (moto); written here, not copied."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("key_value.aio")

from key_value.aio.errors import (
    InvalidKeyError,
    InvalidTTLError,
    SerializationError,
)
from key_value.aio.protocols.key_value import AsyncKeyValue

from opendata_kv import Schema, Store
from opendata_kv.errors import SchemaError, StoreClosedError
from opendata_kv.keys import RecordType, fields
from opendata_kv.keyvalue import KEYVALUE, SlateDBStore
from opendata_kv.native import calls
from opendata_kv.store.expiry import now_ms

T = TypeVar("T")


@pytest.fixture(params=["memory", "local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database location of each kind Store.open takes."""
    if request.param == "memory":
        return f"memory://kv-{uuid.uuid4().hex[:8]}"
    if request.param == "local":
        return str(tmp_path / "kv")
    url: str = request.getfixturevalue("s3_url")
    return url


def run(body: Callable[[SlateDBStore], Awaitable[T]], location: str) -> T:
    async def main() -> T:
        async with SlateDBStore(location) as kv:
            return await body(kv)

    return asyncio.run(main())


async def _until_past(expire_ms: int) -> None:
    """Wait until the wall clock has passed `expire_ms` (no timing asserted: the clock)."""
    while now_ms() <= expire_ms:
        await asyncio.sleep(0.005)


def test_it_is_an_async_key_value() -> None:
    kv: AsyncKeyValue = SlateDBStore("memory://typed")  # mypy checks the protocol here
    assert isinstance(kv, SlateDBStore)


def test_get_put_delete_and_ttl(location: str) -> None:
    async def body(kv: SlateDBStore) -> None:
        assert await kv.get("missing") is None
        assert await kv.ttl("missing") == (None, None)
        await kv.put("k", {"a": 1, "nested": {"b": [1, 2.5, None, True, "s"]}})
        assert await kv.get("k") == {"a": 1, "nested": {"b": [1, 2.5, None, True, "s"]}}
        assert await kv.ttl("k") == ({"a": 1, "nested": {"b": [1, 2.5, None, True, "s"]}}, None)
        await kv.put("k", {"a": 2}, ttl=3600)
        value, ttl = await kv.ttl("k")
        assert value == {"a": 2} and ttl is not None and 3500 < ttl <= 3600
        await kv.put("k", {"a": 3})  # a put without ttl drops the expiry
        assert await kv.ttl("k") == ({"a": 3}, None)
        assert await kv.delete("k") is True
        assert await kv.delete("k") is False
        assert await kv.get("k") is None

    run(body, location)


def test_an_entry_expires(location: str) -> None:
    async def body(kv: SlateDBStore) -> None:
        await kv.put("short", {"v": 1}, ttl=0.05)
        await kv.put("long", {"v": 2}, ttl=3600)
        entry = await kv.store.get_with_expiry(KEYVALUE, ("default_collection", "short"))
        assert entry is not None and entry.expire_ms is not None
        await _until_past(entry.expire_ms)
        assert await kv.get("short") is None
        assert await kv.ttl("short") == (None, None)
        assert await kv.get_many(["short", "long"]) == [None, {"v": 2}]
        assert await kv.delete("short") is False  # an expired entry is not there
        await kv.put_many(["a", "b"], [{"v": 1}, {"v": 2}], ttl=0.05)
        entries = await kv.store.get_many_with_expiry(
            KEYVALUE, [("default_collection", "a"), ("default_collection", "b")]
        )
        assert all(e is not None and e.expire_ms is not None for e in entries)
        await _until_past(max(e.expire_ms or 0 for e in entries if e is not None))
        assert await kv.ttl_many(["a", "b"]) == [(None, None), (None, None)]
        assert await kv.get_many(["a", "b"]) == [None, None]
        await kv.cull()
        assert await kv.store.purge_expired(KEYVALUE) == 0  # cull tombstoned them all
        assert await kv.get("long") == {"v": 2}

    run(body, location)


@pytest.mark.parametrize("ttl", [0, -1, True, "soon"])
def test_invalid_ttls_are_refused(ttl: Any) -> None:
    async def body(kv: SlateDBStore) -> None:
        with pytest.raises((InvalidTTLError, TypeError)):
            await kv.put("k", {"v": 1}, ttl=ttl)
        assert await kv.get("k") is None

    run(body, "memory://ttl-refused")


def test_collections_are_separate_namespaces(location: str) -> None:
    async def body(kv: SlateDBStore) -> None:
        await kv.put("k", {"in": "a"}, collection="a")
        await kv.put("k", {"in": "b"}, collection="b")
        await kv.put("other", {"in": "b"}, collection="b")
        await kv.put("k", {"in": "default"})
        assert await kv.get("k", collection="a") == {"in": "a"}
        assert await kv.get("k", collection="b") == {"in": "b"}
        assert await kv.get("k") == {"in": "default"}
        assert await kv.collections() == ["a", "b", "default_collection"]
        assert await kv.collections(limit=1) == ["a"]
        assert await kv.keys(collection="b") == ["k", "other"]
        assert await kv.keys("b", limit=1) == ["k"]
        assert await kv.delete("k", collection="a") is True
        assert await kv.get("k", collection="b") == {"in": "b"}
        assert await kv.destroy_collection("b") is True
        assert await kv.destroy_collection("b") is False
        assert await kv.keys("b") == []
        assert await kv.get("k") == {"in": "default"}
        assert await kv.destroy() is True
        assert await kv.collections() == []

    run(body, location)


def test_many_forms_keep_order_and_are_atomic(location: str) -> None:
    async def body(kv: SlateDBStore) -> None:
        writes: list[Any] = []
        write = calls.write

        def counted(db: Any, native: Any) -> Any:
            writes.append(native)
            return write(db, native)

        calls.write = counted  # type: ignore[assignment]
        try:
            await kv.put_many(["x", "y", "x"], [{"n": 1}, {"n": 2}, {"n": 3}], collection="m")
            assert len(writes) == 1  # one atomic batch
            assert await kv.delete_many(["y", "x", "y", "nope"], collection="m") == 2
            assert len(writes) == 2
        finally:
            calls.write = write  # type: ignore[assignment]
        await kv.put_many(["a", "b", "c"], [{"n": 1}, {"n": 2}, {"n": 3}], ttl=3600)
        assert await kv.get_many(["c", "zz", "a", "c"]) == [{"n": 3}, None, {"n": 1}, {"n": 3}]
        ttls = await kv.ttl_many(["b", "zz"])
        assert ttls[0][0] == {"n": 2} and ttls[0][1] is not None and ttls[1] == (None, None)
        # a refused value anywhere refuses the whole put_many: nothing is written
        with pytest.raises(SerializationError):
            await kv.put_many(["p", "q", "r"], [{"n": 1}, {"n": b"bytes"}, {"n": 3}])
        assert await kv.get_many(["p", "q", "r"]) == [None, None, None]
        with pytest.raises(ValueError):
            await kv.put_many(["p", "q"], [{"n": 1}])
        assert await kv.get_many([]) == [] and await kv.delete_many([]) == 0

    run(body, location)


def test_fifty_concurrent_tasks(location: str) -> None:
    async def body(kv: SlateDBStore) -> None:
        async def task(i: int) -> tuple[Any, ...]:
            key = f"task-{i}"
            await kv.put(key, {"i": i}, collection=f"c{i % 5}", ttl=3600 if i % 2 else None)
            got = await kv.get(key, collection=f"c{i % 5}")
            many = await kv.get_many([key, "absent"], collection=f"c{i % 5}")
            deleted = await kv.delete(key, collection=f"c{i % 5}") if i % 3 == 0 else None
            return got, many, deleted

        results = await asyncio.gather(*(task(i) for i in range(50)))
        for i, (got, many, deleted) in enumerate(results):
            assert got == {"i": i} and many == [{"i": i}, None]
            assert deleted is (True if i % 3 == 0 else None)
        remaining: list[str] = []
        for c in range(5):
            remaining += await kv.keys(collection=f"c{c}")
        remaining.sort()
        assert remaining == sorted(f"task-{i}" for i in range(50) if i % 3)

    run(body, location)


def test_reopen_keeps_entries_and_expiries(tmp_path: Path) -> None:
    path = str(tmp_path / "reopened")

    async def first(kv: SlateDBStore) -> float | None:
        await kv.put("kept", {"v": 1}, ttl=3600)
        await kv.put("plain", {"v": 2}, collection="c")
        return (await kv.ttl("kept"))[1]

    async def second(kv: SlateDBStore) -> tuple[Any, ...]:
        return await kv.ttl("kept"), await kv.get("plain", collection="c")

    before = run(first, path)
    (value, ttl), plain = run(second, path)
    assert value == {"v": 1} and plain == {"v": 2}
    assert before is not None and ttl is not None and 0 < ttl <= before


def test_reopen_on_s3(s3_url: str) -> None:
    async def first(kv: SlateDBStore) -> None:
        await kv.put_many(["a", "b"], [{"v": 1}, {"v": 2}], collection="s3", ttl=3600)

    async def second(kv: SlateDBStore) -> list[Any]:
        return await kv.get_many(["a", "b"], collection="s3")

    run(first, s3_url)
    assert run(second, s3_url) == [{"v": 1}, {"v": 2}]


def test_an_open_store_is_used_and_left_open() -> None:
    async def main() -> None:
        async with Store.open("memory://shared-store", Schema(KEYVALUE)) as store:
            async with SlateDBStore(store) as kv:
                await kv.put("k", {"v": 1})
            assert not store.closed  # the caller's store stays open
            assert await store.get(KEYVALUE, ("default_collection", "k")) == {"v": 1}
            other = RecordType("other", 3, [("a", fields.string)])
            async with Store.open("memory://no-kv", Schema(other)) as plain:
                with pytest.raises(SchemaError):
                    SlateDBStore(plain)

    asyncio.run(main())


def test_a_record_needs_collection_and_key_fields() -> None:
    wrong = RecordType("wrong", 4, [("bucket", fields.string), ("key", fields.string)])
    with pytest.raises(SchemaError):
        SlateDBStore("memory://x", record=wrong)
    custom = RecordType("state", 4, [("collection", fields.string), ("key", fields.string)])

    async def body(kv: SlateDBStore) -> None:
        await kv.put("k", {"v": 1})
        assert await kv.store.get(custom, ("default_collection", "k")) == {"v": 1}

    async def main() -> None:
        async with SlateDBStore("memory://custom", record=custom) as kv:
            await body(kv)

    asyncio.run(main())


@pytest.mark.parametrize(
    "value",
    [
        {"bytes": b"x"},
        {"set": {1, 2}},
        {"object": object()},
        {"deep": __import__("functools").reduce(lambda v, _: [v], range(150), 0)},  # caps
        {"huge": 2**70},  # JSON holds it, msgpack cannot: the store's codec refuses
    ],
)
def test_values_refused_with_its_serialization_error(value: dict[str, Any]) -> None:
    async def body(kv: SlateDBStore) -> None:
        with pytest.raises(SerializationError):
            await kv.put("k", value)
        with pytest.raises(SerializationError):
            await kv.put_many(["k"], [value])
        assert await kv.get("k") is None

    run(body, "memory://refused")


def test_keys_that_cannot_be_encoded_raise_invalid_key() -> None:
    async def body(kv: SlateDBStore) -> None:
        with pytest.raises(InvalidKeyError):
            await kv.put("\ud800", {"v": 1})
        with pytest.raises(InvalidKeyError):
            await kv.get("k", collection="\udfff")

    run(body, "memory://bad-keys")


def test_nothing_warns_about_stability() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SlateDBStore("memory://quiet")


def test_the_store_is_open_only_between_setup_and_close() -> None:
    kv = SlateDBStore("memory://lifecycle")
    with pytest.raises(StoreClosedError):
        _ = kv.store

    async def main() -> None:
        await kv.put("k", {"v": 1})  # the first call opens it
        assert await kv.store.get(KEYVALUE, ("default_collection", "k")) == {"v": 1}
        await kv.close()
        with pytest.raises(StoreClosedError):
            _ = kv.store

    asyncio.run(main())
