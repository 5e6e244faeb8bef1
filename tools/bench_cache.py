"""The writer's record cache (issue 40 point 3): typed gets on a zipfian workload over records in
SSTs, and batched writes, with the cache on and off, side by side in one run.

    python tools/bench.py cache [--records N] [--gets N] [--rounds R] [--cache-mib M]

Workload: N records (default 1,000,000) of ~100 B msgpack values, written in batches of 1,000,
flushed, the writer closed and reopened (the rows are in SSTs). Gets: ids drawn with a zipfian
law (s=1.1) over the N records, the popular ranks spread over the key space; each get timed
with perf_counter_ns around the SyncStore.get call; p50 and p99 per configuration. Writes: 20
batches of 1,000 records (existing ids) per run, µs per record. Each round opens the store with
the cache (OpenOptions.record_cache_bytes) and without, in an order that alternates, runs an
untimed warm-up of the same gets, then the timed gets and writes. Reported: medians over the
rounds, the per-round ratios, the cache's hit rate and the machine's load average.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.store import OpenOptions

REC = RecordType("zipf", 1, [("id", F.u64)])
SCHEMA = Schema(REC)
BATCH = 1000


def value(i: int) -> dict[str, Any]:
    return {"i": i, "body": bytes([i % 251]) * 84}


def zipf_ids(n: int, count: int, s: float, seed: int) -> list[int]:
    """`count` ids in [0, n): rank r drawn with weight 1/r**s, rank r's id spread by a prime."""
    cumulative = list(itertools.accumulate(1.0 / (r**s) for r in range(1, n + 1)))
    total = cumulative[-1]
    rng = random.Random(seed)
    ranks = [bisect.bisect_left(cumulative, rng.random() * total) for _ in range(count)]
    return [(r * 2_654_435_761) % n for r in ranks]


def build(path: Path, n: int) -> None:
    with SyncStore.open(path, SCHEMA) as store:
        store.put_many(((REC, (i,), value(i)) for i in range(n)), batch_size=BATCH)
        store.flush()


def run_once(path: Path, cache_bytes: int, ids: list[int], writes: int) -> dict[str, Any]:
    options = OpenOptions(record_cache_bytes=cache_bytes)
    with SyncStore.open(path, SCHEMA, options=options) as store:
        get, clock = store.get, time.perf_counter_ns
        fields = [(i,) for i in ids]
        for f in fields:  # warm-up: block cache (and record cache) filled
            get(REC, f)
        times = []
        for f in fields:
            start = clock()
            get(REC, f)
            times.append(clock() - start)
        times.sort()
        start, cpu = clock(), time.thread_time_ns()
        for b in range(writes):
            with store.batch() as batch:
                for i in range(b * BATCH, (b + 1) * BATCH):
                    batch.put(REC, (i,), value(i))
        write_us = (clock() - start) / (writes * BATCH) / 1000
        write_cpu_us = (time.thread_time_ns() - cpu) / (writes * BATCH) / 1000
        cache = store.record_cache
        hit_rate = None if cache is None else cache.hits / max(1, cache.hits + cache.misses)
        return {
            "p50_us": times[len(times) // 2] / 1000,
            "p99_us": times[int(len(times) * 0.99)] / 1000,
            "write_us": write_us,
            "write_cpu_us": write_cpu_us,
            "hit_rate": hit_rate,
            "load": os.getloadavg()[0],
        }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.py cache", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--gets", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=20, help="batches of 1,000 per run")
    parser.add_argument("--cache-mib", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="20,000 records, 5,000 gets")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.gets, args.writes = 20_000, 5_000, 5
    ids = zipf_ids(args.records, args.gets, 1.1, seed=11)
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        path = Path(tmp) / "db"
        start = time.monotonic()
        build(path, args.records)
        print(f"built {args.records:,} records in {time.monotonic() - start:.0f} s")
        runs: dict[str, list[dict[str, Any]]] = {"cache": [], "none": []}
        for r in range(args.rounds):
            order = ["cache", "none"] if r % 2 == 0 else ["none", "cache"]
            for name in order:
                size = args.cache_mib << 20 if name == "cache" else 0
                runs[name].append(run_once(path, size, ids, args.writes))
                print(f"round {r + 1} {name}: {runs[name][-1]}")
    print(
        f"\nzipfian s=1.1 over {args.records:,} records in SSTs, {args.gets:,} timed gets, "
        f"{args.writes:,} batches of {BATCH:,} written per run; medians of {args.rounds} rounds"
    )
    print(
        "| record cache | get p50 µs | get p99 µs | batched put µs/record | put CPU µs/record "
        "| hit rate (last round) | load |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, label in (("cache", f"{args.cache_mib} MiB"), ("none", "off")):
        rows = runs[name]

        def med(field: str, rows: list[dict[str, Any]] = rows) -> float:
            return statistics.median(row[field] for row in rows)

        hit = rows[-1]["hit_rate"]
        print(
            f"| {label} | {med('p50_us'):.2f} | {med('p99_us'):.1f} | {med('write_us'):.2f} | "
            f"{med('write_cpu_us'):.2f} | "
            f"{'-' if hit is None else f'{hit:.3f}'} | {med('load'):.1f} |"
        )
    ratios = [
        c["write_us"] / n["write_us"] for c, n in zip(runs["cache"], runs["none"], strict=True)
    ]
    cpu = [
        c["write_cpu_us"] / n["write_cpu_us"]
        for c, n in zip(runs["cache"], runs["none"], strict=True)
    ]
    print(f"writes with the cache / without, per round: {', '.join(f'{x:.3f}' for x in ratios)}")
    print(f"the same in the writing thread's CPU time: {', '.join(f'{x:.3f}' for x in cpu)}")
    return 0


def run(quick: bool) -> None:
    main(["--quick"] if quick else [])
