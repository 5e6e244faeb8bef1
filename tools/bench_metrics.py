"""What store metrics cost (opendata_kv/store/metrics.py), side by side in one process: the
same records in four stores, two opened with an OpenTelemetry SDK meter provider (in-memory
reader) between two without (STORES), on the same keys, the rows in the memtable (the
cheapest get, so the largest share). Within each round the stores take turns block by block
(256 gets, an eighth of the round's single puts, one put_many or batch of 1,000), who goes
first rotating: turns of a few milliseconds put both sides under the same load and clock
speed, where whole rounds of each did not (their A/A control strayed by up to 9%).

    python tools/bench.py metrics [--quick]

Times are the process's CPU time (slatedb's threads included), not wall time: on a shared
machine a process waits for a core longer than it runs. Rows: per path, the median over
rounds of µs per operation (per key for get_many, per row for a scan, per record for puts)
without and with metrics, the median of the rounds' ratios (with / without) and their range,
and the median of the blocks' ratios (each block's turns side by side: a memtable flush or a
compaction on slatedb's threads lands in one turn, which this median leaves aside).
The meter does not collect inside the timed loops (a service's reader collects every few
seconds at most): what the caller pays is timed, and the collection is timed on its own after
them (µs per duration replayed into the SDK histogram).

Then the control: the same rounds over four stores none of which has metrics (A/A), whose
ratios are what the machine's noise alone makes of the comparison (run after the metrics run
in the same process, it has read 0.97-0.99 for the gets, where run alone it reads 0.99-1.00).

Then the floor of the design: the pure path's wrapper (two clock reads and one aggregation
step) and the C accelerator's Timed around a function that does nothing, against the bare
function, in ns per call, and what it is of the memtable get measured above. The stores use
the C path when the accelerator is in use; OPENDATA_KV_NO_EXTENSIONS=1 measures the pure one.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import tempfile
import time
from bisect import bisect_left
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.store import OpenOptions
from opendata_kv.store import metrics as store_metrics

REC = RecordType("bench", 1, [("id", F.u64)])
SCHEMA = Schema(REC)
VALUE = {"name": "x" * 80}
MANY = 64  # keys per get_many
PUTS = 1000  # records per put_many / batch round


BLOCK = 256  # keys per block of the gets: the two stores take turns block by block


class Workload(NamedTuple):
    """One path: `run(store, block)` does block `block` of a round (a coroutine function for
    the async face) and returns its count; a round is `blocks` blocks."""

    run: Callable[..., Any]
    blocks: int
    is_async: bool = False


def _paths(keys: list[int], next_id: list[int], singles: int) -> dict[str, Workload]:
    """path name -> how one round of it runs, block by block."""
    blocks = [keys[at : at + BLOCK] for at in range(0, len(keys) - BLOCK + 1, BLOCK)]
    put_blocks = 8  # a round's single puts in 8 blocks; put_many and batch(): 8 of PUTS each

    def get(store: SyncStore, b: int) -> int:
        for i in blocks[b]:
            store.get(REC, (i,))
        return BLOCK

    async def aget(store: SyncStore, b: int) -> int:
        inner = store.store
        for i in blocks[b]:
            await inner.get(REC, (i,))
        return BLOCK

    def get_many(store: SyncStore, b: int) -> int:
        block = blocks[b]
        for at in range(0, BLOCK, MANY):
            store.get_many(REC, [(i,) for i in block[at : at + MANY]])
        return BLOCK

    def ids(b: int, count: int) -> range:
        start = next_id[0] + b * count
        return range(start, start + count)

    def put(store: SyncStore, b: int) -> int:
        for i in ids(b, singles // put_blocks):
            store.put(REC, (i,), VALUE)
        return singles // put_blocks

    def put_many(store: SyncStore, b: int) -> int:
        return store.put_many((REC, (i,), VALUE) for i in ids(b, PUTS))

    def batch(store: SyncStore, b: int) -> int:
        with store.batch() as writes:
            for i in ids(b, PUTS):
                writes.put(REC, (i,), VALUE)
        return PUTS

    def scan(store: SyncStore, b: int) -> int:
        return sum(1 for _ in store.scan(REC))

    return {
        "SyncStore.get": Workload(get, len(blocks)),
        "Store.get": Workload(aget, len(blocks), is_async=True),
        "get_many (per key)": Workload(get_many, len(blocks)),
        "put (single)": Workload(put, put_blocks),
        "put_many (per record)": Workload(put_many, put_blocks),
        "batch() put (per record)": Workload(batch, put_blocks),
        "scan (per row)": Workload(scan, 1),
    }


#: the stores, in the order they are opened and loaded: two with metrics between two without
#: (a palindrome, so any trend along the order weighs both sides alike); each one's side
STORES: dict[str, str] = {"off": "off", "on": "on", "on2": "on", "off2": "off"}


def _round(
    path: Workload, stores: dict[str, SyncStore], r: int
) -> tuple[dict[str, float], list[float]]:
    """Round `r` of `path`, the stores taking turns block by block (who goes first rotating
    with the block and the round): ({side: µs of the process's CPU time per item}, each
    block's ratio with / without). Turns of a few ms put both sides under the same load and
    clock speed, which whole rounds of each (tens of ms) did not."""
    names = list(STORES)
    spent = {side: 0.0 for side in ("off", "on")}
    count = {side: 0 for side in ("off", "on")}
    blocks = [{"off": 0.0, "on": 0.0} for _ in range(path.blocks)]  # µs per item, summed
    clock = time.process_time

    def turns(b: int) -> list[str]:
        k = (r + b) % len(names)
        return names[k:] + names[:k]

    def took(name: str, b: int, n: int, seconds: float) -> None:
        side = STORES[name]
        count[side] += n
        spent[side] += seconds
        blocks[b][side] += seconds / n

    if path.is_async:

        async def run() -> None:
            for b in range(path.blocks):
                for name in turns(b):
                    start = clock()
                    n = await path.run(stores[name], b)
                    took(name, b, n, clock() - start)

        asyncio.run(run())
    else:
        for b in range(path.blocks):
            for name in turns(b):
                start = clock()
                n = path.run(stores[name], b)
                took(name, b, n, clock() - start)
    per_item = {side: spent[side] / count[side] * 1e6 for side in spent}
    return per_item, [block["on"] / block["off"] for block in blocks]


def measure(
    records: int, gets: int, rounds: int, root: Path, control: bool = False
) -> tuple[dict[str, tuple[float, ...]], float]:
    """({path: (median µs without, median µs with, median of the rounds' ratios, the least
    and greatest of them, median of the blocks' ratios)}, µs per duration replayed at a
    collection). `control`: the A/A run, no store with metrics, so the ratios show what like
    stores differ by in the same turns (the noise)."""
    reader = InMemoryMetricReader()
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[reader]))
    stores = {
        name: SyncStore.open(
            root / name, SCHEMA, options=options if side == "on" and not control else None
        )
        for name, side in STORES.items()
    }
    for store in stores.values():
        store.put_many(((REC, (i,), VALUE) for i in range(records)), batch_size=1000)
    keys = random.Random(7).sample(range(records), gets)
    next_id = [records]
    paths = _paths(keys, next_id, singles=max(64, gets // 10))
    samples: dict[str, dict[str, list[float]]] = {p: {"off": [], "on": []} for p in paths}
    ratios: dict[str, list[float]] = {p: [] for p in paths}
    for path in paths.values():  # warm-up
        _round(path, stores, 0)
        next_id[0] += 10 * PUTS
    reader.get_metrics_data()  # replays the warm-up's durations
    collect_us: list[float] = []
    for r in range(rounds):
        for name, path in paths.items():
            per_item, blocks = _round(path, stores, r)
            for side, us in per_item.items():
                samples[name][side].append(us)
            ratios[name] += blocks
            next_id[0] += 10 * PUTS
        telemetries: list[Any] = [stores[name].store._telemetry for name in ("on", "on2")]
        if telemetries[0] is None:  # the A/A control: no store with metrics
            collect_us.append(0.0)
            continue
        pending = sum(
            sum(sum(found[: store_metrics.SUM]) for found in t._series.values())
            for t in telemetries
        )
        start = time.process_time()
        reader.get_metrics_data()  # the collection: every duration of the round replayed
        collect_us.append((time.process_time() - start) / max(1, pending) * 1e6)
    for store in stores.values():
        store.close()
    out: dict[str, tuple[float, ...]] = {}
    for name, got in samples.items():
        per_round = [on / off for on, off in zip(got["on"], got["off"], strict=True)]
        out[name] = (
            statistics.median(got["off"]),
            statistics.median(got["on"]),
            statistics.median(per_round),
            min(per_round),
            max(per_round),
            statistics.median(ratios[name]),
        )
    return out, statistics.median(collect_us)


def floor_ns(calls: int, rounds: int) -> dict[str, float]:
    """ns of this thread's CPU per call, median over rounds in rotated order: a function doing
    nothing called as SyncStore.get calls its twin (`bare`), with two clock reads around it
    (`clocks`), with the bucket's bisect and the locked aggregation step too (`step`),
    wrapped by the pure path's wrapper (`wrapper`: the same, plus its call passing the
    arguments on), and, when the accelerator is in use, timed by its Timed (`c_timed`: the
    clock reads and the step in C, what a store uses on the C path)."""
    telemetry = store_metrics.telemetry(MeterProvider(metric_readers=[InMemoryMetricReader()]), "/")
    assert telemetry is not None
    found = telemetry.series("step")
    acquire, release, clock = telemetry.lock.acquire, telemetry.lock.release, time.perf_counter_ns
    bounds, least, most, sums = (
        store_metrics.BOUNDS_NS,
        store_metrics.LEAST,
        store_metrics.MOST,
        store_metrics.SUM,
    )

    def nothing(target: Any, fields: Any, *, default: Any = None, upgrade: bool = True) -> None:
        return None  # called as SyncStore.get calls its twin's _get_now

    def clocks(target: Any, fields: Any, *, default: Any = None, upgrade: bool = True) -> None:
        start = clock()
        elapsed = clock() - start
        del elapsed

    def step(target: Any, fields: Any, *, default: Any = None, upgrade: bool = True) -> None:
        start = clock()
        elapsed = clock() - start
        i = bisect_left(bounds, elapsed)
        acquire()
        try:
            found[i] += 1
            found[sums + i] += elapsed
            if elapsed < found[least]:
                found[least] = elapsed
            if elapsed > found[most]:
                found[most] = elapsed
        finally:
            release()

    ways = {
        "bare": nothing,
        "clocks": clocks,
        "step": step,
        "wrapper": store_metrics._timed_now(telemetry, "get", nothing),
    }
    module = store_metrics._c_timing()
    if module is not None:  # the accelerator's Timed, as a store uses it on the C path
        ways["c_timed"] = store_metrics._in_c(module, telemetry, "c", nothing, False)
    key = (1,)
    got: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = ways[name]
            start = time.thread_time_ns()
            for _ in range(calls):
                fn(REC, key, default=None, upgrade=True)
            got[name].append((time.thread_time_ns() - start) / calls)
    return {name: statistics.median(v) for name, v in got.items()}


def run(quick: bool) -> None:
    records, gets, rounds = (2_000, 640, 3) if quick else (20_000, 6_400, 15)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        result, collect_us = measure(records, gets, rounds, Path(tmp))
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        control, _ = measure(records, gets, rounds, Path(tmp), control=True)
    floor = floor_ns(20_000 if quick else 200_000, rounds)
    print(
        f"{records:,} records in the memtable, {gets:,} gets a round, {rounds} rounds, "
        f"alternating order (load {load:.2f} -> {os.getloadavg()[0]:.2f}); timing: "
        + ("C accelerator" if store_metrics._c_timing() is not None else "pure Python")
    )
    print(
        "| path | without metrics µs | with metrics µs | with / without (median of the "
        "rounds) | rounds' range | median of the blocks' ratios |"
    )
    print("|---|---|---|---|---|---|")
    rows = [*result.items()]
    rows += [(f"control (A/A, no metrics on any): {name}", row) for name, row in control.items()]
    for name, (off, on, ratio, least, most, blocks) in rows:
        print(
            f"| {name} | {off:.2f} | {on:.2f} | {ratio:.3f} | {least:.3f}-{most:.3f} "
            f"| {blocks:.3f} |"
        )
    get_ns = result["SyncStore.get"][0] * 1000
    print(f"collection: {collect_us:.2f} µs per duration replayed into the SDK histogram")
    print(f"floor of the design: ns a call above a bare one, % of SyncStore.get ({get_ns:.0f} ns)")
    for name in ("clocks", "step", "wrapper", "c_timed"):
        if name not in floor:
            continue
        extra = floor[name] - floor["bare"]
        print(f"  {name}: +{extra:.0f} ns ({extra / get_ns * 100:.1f}%)")
    print(f"  (bare call {floor['bare']:.0f} ns)")
