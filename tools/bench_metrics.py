"""What store metrics cost (opendata_kv/store/metrics.py), side by side in one process: the
same records in two stores, one opened with an OpenTelemetry SDK meter provider (in-memory
reader) and one without, timed in alternating rounds on the same keys.

    python tools/bench.py metrics [--quick]
    BENCH_METRICS_QUEUE=unbounded python tools/bench.py metrics   # never recorded in the loop

The measurements wait in a queue until the meter collects or PENDING_LIMIT (4,096) are queued;
a round of 5,000 gets crosses that bound once, so its figures hold the SDK's recording of
4,096 measurements. With BENCH_METRICS_QUEUE=unbounded the bound is lifted: the figures are
then what a call pays when the meter collects before the bound is reached.

Rows: SyncStore.get and Store.get (µs per get), a full scan (µs per row), batched puts (µs per
record); each the median over rounds of (with metrics) / (without), and both medians.
`tools/bench.py store --metrics` gives the same paths' absolute figures for a whole run.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.store import OpenOptions
from opendata_kv.store import metrics as store_metrics

REC = RecordType("bench", 1, [("id", F.u64)])
SCHEMA = Schema(REC)


def _timed(fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    n = fn()
    return (time.perf_counter() - start) / n * 1e6


def measure(records: int, gets: int, rounds: int, root: Path) -> dict[str, tuple[float, ...]]:
    """{path: (median µs without, median µs with, median ratio)}."""
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
    stores = {
        "off": SyncStore.open(root / "off", SCHEMA),
        "on": SyncStore.open(root / "on", SCHEMA, options=options),
    }
    value = {"name": "x" * 80}
    for store in stores.values():
        store.put_many(((REC, (i,), value) for i in range(records)), batch_size=1000)
        store.flush()
    keys = random.Random(7).sample(range(records), gets)
    next_id = [records]

    def get(store: SyncStore) -> int:
        for i in keys:
            store.get(REC, (i,))
        return len(keys)

    def aget(store: SyncStore) -> int:
        inner = store.store

        async def run() -> int:
            for i in keys:
                await inner.get(REC, (i,))
            return len(keys)

        return asyncio.run(run())

    def scan(store: SyncStore) -> int:
        return sum(1 for _ in store.scan(REC))

    def put(store: SyncStore) -> int:
        start = next_id[0]
        with store.batch() as batch:
            for i in range(start, start + 1000):
                batch.put(REC, (i,), value)
        return 1000

    paths = {"SyncStore.get": get, "Store.get": aget, "scan (per row)": scan, "batched put": put}
    samples: dict[str, dict[str, list[float]]] = {p: {"off": [], "on": []} for p in paths}
    for fn in paths.values():  # warm-up
        for store in stores.values():
            fn(store)
        next_id[0] += 1000
    for r in range(rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for name, fn in paths.items():
            for side in order:
                samples[name][side].append(_timed(lambda s=stores[side], f=fn: f(s)))  # type: ignore[misc]
            next_id[0] += 1000
    for store in stores.values():
        store.close()
    out = {}
    for name, got in samples.items():
        ratios = [on / off for on, off in zip(got["on"], got["off"], strict=True)]
        out[name] = (
            statistics.median(got["off"]),
            statistics.median(got["on"]),
            statistics.median(ratios),
        )
    return out


def run(quick: bool) -> None:
    records, gets, rounds = (2_000, 500, 5) if quick else (20_000, 5_000, 9)
    if os.environ.get("BENCH_METRICS_QUEUE") == "unbounded":
        store_metrics.PENDING_LIMIT = 10**12  # type: ignore[misc]
        print("the queue bound lifted: nothing is recorded inside the timed loops")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        result = measure(records, gets, rounds, Path(tmp))
    print(f"{records:,} records, {gets:,} gets a round, {rounds} rounds, alternating order")
    print("| path | without metrics µs | with metrics µs | with / without (median of rounds) |")
    print("|---|---|---|---|")
    for name, (off, on, ratio) in result.items():
        print(f"| {name} | {off:.2f} | {on:.2f} | {ratio:.3f} |")
