"""Scale-out reads (issue 38, RFC 0014): how long Store.splits takes, and the parallel Parquet
export's rate beside the single-file export, side by side in one run.

    python tools/bench.py scaleout [--records N] [--sst-kib K] [--export-records N]
                                   [--parallel 2] [--rounds R] [--only splits|export]

splits: a store of N records (bench_tools_scale's AT-Protocol-like keys, ~100 B msgpack
values, raw batched puts) built with K KiB SSTs (L0 and compacted), so its manifest names more
SSTs than the 10M-record store of docs/performance.md (1 L0 SST and 3 sorted runs): the cost of
splitting is the manifest read and a pass over its SSTs, whatever the record count. Timed: a
reader's `splits(record, n=16)` (manifest and WAL reads included), the median of `rounds`;
and the cut alone over a synthesized manifest of 10M records (1 GB in 64 MiB SSTs, 4 MiB
SSTs, and 200 overlapping L0 SSTs over it).

export: `opendata-kv export --format parquet` to one file, and `--parallel P` to a directory,
each a child process (its own wall time; the workers' too), alternating rounds; records/s.
The 1-min load average is printed beside each figure (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_tools_scale import RECORD, pairs, put_raw_batches

from opendata_kv import Schema, Store
from opendata_kv.store import splitting
from opendata_kv.store.split_points import Piece, clip, cut

#: `--schema bench_scaleout:SCHEMA` for the export (tools/ on PYTHONPATH)
SCHEMA = Schema(RECORD)


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


async def build(path: str, count: int, sst_kib: int | None) -> None:
    """`count` records; with `sst_kib`, in batches of 2,000 (one small L0 SST each) and
    compacted into sorted runs of `sst_kib` KiB SSTs: a manifest of many SSTs."""
    settings = None
    if sst_kib is not None:
        size = sst_kib * 1024
        settings = {
            "l0_sst_size_bytes": size,
            "compactor_options.worker.max_sst_size": size,
            "compactor_options.poll_interval": "100ms",
            "compactor_options.worker.compactions_poll_interval": "100ms",
        }
    start = time.perf_counter()
    async with Store.open(path, SCHEMA, settings=settings) as store:
        if sst_kib is None:
            await put_raw_batches(store, pairs(count), lambda done: None)
        else:
            source = pairs(count)
            while chunk := list(itertools.islice(source, 2000)):
                async with store.batch() as batch:
                    for key, data in chunk:
                        batch.put_raw(key, data)
        await store.flush()
    print(f"  built {count:,} records in {time.perf_counter() - start:.1f} s ({load()})")


async def time_splits(path: str, rounds: int) -> None:
    async with Store.open_reader(path, SCHEMA) as reader:
        pieces = await splitting.pieces_of(reader)
        print(f"  manifest: {len(pieces)} SSTs/pieces, {sum(p.size for p in pieces):,} bytes")
        took = []
        for _ in range(rounds):
            start = time.perf_counter()
            ranges = await reader.splits(RECORD, n=16)
            took.append(time.perf_counter() - start)
        sizes = [r.estimated_bytes for r in ranges]
        print(
            f"  splits(n=16): median {statistics.median(took) * 1000:.1f} ms, max "
            f"{max(took) * 1000:.1f} ms over {rounds} ({len(ranges)} splits, estimates "
            f"{min(sizes):,}..{max(sizes):,} bytes) ({load()})"
        )


def synthetic(total: int, sst: int, l0: int) -> list[Piece]:
    """A manifest of `total` bytes of keys 0x01 0x10 + 8 bytes: a sorted run of `sst`-byte
    SSTs, and `l0` L0 SSTs each spanning the whole range."""
    count = max(1, total // sst)
    span = 1 << 64

    def key(i: int, less: int = 0) -> bytes:
        return b"\x01\x10" + (i * span // count - less).to_bytes(8, "big")

    pieces = [Piece(key(i), key(i + 1, 1), sst) for i in range(count)]
    pieces += [Piece(key(0), key(count, 1), 4 << 20) for _ in range(l0)]
    return pieces


def time_synthetic(rounds: int) -> None:
    total = 10_000_000 * 100  # 10M records of ~100 B
    for sst, l0, what in (
        (64 << 20, 1, "64 MiB SSTs + 1 L0"),
        (4 << 20, 0, "4 MiB SSTs"),
        (4 << 20, 200, "4 MiB SSTs + 200 L0"),
    ):
        pieces = synthetic(total, sst, l0)
        took = []
        for _ in range(rounds):
            start = time.perf_counter()
            ranges = cut(clip(pieces, b"\x01\x10", b"\x01\x11"), b"\x01\x10", b"\x01\x11", 64)
            took.append(time.perf_counter() - start)
        print(
            f"  synthetic 10M records, {what} ({len(pieces)} pieces): cut into "
            f"{len(ranges)} in median {statistics.median(took) * 1000:.1f} ms ({load()})"
        )


def run_export(args: list[str]) -> float:
    """Wall seconds of one export in a child process."""
    tools = str(Path(__file__).resolve().parent)
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, tools])}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "opendata_kv", "export", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"export {args}: exit {done.returncode}: {done.stderr[-2000:]}")
    return wall


def time_export(path: str, records: int, parallel: int, rounds: int, work: Path) -> None:
    spec = ("--schema", "bench_scaleout:SCHEMA")
    single, multi = [], []
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for which in order:
            out = work / f"out-{r}-{which}"
            if which == 0:
                wall = run_export([path, *spec, "--output", f"{out}.parquet"])
                single.append(wall)
            else:
                wall = run_export(
                    [
                        path,
                        *spec,
                        "--format",
                        "parquet",
                        "--output",
                        str(out),
                        "--parallel",
                        str(parallel),
                    ]
                )
                multi.append(wall)
            print(
                f"  round {r}: {'single file' if which == 0 else f'--parallel {parallel}'}: "
                f"{wall:.1f} s, {records / wall:,.0f} records/s ({load()})",
                flush=True,
            )
    s, m = statistics.median(single), statistics.median(multi)
    print(
        f"  median: single file {records / s:,.0f} records/s, --parallel {parallel} "
        f"{records / m:,.0f} records/s: {s / m:.2f}x ({load()}, {os.cpu_count()} cores)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sst-kib", type=int, default=64)
    parser.add_argument("--export-records", type=int, default=200_000)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("splits", "export"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.records = args.export_records = 20_000
        args.rounds = 1
    print(f"scaleout ({load()}, {os.cpu_count()} cores)")
    work = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    try:
        if args.only in (None, "splits"):
            db = str(work / "splits-db")
            print(f"splits: {args.records:,} records in {args.sst_kib} KiB SSTs")
            asyncio.run(build(db, args.records, args.sst_kib))
            asyncio.run(time_splits(db, max(5, args.rounds)))
            time_synthetic(max(5, args.rounds))
        if args.only in (None, "export"):
            db = str(work / "export-db")
            print(f"export: {args.export_records:,} records")
            asyncio.run(build(db, args.export_records, None))
            time_export(db, args.export_records, args.parallel, args.rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
