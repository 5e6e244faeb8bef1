"""Scale: N records of two record types through the typed Store, raw slatedb and rocksdict.

    PYTHONPATH=. python tools/bench.py scale [--records N] [--store file|s3] [--json]

The workload (the same bytes on every side):
    item   key (id u64), ~200 B msgpack map: half of the records
    event  key (actor string, at desc(tid)): newest first per actor; one actor with 10
           events, one with 1,000, one with 100,000 (fewer when N is small), the rest in
           actors of 100
Sides, each in its own store, one after the other in one run:
    typed     opendata_kv Store: put_many (a generator streamed into batches of 1,000), get,
              scan (keys and values decoded into Records)
    raw       slatedb binding calls with keys packed and unpacked by hand (struct + split) and
              msgpack.packb/unpackb: what the typed layer costs on top of slatedb
    rocksdict RocksDB through rocksdict (bench extra), same bytes, same hand decoding; always
              on the local disk, also with --store s3
Reported per side: load rate, flush-to-durable time, point get p50/p99 on a cold cache
(right after reopening: slatedb's block cache and RocksDB's are empty, the OS page cache is
not) and warm (the same keys again), prefix scans of 10 / 1,000 / 100,000 rows (time to the
first row, total, the process's CPU time, and the 1-min load average: CPU far below the
total means the scan waited, e.g. for cores other jobs held), full-scan row rate, peak RSS
of the process during the phase, and bytes on the store per record (slatedb: SST + WAL
objects; rocksdict: its directory).

Every side is measured alike: after the reload it first waits until the store's background
compaction has settled (Side.settle; the wait is reported, not timed as a read). A load of
~1M records leaves four L0 SSTs, and slatedb's compactor (polling every 5 s) merges them
right after the reopen: a read phase that overlaps that compaction ran 3-7x slower on this
2-core machine, on whichever side it happened to hit. Without the wait that made the typed
1M prefix scan 4.8x the raw one in one run and 1.7x in another.
The typed side runs through opendata_kv's native driver (RFC 0011); the raw side calls the
generated binding as shipped. The driver's self-check runs before the first side, so neither
side pays for it.

--store s3 starts a moto_server on 127.0.0.1 (stopped at exit) and puts the slatedb sides
there (default N 100,000). Numbers are printed, never asserted; tests run run_scale() with
N=2,000 and verify=True, which checks every count and every decoded value.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from slatedb.uniffi import AdminBuilder, CompactionStatus, DbBuilder, KeyRange, WriteBatch

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.ids import tid as tids
from opendata_kv.native import calls as native_calls
from opendata_kv.objstore.location import parse_location
from opendata_kv.store.scan import scan_options

ITEM = RecordType("item", 1, [("id", F.u64)])
EVENT = RecordType("event", 2, [("actor", F.string), ("at", F.desc(F.tid))])
SCHEMA = Schema(ITEM, EVENT)

BATCH = 1000
GETS = 1000
PREFIX_SIZES = (10, 1000, 100_000)
FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
T0_US = 1_700_000_000_000_000  # event times count up from here, one µs apart per actor
ROUNDS = 3  # prefix scans: median of this many runs
SAME_STORE_PAIRS = 3  # typed side: u64 scan typed vs hand-decoded pairs on its own store

_U64 = struct.Struct(">Q")
_MASK = (1 << 64) - 1


# --- the workload ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Which records exist: N//2 items, the rest events in actors of known sizes."""

    records: int
    items: int = field(init=False)
    actors: tuple[tuple[str, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        items = self.records // 2
        events = self.records - items
        big = min(PREFIX_SIZES[2], events // 2)
        mid = min(PREFIX_SIZES[1], events // 4)
        small = min(PREFIX_SIZES[0], events // 8)
        actors = [("prefix-small", small), ("prefix-mid", mid), ("prefix-big", big)]
        rest, n = events - small - mid - big, 0
        while rest > 0:
            size = min(100, rest)
            actors.append((f"actor-{n:07d}", size))
            rest -= size
            n += 1
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "actors", tuple(actors))

    def prefix_cases(self) -> list[tuple[str, int]]:
        """(actor, rows) of the three prefix scans."""
        return list(self.actors[:3])


def _noise(seed: bytes) -> str:
    """64 hex digits that differ per record, so values compress about as real ones do."""
    return hashlib.blake2b(seed, digest_size=32).hexdigest()


def item_value(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"item {i}",
        "owner": f"did:plc:{i % 1000:024d}",
        "score": i * 0.5,
        "tags": ["alpha", "beta", "gamma"],
        "body": FILLER[: 40 + i % 40] + _noise(b"i%d" % i),
    }


def event_value(actor: str, n: int) -> dict[str, Any]:
    return {
        "actor": actor,
        "n": n,
        "kind": "app.bsky.feed.post",
        "text": FILLER[: 20 + n % 40] + _noise(b"%s/%d" % (actor.encode(), n)),
        "langs": ["en"],
    }


def event_tid(n: int) -> int:
    """The raw TID integer of an actor's n-th event (timestamp µs << 10 | clock id 7)."""
    return ((T0_US + n) << 10) | 7


def typed_records(w: Workload) -> Iterator[tuple[Any, ...]]:
    """(record_type, fields, value) for every record, generated lazily."""
    for i in range(w.items):
        yield ITEM, (i,), item_value(i)
    for actor, size in w.actors:
        for n in range(size):
            yield EVENT, (actor, tids.encode(event_tid(n))), event_value(actor, n)


# Hand-made keys: the same bytes the key layer makes, built with struct and bytes joins.
_ITEM_HEAD = ITEM.head
_EVENT_HEAD = EVENT.head


def hand_item_key(i: int) -> bytes:
    return _ITEM_HEAD + _U64.pack(i)


def hand_event_prefix(actor: str) -> bytes:
    return _EVENT_HEAD + actor.encode() + b"\x00"


def hand_event_key(actor: str, tid: int) -> bytes:
    return hand_event_prefix(actor) + _U64.pack(_MASK - tid)


def hand_decode_item(key: bytes) -> int:
    (i,) = _U64.unpack_from(key, len(_ITEM_HEAD))
    return int(i)


def hand_decode_event(key: bytes) -> tuple[str, int]:
    actor, _, rest = key[len(_EVENT_HEAD) :].partition(b"\x00")
    (inverted,) = _U64.unpack(rest)
    return actor.decode(), _MASK - inverted


def raw_records(w: Workload) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) bytes for every record, packed by hand."""
    packb = msgpack.packb
    for i in range(w.items):
        yield hand_item_key(i), packb(item_value(i), use_bin_type=True)
    for actor, size in w.actors:
        for n in range(size):
            value = packb(event_value(actor, n), use_bin_type=True)
            yield hand_event_key(actor, event_tid(n)), value


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)


def get_sample(w: Workload, count: int) -> list[tuple[str, int]]:
    """Keys for point gets: ("item", i) or (actor, n), half of each kind, fixed seed."""
    rng = random.Random(15)
    out: list[tuple[str, int]] = []
    for j in range(count):
        if j % 2 == 0 and w.items:
            out.append(("", rng.randrange(w.items)))
        else:
            actor, size = w.actors[rng.randrange(len(w.actors))]
            out.append((actor, rng.randrange(size)))
    return out


# --- measuring --------------------------------------------------------------------------------

#: slatedb's compactor looks for work every poll_interval (5 s by default): a store counts as
#: settled once no compaction is submitted or running and its manifest has not changed for
#: that long plus a margin. SETTLE_LIMIT bounds the wait.
COMPACTOR_POLL_S = 5.0
SETTLE_QUIET_S = COMPACTOR_POLL_S + 1.0
SETTLE_LIMIT_S = 600.0
_BUSY = {CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED, CompactionStatus.RUNNING}


async def settle_slatedb(url: str, quiet_s: float = SETTLE_QUIET_S) -> dict[str, int]:
    """Wait (at most SETTLE_LIMIT_S) until the slatedb store at `url`, open in this process,
    has no compaction pending or running and an unchanged manifest for `quiet_s`; returns its
    L0 SST and sorted-run counts and the compactions it has run (admin reads only)."""
    location = parse_location(url)
    admin = AdminBuilder(location.db_path, location.object_store(create=False)).build()
    deadline = time.monotonic() + SETTLE_LIMIT_S
    quiet_since, last_id = time.monotonic(), -1
    while True:
        manifest = await admin.read_manifest(None)
        compactions = await admin.read_compactions(None)
        recent = compactions.recent_compactions if compactions is not None else []
        busy = any(c.status in _BUSY for c in recent)
        now = time.monotonic()
        if busy or manifest is None or manifest.id != last_id:
            quiet_since = now
            last_id = -1 if manifest is None else manifest.id
        elif now - quiet_since >= quiet_s:
            return {
                "l0_ssts": len(manifest.l0),
                "sorted_runs": len(manifest.compacted),
                "compactions": sum(c.status == CompactionStatus.COMPLETED for c in recent),
            }
        if now > deadline:
            raise RuntimeError(f"{url}: compaction still busy after {SETTLE_LIMIT_S:.0f} s")
        await asyncio.sleep(0.25)


class RssSampler:
    """Peak resident set size of this process, polled from /proc every 20 ms, per phase."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def current(self) -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * self._page
        except OSError:  # not Linux: the process-wide high-water mark
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._peak = max(self._peak, self.current())

    def reset(self) -> None:
        self._peak = self.current()

    def peak(self) -> int:
        return max(self._peak, self.current())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class Progress:
    """A one-line progress bar on stderr (redrawn at most every 0.5 s)."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.start = time.perf_counter()
        self._last = 0.0

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self._last < 0.5 and done < self.total):
            return
        self._last = now
        width = 30
        filled = width * done // max(self.total, 1)
        rate = done / max(now - self.start, 1e-9)
        sys.stderr.write(
            f"\r{self.label:<10} [{'#' * filled}{'.' * (width - filled)}] "
            f"{done:>9,}/{self.total:,} {rate:>9,.0f}/s"
        )
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": ordered[len(ordered) // 2] * 1e6,
        "p99_us": ordered[min(len(ordered) - 1, (len(ordered) * 99) // 100)] * 1e6,
    }


def dir_bytes(path: Path) -> dict[str, int]:
    """Bytes under a slatedb directory by kind (wal, sst = compacted, other = manifests...)."""
    out = {"wal": 0, "sst": 0, "other": 0}
    for file in path.rglob("*"):
        if file.is_file():
            parts = file.relative_to(path).parts
            kind = "wal" if "wal" in parts else "sst" if "compacted" in parts else "other"
            out[kind] += file.stat().st_size
    return out


def s3_bytes(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    out = {"wal": 0, "sst": 0, "other": 0}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            parts = obj["Key"].split("/")
            kind = "wal" if "wal" in parts else "sst" if "compacted" in parts else "other"
            out[kind] += obj["Size"]
    return out


@dataclass
class Env:
    """Where the stores live and how they are measured."""

    root: Path
    workload: Workload
    store: str  # "file" or "s3"
    s3_url: str | None = None
    s3_client: Any = None
    rss: RssSampler | None = None
    progress: bool = True
    verify: bool = False
    settle_quiet_s: float = SETTLE_QUIET_S

    def url(self, name: str) -> str:
        if self.s3_url is not None:
            return f"{self.s3_url}/{name}"
        return str(self.root / name)

    def stored_bytes(self, name: str) -> dict[str, int]:
        if self.s3_url is not None:
            bucket, _, prefix = self.s3_url.removeprefix("s3://").partition("/")
            return s3_bytes(self.s3_client, bucket, f"{prefix}/{name}/")
        return dir_bytes(self.root / name)


class Side:
    """One store implementation under the common workload."""

    name = ""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.w = env.workload
        self.result: dict[str, Any] = {"side": self.name}

    # hooks ------------------------------------------------------------------------------------
    async def open(self, create: bool) -> None: ...
    async def close(self) -> None: ...
    async def load(self, progress: Callable[[int], None]) -> int: ...
    async def flush(self) -> None: ...
    async def get(self, actor: str, n: int) -> Any: ...
    def prefix_rows(self, actor: str) -> AsyncIterator[Any]: ...
    async def full_scan(self) -> tuple[int, int]: ...  # (item rows, event rows)
    async def item_scan(self) -> int: ...
    def stored_bytes(self) -> dict[str, int]: ...
    async def check(self) -> None: ...

    async def same_store_scans(self) -> dict[str, Any]:
        """Extra figures read off this side's own store (the typed side: its u64 scan against
        hand decoding of the same rows, interleaved); none by default."""
        return {}

    async def settle(self) -> dict[str, int]:
        """Wait until the store's background compaction is done (slatedb by default: the
        sides that use it override this); returns what the store looks like then."""
        return await settle_slatedb(self.env.url(self.name), self.env.settle_quiet_s)

    # the common sequence ------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        env, w, r = self.env, self.w, self.result
        rss = env.rss
        assert rss is not None
        clock = time.perf_counter
        rss.reset()
        await self.open(create=True)
        start = clock()
        loaded = await self.load(Progress(self.name, w.records, env.progress))
        load_s = clock() - start
        start = clock()
        await self.flush()
        r["flush_ms"] = (clock() - start) * 1e3
        r["loaded"] = loaded
        r["load_records_per_s"] = loaded / load_s
        r["load_peak_rss_mb"] = rss.peak() / 2**20
        await self.close()
        stored = self.stored_bytes()
        r["stored_bytes"] = stored
        r["bytes_per_record"] = sum(stored.values()) / max(loaded, 1)

        await self.open(create=False)
        start = clock()
        r["settled"] = await self.settle()
        r["settle_s"] = clock() - start
        sample = get_sample(w, min(GETS, w.records))
        for label in ("cold", "warm"):
            times = []
            for actor, n in sample:
                start = clock()
                value = await self.get(actor, n)
                times.append(clock() - start)
                if value is None:
                    raise AssertionError(f"{self.name}: get {actor or 'item'} {n} found nothing")
            r[f"get_{label}"] = percentiles(times)

        r["prefix"] = {}
        for actor, size in w.prefix_cases():
            firsts, totals, cpus = [], [], []
            load = os.getloadavg()[0]
            for _ in range(ROUNDS):
                rows = 0
                cpu = time.process_time()
                start = clock()
                first = 0.0
                async for _row in self.prefix_rows(actor):
                    if not rows:
                        first = clock() - start
                    rows += 1
                totals.append(clock() - start)
                cpus.append(time.process_time() - cpu)
                firsts.append(first)
                if rows != size:
                    raise AssertionError(f"{self.name}: prefix {actor}: {rows} rows, not {size}")
            r["prefix"][str(size)] = {
                "rows": size,
                "first_row_ms": statistics.median(firsts) * 1e3,
                "total_ms": statistics.median(totals) * 1e3,
                # CPU of the whole process (slatedb's threads too): far below total_ms means
                # the scan waited, e.g. for cores other jobs held (`load`: 1-min load average)
                "cpu_ms": statistics.median(cpus) * 1e3,
                "load": load,
            }

        rss.reset()
        before = rss.current()
        start = clock()
        items, events = await self.full_scan()
        elapsed = clock() - start
        if (items, events) != (w.items, w.records - w.items):
            raise AssertionError(f"{self.name}: full scan saw {items} + {events} rows")
        r["full_scan_rows"] = items + events
        r["full_scan_rows_per_s"] = (items + events) / elapsed
        r["full_scan_rss_growth_mb"] = (rss.peak() - before) / 2**20
        r["full_scan_peak_rss_mb"] = rss.peak() / 2**20
        best = float("inf")
        for _ in range(2):
            start = clock()
            rows = await self.item_scan()
            best = min(best, clock() - start)
            assert rows == w.items, rows
        r["item_scan_us_per_row"] = best / max(w.items, 1) * 1e6
        r.update(await self.same_store_scans())
        if env.verify:
            await self.check()
        await self.close()
        return r


class TypedSide(Side):
    name = "typed"

    store: Store

    async def open(self, create: bool) -> None:
        self.store = await Store.open(self.env.url("typed"), SCHEMA)

    async def close(self) -> None:
        await self.store.close()

    async def load(self, progress: Callable[[int], None]) -> int:
        return await self.store.put_many(typed_records(self.w), batch_size=BATCH, progress=progress)

    async def flush(self) -> None:
        await self.store.flush()

    async def get(self, actor: str, n: int) -> Any:
        if not actor:
            return await self.store.get(ITEM, (n,))
        return await self.store.get(EVENT, (actor, tids.encode(event_tid(n))))

    def prefix_rows(self, actor: str) -> AsyncIterator[Any]:
        return self.store.scan(EVENT, actor).__aiter__()

    async def full_scan(self) -> tuple[int, int]:
        counts = []
        for record_type in (ITEM, EVENT):
            n = 0
            async for record in self.store.scan(record_type, fill_cache=False):
                record.value  # noqa: B018 - every side touches the decoded value
                n += 1
            counts.append(n)
        return counts[0], counts[1]

    async def item_scan(self) -> int:
        n = 0
        async for record in self.store.scan(ITEM, fill_cache=False):
            record.value  # noqa: B018
            n += 1
        return n

    def stored_bytes(self) -> dict[str, int]:
        return self.env.stored_bytes("typed")

    async def same_store_scans(self) -> dict[str, Any]:
        """The u64 scan typed vs hand-decoded on this very store, in SAME_STORE_PAIRS
        interleaved pairs: the typed and raw sides' stores are separate databases whose SST
        layout and timing differ, so this is the ratio that says what the typed layer costs."""
        lo, hi = ITEM.range()
        key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
        db, unpackb = self.store._source, msgpack.unpackb

        async def hand() -> int:
            it = await db.scan_with_options(key_range, scan_options(False, fill_cache=False))
            n = 0
            while rows := await it.next_batch(1024):
                for kv in rows:
                    hand_decode_item(kv.key)
                    unpackb(kv.value, raw=False, timestamp=3, strict_map_key=False)
                n += len(rows)
            return n

        times: dict[str, list[float]] = {"typed": [], "hand": []}
        clock = time.perf_counter
        for i in range(SAME_STORE_PAIRS):
            order = [("typed", self.item_scan), ("hand", hand)]
            for name, scan in order if i % 2 == 0 else order[::-1]:
                start = clock()
                assert await scan() == self.w.items
                times[name].append(clock() - start)
        ratios = [h / t for t, h in zip(times["typed"], times["hand"], strict=True)]
        per_row = {k: statistics.median(v) / max(self.w.items, 1) * 1e6 for k, v in times.items()}
        return {
            "same_store_typed_us_per_row": per_row["typed"],
            "same_store_hand_us_per_row": per_row["hand"],
            "same_store_ratio": statistics.median(ratios),
            "same_store_ratio_range": [min(ratios), max(ratios)],
        }

    async def check(self) -> None:
        i = 0
        async for record in self.store.scan(ITEM):
            assert tuple(record.key) == (i,) and record.value == item_value(i), record
            i += 1
        assert i == self.w.items
        expected = iter(
            (actor, n) for actor, size in sorted(self.w.actors) for n in reversed(range(size))
        )
        count = 0
        async for record in self.store.scan(EVENT):
            actor, n = next(expected)
            assert tuple(record.key) == (actor, tids.encode(event_tid(n))), record
            assert record.value == event_value(actor, n), record
            count += 1
        assert count == self.w.records - self.w.items


class RawSide(Side):
    """slatedb binding calls; keys and values packed and unpacked by hand."""

    name = "raw"

    db: Any
    #: the typed Store's ScanOptions (prefix scans: default; full scans: fill_cache=False),
    #: so the two sides differ only in decoding
    options = scan_options(False)
    bulk_options = scan_options(False, fill_cache=False)

    async def open(self, create: bool) -> None:
        location = parse_location(self.env.url("raw"))
        builder = DbBuilder(location.db_path, location.object_store(create=True))
        self.db = await builder.build()

    async def close(self) -> None:
        await self.db.shutdown()

    async def load(self, progress: Callable[[int], None]) -> int:
        n = 0
        wb = WriteBatch()
        for key, value in raw_records(self.w):
            wb.put(key, value)
            n += 1
            if n % BATCH == 0:
                await self.db.write(wb)
                wb = WriteBatch()
                progress(n)
        if n % BATCH:
            await self.db.write(wb)
            progress(n)
        return n

    async def flush(self) -> None:
        await self.db.flush()

    async def get(self, actor: str, n: int) -> Any:
        key = hand_item_key(n) if not actor else hand_event_key(actor, event_tid(n))
        data = await self.db.get(key)
        return None if data is None else unpack(data)

    async def _scan(self, lo: bytes, hi: bytes, bulk: bool = False) -> Any:
        """An iterator with the ScanOptions the typed Store uses."""
        key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
        return await self.db.scan_with_options(
            key_range, self.bulk_options if bulk else self.options
        )

    async def _rows(self, lo: bytes, hi: bytes) -> AsyncIterator[Any]:
        it = await self._scan(lo, hi)
        while rows := await it.next_batch(1024):
            for kv in rows:
                yield kv

    def prefix_rows(self, actor: str) -> AsyncIterator[Any]:
        lo = hand_event_prefix(actor)
        return self._decoded_events(lo, lo[:-1] + b"\x01")

    async def _decoded_events(self, lo: bytes, hi: bytes) -> AsyncIterator[Any]:
        async for kv in self._rows(lo, hi):
            yield hand_decode_event(kv.key), unpack(kv.value)

    async def _count(self, lo: bytes, hi: bytes, decode_key: Callable[[bytes], Any]) -> int:
        it = await self._scan(lo, hi, bulk=True)
        n = 0
        unpackb = msgpack.unpackb
        while rows := await it.next_batch(1024):
            for kv in rows:
                decode_key(kv.key)
                unpackb(kv.value, raw=False, timestamp=3, strict_map_key=False)
            n += len(rows)
        return n

    async def full_scan(self) -> tuple[int, int]:
        items = await self.item_scan()
        lo, hi = EVENT.range()
        assert hi is not None
        return items, await self._count(lo, hi, hand_decode_event)

    async def item_scan(self) -> int:
        lo, hi = ITEM.range()
        assert hi is not None
        return await self._count(lo, hi, hand_decode_item)

    def stored_bytes(self) -> dict[str, int]:
        return self.env.stored_bytes("raw")

    async def check(self) -> None:
        lo, hi = ITEM.range()
        assert hi is not None
        i = 0
        async for kv in self._rows(lo, hi):
            assert kv.key == ITEM.encode(i) and unpack(kv.value) == item_value(i)
            i += 1
        assert i == self.w.items


class RocksSide(Side):
    """RocksDB through rocksdict (raw bytes mode), the same bytes and hand decoding."""

    name = "rocksdict"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.path = env.root / "rocksdict"
        import rocksdict

        self.rocksdict = rocksdict
        self.db: Any = None

    async def open(self, create: bool) -> None:
        rd = self.rocksdict
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        self.db = rd.Rdict(str(self.path), options)

    async def close(self) -> None:
        self.db.close()

    async def load(self, progress: Callable[[int], None]) -> int:
        n = 0
        wb = self.rocksdict.WriteBatch(raw_mode=True)
        for key, value in raw_records(self.w):
            wb.put(key, value)
            n += 1
            if n % BATCH == 0:
                self.db.write(wb)
                wb = self.rocksdict.WriteBatch(raw_mode=True)
                progress(n)
        if n % BATCH:
            self.db.write(wb)
            progress(n)
        return n

    async def flush(self) -> None:
        self.db.flush(True)
        self.db.flush_wal(True)

    async def get(self, actor: str, n: int) -> Any:
        key = hand_item_key(n) if not actor else hand_event_key(actor, event_tid(n))
        data = self.db.get(key)
        return None if data is None else unpack(data)

    def _iter(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self.db.iter()
        it.seek(lo)
        while it.valid():
            key = it.key()
            if key >= hi:
                return
            yield key, it.value()
            it.next()

    async def prefix_rows(self, actor: str) -> AsyncIterator[Any]:  # type: ignore[override]
        lo = hand_event_prefix(actor)
        for key, value in self._iter(lo, lo[:-1] + b"\x01"):
            yield hand_decode_event(key), unpack(value)

    def _count(self, lo: bytes, hi: bytes, decode_key: Callable[[bytes], Any]) -> int:
        n = 0
        for key, value in self._iter(lo, hi):
            decode_key(key)
            unpack(value)
            n += 1
        return n

    async def full_scan(self) -> tuple[int, int]:
        items = await self.item_scan()
        lo, hi = EVENT.range()
        assert hi is not None
        return items, self._count(lo, hi, hand_decode_event)

    async def item_scan(self) -> int:
        lo, hi = ITEM.range()
        assert hi is not None
        return self._count(lo, hi, hand_decode_item)

    def stored_bytes(self) -> dict[str, int]:
        total = sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        return {"all": total}

    async def settle(self) -> dict[str, int]:
        """RocksDB: wait until no compaction is pending or running (same bound)."""
        deadline = time.monotonic() + SETTLE_LIMIT_S
        busy = ("rocksdb.compaction-pending", "rocksdb.num-running-compactions")
        while any(self.db.property_int_value(name) for name in busy):
            if time.monotonic() > deadline:
                raise RuntimeError(f"rocksdict: compaction busy after {SETTLE_LIMIT_S:.0f} s")
            await asyncio.sleep(0.25)
        return {}

    async def check(self) -> None:
        lo, hi = ITEM.range()
        assert hi is not None
        i = 0
        for key, value in self._iter(lo, hi):
            assert key == ITEM.encode(i) and unpack(value) == item_value(i)
            i += 1
        assert i == self.w.items


# --- S3 endpoint ----------------------------------------------------------------------------------


class Moto:
    """A moto_server on 127.0.0.1 for the run; stop() ends it (also at interpreter exit)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.gettempdir()) / f"bench-moto-{self.port}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start on {self.endpoint}") from None
                time.sleep(0.1)

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.log_path.unlink(missing_ok=True)


# --- running and reporting ------------------------------------------------------------------------


async def run_scale(
    records: int,
    store: str = "file",
    root: Path | None = None,
    *,
    progress: bool = True,
    verify: bool = False,
    sides: tuple[str, ...] = ("typed", "raw", "rocksdict"),
    settle_quiet_s: float = SETTLE_QUIET_S,
) -> dict[str, Any]:
    """Run the workload on each side; returns {"records", "store", "sides": {name: figures}}."""
    workload = Workload(records)
    own_root = root is None
    base = Path(tempfile.mkdtemp(prefix="bench-scale-")) if root is None else root
    moto: Moto | None = None
    saved_env: dict[str, str | None] = {}
    rss = RssSampler()
    # the native driver checks itself once per process: do it before any side is timed
    # runs, so every side (raw's next_batch and WriteBatch included) runs the same binding
    # whatever the order or selection of sides.
    native_calls.status()
    try:
        env = Env(
            base,
            workload,
            store,
            rss=rss,
            progress=progress,
            verify=verify,
            settle_quiet_s=settle_quiet_s,
        )
        if store == "s3":
            moto = Moto()
            for name, value in moto.env().items():
                saved_env[name] = os.environ.get(name)
                os.environ[name] = value
            env.s3_client = moto.client()
            env.s3_client.create_bucket(Bucket="bench")
            env.s3_url = f"s3://bench/scale-{os.getpid()}"
        classes = {"typed": TypedSide, "raw": RawSide, "rocksdict": RocksSide}
        out: dict[str, Any] = {"records": records, "store": store, "sides": {}}
        for name in sides:
            out["sides"][name] = await classes[name](env).run()
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return out
    finally:
        rss.close()
        if moto is not None:
            moto.stop()
        for name, old in saved_env.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        if own_root:
            shutil.rmtree(base, ignore_errors=True)


def table(result: dict[str, Any]) -> str:
    """The figures side by side, one row per measure, with typed/raw and typed/rocksdict."""
    sides = result["sides"]
    names = list(sides)
    rows: list[tuple[str, list[float | None], str]] = []

    def add(label: str, get: Callable[[dict[str, Any]], float | None], unit: str) -> None:
        values = []
        for n in names:
            try:
                values.append(get(sides[n]))
            except (KeyError, TypeError):
                values.append(None)
        rows.append((label, values, unit))

    add("load", lambda s: s["load_records_per_s"], "rec/s")
    add("flush to durable", lambda s: s["flush_ms"], "ms")
    add("compaction settle wait", lambda s: s["settle_s"], "s")
    for label in ("cold", "warm"):
        for p in ("p50", "p99"):
            add(f"get {label} {p}", lambda s, label=label, p=p: s[f"get_{label}"][f"{p}_us"], "µs")
    for size in sides[names[0]]["prefix"]:
        add(f"prefix {size} first row", lambda s, z=size: s["prefix"][z]["first_row_ms"], "ms")
        add(f"prefix {size} total", lambda s, z=size: s["prefix"][z]["total_ms"], "ms")
        add(f"prefix {size} CPU", lambda s, z=size: s["prefix"][z]["cpu_ms"], "ms")
    add("load avg, largest prefix", lambda s: list(s["prefix"].values())[-1]["load"], "")
    add("full scan", lambda s: s["full_scan_rows_per_s"], "rows/s")
    add("u64 scan", lambda s: s["item_scan_us_per_row"], "µs/row")
    add("load peak RSS", lambda s: s["load_peak_rss_mb"], "MiB")
    add("full scan RSS growth", lambda s: s["full_scan_rss_growth_mb"], "MiB")
    add("bytes per record", lambda s: s["bytes_per_record"], "B")
    header = f"{'measure':<24}" + "".join(f"{n:>14}" for n in names) + "  unit"
    lines = [
        f"scale: {result['records']:,} records, store {result['store']}",
        header,
        "-" * len(header),
    ]
    for label, values, unit in rows:
        cells = "".join(f"{'-':>14}" if v is None else f"{v:>14,.2f}" for v in values)
        lines.append(f"{label:<24}{cells}  {unit}")
    typed, raw = sides.get("typed"), sides.get("raw")
    if typed and raw:
        ratio = raw["item_scan_us_per_row"] / typed["item_scan_us_per_row"]
        lines.append(f"u64 scan row rate, typed store / raw store: {ratio:.2f}")
    if typed and "same_store_ratio" in typed:
        low, high = typed["same_store_ratio_range"]
        lines.append(
            "typed u64 scan row rate / hand-decoded, same store, median of "
            f"{SAME_STORE_PAIRS} interleaved pairs: {typed['same_store_ratio']:.2f} "
            f"({low:.2f}-{high:.2f}; {typed['same_store_typed_us_per_row']:.2f} vs "
            f"{typed['same_store_hand_us_per_row']:.2f} µs/row) (target >= 0.85)"
        )
    lines.append(f"process peak RSS: {result['peak_rss_mb']:.0f} MiB")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.py scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--records",
        type=int,
        default=None,
        help="records to load (default 1,000,000 on file, 100,000 on s3)",
    )
    parser.add_argument("--store", choices=("file", "s3"), default="file")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON on stdout (the table goes to stderr)",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    records = args.records or (1_000_000 if args.store == "file" else 100_000)
    result = asyncio.run(run_scale(records, args.store, progress=not args.no_progress))
    text = table(result)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(result, indent=2))
    else:
        print(text)
    return 0


def run(quick: bool) -> None:
    main(["--records", "20000" if quick else "1000000"])
