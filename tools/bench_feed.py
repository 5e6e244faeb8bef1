"""The change feed against a typed scan of the same records, and how soon a following
reader sees a flushed write.

    PYTHONPATH=. python tools/bench.py feed [--quick]

rate    N msgpack records (about 100 B each) written in batches of 1000, one WAL flush per
        batch, to a local directory; then, alternating which goes first, a full typed scan
        (`store.scan`, keys and values decoded) and a full read of the feed
        (`store.changes()`, the same records as typed Changes). Best of several rounds, with
        the ratio of the medians beside it; target: feed row rate >= 0.5x the scan's.
delay   a `follow=True` reader (poll_interval 0.1 s, the default, and 0.01 s) on the writer's
        store; the writer puts one record and flushes, at random gaps of 0-50 ms, and the
        delay is from flush() returning to the Change arriving at the reader. p50 and p99.
Numbers are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F

REC = RecordType("bench", 1, [("id", F.u64)])
SCHEMA = Schema(REC)
BATCH = 1000


def _value(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"record-{i:08d}", "tags": ["a", "b", "c"], "body": "x" * 48}


async def _rate(root: Path, count: int, rounds: int) -> None:
    async with Store.open(root / "rate", SCHEMA) as store:
        for start in range(0, count, BATCH):
            async with store.batch() as batch:
                for i in range(start, min(start + BATCH, count)):
                    batch.put(REC, (i,), _value(i))
            await store.flush()

        async def scan() -> float:
            began = time.perf_counter()
            n = 0
            async for _ in store.scan(REC):
                n += 1
            assert n == count
            return time.perf_counter() - began

        async def feed() -> float:
            began = time.perf_counter()
            n = 0
            async for _ in store.changes():
                n += 1
            assert n == count
            return time.perf_counter() - began

        scans: list[float] = []
        feeds: list[float] = []
        for r in range(rounds):
            order = (scan, feed) if r % 2 == 0 else (feed, scan)
            for case in order:
                (scans if case is scan else feeds).append(await case())
    best_scan, best_feed = min(scans), min(feeds)
    print(
        f"  feed vs typed scan, {count} records: feed {best_feed / count * 1e6:.2f} µs/row, "
        f"scan {best_scan / count * 1e6:.2f} µs/row; feed row rate {best_scan / best_feed:.2f}x "
        f"the scan's (medians: {statistics.median(scans) / statistics.median(feeds):.2f}x; "
        "target >= 0.5x)"
    )


async def _delay(root: Path, samples: int, poll: float) -> None:
    async with Store.open(root / f"delay-{poll}", SCHEMA) as store:
        await store.put(REC, (0,), _value(0))
        await store.flush()
        start = [c async for c in store.changes()][-1].cursor
        flushed: dict[int, float] = {}
        delays: list[float] = []

        async def follow() -> None:
            async for change in store.changes(start, follow=True, poll_interval=poll):
                delays.append(time.perf_counter() - flushed[change.key.id])
                if len(delays) == samples:
                    return

        follower = asyncio.create_task(follow())
        rng = random.Random(7)
        for i in range(1, samples + 1):
            await asyncio.sleep(rng.uniform(0, 0.05))
            await store.put(REC, (i,), _value(i))
            await store.flush()
            flushed[i] = time.perf_counter()
        await asyncio.wait_for(follower, 60)
    delays.sort()
    p50 = delays[len(delays) // 2]
    p99 = delays[min(len(delays) - 1, round(len(delays) * 0.99))]
    print(
        f"  flush -> follow=True reader, poll_interval {poll:g} s, {samples} writes: "
        f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {delays[-1] * 1000:.1f} ms"
    )


async def _main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        await _rate(root, 5_000 if quick else 50_000, 3 if quick else 5)
        for poll in (0.1, 0.01):
            await _delay(root, 20 if quick else 200, poll)


def run(quick: bool) -> None:
    asyncio.run(_main(quick))
