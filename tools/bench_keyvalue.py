"""py-key-value stores side by side: opendata_kv.keyvalue.SlateDBStore beside py-key-value's
own RocksDBStore (rocksdict), both on a local directory, in one process and one run.

    python tools/bench.py keyvalue [--quick]
    python tools/bench_keyvalue.py [--quick] [--wall]   (wall time instead of CPU time)

Each operation (put, get, get_many of 64 keys, put_many of 100, ttl) runs through the protocol
(`await store.put(...)` ...), over the same keys and values, in interleaved rounds after an
untimed warm-up; the figures are medians of µs per key and the ratio is the median of the
per-round ratios SlateDB / RocksDB. Runs are timed in process CPU time (every thread's), which
the other work of a shared machine disturbs far less than wall time; the load average is
printed beside them.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from opendata_kv.keyvalue import SlateDBStore

MANY = 64  # keys per get_many
PUT_MANY = 100  # entries per put_many
OPS = ("put", "get", "get_many", "put_many", "ttl")
#: what runs are timed with: the process's CPU time (every thread's: slatedb's and rocksdb's
#: included), which a machine shared with other work disturbs far less than wall time
CLOCK: list[Callable[[], int]] = [time.process_time_ns]


def _value(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"entry-{i}", "tags": ["a", "b"], "score": i / 7}


def _rocks(path: Path) -> Any | None:
    try:
        from key_value.aio.stores.rocksdb import RocksDBStore
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # py-key-value warns about unstable store APIs
        return RocksDBStore(path=path)


def _paths(store: Any, n: int) -> dict[str, Callable[[], Awaitable[int]]]:
    """op -> a timed run of it over n keys (ns of CLOCK)."""
    keys = [f"key-{i:07d}" for i in range(n)]
    values = [_value(i) for i in range(n)]
    clock = CLOCK[0]

    async def put() -> int:
        start = clock()
        for key, value in zip(keys, values, strict=True):
            await store.put(key, value, collection="bench")
        return clock() - start

    async def get() -> int:
        start = clock()
        for key in keys:
            await store.get(key, collection="bench")
        return clock() - start

    async def get_many() -> int:
        start = clock()
        for at in range(0, n, MANY):
            await store.get_many(keys[at : at + MANY], collection="bench")
        return clock() - start

    async def put_many() -> int:
        start = clock()
        for at in range(0, n, PUT_MANY):
            await store.put_many(
                keys[at : at + PUT_MANY], values[at : at + PUT_MANY], collection="many", ttl=3600
            )
        return clock() - start

    async def ttl() -> int:
        start = clock()
        for key in keys:
            await store.ttl(key, collection="many")
        return clock() - start

    return {"put": put, "get": get, "get_many": get_many, "put_many": put_many, "ttl": ttl}


async def measure(n: int, rounds: int, root: Path) -> dict[str, Any]:
    """Per op and store: median µs per key; per op: median of per-round ratios."""
    stores: dict[str, Any] = {"slatedb": SlateDBStore(str(root / "slatedb"))}
    rocks = _rocks(root / "rocksdb")
    if rocks is not None:
        stores["rocksdb"] = rocks
    for store in stores.values():
        await store.setup()
    try:
        paths = {name: _paths(store, n) for name, store in stores.items()}
        samples: dict[str, dict[str, list[float]]] = {s: {op: [] for op in OPS} for s in stores}
        for name in stores:  # warm-up: every op once, untimed (and the keys exist)
            for op in OPS:
                await paths[name][op]()
        for r in range(rounds):
            order = list(stores) if r % 2 == 0 else list(reversed(stores))
            for op in OPS:
                for name in order:
                    gc.collect()
                    samples[name][op].append(await paths[name][op]() / n / 1000.0)
    finally:
        for store in stores.values():
            await store.close()
    out: dict[str, Any] = {"n": n, "rounds": rounds, "ops": {}}
    for op in OPS:
        row: dict[str, Any] = {name: statistics.median(samples[name][op]) for name in stores}
        if "rocksdb" in stores:
            row["ratio"] = statistics.median(
                a / b for a, b in zip(samples["slatedb"][op], samples["rocksdb"][op], strict=True)
            )
        out["ops"][op] = row
    return out


def table(result: dict[str, Any], load: tuple[str, str]) -> str:
    lines = [
        f"keyvalue bench: {result['n']:,} keys, {result['rounds']} interleaved rounds, "
        f"medians of µs per key ({CLOCK[0].__name__}); get_many {MANY} keys, "
        f"put_many {PUT_MANY} (ttl=3600); "
        f"local directory, {os.cpu_count()} CPUs",
        f"load average before: {load[0]}; after: {load[1]}",
        "",
        "| op | SlateDBStore (opendata_kv) µs | RocksDBStore (py-key-value) µs | ratio |",
        "|---|---|---|---|",
    ]
    for op, row in result["ops"].items():
        rocks = f"{row['rocksdb']:.2f}" if "rocksdb" in row else "n/a (no rocksdict)"
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
        lines.append(f"| {op} | {row['slatedb']:.2f} | {rocks} | {ratio} |")
    return "\n".join(lines)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(quick: bool, wall: bool = False) -> None:
    if wall:
        CLOCK[0] = time.perf_counter_ns
    n, rounds = (500, 3) if quick else (5_000, 5)
    before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(n, rounds, Path(tmp)))
    print(table(result, (before, _load())))


if __name__ == "__main__":
    run("--quick" in sys.argv, wall="--wall" in sys.argv)
