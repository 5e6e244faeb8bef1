"""The store's read and write paths as ratios to the C floor, measured side by side in one run.

    python tools/bench.py store [--quick] [--json]

Workload (issue 19): 20,000 records of ~100 B msgpack values written in batches of 1,000 and
made durable with flush(); 5,000 random gets of distinct keys; full scans of the 20,000 rows;
batched puts of 20,000 records in batches of 1,000 into a second store (overwriting the same
keys each round, so the read store keeps its layout). --quick: 2,000 records, 500 gets.

Rows (each path reads the same slatedb Db; rocksdict has its own copy of the same bytes):
    floor        ../shared/floor/ (a C extension calling the wheel's own native functions with
                 no Python in between): fx.get, fx.next_batch(1024), wb_new/wb_put_many/write
    generated    the slatedb binding as shipped: await db.get, await it.next_batch(1024),
                 WriteBatch.put + await db.write (the binding as shipped)
                 (floor and generated scans open their iterator with the ScanOptions the
                 typed scan uses, so all do the same Rust work)
    Store        opendata_kv typed: await store.get(REC, (i,)), async for r in store.scan(REC),
                 async with store.batch() as b: b.put(REC, (i,), value)
    SyncStore    the same calls, blocking, from a plain thread (no event loop running)
    get_many     store.get_many(REC, [64 fields tuples]) per key, Store and SyncStore; a row
                 says "n/a (no get_many)" while the method does not exist
    rocksdict    RocksDB through rocksdict (bench extra), raw bytes: get, items(), WriteBatch
    native       puts only: the store's own native call alone, pre-encoded keys and values in
                 one calls.batch_put_many per batch and calls.write (blocking), without and
                 with its expiry column (every put with the TTL rows' ttl): the floor of a
                 TTL put against a plain one on the path the typed batch takes
The table is made twice: rows in the memtable (right after the load; the manifest lists no
SST), then rows in an SST (memtable flushed, store closed and reopened: the manifest lists
the SST; the untimed warm-up round fills the block cache). rocksdict likewise: memtable,
then flushed and reopened.

Method: per column (get, scan, put), one untimed warm-up run of every path, then R rounds
(7; --quick 3) in which every path runs its whole workload once, in an order rotated each
round, so machine noise hits all alike. Sync paths (floor, SyncStore, rocksdict) run on the
main thread while no event loop runs; async paths inside one event loop (run_until_complete
on the same thread). Each run is timed with time.perf_counter_ns around its loop only; gc is
collected before each run and left on. Reported: the median µs per operation (per key for
get_many, per row for scans, per record for puts) and the median over rounds of the ratio to
the floor's run in the same round; the targets of issue 32 are printed beside the ratios.
Numbers are printed, never asserted. --json prints the figures (every sample) as JSON on
stdout and the tables on stderr.

Last, the latency of one put when accepted, with flush(), and with await_durable() (raw
binding, local directory; also on OPENDATA_KV_BENCH_S3=s3://bucket/prefix when set, with the
AWS_* variables of objstore/location.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_floor
import msgpack
from slatedb.uniffi import (
    AdminBuilder,
    DbBuilder,
    FlushOptions,
    FlushType,
    KeyRange,
    ScanOptions,
    WriteBatch,
)

from opendata_kv import RecordType, Schema, Store, SyncStore
from opendata_kv import fields as F
from opendata_kv.native import calls
from opendata_kv.objstore.location import parse_location

REC = RecordType("bench", 1, [("id", F.u64)])
SCHEMA = Schema(REC)
BATCH = 1000  # records per batched write
MANY = 64  # keys per get_many call
SCAN_BATCH = 1024  # rows per next_batch on the floor and generated paths


@dataclass(frozen=True)
class Sizes:
    records: int
    gets: int
    rounds: int
    durability: int  # puts per mode in the durability latency lines (0: skip them)


FULL = Sizes(records=20_000, gets=5_000, rounds=7, durability=30)
QUICK = Sizes(records=2_000, gets=500, rounds=3, durability=5)

COLUMNS = {
    "get": "get µs",
    "scan": "scan µs/row",
    "put": "batched put µs/record",
    "single": "single put µs",
}
TTL = 3600.0  # the ttl= of the TTL put rows (issue 41: within 10% of a plain put)
#: what each run is timed with: wall time, or the process's CPU time (--cpu: every thread's,
#: slatedb's included), which a machine shared with other work disturbs far less
CLOCK: list[Callable[[], int]] = [time.perf_counter_ns]
SINGLES = 10  # single puts per round: a tenth of the gets
ROWS = {
    "floor": "floor (C, same native calls)",
    "generated": "generated binding: `await db.get`, `next_batch`, WriteBatch put + write",
    "store": "opendata_kv `Store` typed: get, scan, `batch()` put",
    "sync": "opendata_kv `SyncStore` typed: get, scan, `batch()` put",
    "store_many": "`Store.get_many`, 64 keys (per key)",
    "sync_many": "`SyncStore.get_many`, 64 keys (per key)",
    "store_ttl": "`Store` typed: `batch()` put and put, each with `ttl=`",
    "sync_ttl": "`SyncStore` typed: `batch()` put and put, each with `ttl=`",
    "rocksdict": "rocksdict (raw bytes): get, `items()`, WriteBatch",
    "native": "`calls.batch_put_many` + `calls.write` alone, pre-encoded",
    "native_ttl": "the same with its expiry column (every put with `ttl=`)",
}
#: issue 32's targets (stricter than issue 19's): (row, column) -> the largest ratio to the
#: floor that meets it
TARGETS = {
    ("sync", "get"): 1.5,
    ("store", "get"): 1.7,
    ("store_many", "get"): 1.5,
    ("sync_many", "get"): 1.5,
    ("store", "scan"): 1.5,
    ("sync", "scan"): 1.5,
    ("store", "put"): 1.8,
    ("sync", "put"): 1.8,
}


def value(i: int) -> dict[str, Any]:
    """The ~100 B value of record i (97 bytes of msgpack)."""
    return {"i": i, "body": bytes([i % 251]) * 84}


# --- the stores -----------------------------------------------------------------------------------


@dataclass
class Faces:
    """One slatedb store seen three ways: SyncStore, its async Store, and the binding's Db.

    Both faces share one Db, so every path reads the same memtable or SSTs. Today SyncStore
    keeps its Store as `.store` and Store its Db as `._source` (a bench may reach in; the
    product never does). The async face is driven from the bench's own event loop."""

    path: Path
    sync: SyncStore
    store: Store
    db: Any

    @classmethod
    def open(cls, path: Path) -> Faces:
        sync = SyncStore.open(path, SCHEMA)
        store = sync.store
        return cls(path, sync, store, store._source)

    def close(self) -> None:
        self.sync.close()


class Rocks:
    """A rocksdict store in raw-bytes mode, or None when rocksdict is not installed."""

    def __init__(self, path: Path) -> None:
        import rocksdict

        self.rd = rocksdict
        self.path = path
        self.db: Any = None
        self.open()

    @staticmethod
    def available() -> bool:
        return importlib.util.find_spec("rocksdict") is not None

    def open(self) -> None:
        options = self.rd.Options(raw_mode=True)
        options.create_if_missing(True)
        self.db = self.rd.Rdict(str(self.path), options)

    def close(self) -> None:
        self.db.close()

    def to_sst(self) -> None:
        self.db.flush(True)
        self.close()
        self.open()

    def where(self) -> str:
        memtable = self.db.property_int_value("rocksdb.num-entries-active-mem-table")
        return f"{memtable} entries in the active memtable, {len(self.db.live_files())} SST files"


async def _manifest(path: Path) -> Any:
    location = parse_location(str(path))
    admin = AdminBuilder(location.db_path, location.object_store(create=False)).build()
    return await admin.read_manifest(None)


def _where_rows_are(manifest: Any, expect: str, writes: int) -> tuple[str, bool]:
    """Where the manifest says the rows are, and whether that is where the table says: no SST
    for "memtable"; for "sst", L0 holds every sequence number the load wrote (one per batch),
    so a reopened writer replays none of them into its memtable."""
    ssts = len(manifest.l0) + sum(len(run.ssts) for run in manifest.compacted)
    text = (
        f"manifest {manifest.id}: {len(manifest.l0)} L0 SSTs, {len(manifest.compacted)} "
        f"sorted runs, last L0 seq {manifest.last_l0_seq} of the load's {writes} writes"
    )
    if expect == "memtable":
        return text, ssts == 0
    return text, ssts > 0 and manifest.last_l0_seq >= writes


def typed_scan_options() -> tuple[Any, str]:
    """The ScanOptions a typed forward scan passes to slatedb (read-ahead, block caching), so
    the floor and generated scans do the same Rust work; slatedb's defaults if not found."""
    try:
        options = importlib.import_module("opendata_kv.store.scan").scan_options(False)
    except (ImportError, AttributeError):
        return ScanOptions(), "slatedb's default ScanOptions"
    return options, "the typed scan's ScanOptions"


def _patch_state() -> str:
    from opendata_kv.native import accel, calls

    return f"typed paths: {calls.status()}; {accel.describe(calls.status())}"


# --- the timed paths ------------------------------------------------------------------------------


@dataclass
class Timed:
    """One path of one column: run() does the whole workload once and returns elapsed ns."""

    row: str
    ops: int
    run: Callable[[], int] | None
    missing: str = ""  # why run is None


@dataclass
class Bench:
    sizes: Sizes
    floor: bench_floor.Floor | str
    loop: asyncio.AbstractEventLoop
    read: Faces
    puts: Faces
    rocks: Rocks | None
    rocks_puts: Rocks | None
    order: list[int] = field(init=False)
    keys: list[bytes] = field(init=False)
    values: list[dict[str, Any]] = field(init=False)
    packed: list[bytes] = field(init=False)

    def __post_init__(self) -> None:
        n = self.sizes.records
        self.order = random.Random(7).sample(range(n), self.sizes.gets)
        self.keys = [REC.encode(i) for i in range(n)]
        self.values = [value(i) for i in range(n)]
        self.packed = [msgpack.packb(v, use_bin_type=True) for v in self.values]

    def in_loop(self, make: Callable[[], Coroutine[Any, Any, int]]) -> Callable[[], int]:
        return lambda: self.loop.run_until_complete(make())

    # get ---------------------------------------------------------------------------------------

    def get_paths(self) -> list[Timed]:
        gets = self.sizes.gets
        keys = [self.keys[i] for i in self.order]
        fields = [(i,) for i in self.order]
        chunks = [fields[s : s + MANY] for s in range(0, gets, MANY)]
        db, store, sync = self.read.db, self.read.store, self.read.sync
        clock = CLOCK[0]
        paths = [self._floor("floor", gets, lambda fx: self._floor_get(fx, keys))]

        async def generated() -> int:
            get = db.get
            start = clock()
            for key in keys:
                await get(key)
            return clock() - start

        async def store_get() -> int:
            get = store.get
            start = clock()
            for f in fields:
                await get(REC, f)
            return clock() - start

        def sync_get() -> int:
            get = sync.get
            start = clock()
            for f in fields:
                get(REC, f)
            return clock() - start

        paths += [
            Timed("generated", gets, self.in_loop(generated)),
            Timed("store", gets, self.in_loop(store_get)),
            Timed("sync", gets, sync_get),
        ]
        store_many = getattr(store, "get_many", None)
        sync_many = getattr(sync, "get_many", None)
        if store_many is None:
            paths.append(Timed("store_many", gets, None, "n/a (no get_many)"))
        else:

            async def store_get_many() -> int:
                start = clock()
                for chunk in chunks:
                    await store_many(REC, chunk)
                return clock() - start

            paths.append(Timed("store_many", gets, self.in_loop(store_get_many)))
        if sync_many is None:
            paths.append(Timed("sync_many", gets, None, "n/a (no get_many)"))
        else:

            def sync_get_many() -> int:
                start = clock()
                for chunk in chunks:
                    sync_many(REC, chunk)
                return clock() - start

            paths.append(Timed("sync_many", gets, sync_get_many))
        paths.append(self._rocks(gets, lambda rd: self._rocks_get(rd, keys)))
        return paths

    def _floor_get(self, fx: Any, keys: list[bytes]) -> int:
        get, handle = fx.get, self.read.db._handle
        start = CLOCK[0]()
        for key in keys:
            get(handle, key)
        return CLOCK[0]() - start

    def _rocks_get(self, rocks: Rocks, keys: list[bytes]) -> int:
        get = rocks.db.get
        start = CLOCK[0]()
        for key in keys:
            get(key)
        return CLOCK[0]() - start

    # scan --------------------------------------------------------------------------------------

    def scan_paths(self) -> list[Timed]:
        rows = self.sizes.records
        db, store, sync = self.read.db, self.read.store, self.read.sync
        lo, hi = REC.range()
        clock = CLOCK[0]
        options, _ = typed_scan_options()

        def scan() -> Any:  # the binding's iterator, as the typed scan opens it
            key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
            return db.scan_with_options(key_range, options)

        def floor_scan(fx: Any) -> int:
            # the iterator is made through the binding, untimed (one call per 20,000 rows)
            it = self.loop.run_until_complete(scan())
            next_batch, handle, n = fx.next_batch, it._handle, 0
            start = clock()
            while True:
                keys, _values = next_batch(handle, SCAN_BATCH)
                if not keys:
                    break
                n += len(keys)
            elapsed = clock() - start
            assert n == rows, n
            return elapsed

        async def generated() -> int:
            start = clock()
            it = await scan()
            n = 0
            while batch := await it.next_batch(SCAN_BATCH):
                for kv in batch:
                    kv.key  # noqa: B018 - touch the row as a caller would
                    kv.value  # noqa: B018
                n += len(batch)
            elapsed = clock() - start
            assert n == rows, n
            return elapsed

        async def store_scan() -> int:
            start = clock()
            n = 0
            async for record in store.scan(REC):
                record.value  # noqa: B018
                n += 1
            elapsed = clock() - start
            assert n == rows, n
            return elapsed

        def sync_scan() -> int:
            start = clock()
            n = 0
            for record in sync.scan(REC):
                record.value  # noqa: B018
                n += 1
            elapsed = clock() - start
            assert n == rows, n
            return elapsed

        def rocks_scan(rocks: Rocks) -> int:
            start = clock()
            n = 0
            for _key, _value in rocks.db.items():
                n += 1
            elapsed = clock() - start
            assert n == rows, n
            return elapsed

        return [
            self._floor("floor", rows, floor_scan),
            Timed("generated", rows, self.in_loop(generated)),
            Timed("store", rows, self.in_loop(store_scan)),
            Timed("sync", rows, sync_scan),
            self._rocks(rows, rocks_scan),
        ]

    # put ---------------------------------------------------------------------------------------

    def put_paths(self) -> list[Timed]:
        n = self.sizes.records
        spans = [range(s, min(s + BATCH, n)) for s in range(0, n, BATCH)]
        key_chunks = [[self.keys[i] for i in span] for span in spans]
        value_chunks = [[self.packed[i] for i in span] for span in spans]
        values = self.values
        db, store, sync = self.puts.db, self.puts.store, self.puts.sync
        clock = CLOCK[0]

        def floor_put(fx: Any) -> int:
            new, put_many, write, free = fx.wb_new, fx.wb_put_many, fx.write, fx.wb_free
            handle = db._handle
            start = clock()
            for keys, packed in zip(key_chunks, value_chunks, strict=True):
                wb = new()
                put_many(wb, keys, packed)
                write(handle, wb)
                free(wb)
            return clock() - start

        async def generated() -> int:
            start = clock()
            for keys, packed in zip(key_chunks, value_chunks, strict=True):
                wb = WriteBatch()
                for key, data in zip(keys, packed, strict=True):
                    wb.put(key, data)
                await db.write(wb)
            return clock() - start

        async def store_put() -> int:
            start = clock()
            for span in spans:
                async with store.batch() as batch:
                    for i in span:
                        batch.put(REC, (i,), values[i])
            return clock() - start

        def sync_put() -> int:
            start = clock()
            for span in spans:
                with sync.batch() as batch:
                    for i in span:
                        batch.put(REC, (i,), values[i])
            return clock() - start

        def rocks_put(rocks: Rocks) -> int:
            write_batch, write = rocks.rd.WriteBatch, rocks.db.write
            start = clock()
            for keys, packed in zip(key_chunks, value_chunks, strict=True):
                wb = write_batch(raw_mode=True)
                for key, data in zip(keys, packed, strict=True):
                    wb.put(key, data)
                write(wb)
            return clock() - start

        async def store_put_ttl() -> int:
            start = clock()
            for span in spans:
                async with store.batch() as batch:
                    for i in span:
                        batch.put(REC, (i,), values[i], ttl=TTL)
            return clock() - start

        def sync_put_ttl() -> int:
            start = clock()
            for span in spans:
                with sync.batch() as batch:
                    for i in span:
                        batch.put(REC, (i,), values[i], ttl=TTL)
            return clock() - start

        def native_put(ttl: float | None) -> Callable[[], int]:
            ms = None if ttl is None else round(ttl * 1000)

            def run() -> int:
                put_many, write, after = calls.batch_put_many, calls.write, calls.expire_after
                start = clock()
                for keys, packed in zip(key_chunks, value_chunks, strict=True):
                    wb = WriteBatch()
                    expires = None if ms is None else [after(ms) for _ in keys]
                    put_many(wb, keys, packed, expires)
                    calls.sync(write(db, wb))
                return clock() - start

            return run

        return [
            self._floor("floor", n, floor_put),
            Timed("generated", n, self.in_loop(generated)),
            Timed("store", n, self.in_loop(store_put)),
            Timed("sync", n, sync_put),
            Timed("store_ttl", n, self.in_loop(store_put_ttl)),
            Timed("sync_ttl", n, sync_put_ttl),
            self._rocks(n, rocks_put, puts=True),
            Timed("native", n, native_put(None)),
            Timed("native_ttl", n, native_put(TTL)),
        ]

    def single_paths(self) -> list[Timed]:
        """One put per call, plain and with a ttl, through both faces (no floor row)."""
        ops = max(1, self.sizes.gets // SINGLES)
        picks = [(i,) for i in self.order[:ops]]
        values = self.values
        store, sync = self.puts.store, self.puts.sync
        clock = CLOCK[0]

        def timed_async(ttl: float | None) -> Callable[[], Coroutine[Any, Any, int]]:
            async def run() -> int:
                put = store.put
                start = clock()
                for f in picks:
                    await put(REC, f, values[f[0]], ttl=ttl)
                return clock() - start

            return run

        def timed_sync(ttl: float | None) -> Callable[[], int]:
            def run() -> int:
                put = sync.put
                start = clock()
                for f in picks:
                    put(REC, f, values[f[0]], ttl=ttl)
                return clock() - start

            return run

        no_floor = "no floor" if isinstance(self.floor, str) else "n/a (no single put)"
        return [
            Timed("floor", ops, None, no_floor),
            Timed("store", ops, self.in_loop(timed_async(None))),
            Timed("sync", ops, timed_sync(None)),
            Timed("store_ttl", ops, self.in_loop(timed_async(TTL))),
            Timed("sync_ttl", ops, timed_sync(TTL)),
        ]

    # helpers -----------------------------------------------------------------------------------

    def _floor(self, row: str, ops: int, run: Callable[[Any], int]) -> Timed:
        if isinstance(self.floor, str):
            return Timed(row, ops, None, "no floor")
        fx = self.floor.fx
        return Timed(row, ops, lambda: run(fx))

    def _rocks(self, ops: int, run: Callable[[Rocks], int], puts: bool = False) -> Timed:
        rocks = self.rocks_puts if puts else self.rocks
        if rocks is None:
            return Timed("rocksdict", ops, None, "n/a (rocksdict not installed)")
        return Timed("rocksdict", ops, lambda: run(rocks))


def interleave(paths: list[Timed], rounds: int) -> dict[str, list[float]]:
    """µs per operation of every runnable path, `rounds` samples each: one untimed warm-up run
    of every path, then rounds in an order rotated by one each round."""
    live = [p for p in paths if p.run is not None]
    for p in live:
        assert p.run is not None
        p.run()
    samples: dict[str, list[float]] = {p.row: [] for p in live}
    for r in range(rounds):
        shift = r % len(live) if live else 0
        for p in live[shift:] + live[:shift]:
            assert p.run is not None
            gc.collect()
            samples[p.row].append(p.run() / p.ops / 1000.0)
    return samples


def cells(paths: list[Timed], samples: dict[str, list[float]], column: str) -> dict[str, Any]:
    """Per row: the median µs, the median of per-round ratios to the floor, the target."""
    floor = samples.get("floor")
    out: dict[str, Any] = {}
    for p in paths:
        target = TARGETS.get((p.row, column))
        if p.run is None:
            out[p.row] = {"missing": p.missing, "target": target}
            continue
        mine = samples[p.row]
        ratio = None
        if floor:
            ratio = statistics.median(a / b for a, b in zip(mine, floor, strict=True))
        out[p.row] = {
            "us": statistics.median(mine),
            "ratio": ratio,
            "target": target,
            "met": None if ratio is None or target is None else ratio <= target,
            "samples_us": mine,
        }
    return out


def measure_table(bench: Bench, where: str) -> dict[str, Any]:
    """One table: every column's paths interleaved over the rounds; where the rows are."""
    manifest = bench.loop.run_until_complete(_manifest(bench.read.path))
    writes = -(-bench.sizes.records // BATCH)
    located, as_expected = _where_rows_are(manifest, where, writes)
    table: dict[str, Any] = {
        "rows_in": where,
        "slatedb": located,
        "as_expected": as_expected,
        "rocksdict": bench.rocks.where() if bench.rocks is not None else None,
        "columns": {},
    }
    for column, make in (
        ("get", bench.get_paths),
        ("scan", bench.scan_paths),
        ("put", bench.put_paths),
        ("single", bench.single_paths),
    ):
        paths = make()
        samples = interleave(paths, bench.sizes.rounds)
        table["columns"][column] = cells(paths, samples, column)
        if column in ("put", "single"):  # TTL puts against plain ones, per round
            table.setdefault("ttl_ratio", {})[column] = ttl_ratios(samples)
        if column in ("put", "single"):  # let the put store's writes land before the next
            bench.puts.sync.flush()
    return table


def ttl_ratios(samples: dict[str, list[float]]) -> dict[str, float]:
    """Median per-round ratio of each face's TTL put to its plain put (issue 41: ≤ 1.10), and
    of the native call alone with its expiry column to without (the floor of that ratio)."""
    out = {}
    for face in ("store", "sync", "native"):
        plain, ttl = samples.get(face), samples.get(f"{face}_ttl")
        if plain and ttl:
            out[face] = statistics.median(a / b for a, b in zip(ttl, plain, strict=True))
    return out


def measure(
    sizes: Sizes,
    root: Path,
    floor_dir: Path = bench_floor.FLOOR_DIR,
    build_dir: Path = bench_floor.BUILD_DIR,
    rocks: bool = True,
) -> dict[str, Any]:
    """Both tables (memtable, SST) as a JSON-able dict."""
    floor = bench_floor.load(floor_dir, build_dir)
    result: dict[str, Any] = {
        "sizes": sizes.__dict__,
        "floor": str(floor.built) if isinstance(floor, bench_floor.Floor) else floor,
        "about": _about(),
        "tables": {},
    }
    use_rocks = rocks and Rocks.available()
    with contextlib.ExitStack() as stack:  # closes whatever was opened, in reverse order
        loop = asyncio.new_event_loop()
        stack.callback(loop.close)
        puts = Faces.open(root / "puts")
        stack.callback(puts.close)
        rocks_read = rocks_puts = None
        if use_rocks:
            rocks_read, rocks_puts = Rocks(root / "rocks-read"), Rocks(root / "rocks-puts")
            stack.callback(rocks_read.close)
            stack.callback(rocks_puts.close)
        bench = Bench(sizes, floor, loop, Faces.open(root / "read"), puts, rocks_read, rocks_puts)
        stack.callback(lambda: bench.read.close())  # the store open at the time
        _load(bench)
        result["patch"] = _patch_state()
        result["scan_options"] = typed_scan_options()[1]
        result["tables"]["memtable"] = measure_table(bench, "memtable")
        # rows into an SST: flush the memtable, close, reopen; the warm-up runs fill the cache
        loop.run_until_complete(
            bench.read.db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE))
        )
        bench.read.close()
        bench.read = Faces.open(root / "read")
        if rocks_read is not None:
            rocks_read.to_sst()
        result["tables"]["sst"] = measure_table(bench, "sst")
        if sizes.durability:
            result["durability"] = {
                "local directory": loop.run_until_complete(
                    durability(str(root / "durability"), sizes.durability)
                )
            }
            s3 = os.environ.get("OPENDATA_KV_BENCH_S3")
            if s3:  # e.g. s3://bucket/bench with AWS_* pointing at a moto_server on 127.0.0.1
                url = f"{s3.rstrip('/')}/{os.getpid()}"
                result["durability"][s3] = loop.run_until_complete(
                    durability(url, sizes.durability)
                )
    return result


def _load(bench: Bench) -> None:
    """The same records into the read store (typed batches, then flush()) and rocksdict."""
    sync = bench.read.sync
    n = bench.sizes.records
    for s in range(0, n, BATCH):
        with sync.batch() as batch:
            for i in range(s, min(s + BATCH, n)):
                batch.put(REC, (i,), bench.values[i])
    sync.flush()
    assert sync.get(REC, (n - 1,)) == bench.values[n - 1]
    assert bench.loop.run_until_complete(bench.read.store.get(REC, (0,))) == bench.values[0]
    if isinstance(bench.floor, bench_floor.Floor):
        assert bench.floor.fx.get(bench.read.db._handle, bench.keys[0]) == bench.packed[0]
    if bench.rocks is not None:
        for s in range(0, n, BATCH):
            wb = bench.rocks.rd.WriteBatch(raw_mode=True)
            for i in range(s, min(s + BATCH, n)):
                wb.put(bench.keys[i], bench.packed[i])
            bench.rocks.db.write(wb)


async def durability(url: str, count: int) -> dict[str, dict[str, float]]:
    """Latency of one 100 B put (raw binding): accepted, + flush(), + await_durable(); ms."""
    location = parse_location(url)
    db = await DbBuilder(location.path, location.object_store(create=True)).build()
    out: dict[str, dict[str, float]] = {}
    try:
        for mode in ("put", "put+flush", "put+await_durable"):
            times = []
            for i in range(count):
                start = time.perf_counter_ns()
                handle = await db.put(b"durability-%06d" % i, b"v" * 100)
                if mode == "put+flush":
                    await db.flush()
                elif mode == "put+await_durable":
                    await handle.await_durable()
                times.append((time.perf_counter_ns() - start) / 1e6)
            out[mode] = {"median": statistics.median(times), "min": min(times), "max": max(times)}
    finally:
        await db.shutdown()
    return out


def _about() -> dict[str, str]:
    """When and on what the figures were measured."""
    repo = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "slatedb": importlib.metadata.version("slatedb"),
        "python": sys.version.split()[0],
        "cpus": str(os.cpu_count()),
    }


# --- printing -------------------------------------------------------------------------------------


def _us(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _cell(row: str, cell: dict[str, Any] | None, floor_missing: bool) -> str:
    if cell is None:
        return "-"
    if "missing" in cell:
        return str(cell["missing"])
    text = _us(cell["us"])
    ratio, target = cell["ratio"], cell["target"]
    if row == "floor":
        return text
    if ratio is None:
        return f"{text} (no floor)" if floor_missing else text
    note = f"{ratio:.2f}x"
    if target is not None:
        note += f", target ≤ {target:.1f}x: {'met' if cell['met'] else 'MISSED'}"
    return f"{text} ({note})"


def table(result: dict[str, Any]) -> str:
    """Both tables as markdown, with the run's facts above them."""
    sizes, about = result["sizes"], result["about"]
    floor_missing = str(result["floor"]).startswith("no floor")
    lines = [
        f"store bench: {sizes['records']:,} records of ~100 B, {sizes['gets']:,} random gets, "
        f"full scans, puts in batches of {BATCH:,}; {sizes['rounds']} interleaved rounds after "
        "a warm-up, medians; ratio = median of per-round path/floor",
        f"floor: {result['floor']}",
        f"{about['date']}, commit {about['commit']}, slatedb {about['slatedb']}, Python "
        f"{about['python']}, {about['cpus']} CPUs; timed with {CLOCK[0].__name__}; "
        f"{result.get('patch', '')}; floor and "
        f"generated scans use {result.get('scan_options', '?')}",
    ]
    titles = {"memtable": "rows in the memtable", "sst": "rows in an SST, warm cache"}
    for name, title in titles.items():
        t = result["tables"].get(name)
        if t is None:
            continue
        check = "" if t["as_expected"] else "  WARNING: not where this table says"
        lines += ["", f"## {title}", f"slatedb {t['slatedb']}{check}"]
        if t["rocksdict"]:
            lines.append(f"rocksdict: {t['rocksdict']}")
        lines += ["", "| path | " + " | ".join(COLUMNS.values()) + " |"]
        lines.append("|---" * (len(COLUMNS) + 1) + "|")
        met = total = 0
        for row, label in ROWS.items():
            parts = []
            for column in COLUMNS:
                cell = t["columns"][column].get(row)
                parts.append(_cell(row, cell, floor_missing))
                if cell is not None and cell.get("met") is not None:
                    total += 1
                    met += bool(cell["met"])
            lines.append(f"| {label} | " + " | ".join(parts) + " |")
        if total:
            lines.append(f"targets met: {met} of {total} measured")
        for column, ratios in t.get("ttl_ratio", {}).items():
            lines.append(
                f"TTL put / plain put ({COLUMNS[column]}, median of per-round ratios; issue 41 "
                "target ≤ 1.10): "
                + ", ".join(
                    f"{face} {r:.2f}x ({'met' if r <= 1.10 else 'MISSED'})"
                    for face, r in ratios.items()
                )
            )
    for where, modes in result.get("durability", {}).items():
        lines.append("")
        lines.append(
            f"durability, {where}: median (min-max) ms of {sizes['durability']}: "
            + "; ".join(
                f"{mode} {m['median']:.2f} ({m['min']:.2f}-{m['max']:.2f})"
                for mode, m in modes.items()
            )
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.py store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="2,000 records, 500 gets, 3 rounds")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time each run with the process's CPU time instead of wall time (on a loaded "
        "machine; every row, the floor's too)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON on stdout (the tables go to stderr)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="set an OpenTelemetry SDK meter provider (in-memory reader) first, so every store "
        "records its metrics: the enabled cost, against a run without it (docs/operations.md)",
    )
    args = parser.parse_args(argv)
    if args.cpu:
        CLOCK[0] = time.process_time_ns
    if args.metrics:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        result = measure(QUICK if args.quick else FULL, Path(tmp))
    text = table(result)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(result, indent=2))
    else:
        print(text)
    return 0


def run(quick: bool) -> None:
    main(["--quick"] if quick else [])
