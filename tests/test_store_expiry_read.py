"""Issue 41's record API: get/get_many with the expiry, delete's bool and delete_many's count,
TTLs per put_many item and in Batch.put's per-record path, TTL puts on the direct native
calls, and distinct leading-field listing; through both faces."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, Store, SyncStore, fields
from opendata_kv.errors import InvalidArgumentError
from opendata_kv.native import calls
from opendata_kv.store import Batch
from opendata_kv.store.entry import Entry, expiry_datetime
from opendata_kv.store.expiry import now_ms
from opendata_kv.store.indexes import Index

kv = RecordType("kv", 5, [("collection", fields.string), ("key", fields.string)])
SCHEMA = Schema(kv)
HOUR = 3600.0
PAST = 1  # an expire_at (Unix ms) long gone: the row is stored but reads as absent


def _between(entry: Entry[Any] | None, before: int, after: int, ttl: float) -> None:
    """The entry's expiry is the put's clock plus its ttl, as a UTC datetime and in ms."""
    assert entry is not None and entry.expire_ms is not None
    assert before + ttl * 1000 <= entry.expire_ms <= after + ttl * 1000
    assert entry.expires_at == expiry_datetime(entry.expire_ms)
    assert entry.expires_at is not None and entry.expires_at.tzinfo == datetime.timezone.utc


def test_get_with_expiry_async(db_url: str) -> None:
    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            before = now_ms()
            await store.put(kv, ("c", "ttl"), {"v": 1}, ttl=HOUR)
            after = now_ms()
            await store.put(kv, ("c", "plain"), {"v": 2})
            async with store.batch() as batch:
                batch.put_raw(kv.encode("c", "gone"), b"\x81\xa1v\x03", expire_at=PAST)
            entry = await store.get_with_expiry(kv, ("c", "ttl"))
            _between(entry, before, after, HOUR)
            assert entry is not None and entry.value == {"v": 1}
            ttl = entry.ttl()
            assert ttl is not None and 0 < ttl <= HOUR
            assert await store.get_with_expiry(kv.key("c", "plain")) == Entry({"v": 2}, None)
            assert await store.get_with_expiry("kv", {"collection": "c", "key": "none"}) is None
            assert await store.get_with_expiry(kv, ("c", "gone")) is None  # expired: absent
            assert await store.get(kv, ("c", "gone")) is None  # the one rule
            many = await store.get_many_with_expiry(
                kv, [("c", "plain"), ("c", "gone"), ("c", "none"), ("c", "ttl")]
            )
            assert many[0] == Entry({"v": 2}, None)
            assert many[1] is None and many[2] is None
            assert many[3] == entry
            keys = [kv.key("c", "ttl"), kv.key("c", "plain")]
            assert await store.get_many_with_expiry(keys) == [entry, many[0]]

    asyncio.run(main())


def test_get_with_expiry_sync(db_url: str) -> None:
    with SyncStore.open(db_url, SCHEMA) as db:
        before = now_ms()
        db.put(kv, ("c", "a"), [1, 2], ttl=datetime.timedelta(hours=1))
        after = now_ms()
        db.put(kv, ("c", "b"), "b")
        entry = db.get_with_expiry(kv, ("c", "a"))
        _between(entry, before, after, HOUR)
        assert db.get_with_expiry(kv, ("c", "b")) == Entry("b", None)
        assert db.get_many_with_expiry(kv, [("c", "b"), ("c", "x")]) == [Entry("b", None), None]


def test_delete_says_whether_a_live_record_was_there(db_url: str) -> None:
    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            await store.put(kv, ("c", "a"), 1)
            async with store.batch() as batch:
                batch.put_raw(kv.encode("c", "gone"), b"\x01", expire_at=PAST)
            assert await store.delete(kv, ("c", "a")) is True
            assert await store.delete(kv, ("c", "a")) is False
            assert await store.delete(kv.key("c", "never")) is False
            assert await store.delete(kv, ("c", "gone")) is False  # expired: not live
            assert await store.get(kv, ("c", "a")) is None

    asyncio.run(main())
    with SyncStore.open(db_url, SCHEMA) as db:
        db.put(kv, ("s", "a"), 1)
        assert db.delete(kv, ("s", "a")) is True
        assert db.delete(kv, ("s", "a")) is False


def test_delete_many_counts_distinct_live_records_in_one_batch(db_url: str) -> None:
    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            await store.put_many([(kv, ("c", str(i)), i) for i in range(5)])
            async with store.batch() as batch:
                batch.put_raw(kv.encode("c", "gone"), b"\x01", expire_at=PAST)
            writes: list[Any] = []
            write = calls.write

            def counted(db: Any, native: Any) -> Any:
                writes.append(native)
                return write(db, native)

            calls.write = counted  # type: ignore[assignment]
            try:
                asked = [("c", "0"), ("c", "0"), ("c", "3"), ("c", "gone"), ("c", "none")]
                assert await store.delete_many(kv, asked) == 2
            finally:
                calls.write = write  # type: ignore[assignment]
            assert len(writes) == 1  # one atomic batch
            assert await store.delete_many([kv.key("c", "1"), kv.key("c", "9")]) == 1
            assert await store.delete_many(kv, []) == 0
            assert [r.key.key for r in await store.scan(kv).to_list()] == ["2", "4"]

    asyncio.run(main())
    with SyncStore.open(db_url, SCHEMA) as db:
        db.put(kv, ("s", "a"), 1)
        assert db.delete_many(kv, [("s", "a"), ("s", "b")]) == 1


def test_delete_keeps_indexes_right(db_url: str) -> None:
    by_value = Index("by_v", kv, [("v", fields.u32)])

    async def main() -> None:
        async with Store.open(db_url, SCHEMA, indexes=[by_value]) as store:
            await store.put(kv, ("c", "a"), {"v": 7})
            await store.put(kv, ("c", "b"), {"v": 7})
            assert await store.delete(kv, ("c", "a")) is True
            assert [r.key.key for r in await store.index_scan("by_v", 7).to_list()] == ["b"]
            assert await store.delete_many(kv, [("c", "a"), ("c", "b")]) == 1
            assert await store.index_scan("by_v").to_list() == []
            assert await store.check_indexes() == []

    asyncio.run(main())


def test_put_many_items_carry_ttls(db_url: str) -> None:
    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            before = now_ms()
            items: list[tuple[Any, ...]] = [
                (kv, ("c", "a"), 1, HOUR),
                (kv, ("c", "b"), 2, None),
                (kv.key("c", "k"), 3, HOUR),
                (kv.key("c", "n"), 4),
                (kv, ("c", "p"), 5),
                ("kv", ("c", "q"), 6, datetime.timedelta(hours=1)),
            ]
            assert await store.put_many(items, batch_size=4) == 6
            after = now_ms()
            got = await store.get_many_with_expiry(
                kv, [("c", k) for k in ("a", "b", "k", "n", "p", "q")]
            )
            assert [e.value if e else None for e in got] == [1, 2, 3, 4, 5, 6]
            for at in (0, 2, 5):
                _between(got[at], before, after, HOUR)
            assert [got[1], got[3], got[4]] == [Entry(2, None), Entry(4, None), Entry(5, None)]
            with pytest.raises(InvalidArgumentError):
                await store.put_many([(kv, ("c", "bad"), 1, -1)])

    asyncio.run(main())


def test_ttl_puts_take_the_direct_native_calls(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put with a ttl no longer goes through the generated put_with_options (calls.method),
    and Batch.put with a ttl stays on its per-record path (the bound encoders)."""
    if not calls.active():
        pytest.skip("the generated binding is in use: every call is calls.method")
    generic: list[str] = []
    method = calls.method

    def watched(target: Any, name: str, *args: Any) -> Any:
        generic.append(name)
        return method(target, name, *args)

    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            monkeypatch.setattr(calls, "method", watched)
            before = now_ms()
            await store.put(kv, ("c", "a"), 1, ttl=HOUR)
            batch = Batch(store)
            batch.put(kv, ("c", "warm"), 0)  # binds the encoders of kv
            any_path: list[Any] = []
            put_any = Batch._put_any

            def general(self: Batch, *args: Any) -> None:
                any_path.append(args)
                put_any(self, *args)

            monkeypatch.setattr(Batch, "_put_any", general)
            batch.put(kv, ("c", "b"), 2, ttl=HOUR)
            assert any_path == []  # the per-record path took it
            await store.write(batch)
            after = now_ms()
            assert "put_with_options" not in generic
            _between(await store.get_with_expiry(kv, ("c", "a")), before, after, HOUR)
            _between(await store.get_with_expiry(kv, ("c", "b")), before, after, HOUR)

    asyncio.run(main())


def test_batch_put_ttl_is_checked_before_anything_is_queued() -> None:
    with SyncStore.open("memory://ttl-check", SCHEMA) as db, db.batch() as batch:
        batch.put(kv, ("c", "a"), 1)
        with pytest.raises(InvalidArgumentError):
            batch.put(kv, ("c", "b"), 2, ttl=0)
        assert len(batch.batch) == 1


def test_distinct_refuses_a_field_that_is_not_next() -> None:
    with SyncStore.open("memory://distinct-field", SCHEMA) as db:
        with pytest.raises(InvalidArgumentError) as caught:
            db.distinct(kv, "key")
        assert caught.value.field == "key"
        with pytest.raises(InvalidArgumentError):
            db.distinct(kv, "collection", "c")
        assert db.distinct("kv", "key", "c") == []


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.tuples(names, names), st.integers(0, 3), max_size=40))
def test_distinct_equals_a_recount(records: dict[tuple[str, str], int]) -> None:
    with SyncStore.open("memory://distinct", SCHEMA) as db:
        db.put_many((kv, pair, value) for pair, value in records.items())
        collections = sorted({c for c, _ in records}, key=lambda c: kv.prefix(c))
        assert db.distinct(kv, "collection") == collections
        for collection in collections:
            keys = sorted({k for c, k in records if c == collection}, key=kv.prefix)
            assert db.distinct(kv, "key", collection) == keys


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(names, st.integers(-(2**63), 2**64 - 1), max_size=12),
    st.lists(names, max_size=12),
)
def test_delete_many_against_a_dict(stored: dict[str, int], deleted: list[str]) -> None:
    model = dict(stored)
    with SyncStore.open("memory://delete-many", SCHEMA) as db:
        db.put_many((kv, ("m", key), value) for key, value in stored.items())
        expected = len({key for key in deleted if key in model})
        assert db.delete_many(kv, [("m", key) for key in deleted]) == expected
        for key in deleted:
            model.pop(key, None)
        assert {r.key.key: r.value for r in db.scan(kv, "m")} == model


def test_purge_expired_tombstones_only_expired_rows(db_url: str) -> None:
    async def main() -> None:
        async with Store.open(db_url, SCHEMA) as store:
            async with store.batch() as batch:
                for key in ("x", "y", "z"):
                    batch.put_raw(kv.encode("c", key), b"\x01", expire_at=PAST)
                batch.put_raw(kv.encode("d", "x"), b"\x01", expire_at=PAST)
            await store.put(kv, ("c", "live"), 1, ttl=HOUR)
            await store.put(kv, ("c", "plain"), 2)
            assert await store.purge_expired(kv, "c", max_keys=2) == 2  # at most max_keys
            assert await store.purge_expired(kv, "c") == 1
            assert await store.purge_expired(kv, "c") == 0
            assert await store.purge_expired("kv") == 1  # the other collection's
            assert [r.key.key for r in await store.scan(kv).to_list()] == ["live", "plain"]

    asyncio.run(main())
    with SyncStore.open(db_url, SCHEMA) as db:
        assert db.purge_expired(kv) == 0
