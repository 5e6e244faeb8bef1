"""RecordCollection.repos() and collections() against a keys-only scan of the same records.

    PYTHONPATH=. python tools/bench.py listing [--repos N] [--per-repo N] [--store s3|file]

The records: N repos (DIDs), each with `per-repo` records spread over 3 collections (and one
repo with 100x as many, a long run that a seek skips). Timed on a reopened reader (cold
block cache) one after the other: a keys-only scan of every record, `repos()`, and
`collections(repo)` for the long repo and for a short one. --store s3 (the default) starts a
moto_server on 127.0.0.1 and puts the store there. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

NSIDS = ("app.bsky.feed.like", "app.bsky.feed.post", "app.bsky.graph.follow")


def did(n: int) -> str:
    return f"did:plc:{n:024d}"


def records(repos: int, per_repo: int) -> Any:
    from opendata_kv.collections import RECORDS

    for r in range(repos):
        count = per_repo * 100 if r == repos // 2 else per_repo
        for i in range(count):
            rkey = f"3k{i:011d}"
            yield RECORDS.record, (did(r), NSIDS[i % len(NSIDS)], rkey), {"i": i}


async def timed(what: str, work: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await work
    seconds = time.perf_counter() - started
    return seconds, result


async def measure(url: str, repos: int, per_repo: int) -> dict[str, Any]:
    from opendata_kv.collections import RecordCollection, default_schema
    from opendata_kv.store import Store

    async with Store.open(url, default_schema()) as store:
        total = await store.put_many(records(repos, per_repo), batch_size=5000)
        await store.flush()
    out: dict[str, Any] = {"records": total, "repos": repos}
    long_repo, short_repo = did(repos // 2), did(0)

    async def cold(what: str, work: Any) -> Any:
        # each on a reader of its own: nothing read before is in its block cache
        async with Store.open_reader(url, default_schema()) as reader:
            rc = RecordCollection(reader)  # type: ignore[arg-type]
            out[what], result = await timed(what, work(reader, rc))
            return result

    async def keys_only(reader: Any, rc: Any) -> int:
        keys = reader.scan(rc.record).keys()
        return sum([1 async for _ in keys])

    counted = await cold("keys_scan_s", keys_only)
    found = await cold("repos_s", lambda reader, rc: rc.repos())
    long_c = await cold("collections_long_s", lambda reader, rc: rc.collections(long_repo))
    short_c = await cold("collections_short_s", lambda reader, rc: rc.collections(short_repo))
    assert counted == total and len(found) == repos, (counted, total, len(found))
    assert long_c == sorted(NSIDS) and short_c == sorted(NSIDS[: min(per_repo, 3)])
    out["repos_vs_scan"] = out["repos_s"] / out["keys_scan_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--per-repo", type=int, default=20)
    parser.add_argument("--store", choices=("s3", "file"), default="s3")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.repos, args.per_repo = 200, 10
    server = None
    try:
        if args.store == "s3":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
            from conftest import MotoServer

            server = MotoServer().start()
            bucket = server.create_bucket("bench-listing")
            os.environ.update(server.env())
            url = f"s3://{bucket}/{uuid.uuid4().hex[:8]}"
            result = asyncio.run(measure(url, args.repos, args.per_repo))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                result = asyncio.run(measure(f"{tmp}/db", args.repos, args.per_repo))
    finally:
        if server is not None:
            server.stop()
    print(
        f"{args.store}: {result['records']:,} records in {result['repos']:,} repos: "
        f"keys-only scan {result['keys_scan_s']:.2f} s, repos() {result['repos_s']:.2f} s "
        f"({result['repos_vs_scan']:.1f}x), collections(long repo) "
        f"{result['collections_long_s'] * 1000:.0f} ms, collections(short repo) "
        f"{result['collections_short_s'] * 1000:.0f} ms"
    )
    return 0


def run(quick: bool) -> None:
    main(["--quick"] if quick else [])


if __name__ == "__main__":
    raise SystemExit(main())
