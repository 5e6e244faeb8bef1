"""Scale-out reads (issue 38, RFC 0014): how long Store.splits takes, and the parallel Parquet
export's rate beside the single-file export, side by side in one run.

    python tools/bench.py scaleout [--records N] [--sst-kib K] [--export-records N]
                                   [--parallel 2] [--rounds R] [--only splits|export]
                                   [--root DIR] [--n 16,64] [--lz4 arrow|python] [--rows]

splits: a store of N records (bench_tools_scale's AT-Protocol-like keys, ~100 B msgpack
values, raw batched puts) built with K KiB SSTs (L0 and compacted), so its manifest names more
SSTs than the 10M-record store of docs/performance.md (1 L0 SST and 3 sorted runs): the cost of
splitting is the manifest read and a pass over its SSTs, whatever the record count. Timed: a
reader's `splits(record, n=16)` (manifest and WAL reads included), the median of `rounds`;
and the cut alone over a synthesized manifest of 10M records (1 GB in 64 MiB SSTs, 4 MiB
SSTs, and 200 overlapping L0 SSTs over it).

With `--root DIR`, the splits store is DIR's (built there first when DIR holds none: N records
in batches of 50,000, with K KiB SSTs, or slatedb's sizes with `--sst-kib 0`; reused as is
after), and splits is timed in full and by phase, median of `rounds` (at least 5): the manifest
read, the index-block reads, their parsing into pieces, the WAL read, and the cut, each wall
and CPU (the process's: slatedb's and the read threads' too), for a reader and a writer
(`Store.splits`), at each `--n`. `--lz4 arrow` imports pyarrow first (its LZ4 decodes the
index blocks), `--lz4 python` hides it (the pure-Python LZ4). `--rows` counts the rows each
split holds (a keys-only count per range: a scan of the whole store). `--s3` copies DIR's
store into a moto S3 server of its own (tests/conftest.py's MotoServer, on 127.0.0.1, stopped
at the end) and counts the requests a cold reader's splits sends through tests/tcp_proxy.py's
DelayProxy: by object kind and in round trips (waves); counts, not times.

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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_tools_scale import RECORD, pairs, put_raw_batches

from opendata_kv import KeyRange, Schema, Store
from opendata_kv.objstore import sidecar
from opendata_kv.store import splitting
from opendata_kv.store.ops import sst_blocks
from opendata_kv.store.ops.feed import admin as admin_of
from opendata_kv.store.ops.manifest_pieces import (
    manifest_views,
    read_wal,
    view_piece,
    wal_share,
    wal_sizes,
)
from opendata_kv.store.split_points import Piece, clip, cut, how_many

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


async def build_root(path: str, count: int, sst_kib: int) -> None:
    """`count` records in atomic batches of 50,000 raw puts (bench_tools_scale's build), with
    `sst_kib` KiB L0 and compacted SSTs (0: slatedb's sizes), closed cleanly."""
    settings = None
    if sst_kib:
        size = sst_kib * 1024
        settings = {"l0_sst_size_bytes": size, "compactor_options.worker.max_sst_size": size}
    start = time.perf_counter()
    async with Store.open(path, SCHEMA, settings=settings) as store:
        await put_raw_batches(store, pairs(count), lambda done: None)
        await store.flush()
    print(f"  built {count:,} records in {time.perf_counter() - start:.1f} s ({load()})")


class Clock:
    """Wall and process CPU seconds (every thread's) of named phases, summed per name."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._at = (time.perf_counter(), time.process_time())

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.wall[name] = self.wall.get(name, 0.0) + wall - self._at[0]
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu - self._at[1]
        self._at = (time.perf_counter(), time.process_time())


async def phased(reader: Any, ns: list[int], clock: Clock, facts: dict[str, Any]) -> None:
    """What reader.splits(RECORD, n=...) does for each n (manifest_pieces.data_pieces, then
    the cut), step by step, each step timed on `clock`."""
    location, store, where = reader.location, reader._object_store, reader.where
    path = location.db_path
    lo, hi = splitting.target_bounds(reader, RECORD, (), {})
    clock.lap("bounds")
    manifest = await admin_of(path, store, where).read_manifest(None)
    views = list(manifest_views(manifest))
    clock.lap("manifest")
    chosen = sst_blocks.chosen_views(views)
    regions = await sst_blocks.read_indexes(location, store, path, views, chosen)
    clock.lap("index reads")
    by_blocks = sst_blocks.parsed_pieces(views, chosen, regions)
    pieces: list[Piece] = []
    for i, view in enumerate(views):
        if i in by_blocks:
            pieces += by_blocks[i]
        elif (piece := view_piece(view)) is not None:
            pieces.append(piece)
    clock.lap("parse")

    side, _ = sidecar.of(store)

    async def sizes_of(first: int, last: int) -> dict[int, int] | None:
        return await asyncio.to_thread(wal_sizes, location, side, path, first, last)

    read = await read_wal(path, store, manifest.replay_after_wal_id, where, sizes_of, not pieces)
    pieces = wal_share(pieces, read)
    clock.lap("wal")
    for n in ns:
        inside = clip(pieces, lo, hi)
        cut(inside, lo, hi, how_many(sum(p.size for p in inside), n, None))
    clock.lap("cut")
    facts.update(
        views=len(views),
        l0=len(manifest.l0),
        runs=len(manifest.compacted),
        chosen=len(chosen),
        read=sum(len(r) for r in regions.values() if r is not None),
        index_total=sum(int(v.sst.info.index_len) for v in views),
        sizes=sorted(int(v.estimated_size_bytes) for v in views),
        pieces=len(pieces),
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


async def time_root_splits(
    path: str, ns: list[int], rounds: int, rows: bool, entries: list[int]
) -> None:
    """splits at each n on DIR's store, with each INDEX_ENTRIES budget in turn in every round:
    whole calls (a reader's; a writer's at the first budget) and their phases."""
    facts: dict[str, Any] = {}
    async with Store.open_reader(path, SCHEMA) as reader:
        await reader.splits(RECORD, n=ns[0])  # warm: the binding's first calls, imports
        whole: dict[tuple[int, int], list[tuple[float, float]]] = {}
        clocks: dict[int, list[Clock]] = {e: [] for e in entries}
        for _ in range(rounds):
            for budget in entries:
                sst_blocks.INDEX_ENTRIES = budget
                for n in ns:
                    wall, cpu = time.perf_counter(), time.process_time()
                    await reader.splits(RECORD, n=n)
                    took = (time.perf_counter() - wall, time.process_time() - cpu)
                    whole.setdefault((budget, n), []).append(took)
                clock = Clock()
                await phased(reader, ns, clock, facts)
                clocks[budget].append(clock)
                facts.setdefault("pieces by budget", {})[budget] = facts["pieces"]
        sizes = facts["sizes"]
        print(
            f"  store: {facts['views']} SST views ({facts['l0']} L0, {facts['runs']} sorted "
            f"runs), {sum(sizes) / 1e6:,.1f} MB, SSTs {min(sizes) / 1e6:.2f}.."
            f"{statistics.median(sizes) / 1e6:.2f}..{max(sizes) / 1e6:.2f} MB (min..median.."
            f"max); index blocks {facts['index_total'] / 1e6:.2f} MB, of them read "
            f"{facts['read'] / 1e6:.2f} MB from {facts['chosen']} SSTs ({load()})"
        )
        for budget in entries:
            print(f"  INDEX_ENTRIES {budget:,}: {facts['pieces by budget'][budget]:,} pieces")
            for n in ns:
                walls = [w for w, _ in whole[budget, n]]
                cpus = [c for _, c in whole[budget, n]]
                print(
                    f"    reader splits(n={n}): median {ms(statistics.median(walls))} wall, "
                    f"{ms(statistics.median(cpus))} CPU (wall {ms(min(walls))}.."
                    f"{ms(max(walls))}) over {rounds} ({load()})"
                )
            got = clocks[budget]
            print(
                f"    phases (median of {rounds}; the cut for n in {ns}): "
                + ", ".join(
                    f"{name} {ms(statistics.median(c.wall[name] for c in got))} / "
                    f"{ms(statistics.median(c.cpu[name] for c in got))} CPU"
                    for name in got[0].wall
                )
                + f" ({load()})"
            )
            if rows:
                sst_blocks.INDEX_ENTRIES = budget
                await count_rows(reader, ns)
    sst_blocks.INDEX_ENTRIES = entries[0]
    async with Store.open(path, SCHEMA) as store:
        await store.splits(RECORD, n=ns[0])
        for n in ns:
            took = []
            for _ in range(rounds):
                wall, cpu = time.perf_counter(), time.process_time()
                await store.splits(RECORD, n=n)
                took.append((time.perf_counter() - wall, time.process_time() - cpu))
            print(
                f"  Store splits(n={n}), INDEX_ENTRIES {entries[0]:,}: median "
                f"{ms(statistics.median(w for w, _ in took))} wall, "
                f"{ms(statistics.median(c for _, c in took))} CPU over {rounds} ({load()})"
            )


async def count_rows(reader: Any, ns: list[int]) -> None:
    """Rows in each split at each n: one count per range between any two cuts (the store
    scanned once), summed per split."""
    cuts = {n: await reader.splits(RECORD, n=n) for n in ns}
    starts = sorted({r.start for ranges in cuts.values() for r in ranges})
    end = next(iter(cuts.values()))[-1].end
    bounds = [*starts[1:], end]
    start = time.perf_counter()
    held: dict[bytes, int] = {}
    for lo, hi in zip(starts, bounds, strict=True):
        held[lo] = await reader.count(RECORD, range=KeyRange(lo, hi, 0))
    print(f"  counted {sum(held.values()):,} rows in {time.perf_counter() - start:.1f} s")
    for n, ranges in cuts.items():
        per = []
        for r in ranges:
            per.append(
                sum(c for s, c in held.items() if r.start <= s and (r.end is None or s < r.end))
            )
        est = [r.estimated_bytes for r in ranges]
        print(
            f"  splits(n={n}): {len(ranges)} splits, rows {min(per):,}..{max(per):,} "
            f"(max/min {max(per) / max(1, min(per)):.2f}), estimates {min(est):,}..{max(est):,}"
            f" bytes; rows: {per}"
        )


async def count_s3(root: str, ns: list[int]) -> None:
    """DIR's store copied to a moto S3 server; each n's splits from a cold reader, its
    requests counted through a DelayProxy (and the index range reads by sst_blocks)."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    sys.path.insert(0, tests)
    import boto3
    from conftest import S3_BUCKET, MotoServer
    from tcp_proxy import DelayProxy

    server = MotoServer()
    server.start()
    try:
        server.create_bucket(S3_BUCKET)
        os.environ.update(server.env())
        client = boto3.client("s3", endpoint_url=server.endpoint)
        start, copied = time.perf_counter(), 0
        for file in sorted(Path(root).rglob("*")):
            if file.is_file():
                client.upload_file(str(file), S3_BUCKET, f"split10m/{file.relative_to(root)}")
                copied += file.stat().st_size
        print(f"  copied {copied / 1e6:,.0f} MB to moto in {time.perf_counter() - start:.0f} s")
        url = f"s3://{S3_BUCKET}/split10m"
        ranged: list[int] = []
        real = sst_blocks.read_region

        def counted(*args: Any) -> bytes | None:
            found = real(*args)
            ranged.append(0 if found is None else len(found))
            return found

        sst_blocks.read_region = counted  # type: ignore[assignment]
        with DelayProxy(("127.0.0.1", server.port), delay=0.02) as proxy:
            # poll_interval: the reader's own WAL polls stay out of the window (as in tests)
            options = {"object_store_options": {"endpoint": proxy.endpoint}, "poll_interval": 60.0}
            for n in ns:
                ranged.clear()
                async with Store.open_reader(url, SCHEMA, **options) as reader:
                    with proxy.measure() as window:
                        got = await reader.splits(RECORD, n=n)
                kinds = {
                    kind: window.count(None, f"/{kind}/")
                    for kind in ("manifest", "compacted", "wal", "compactions")
                }
                listed = window.count(None, "list-type")
                wal = {m: window.count(m, "/wal/") for m in ("GET", "HEAD", "PUT")}
                print(
                    f"  s3 splits(n={n}): {len(got)} splits; {len(window.requests)} requests in "
                    f"{window.waves()} waves: {kinds} (WAL by method {wal}), listings {listed}; "
                    f"index range reads {len(ranged)} ({sum(ranged) / 1e6:.2f} MB) ({load()})"
                )
        sst_blocks.read_region = real  # type: ignore[assignment]
    finally:
        server.stop()


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
    parser.add_argument("--root", help="the splits store's directory (built when missing)")
    parser.add_argument("--n", default="16,64", help="with --root: the n values, comma-separated")
    parser.add_argument("--lz4", choices=("arrow", "python"), default="arrow")
    parser.add_argument("--rows", action="store_true", help="with --root: rows per split")
    parser.add_argument("--s3", action="store_true", help="with --root: requests on a moto copy")
    parser.add_argument(
        "--index-entries",
        default=str(sst_blocks.INDEX_ENTRIES),
        help="with --root: INDEX_ENTRIES budgets to compare, comma-separated, each in every round",
    )
    args = parser.parse_args(argv)
    if args.lz4 == "python":
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import pyarrow raises
    else:
        import pyarrow  # noqa: F401  # its import is not a splits cost
    if args.root and args.only != "export":
        print(f"scaleout splits on {args.root} (lz4 {args.lz4}; {load()}, {os.cpu_count()} cores)")
        if not (Path(args.root) / "manifest").exists():
            asyncio.run(build_root(args.root, args.records, args.sst_kib))
        ns = [int(n) for n in args.n.split(",")]
        if args.s3:
            asyncio.run(count_s3(args.root, ns))
            return 0
        entries = [int(e) for e in args.index_entries.split(",")]
        asyncio.run(time_root_splits(args.root, ns, max(5, args.rounds), args.rows, entries))
        return 0
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
