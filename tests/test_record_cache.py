"""The writer's record cache (store/record_cache.py, issue 40 point 3): bounded in bytes, least
recently used out; every write path of the writer writes through it; an uncertain write empties
it; a read that raced a write never puts back the replaced value; TTLs hold on hits; readers,
transactions and snapshots never use it; under 8 threads it ends equal to the store."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import InvalidArgumentError, OpendataKvError
from opendata_kv.native import calls
from opendata_kv.store import OpenOptions
from opendata_kv.store.record_cache import ENTRY_OVERHEAD, RecordCache

REC = RecordType("cached", 1, [("id", F.u32)])
SCHEMA = Schema(REC)


def open_cached(path: Path, limit: int = 1 << 20) -> SyncStore:
    return SyncStore.open(path, SCHEMA, options=OpenOptions(record_cache_bytes=limit))


def agrees(store: SyncStore) -> int:
    """Every cached row equals the store's own read of it; how many there are."""
    cache = store.record_cache
    assert cache is not None
    rows = dict(cache._rows)
    for key, row in rows.items():
        assert calls.get_row_now(store.store._source, key) == row, key
    return len(rows)


def test_bounded_in_bytes_least_recently_used_out() -> None:
    cache = RecordCache(3 * (4 + 10 + ENTRY_OVERHEAD))
    for i in range(3):
        cache.wrote(b"k%03d" % i, b"v" * 10, None, cache.generation)
    assert cache.get(b"k000") is not None  # now the most recently used
    cache.wrote(b"k003", b"v" * 10, None, cache.generation)
    assert cache.get(b"k001") is None and cache.get(b"k000") is not None
    assert len(cache) == 3 and cache.size <= cache.limit
    cache.wrote(
        b"big", b"x" * cache.limit, None, cache.generation
    )  # larger than the whole cache: not kept
    assert cache.get(b"big") is None and cache.size <= cache.limit
    assert (cache.hits, cache.misses) == (2, 2)


def test_a_fill_from_a_read_older_than_a_write_is_refused() -> None:
    cache = RecordCache(1 << 16)
    generation = cache.generation  # a get missed and reads the store...
    cache.wrote(b"k", b"new", None, cache.generation)  # ...while a write goes through
    cache.fill(b"k", (b"old", None), generation)
    assert cache.get(b"k") == (b"new", None)
    cache.clear()
    generation = cache.generation
    cache.fill(b"k", (b"read", None), generation)
    assert cache.get(b"k") == (b"read", None)


def test_of_two_writes_in_flight_the_one_acknowledged_last_drops_the_key() -> None:
    cache = RecordCache(1 << 16)
    first = second = cache.generation  # both sent; slatedb may apply either last
    cache.wrote(b"k", b"second", None, second)
    assert cache.get(b"k") == (b"second", None)
    cache.wrote(b"k", b"first", None, first)  # another write went through meanwhile
    assert cache.get(b"k") is None
    cache.wrote(b"a", b"1", None, cache.generation)
    cache.dropped([b"a", b"b"])  # a batch's keys
    assert cache.get(b"a") is None and len(cache) == 0 and cache.size == 0


#: a cache operation: (what, key number, value length); keys from a small set so they repeat
_cache_ops = st.lists(
    st.tuples(
        st.sampled_from(["fill", "wrote", "delete", "drop", "clear", "get"]),
        st.integers(0, 40),
        st.integers(0, 30),
    ),
    max_size=120,
)


@settings(max_examples=80, deadline=None)
@given(_cache_ops, st.integers(0, 8))
def test_a_batch_drop_through_the_key_filter_is_the_dictionary_s(
    ops: list[tuple[str, int, int]], room: int
) -> None:
    """The same operations on a cache whose drops go through the accelerator's KeyFilter and
    on one without it end with the same rows, sizes and counts after every step, and no key a
    batch dropped is left behind (small enough to evict, and to rebuild the filter often)."""
    limit = room * (ENTRY_OVERHEAD + 40)
    plain, filtered = RecordCache(limit), RecordCache(limit)
    plain._filter = None
    if filtered._filter is None:
        pytest.skip("the C accelerator is not in use")
    key = b"k%02d".__mod__
    for what, n, length in ops:
        for cache in (plain, filtered):
            if what == "fill":
                cache.fill(key(n), (b"v" * length, None), cache.generation)
            elif what == "wrote":
                cache.wrote(key(n), b"w" * length, None, cache.generation)
            elif what == "delete":
                cache.wrote(key(n), None, None, cache.generation)
            elif what == "drop":  # a batch of keys around n, some cached, some not
                cache.dropped([key(m) for m in range(n, n + length % 7)])
                assert not any(key(m) in cache._rows for m in range(n, n + length % 7))
            elif what == "clear":
                cache.clear()
            else:
                cache.get(key(n))
        assert list(filtered._rows.items()) == list(plain._rows.items())
        assert (filtered.size, filtered.hits, filtered.misses, filtered.generation) == (
            plain.size,
            plain.hits,
            plain.misses,
            plain.generation,
        )


def test_the_key_filter_marks_every_key_kept_across_rebuilds() -> None:
    # a filter of the least size (4,096 bits, a rebuild due every 256 adds): keys kept long
    # before a rebuild, and thousands of keeps and evictions after, are still found by a drop
    cache = RecordCache(400 * (ENTRY_OVERHEAD + 12))
    if cache._filter is None:
        pytest.skip("the C accelerator is not in use")
    assert cache._filter.slots == 4096
    for n in range(400):  # 400 adds
        cache.wrote(b"old%05d" % n, b"v" * 4, None, cache.generation)
    for i in range(300):  # the same 50 keys again: a rebuild on the way, the old ones kept
        cache.wrote(b"old%05d" % (i % 50), b"w" * 4, None, cache.generation)
    held = list(cache._rows)
    assert len(held) == 400
    assert cache._filter.cached(cache._rows, [*held, b"absent"]) == held
    rng = random.Random(3)
    for i in range(5000):
        cache.wrote(b"key%05d" % rng.randrange(3000), b"v" * 4, None, cache.generation)
        if i % 250 == 0:
            held = list(cache._rows)
            assert cache._filter.cached(cache._rows, [*held, b"absent"]) == held
    held = list(cache._rows)
    cache.dropped(held[::2])
    assert list(cache._rows) == held[1::2]
    cache.dropped([b"key%05d" % n for n in range(3000)] + [b"old%05d" % n for n in range(400)])
    assert len(cache) == 0 and cache.size == 0


def test_the_key_filter_is_sized_for_the_keys_held_not_the_limit() -> None:
    # a 64 MiB cache holding a few thousand keys: its filter stays small (16-32 bits a key held,
    # in the CPU's caches), grows with the keys held, and still finds every one of them
    cache = RecordCache(64 << 20)
    if cache._filter is None:
        pytest.skip("the C accelerator is not in use")
    assert cache._filter.slots == 4096
    for n in range(6000):
        cache.wrote(b"key%06d" % n, b"v" * 90, None, cache.generation)
    held = list(cache._rows)
    assert 16 * len(held) <= cache._filter.slots <= 64 * len(held)
    assert cache._filter.cached(cache._rows, [*held, b"absent"]) == held
    cache.dropped(held)
    assert len(cache) == 0 and cache.size == 0


def test_every_write_path_writes_through(tmp_path: Path) -> None:
    with open_cached(tmp_path / "db") as store:
        for i in range(6):
            store.put(REC, (i,), {"v": i})
        assert [store.get(REC, (i,)) for i in range(6)] == [{"v": i} for i in range(6)]
        hits = store.record_cache.hits  # type: ignore[union-attr]
        store.put(REC, (0,), {"v": "put"})
        store.delete(REC, (1,))
        store.put_raw(REC.encode(2), b"\x81\xa1v\xa3raw")
        with store.batch() as batch:
            batch.put(REC, (3,), {"v": "batch"})
            batch.delete(REC, (4,))
        store.put_many([(REC, (5,), {"v": "many"}), (REC, (6,), {"v": "new"})])
        assert store.get(REC, (0,)) == {"v": "put"}
        assert store.get(REC, (1,)) is None
        assert store.get(REC, (2,)) == {"v": "raw"}
        assert store.get(REC, (3,)) == {"v": "batch"}
        assert store.get(REC, (4,)) is None
        assert store.get(REC, (5,)) == {"v": "many"}
        # put and put_raw write through; a batch's and put_many's keys are dropped
        assert store.record_cache.hits == hits + 2  # type: ignore[union-attr]
        with store.transaction() as tx:  # its writes are not listed: the cache starts again
            tx.put(REC, (7,), {"v": "tx"})
        assert len(store.record_cache) == 0  # type: ignore[arg-type]
        assert store.get(REC, (7,)) == {"v": "tx"}
        assert store.delete_range(REC) == 6
        assert [store.get(REC, (i,)) for i in range(8)] == [None] * 8
        agrees(store)


def test_ttls_hold_on_hits(tmp_path: Path) -> None:
    with open_cached(tmp_path / "db") as store:
        store.put(REC, (1,), {"v": 1}, ttl=0.05)
        assert store.get(REC, (1,)) == {"v": 1}
        time.sleep(0.1)  # past the TTL (expiry itself is the subject, not a timing)
        assert store.get(REC, (1,), default="gone") == "gone"


def test_an_uncertain_write_empties_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_cached(tmp_path / "db") as store:
        for i in range(4):
            store.put(REC, (i,), {"v": i})
        assert len(store.record_cache) == 4  # type: ignore[arg-type]

        async def cut_short(*args: Any) -> None:
            raise KeyboardInterrupt  # past slatedb perhaps: written or not

        monkeypatch.setattr(calls, "write", cut_short)
        with pytest.raises(KeyboardInterrupt), store.batch() as batch:
            batch.put(REC, (9,), {"v": 9})
        assert len(store.record_cache) == 0  # type: ignore[arg-type]
        monkeypatch.undo()
        assert store.get(REC, (0,)) == {"v": 0}


def test_readers_transactions_and_snapshots_do_not_use_it(tmp_path: Path) -> None:
    with open_cached(tmp_path / "db") as store:
        store.put(REC, (1,), {"v": 1})
        store.flush()
        with store.snapshot() as snap:
            store.put(REC, (1,), {"v": 2})
            assert snap.get(REC, (1,)) == {"v": 1}  # its own point in time, not the cache's
        with store.transaction() as tx:
            tx.put(REC, (1,), {"v": 3})
            assert tx.get(REC, (1,)) == {"v": 3}
            assert store.get(REC, (1,)) == {"v": 2}
        assert store.get(REC, (1,)) == {"v": 3}
        with SyncStore.open_reader(tmp_path / "db", SCHEMA) as reader:
            assert reader.store._record_cache is None
        options = OpenOptions(record_cache_bytes=1 << 20)
        with pytest.raises(InvalidArgumentError, match="record_cache_bytes"):
            SyncStore.open_reader(tmp_path / "db", SCHEMA, options=options)
    with pytest.raises(InvalidArgumentError, match="record_cache_bytes"):
        OpenOptions(record_cache_bytes=-1)
    plain = SyncStore.open(tmp_path / "db", SCHEMA, options=OpenOptions(check_expiry=False))
    with plain:
        assert plain.record_cache is None  # no TTL checks on reads: no cache


def test_under_8_threads_it_ends_equal_to_the_store(tmp_path: Path) -> None:
    with open_cached(tmp_path / "db", limit=40 * (ENTRY_OVERHEAD + 20)) as store:
        errors: list[BaseException] = []

        def work(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(300):
                    k = (rng.randrange(60),)
                    roll = rng.random()
                    if roll < 0.4:
                        store.get(REC, k)
                    elif roll < 0.7:
                        store.put(REC, k, {"by": seed, "n": rng.randrange(1000)})
                    elif roll < 0.8:
                        store.delete(REC, k)
                    else:
                        with store.batch() as batch:
                            batch.put(REC, k, {"batch": seed})
                            batch.delete(REC, ((k[0] + 1) % 60,))
            except (OpendataKvError, AssertionError) as exc:  # pragma: no cover - reported
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        assert not errors
        agrees(store)
        with store.snapshot() as snap:
            for i in range(60):
                assert store.get(REC, (i,)) == snap.get(REC, (i,)), i
        cache = store.record_cache
        assert cache is not None and cache.hits > 0 and cache.size <= cache.limit
