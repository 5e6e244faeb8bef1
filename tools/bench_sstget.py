"""Warm SST point gets: per-get latency (p50, p99) on each path, per DB setting and CPU pinning.

    python tools/bench.py sstget [--quick] [--records N] [--gets N] [--rounds R]
                                 [--variant NAME ...] [--pin none|one|split] [--native c|pure|both]
                                 [--json]

Workload (issue 32 point 4): `--records` records (20,000; --quick 2,000) of ~100 B msgpack values
written in batches of 1,000, the memtable flushed to one L0 SST, the store closed and reopened
(the manifest must list the SST holding every write), every key read once (warm-up: the block
cache holds the SST's blocks), then per round and path `--gets` typed gets (20,000) of distinct
keys in random order, each timed alone with time.perf_counter_ns; rounds (3; --quick 1) rotate
the order of the paths. Reported per path: p50, p99 and mean µs over all rounds, and the main
thread's CPU µs per get (time.thread_time_ns around the loop: a get that slept waiting for
slatedb's runtime thread shows as wall time above its CPU time).

Paths: `floor` (../shared/floor's fx.get, when built: no Python in between), `SyncStore.get`,
and `Store.get` awaited in an event loop. `--native`: the C accelerator (`c`), the pure path
(`pure`: this tool re-run with OPENDATA_KV_NO_EXTENSIONS=1), or both in turn (default).

Variants (`--variant`, repeatable; default: default): how the store is opened
    default       Store.open's defaults (slatedb's default block cache)
    moka-64mib    cache_bytes=64 MiB (slatedb's Moka cache, opening.set_block_cache)
    no-filter     settings={"min_filter_keys": 2**30}: the SST is written without a bloom
                  filter, so a get of a present key skips the filter probe
`--pin` sets the CPU affinity of every thread of the process once the store is open: `none`
(as the OS places them), `one` (all on CPU 0: the caller and slatedb's runtime thread share a
core), `split` (the calling thread on CPU 0, every other thread on CPU 1).

Numbers are printed, never asserted; only figures taken side by side in one run compare.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_floor
from bench_store import REC, SCHEMA, _manifest, value
from slatedb.uniffi import FlushOptions, FlushType

from opendata_kv import SyncStore

BATCH = 1000
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "moka-64mib": {"cache_bytes": 64 << 20},
    "no-filter": {"settings": {"min_filter_keys": 1 << 30}},
}
PINS = ("none", "one", "split")


CPUS = sorted(os.sched_getaffinity(0))  # as the process started (pin_threads restores it)


def pin_threads(mode: str) -> str:
    """Set the CPU affinity of every thread of this process as `mode` says (see the doc);
    "none" gives every thread all the CPUs the process started with."""
    if mode != "none" and len(CPUS) < 2:
        return f"{mode} not applied: {len(CPUS)} CPU"
    me = threading.get_native_id()
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    for tid in tids:
        if mode == "none":
            target = set(CPUS)
        else:
            target = {CPUS[0]} if mode == "one" or tid == me else {CPUS[1]}
        try:
            os.sched_setaffinity(tid, target)
        except OSError:  # a thread that ended meanwhile
            continue
    return f"{mode}: {len(tids)} threads" if mode != "none" else "none"


def load(path: Path, records: int, options: dict[str, Any]) -> str:
    """Write the records, flush them to one L0 SST, close; where the manifest says they are."""
    store = SyncStore.open(path, SCHEMA, **options)
    try:
        for start in range(0, records, BATCH):
            with store.batch() as batch:
                for i in range(start, min(start + BATCH, records)):
                    batch.put(REC, (i,), value(i))
        db = store.store._source  # the bench reaches in; the product never does
        asyncio.run(db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)))
    finally:
        store.close()
    manifest = asyncio.run(_manifest(path))
    writes = -(-records // BATCH)
    if len(manifest.l0) != 1 or manifest.compacted or manifest.last_l0_seq < writes:
        raise SystemExit(
            f"sstget: expected one L0 SST holding all {writes} writes, the manifest has "
            f"{len(manifest.l0)} L0 SSTs, {len(manifest.compacted)} sorted runs, last L0 seq "
            f"{manifest.last_l0_seq}"
        )
    return f"manifest {manifest.id}: 1 L0 SST, last L0 seq {manifest.last_l0_seq}"


def timed(get: Callable[[bytes | tuple[int]], Any], order: list[int]) -> tuple[list[int], int]:
    """Per-get ns of get((i,)) over `order`, and the calling thread's CPU ns for the loop."""
    clock, cpu = time.perf_counter_ns, time.thread_time_ns
    out = [0] * len(order)
    cpu0 = cpu()
    for n, i in enumerate(order):
        start = clock()
        get((i,))
        out[n] = clock() - start
    return out, cpu() - cpu0


def paths(store: SyncStore, loop: asyncio.AbstractEventLoop, records: int) -> dict[str, Any]:
    """name -> run(order) -> (per-get ns, thread CPU ns)."""
    found: dict[str, Any] = {}
    floor = bench_floor.load()
    if isinstance(floor, bench_floor.Floor) and not os.environ.get("OPENDATA_KV_NO_EXTENSIONS"):
        fx, handle = floor.fx, store.store._source._handle
        keys = [REC.encode(i) for i in range(records)]
        found["floor fx.get"] = lambda order: timed(lambda f: fx.get(handle, keys[f[0]]), order)
    sync_get = store.get
    found["SyncStore.get"] = lambda order: timed(lambda f: sync_get(REC, f), order)
    async_store = store.store

    async def async_run(order: list[int]) -> tuple[list[int], int]:
        clock, cpu = time.perf_counter_ns, time.thread_time_ns
        get = async_store.get
        out = [0] * len(order)
        cpu0 = cpu()
        for n, i in enumerate(order):
            start = clock()
            await get(REC, (i,))
            out[n] = clock() - start
        return out, cpu() - cpu0

    found["Store.get (async)"] = lambda order: loop.run_until_complete(async_run(order))
    return found


def measure_variant(root: Path, name: str, args: argparse.Namespace) -> dict[str, Any]:
    options = VARIANTS[name]
    path = root / name
    where = load(path, args.records, options)
    store = SyncStore.open(path, SCHEMA, **options)
    loop = asyncio.new_event_loop()
    try:
        for i in range(args.records):  # warm-up: every block in the cache
            if store.get(REC, (i,)) is None:
                raise SystemExit(f"sstget: record {i} missing after the reopen")
        pinned = pin_threads(args.pin)
        runs = paths(store, loop, args.records)
        samples: dict[str, list[int]] = {p: [] for p in runs}
        cpu: dict[str, int] = dict.fromkeys(runs, 0)
        rng = random.Random(7)
        names = list(runs)
        for r in range(args.rounds):
            for p in names[r % len(names) :] + names[: r % len(names)]:
                order = rng.sample(range(args.records), args.gets)
                gc.collect()
                ns, used = runs[p](order)
                samples[p] += ns
                cpu[p] += used
        rows = {}
        for p, ns in samples.items():
            ns.sort()
            rows[p] = {
                "p50": ns[len(ns) // 2] / 1000,
                "p99": ns[min(len(ns) - 1, len(ns) * 99 // 100)] / 1000,
                "mean": statistics.fmean(ns) / 1000,
                "cpu": cpu[p] / len(ns) / 1000,
                "gets": len(ns),
            }
        return {"where": where, "pin": pinned, "rows": rows}
    finally:
        pin_threads("none")
        loop.close()
        store.close()


def native_label() -> str:
    from opendata_kv.native import accel, calls

    return accel.describe(calls.status())


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sstget-") as tmp:
        result = {
            "native": native_label(),
            "uptime": _uptime(),
            "variants": {v: measure_variant(Path(tmp), v, args) for v in args.variant},
        }
    result["uptime_after"] = _uptime()
    return result


def _uptime() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def table(result: dict[str, Any]) -> str:
    lines = [
        f"## {result['native']}",
        f"load average before {result['uptime']}, after {result['uptime_after']}",
        "",
        "| variant | pin | path | p50 µs | p99 µs | mean µs | thread CPU µs/get |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v in result["variants"].items():
        for path, row in v["rows"].items():
            lines.append(
                f"| {name} | {v['pin'].split(':')[0]} | {path} | {row['p50']:.1f} | "
                f"{row['p99']:.1f} | {row['mean']:.1f} | {row['cpu']:.1f} |"
            )
    first = next(iter(result["variants"].values()))
    lines.append(f"({first['where']}; {first['rows'][next(iter(first['rows']))]['gets']} gets)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.py sstget", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2,000 records and gets, 1 round")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--gets", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--pin", choices=PINS, default="none")
    parser.add_argument("--native", choices=("c", "pure", "both"), default="both")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, tables on stderr")
    args = parser.parse_args(argv)
    args.records = args.records or (2_000 if args.quick else 20_000)
    args.gets = min(args.gets or args.records, args.records)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.variant = args.variant or ["default"]
    results = []
    if args.native in ("c", "both") and not os.environ.get("OPENDATA_KV_NO_EXTENSIONS"):
        results.append(measure(args))
    if args.native == "pure" and os.environ.get("OPENDATA_KV_NO_EXTENSIONS"):
        results.append(measure(args))
    elif args.native in ("pure", "both"):
        child = [
            a for n, a in enumerate(argv) if a != "--native" and argv[n - 1 : n] != ["--native"]
        ]
        env = {**os.environ, "OPENDATA_KV_NO_EXTENSIONS": "1"}
        out = subprocess.run(
            [sys.executable, __file__, *child, "--native", "pure", "--json"],
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(f"sstget: the pure-path run failed ({out.returncode})")
        results += json.loads(out.stdout)
    text = "\n\n".join(map(table, results))
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(results, indent=2))
    else:
        print(text)
    return 0


def run(quick: bool) -> None:
    main(["--quick"] if quick else [])


if __name__ == "__main__":  # the pure-path child (tools/ is on sys.path as the script's folder)
    raise SystemExit(main(sys.argv[1:]))
