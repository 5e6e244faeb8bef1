"""The inspection tools at scale (issue 43 point 5): `opendata-kv stats` and `verify` on a
store of N records, each run as its own process, reporting wall time, CPU time and peak RSS.

    PYTHONPATH=. python tools/bench_tools_scale.py build DIR --records N
    PYTHONPATH=. python tools/bench_tools_scale.py measure DIR [--runs 1]

The store holds AT-Protocol-like record keys (repo DID, collection NSID, TID rkey) with
~100 B msgpack values, written by the bulk loader (load_pairs, 10,000 per atomic batch) and
closed cleanly. Each tool runs in a child process (`python -m opendata_kv ...`) so its peak
RSS (ru_maxrss of the child) and CPU time are its own; the 1-min load average is printed
beside each figure (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

try:
    from opendata_kv import Schema, Store
    from opendata_kv.keys import RecordType, fields
    from opendata_kv.store.ops.bulk_load import load_pairs
    from opendata_kv.values import pack
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv import Schema, Store
    from opendata_kv.keys import RecordType, fields
    from opendata_kv.store.ops.bulk_load import load_pairs
    from opendata_kv.values import pack

RECORD = RecordType(
    "record",
    1,
    [("repo", fields.string), ("collection", fields.string), ("rkey", fields.string)],
)
COLLECTIONS = ("app.bsky.feed.post", "app.bsky.feed.like", "app.bsky.graph.follow")
B32 = "234567abcdefghijklmnopqrstuvwxyz"


def _tid(n: int) -> str:
    value = (1_750_000_000_000_000 + n) << 10
    return "".join(B32[(value >> (5 * i)) & 31] for i in reversed(range(13)))


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


async def build(path: str, count: int) -> None:
    start = time.perf_counter()
    async with Store.open(path, Schema(RECORD)) as store:

        def progress(done: int) -> None:
            if done % 1_000_000 == 0:
                print(f"  {done:,} records, {time.perf_counter() - start:.0f} s", flush=True)

        await load_pairs(store, pairs(count), batch_size=10_000, progress=progress)
    print(f"built {count:,} records in {time.perf_counter() - start:.1f} s")


def run_tool(args: list[str]) -> dict[str, float]:
    """One CLI run in a child process: wall s, CPU s and peak RSS MiB of that child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "opendata_kv", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args}: exit {done.returncode}: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": after.ru_maxrss / 1024}


def measure(path: str, runs: int) -> None:
    for tool in (["stats", path], ["verify", path]):
        for _ in range(runs):
            load = os.getloadavg()[0]
            got = run_tool(tool)
            print(
                f"{tool[0]:<7} wall {got['wall_s']:7.1f} s  cpu {got['cpu_s']:7.1f} s  "
                f"peak RSS {got['peak_rss_mib']:6.0f} MiB  (load {load:.2f})",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "measure"))
    parser.add_argument("dir")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if args.action == "build":
        asyncio.run(build(args.dir, args.records))
    else:
        measure(args.dir, args.runs)


if __name__ == "__main__":
    main()
