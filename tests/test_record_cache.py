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
