"""The inspection tools at scale (issue 43 point 5): `opendata-kv stats` and `verify` on a
store of N records, each run as its own process, reporting wall time, CPU time and peak RSS.

    PYTHONPATH=. python tools/bench_tools_scale.py build DIR --records N
    PYTHONPATH=. python tools/bench_tools_scale.py measure DIR [--runs 1]
    PYTHONPATH=. python tools/bench_tools_scale.py footprint DIR   (settles DIR: after measure)
    PYTHONPATH=. python tools/bench_tools_scale.py reads BASE_DIR OTHER_DIR...

The store holds AT-Protocol-like record keys (repo DID, collection NSID, TID rkey) with
~100 B msgpack values, written in atomic batches of 50,000 raw puts (`--checked`: through
load_pairs, which decodes every value, ~half the CPU of a build) and closed cleanly. Each tool
runs in a child process (`python -m opendata_kv ...`) whose own rusage (os.wait4) gives its
peak RSS and CPU time; the 1-min load average is printed beside each figure (the machine is
shared).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from slatedb.uniffi import KeyRange

try:
    from opendata_kv import Schema, Store
    from opendata_kv.keys import RecordType, fields
    from opendata_kv.store.ops.bulk_load import load_pairs
    from opendata_kv.store.scan import scan_options
    from opendata_kv.values import pack
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv import Schema, Store
    from opendata_kv.keys import RecordType, fields
    from opendata_kv.store.ops.bulk_load import load_pairs
    from opendata_kv.store.scan import scan_options
    from opendata_kv.values import pack

RECORD = RecordType(
    "record",
    1,
    [("repo", fields.string), ("collection", fields.string), ("rkey", fields.string)],
)
COLLECTIONS = ("app.bsky.feed.post", "app.bsky.feed.like", "app.bsky.graph.follow")
B32 = "234567abcdefghijklmnopqrstuvwxyz"


_PAIRS = [a + b for a in B32 for b in B32]  # 10 bits -> 2 base32 chars


def _tid(n: int) -> str:
    """The TID of microsecond 1_750_000_000_000_000 + n, clock id 0 (13 base32 chars): the top
    3 chars from bits 50-64, then five 2-char pairs, a table lookup each (~4x the per-char join:
    the generator was a third of a build's CPU)."""
    value = (1_750_000_000_000_000 + n) << 10
    high = value >> 50
    head = B32[(high >> 10) & 31] + B32[(high >> 5) & 31] + B32[high & 31]
    p = _PAIRS
    return (
        head
        + p[(value >> 40) & 1023]
        + p[(value >> 30) & 1023]
        + p[(value >> 20) & 1023]
        + p[(value >> 10) & 1023]
        + p[value & 1023]
    )


def pairs(count: int, seed: int = 43) -> Iterator[tuple[bytes, bytes]]:
    """`count` (key, value) pairs in key order: 100 records per repo, ~100 B values."""
    rng = random.Random(seed)
    repos = max(1, count // 100)
    n = 0
    for r in range(repos):
        did = f"did:plc:{r:08d}" + "".join(rng.choice(B32) for _ in range(16))
        for collection in COLLECTIONS:
            share = 100 // len(COLLECTIONS) + (1 if collection == COLLECTIONS[0] else 0)
            for _ in range(share):
                if n >= count:
                    return
                value = {"text": "x" * rng.randrange(40, 70), "createdAt": 1_750_000_000 + n}
                yield RECORD.encode(did, collection, _tid(n)), pack(value)
                n += 1


async def put_raw_batches(
    store: Store, source: Iterator[tuple[bytes, bytes]], progress: Callable[[int], None]
) -> None:
    """The pairs in atomic batches of 50,000 through Batch.put_raw (size and caps checked, no
    value decode): load_pairs decodes each value to check it, ~half a build's CPU for data
    this tool generated itself."""
    done = 0
    while True:
        chunk = list(itertools.islice(source, 50_000))
        if not chunk:
            return
        async with store.batch() as batch:
            for key, data in chunk:
                batch.put_raw(key, data)
        done += len(chunk)
        progress(done)


async def build(path: str, count: int, checked: bool = False, no_codec: bool = False) -> None:
    start = time.perf_counter()
    settings = None
    if no_codec:  # slatedb's own defaults for what the library sets (its codec: none)
        from bench_footprint import variant_settings

        settings = variant_settings("slatedb")
    async with Store.open(path, Schema(RECORD), settings=settings) as store:

        def progress(done: int) -> None:
            if done % 1_000_000 < (10_000 if checked else 50_000):
                print(f"  {done:,} records, {time.perf_counter() - start:.0f} s", flush=True)

        if checked:
            await load_pairs(store, pairs(count), batch_size=10_000, progress=progress)
        else:
            await put_raw_batches(store, pairs(count), progress)
    print(f"built {count:,} records in {time.perf_counter() - start:.1f} s")


def run_tool(args: list[str]) -> dict[str, float]:
    """One CLI run in a child process: wall s, CPU s and peak RSS MiB of that child alone
    (os.wait4's rusage of the one pid: RUSAGE_CHILDREN's ru_maxrss is the largest child so far,
    so a verify after a bigger stats would report the stats' peak)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "opendata_kv", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        if child.returncode != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"{args}: exit {child.returncode}: {tail}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": usage.ru_maxrss / 1024}


def measure(path: str, runs: int, tools: list[str], timeout: float = 0) -> None:
    # --timeout 0: on a loaded machine the open of a 10M store outlasts the default 10 s
    for tool in ([name, path, "--timeout", f"{timeout:g}"] for name in tools):
        for _ in range(runs):
            load = os.getloadavg()[0]
            got = run_tool(tool)
            print(
                f"{tool[0]:<7} wall {got['wall_s']:7.1f} s  cpu {got['cpu_s']:7.1f} s  "
                f"peak RSS {got['peak_rss_mib']:6.0f} MiB  (load {load:.2f})",
                flush=True,
            )


async def footprint(path: str, settle: bool = True) -> None:
    """The store's settled bytes beside rocksdict's for the same pairs (bench_footprint's
    moments on a store this tool built: reopen the writer, let compaction settle, one GC pass
    beside it, close; rocksdict with default options gets every raw pair, flushed, reopened
    and compacted, copied first, by a reader). Writes to the store: run it after `measure`;
    `settle` False reads only (the store's bytes as built, L0 and WAL included)."""
    import rocksdict as rd
    from bench_footprint import GC_MIN_AGE_S, collect_all
    from bench_scale import dir_bytes, settle_slatedb

    load = os.getloadavg()[0]
    before = dir_bytes(Path(path))
    rocks = Path(path).parent / (Path(path).name + "-rocksdict")
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    db = rd.Rdict(str(rocks), options)
    reader = await Store.open_reader(path, Schema(RECORD))
    everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    rows = await reader._source.scan_with_options(everything, scan_options(False, fill_cache=False))
    copied = 0
    while got := await rows.next_batch(1024):
        batch = rd.WriteBatch(raw_mode=True)
        for kv in got:
            batch.put(kv.key, kv.value)
        db.write(batch)
        copied += len(got)
    await reader.close()
    db.flush(True)
    db.flush_wal(True)
    db.close()
    db = rd.Rdict(str(rocks), options)
    db.compact_range(None, None)
    busy = ("rocksdb.compaction-pending", "rocksdb.num-running-compactions")
    while any(db.property_int_value(p) for p in busy):
        await asyncio.sleep(0.25)
    db.close()
    compaction: dict[str, int] = {}
    if settle:
        store = await Store.open(path, Schema(RECORD))
        compaction = await settle_slatedb(path)
        await asyncio.sleep(GC_MIN_AGE_S + 0.1)
        await collect_all(path)
        await store.close()
    settled = dir_bytes(Path(path))
    rocks_bytes = sum(f.stat().st_size for f in rocks.rglob("*") if f.is_file())
    ours = sum(settled.values())
    print(
        f"footprint {copied:,} records (settled: {settle}): "
        f"as built {sum(before.values()) / 1e6:,.1f} MB {before}; "
        f"settled {ours / 1e6:,.1f} MB {settled} ({ours / copied:.1f} B/record, {compaction}); "
        f"rocksdict {rocks_bytes / 1e6:,.1f} MB ({rocks_bytes / copied:.1f} B/record); "
        f"x rocksdict {ours / rocks_bytes:.2f}  (load {load:.2f} -> {os.getloadavg()[0]:.2f})",
        flush=True,
    )


async def reads(paths: list[str], rounds: int = 3, gets: int = 2000) -> None:
    """Typed get and full typed scan cost per row on stores of the same records (e.g. Lz4 and
    no codec), side by side: the same `gets` keys on each (block cache warm after a first pass),
    `rounds` interleaved rounds, median of the process CPU time (slatedb's threads too) and wall
    time per get / per row."""
    stores = [await Store.open_reader(path, Schema(RECORD)) for path in paths]
    n = 0
    rng = random.Random(43)
    keys: list[tuple[str, ...]] = []
    async for rec in stores[0].scan(RECORD, fill_cache=False):  # reservoir sample of keys
        n += 1
        if len(keys) < gets:
            keys.append(tuple(rec.key))
        elif (j := rng.randrange(n)) < gets:
            keys[j] = tuple(rec.key)
    got: dict[str, dict[str, list[float]]] = {p: {} for p in paths}
    load = os.getloadavg()[0]
    try:
        for store in stores:
            for key in keys:
                await store.get(RECORD, key)
        for r in range(rounds):
            order = list(zip(paths, stores, strict=True))
            for path, store in order if r % 2 == 0 else order[::-1]:
                wall, cpu = time.perf_counter(), time.process_time()
                for key in keys:
                    if await store.get(RECORD, key) is None:
                        raise AssertionError(f"{path}: {key} not found")
                got[path].setdefault("get_us", []).append((time.perf_counter() - wall) / gets * 1e6)
                got[path].setdefault("get_cpu_us", []).append(
                    (time.process_time() - cpu) / gets * 1e6
                )
                wall, cpu, rows = time.perf_counter(), time.process_time(), 0
                async for rec in store.scan(RECORD, fill_cache=False):
                    rec.value  # noqa: B018 - decoded, as a reader would
                    rows += 1
                if rows != n:
                    raise AssertionError(f"{path}: scan saw {rows} rows, not {n}")
                got[path].setdefault("scan_us", []).append((time.perf_counter() - wall) / n * 1e6)
                got[path].setdefault("scan_cpu_us", []).append(
                    (time.process_time() - cpu) / n * 1e6
                )
    finally:
        for store in stores:
            await store.close()
    base = {m: statistics.median(v) for m, v in got[paths[0]].items()}
    for path in paths:
        med = {m: statistics.median(v) for m, v in got[path].items()}
        print(
            f"{path}: {n:,} rows; get CPU {med['get_cpu_us']:.1f} µs "
            f"(x{med['get_cpu_us'] / base['get_cpu_us']:.2f}, wall {med['get_us']:.1f}); "
            f"scan CPU {med['scan_cpu_us']:.2f} µs/row "
            f"(x{med['scan_cpu_us'] / base['scan_cpu_us']:.2f}, wall {med['scan_us']:.2f}); "
            f"rounds {got[path]}  (load {load:.2f} -> {os.getloadavg()[0]:.2f})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "measure", "footprint", "reads"))
    parser.add_argument("dir", nargs="+", help="one store (reads: the baseline first, others)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--no-codec", action="store_true", help="build with slatedb's defaults (no codec)"
    )
    parser.add_argument("--no-settle", action="store_true", help="footprint: read only")
    parser.add_argument("--tools", default="stats,verify", help="which CLI commands to measure")
    parser.add_argument(
        "--timeout", type=float, default=0, help="each tool's --timeout (0: no bound)"
    )
    parser.add_argument(
        "--checked", action="store_true", help="build through load_pairs (decodes each value)"
    )
    args = parser.parse_args()
    if args.action == "reads":
        asyncio.run(reads(args.dir))
        return
    if len(args.dir) != 1:
        parser.error(f"{args.action} takes one store")
    (where,) = args.dir
    if args.action == "build":
        asyncio.run(build(where, args.records, args.checked, args.no_codec))
    elif args.action == "measure":
        measure(where, args.runs, args.tools.split(","), args.timeout)
    else:
        asyncio.run(footprint(where, not args.no_settle))


if __name__ == "__main__":
    main()
