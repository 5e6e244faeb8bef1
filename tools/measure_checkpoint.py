"""Measure the writer's Store.checkpoint() (issue 21, point 10): a writer puts records flat
out while the same process makes a checkpoint every half second; each call's phases (the
binding calls Checkpoints.create makes) are timed. Prints one line per call and a summary.

    python tools/measure_checkpoint.py [DIR] [CALLS] [SETTINGS-JSON]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from typing import Any

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.store import Store
from opendata_kv.store.ops import checkpoints

ITEM = RecordType("item", 1, [("n", F.u64)])
PHASES: list[tuple[str, float]] = []


def instrument() -> None:
    original = checkpoints.Checkpoints._call

    async def timed(self: Any, awaitable: Any, what: str) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, awaitable, what)
        finally:
            PHASES.append((what, time.perf_counter() - started))

    checkpoints.Checkpoints._call = timed  # type: ignore[method-assign]


async def l0_count(store: Any) -> int:
    from slatedb.uniffi import AdminBuilder

    location = store.location  # the measurement looks at slatedb's manifest directly
    admin = AdminBuilder(location.db_path, store._object_store).build()
    manifest = await admin.read_manifest(None)
    return len(manifest.l0)


async def main(path: str, calls: int, settings: dict[str, Any]) -> None:
    instrument()
    async with Store.open(path, Schema(ITEM), settings=settings) as store:
        stop = asyncio.Event()

        async def write() -> None:
            n = 0
            while not stop.is_set():
                await store.put(ITEM, (n,), {"n": n, "pad": "x" * 200})
                n += 1

        writer = asyncio.create_task(write())
        totals = []
        for call in range(calls):
            await asyncio.sleep(0.5)
            PHASES.clear()
            try:
                l0 = await l0_count(store)
            except AttributeError:
                l0 = -1
            started = time.perf_counter()
            await store.checkpoint()
            total = time.perf_counter() - started
            totals.append(total)
            slow = ", ".join(f"{what} {sec * 1000:.0f} ms" for what, sec in PHASES if sec > 0.05)
            line = f"call {call:2d}: L0 SSTs before {l0}: {total * 1000:7.1f} ms  {slow}"
            print(line, flush=True)
        stop.set()
        await writer
    totals.sort()
    print(
        f"{calls} calls: median {statistics.median(totals) * 1000:.1f} ms, "
        f"max {totals[-1] * 1000:.1f} ms, over 1 s: {sum(t > 1 for t in totals)}"
    )


if __name__ == "__main__":
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp() + "/db"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    asyncio.run(main(directory, count, json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}))
