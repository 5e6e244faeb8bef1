"""RecordCollection bulk writes vs store.put_many with the same backlink indexes.

    python tools/bench.py collections [--quick]
    python tools/bench_collections.py [--quick] [--no-indexes]   # the same, no index at all

Like records (each one a backlink index entry and a count update) into a fresh local
database per run, written four ways, rounds interleaved so drift hits all alike:
- store.put_many(RECORDS.record, ...): no checks (what a user bypassing the collection does);
- RecordCollection.put_many: put's checks on every record (DID, NSID, rkey type, $type);
- RecordCollection.create_many: create's checks and one atomic batch of creates per batch
  (Batch.create: every key read under the write lock, never overwrites), TIDs generated;
- RecordCollection.create, one record at a time (a few hundred records only).
Printed as records/s (median of the rounds) and ratios to store.put_many.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

try:
    from opendata_kv import Store
    from opendata_kv.collections import BACKLINKS, RECORDS, RecordCollection, default_schema
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv import Store
    from opendata_kv.collections import BACKLINKS, RECORDS, RecordCollection, default_schema
from opendata_kv.ids import tid

LIKE = "app.bsky.feed.like"
REPO = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"


def _like(i: int) -> dict[str, Any]:
    subject = f"at://{REPO}/app.bsky.feed.post/{tid.encode((1 << 50) + i % 97)}"
    return {"$type": LIKE, "subject": {"uri": subject, "cid": "bafy"}, "createdAt": str(i)}


Case = Callable[[RecordCollection, list[dict[str, Any]], list[str]], Awaitable[Any]]


async def _store_put_many(
    repo: RecordCollection, values: list[dict[str, Any]], rkeys: list[str]
) -> Any:
    items = ((RECORDS.record, (REPO, LIKE, k), v) for k, v in zip(rkeys, values, strict=True))
    return await repo.store.put_many(items)


async def _put_many(repo: RecordCollection, values: list[dict[str, Any]], rkeys: list[str]) -> Any:
    return await repo.put_many((REPO, LIKE, k, v) for k, v in zip(rkeys, values, strict=True))


async def _create_many(
    repo: RecordCollection, values: list[dict[str, Any]], rkeys: list[str]
) -> Any:
    return await repo.create_many((REPO, LIKE, v) for v in values)


async def _create(repo: RecordCollection, values: list[dict[str, Any]], rkeys: list[str]) -> Any:
    for value in values:
        await repo.create(REPO, LIKE, value)


async def _timed(case: Case, count: int, indexed: bool) -> float:
    """Records/s of one run of `case` writing `count` records into a fresh database."""
    directory = tempfile.mkdtemp(prefix="bench-collections-")
    indexes = BACKLINKS.indexes if indexed else ()
    try:
        async with Store.open(directory, default_schema(), indexes=indexes) as store:
            repo = RecordCollection(store)
            values = [_like(i) for i in range(count)]
            rkeys = [tid.encode(((1 << 50) + i) << 10) for i in range(count)]
            start = time.perf_counter()
            await case(repo, values, rkeys)
            elapsed = time.perf_counter() - start
            assert await repo.count(REPO) == count
        return count / elapsed
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run(quick: bool, indexed: bool = True) -> None:
    count, few, rounds = (2_000, 100, 3) if quick else (20_000, 500, 5)
    cases: dict[str, tuple[Case, int]] = {
        "store.put_many": (_store_put_many, count),
        "RecordCollection.put_many": (_put_many, count),
        "RecordCollection.create_many": (_create_many, count),
        "RecordCollection.create": (_create, few),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        names = list(cases)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            case, n = cases[name]
            samples[name].append(asyncio.run(_timed(case, n, indexed)))
    print(
        f"like records {'with backlink indexes' if indexed else 'without indexes'}, local "
        f"directory, batches of 1000; {count} "
        f"records per run ({few} for create), {rounds} interleaved rounds"
    )
    base = samples["store.put_many"]
    for name, rates in samples.items():
        ratios = [rate / b for rate, b in zip(rates, base, strict=True)]
        print(
            f"  {name:<30} {statistics.median(rates):>9,.0f} records/s  "
            f"{statistics.median(ratios):.2f}x store.put_many "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    run("--quick" in sys.argv, indexed="--no-indexes" not in sys.argv)
