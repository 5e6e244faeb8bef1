"""Issue 41's last target: a batched TTL put takes the same deferred path as a plain one (the
accelerator's msgpack, one batch_put_many call with an expiry column at the write), and a
batch of plain, TTL, raw and delete ops reads back as a dict model says (a later op on the
same key wins, its expiry with it), on every native path (C accelerator, ctypes driver,
generated binding) and both faces."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import os
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, Store, SyncStore, fields
from opendata_kv.native import accel, calls
from opendata_kv.store import Batch
from opendata_kv.store.entry import Entry
from opendata_kv.store.expiry import now_ms
from opendata_kv.store.indexes import Index

kv = RecordType("kv", 5, [("collection", fields.string), ("key", fields.string)])
SCHEMA = Schema(kv)
EXAMPLES = int(os.environ.get("OPENDATA_KV_TTL_BATCH_EXAMPLES", "40"))
KEYS = ("a", "b", "c", "d")  # few, so later ops overwrite earlier ones often
PAST = 1  # an expire_at (Unix ms) long gone: the row is stored but reads as absent
#: ttls of Batch.put and put_many items: repeated ones take the cached check, new ones not
TTLS = st.sampled_from([None, 60.0, 3600.0, 90, datetime.timedelta(hours=2)])
UTC = datetime.timezone.utc
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.text(max_size=12),
        st.binary(max_size=12),
        # not one of the C packer's common types: the codec's encoder, deferred all the same
        st.datetimes(timezones=st.just(UTC)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=8,
)
VALUE = VALUES.filter(lambda v: v is not None)  # a record's value is never None
KEY = st.sampled_from(KEYS)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEY, VALUE, TTLS, st.sampled_from(["type", "name", "key"])),
        st.tuples(st.just("raw"), KEY, VALUE, st.sampled_from([None, PAST, "future"])),
        st.tuples(st.just("delete"), KEY),
        st.tuples(st.just("items"), st.lists(st.tuples(KEY, VALUE, TTLS), max_size=4)),
    ),
    min_size=1,
    max_size=14,
)


@pytest.fixture(params=["accel", "ctypes", "generated"])
def native_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The native path the store's calls take: the C accelerator, the ctypes driver (calls.py's
    pure functions, as with OPENDATA_KV_NO_EXTENSIONS=1) or the generated binding."""
    calls.status()
    if request.param == "accel" and accel.active_module() is None:
        pytest.skip("the C accelerator is off or not built (the ctypes params cover it)")
    if request.param == "ctypes":
        for name in accel.HOT:
            if name in calls._PURE:
                monkeypatch.setattr(calls, name, calls._PURE[name])
    if request.param != "generated":
        yield request.param
        return
    try:
        assert not calls.set_active(False).active
        yield request.param
    finally:
        calls.set_active(True)


class Model:
    """What each key of one example's collection holds after the batch: (value, expiry),
    the expiry None, ("ttl", ms) from the put's clock, or ("at", ms) exactly."""

    def __init__(self, future: int) -> None:
        self.rows: dict[str, tuple[Any, Any]] = {}
        self.future = future

    def apply(self, batch: Any, collection: str, ops: list[tuple[Any, ...]]) -> None:
        """Queue `ops` in `batch` (a Batch or SyncBatch) and model them."""
        for op in ops:
            kind = op[0]
            if kind == "put":
                _, key, value, ttl, address = op
                if address == "type":
                    batch.put(kv, (collection, key), value, ttl=ttl)
                elif address == "name":
                    batch.put("kv", (collection, key), value, ttl=ttl)
                else:
                    batch.put(kv.key(collection, key), value, ttl=ttl)
                self.rows[key] = (value, _ttl_spec(ttl))
            elif kind == "raw":
                _, key, value, at = op
                expire_at = self.future if at == "future" else at
                batch.put_raw(kv.encode(collection, key), _packed(value), expire_at=expire_at)
                self.rows[key] = (value, None if expire_at is None else ("at", expire_at))
            elif kind == "delete":
                key = op[1]
                batch.delete(kv, (collection, key))
                self.rows.pop(key, None)
            else:
                items = [
                    (kv, (collection, k), v)
                    if ttl is None and n % 2
                    else (kv, (collection, k), v, ttl)
                    for n, (k, v, ttl) in enumerate(op[1])
                ]
                batch.put_all(items)
                for k, v, ttl in op[1]:
                    self.rows[k] = (v, _ttl_spec(ttl))

    def check(self, read: dict[str, Entry[Any] | None], before: int, after: int) -> None:
        """Each key reads as modelled: absent, expired (absent), or its value and expiry."""
        for key in KEYS:
            got = read[key]
            if key not in self.rows or self.rows[key][1] == ("at", PAST):
                assert got is None, (key, got)
                continue
            value, spec = self.rows[key]
            assert got is not None and got.value == value, (key, got, value)
            if spec is None:
                assert got.expire_ms is None, (key, got)
            elif spec[0] == "at":
                assert got.expire_ms == spec[1], (key, got, spec)
            else:
                assert got.expire_ms is not None, (key, got)
                assert before + spec[1] <= got.expire_ms <= after + spec[1], (key, got, spec)


def _ttl_spec(ttl: Any) -> tuple[str, int] | None:
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, datetime.timedelta) else ttl
    return ("ttl", round(seconds * 1000))


def _packed(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True, datetime=True)
    return data


_tags = itertools.count()


def test_batches_read_back_as_a_dict_model_async(native_path: str) -> None:
    loop = asyncio.new_event_loop()  # one loop for the store and every example's batch
    store = loop.run_until_complete(Store.open("memory://ttl-batch-async", SCHEMA))

    async def one(ops: list[tuple[Any, ...]]) -> None:
        collection = f"{native_path}-{next(_tags)}"
        model = Model(now_ms() + 10 * 3_600_000)
        before = now_ms()
        async with store.batch() as batch:
            model.apply(batch, collection, ops)
        after = now_ms()
        got = await store.get_many_with_expiry(kv, [(collection, key) for key in KEYS])
        model.check(dict(zip(KEYS, got, strict=True)), before, after)

    @settings(max_examples=EXAMPLES, deadline=None)
    @given(ops=OPS)
    def example(ops: list[tuple[Any, ...]]) -> None:
        loop.run_until_complete(one(ops))

    try:
        example()
    finally:
        loop.run_until_complete(store.close())
        loop.close()


def test_batches_read_back_as_a_dict_model_sync(native_path: str) -> None:
    with SyncStore.open("memory://ttl-batch-sync", SCHEMA) as db:

        @settings(max_examples=EXAMPLES, deadline=None)
        @given(ops=OPS)
        def example(ops: list[tuple[Any, ...]]) -> None:
            collection = f"{native_path}-{next(_tags)}"
            model = Model(now_ms() + 10 * 3_600_000)
            before = now_ms()
            with db.batch() as batch:
                model.apply(batch, collection, ops)
            after = now_ms()
            read = {key: db.get_with_expiry(kv, (collection, key)) for key in KEYS}
            model.check(read, before, after)

        example()


BY_V = Index("by_v", kv, [("v", fields.u32)])
INDEXED_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEY, st.integers(0, 3), TTLS),
        st.tuples(st.just("delete"), KEY),
        st.tuples(st.just("items"), st.lists(st.tuples(KEY, st.integers(0, 3), TTLS), max_size=3)),
    ),
    min_size=1,
    max_size=10,
)


def test_indexed_batches_keep_each_entry_with_its_record(native_path: str) -> None:
    """With an index, a batch's TTL and plain puts and deletes leave index entries equal to a
    recount of the records (check_indexes), each entry expiring with its record (the index
    ops go through fill's runs of puts with their expiries)."""
    with SyncStore.open("memory://ttl-batch-indexed", SCHEMA, indexes=[BY_V]) as db:

        @settings(max_examples=max(10, EXAMPLES // 2), deadline=None)
        @given(ops=INDEXED_OPS)
        def example(ops: list[tuple[Any, ...]]) -> None:
            collection = f"{native_path}-{next(_tags)}"
            rows: dict[str, tuple[int, Any]] = {}
            with db.batch() as batch:
                for op in ops:
                    if op[0] == "put":
                        _, key, v, ttl = op
                        batch.put(kv, (collection, key), {"v": v}, ttl=ttl)
                        rows[key] = (v, ttl)
                    elif op[0] == "delete":
                        batch.delete(kv, (collection, op[1]))
                        rows.pop(op[1], None)
                    else:
                        batch.put_all([(kv, (collection, k), {"v": v}, t) for k, v, t in op[1]])
                        rows.update((k, (v, t)) for k, v, t in op[1])
            assert db.check_indexes() == []
            for v in range(4):
                found = [
                    r.key.key for r in db.index_scan("by_v", v) if r.key.collection == collection
                ]
                assert sorted(found) == sorted(k for k, (w, _) in rows.items() if w == v)
            stored = _all_rows(db)
            for key, (_, ttl) in rows.items():
                entry = db.get_with_expiry(kv, (collection, key))
                assert entry is not None and (entry.expire_ms is None) == (ttl is None)
                record_key = kv.encode(collection, key)
                entries = [at for k, at in stored.items() if k.endswith(record_key)]
                assert entries == [entry.expire_ms, entry.expire_ms], (key, entries)

        example()


def _all_rows(db: SyncStore) -> dict[bytes, int | None]:
    """Every stored row's key and expiry (Unix ms or None), records and index entries (an
    entry's key ends with its record's), read through the binding."""
    source = db.store._source
    whole = calls._B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    iterator = calls.sync(calls.method(source, "scan", whole))
    rows: dict[bytes, int | None] = {}
    while True:
        keys, _, expires = calls.sync(calls.next_columns(iterator, 1024))
        if not keys:
            return rows
        rows.update(zip(keys, expires, strict=True))


def test_ttl_puts_are_deferred_with_the_plain_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the accelerator, Batch.put and put_all queue TTL puts as they queue plain ones: no
    native call per put, one batch_put_many at the write with the expiries beside the keys;
    a delete between them sends what came before it first."""
    calls.status()
    if accel.active_module() is None:
        pytest.skip("the C accelerator is off or not built: puts are not deferred")
    single: list[bytes] = []
    runs: list[tuple[list[bytes], list[int | None] | None]] = []
    put_expiring, put_many = calls.batch_put_expiring, calls.batch_put_many

    def expiring(batch: Any, key: bytes, *args: Any) -> None:
        single.append(key)
        put_expiring(batch, key, *args)

    def many(batch: Any, keys: Any, values: Any, expires: Any = None) -> None:
        runs.append((list(keys), None if expires is None else list(expires)))
        put_many(batch, keys, values, expires)

    monkeypatch.setattr(calls, "batch_put_expiring", expiring)
    monkeypatch.setattr(calls, "batch_put_many", many)

    async def main() -> None:
        async with Store.open("memory://ttl-deferred", SCHEMA) as store:
            before = now_ms()
            batch = Batch(store)
            batch.put(kv, ("d", "warm"), 0)  # binds the encoders of kv (a direct call)
            batch.put("kv", ("d", "warm"), 0)  # and of its name
            batch.put(kv, ("d", "a"), 1, ttl=3600)
            batch.put(kv, ("d", "b"), 2)
            batch.put_all([(kv, ("d", "c"), 3, 60.0), (kv, ("d", "e"), 4, None)])
            assert runs == [] and single == []  # nothing sent yet
            batch.delete(kv, ("d", "b"))
            batch.put("kv", ("d", "b"), 5, ttl=3600)
            await store.write(batch)
            after = now_ms()
            assert single == []
            keys = [kv.encode("d", k) for k in ("a", "b", "c", "e", "b")]
            assert [run[0] for run in runs] == [keys[:4], keys[4:]]
            first, second = runs[0][1], runs[1][1]
            assert first is not None and second is not None
            assert first[1] is None and first[3] is None
            assert first[0] is not None and before + 3_600_000 <= first[0] <= after + 3_600_000
            assert first[2] is not None and before + 60_000 <= first[2] <= after + 60_000
            assert second[0] is not None and before + 3_600_000 <= second[0] <= after + 3_600_000
            got = await store.get_many_with_expiry(kv, [("d", k) for k in ("a", "b", "c", "e")])
            assert [e.value if e else None for e in got] == [1, 5, 3, 4]
            assert [e.expire_ms if e else None for e in got] == [
                first[0],
                second[0],
                first[2],
                None,
            ]

    asyncio.run(main())


def test_expire_after_reads_the_clock_slatedb_stamps_with() -> None:
    """calls.expire_after (in C on the accelerator): now in Unix ms plus the given ms, as
    time.time_ns() // 1_000_000 + ms; what it does not take, the pure function answers."""
    calls.status()
    for ms in (0, 1, 60_000, 3_600_000, 10**12):
        before = now_ms()
        got = calls.expire_after(ms)
        after = now_ms()
        assert got.__class__ is int and before + ms <= got <= after + ms
    big = 1 << 70  # past what C takes: Python's ints, as the pure function
    before = now_ms()
    assert before + big <= calls.expire_after(big) <= now_ms() + big
    with pytest.raises(TypeError):
        calls.expire_after("60")  # type: ignore[arg-type]


def test_a_repeated_ttl_is_queued_in_c_on_both_faces(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a put checks a ttl, later puts with the same ttl object are encoded and queued
    by the accelerator's one call (queue_put with the expiry; on a sync batch its C put, no
    Batch.put frame), with the expiry a put through Python gets: the wall clock in Unix ms
    plus the ttl's ms. Another ttl object goes through Python and becomes the remembered
    one; a plain put still stores no expiry."""
    calls.status()
    if accel.active_module() is None:
        pytest.skip("the C accelerator is off or not built")
    python_puts: list[Any] = []
    put = Batch.put

    def counted(self: Batch, *args: Any, **kwargs: Any) -> None:
        python_puts.append(kwargs.get("ttl"))
        put(self, *args, **kwargs)

    monkeypatch.setattr(Batch, "put", counted)
    hour, minute = 3600.0, datetime.timedelta(minutes=1)

    def check(got: list[Any], before: int, after: int) -> None:
        ms = [None, 3_600_000, 3_600_000, 3_600_000, 60_000, 60_000, None]
        assert [e.value for e in got] == list(range(7))
        for entry, want in zip(got, ms, strict=True):
            if want is None:
                assert entry.expire_ms is None
            else:
                assert before + want <= entry.expire_ms <= after + want

    keys = [("t", str(i)) for i in range(7)]
    ttls = [None, hour, hour, hour, minute, minute, None]
    with SyncStore.open("memory://ttl-c-sync", SCHEMA) as store:
        before = now_ms()
        with store.batch() as b:
            for i, (k, ttl) in enumerate(zip(keys, ttls, strict=True)):
                if ttl is None:
                    b.put(kv, k, i)
                else:
                    b.put(kv, k, i, ttl=ttl)
        check(store.get_many_with_expiry(kv, keys), before, now_ms())
    # the sync face: the first put binds the plan, each new ttl object is checked in Python
    assert python_puts == [None, hour, minute], python_puts

    python_puts.clear()
    queued: list[tuple[int, bool]] = []  # (arguments, queued) of each queue_put call
    queue_put = calls.queue_put

    def spied(*args: Any) -> bool:
        done = queue_put(*args)
        queued.append((len(args), done))
        return done

    monkeypatch.setattr(calls, "queue_put", spied)

    async def main() -> None:
        async with Store.open("memory://ttl-c-async", SCHEMA) as store:
            before = now_ms()
            batch = Batch(store)
            for i, (k, ttl) in enumerate(zip(keys, ttls, strict=True)):
                batch.put(kv, k, i, ttl=ttl)
            await store.write(batch)
            check(await store.get_many_with_expiry(kv, keys), before, now_ms())

    asyncio.run(main())
    # the first put binds the plan; a new ttl object is checked in Python (no C call), the
    # same one again is queued in C with its expiry (8 arguments)
    assert queued == [(7, False), (8, True), (8, True), (8, True), (7, True)]
    assert python_puts == ttls  # Batch.put is the async face's entry: every call counted
