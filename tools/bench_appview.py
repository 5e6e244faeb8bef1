"""The appview's reads and ingest (issue 39), side by side in one run.

    python tools/bench.py appview [--quick]

- pages: "who liked X", pages of 100 read to the end, through the plain backlinks (each
  entry's record read) and the covering ones (entries only), rounds interleaved: pages/s
  and the ratio; `top(10)` over the like count index and `distinct_likers` beside them.
- ingest: one generated Jetstream stream (posts, likes, reposts, follows, profile updates,
  deletes, a few deletes of unknown records), applied by `Jetstream` with the covering
  backlinks, and by a hand-written rocksdict consumer with the same semantics (JSON parsed,
  the record read before every write and delete, backlink entries holding the record's copy
  and counts kept right, the cursor in each batch's atomic write), each into a fresh local
  directory, rounds interleaved: events/s and the ratio.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout, uninstalled
import msgpack

from opendata_kv import Store
from opendata_kv.atproto import JETSTREAM, Jetstream
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RecordCollection,
    default_schema,
)
from opendata_kv.ids import tid

POST, LIKE, REPOST = "app.bsky.feed.post", "app.bsky.feed.like", "app.bsky.feed.repost"
FOLLOW, PROFILE = "app.bsky.graph.follow", "app.bsky.actor.profile"
CID = "bafyreib2rxk3rh6kzwq3xg6ahqmbt3vwmsbkfdbqs5axg4ty7qj7q6qqbe"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


# --- pages ------------------------------------------------------------------------------------


async def _pages(repo: RecordCollection, uri: str) -> float:
    start = time.perf_counter()
    pages, cursor = 0, None
    while True:
        page = await repo.likes(uri, limit=100, cursor=cursor)
        pages += 1
        cursor = page.cursor
        if cursor is None:
            return pages / (time.perf_counter() - start)


async def pages(quick: bool) -> None:
    likes, rounds = (5_000, 3) if quick else (20_000, 5)
    posts = 2_000
    directory = tempfile.mkdtemp(prefix="bench-appview-")
    indexes = (*BACKLINKS.indexes, *(link.entries for link in COVERING_BACKLINKS))
    try:
        async with Store.open(directory, default_schema(), indexes=indexes) as store:
            plain = RecordCollection(store, key_types=BSKY_KEY_TYPES)
            covering = RecordCollection(
                store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
            )
            hot = f"at://did:plc:{'a' * 24}/{POST}/{tid.encode(1 << 52)}"
            rng = random.Random(1)
            other = f"did:plc:{'b' * 24}"
            items = []
            for n in range(likes):
                uri = (
                    hot
                    if n % 2
                    else f"at://{other}/{POST}/{tid.encode((1 << 52) + rng.randrange(posts))}"
                )
                value = {
                    "$type": LIKE,
                    "subject": {"uri": uri, "cid": CID},
                    "createdAt": "2024-09-01T00:00:00.000Z",
                }
                items.append((f"did:plc:{n:024d}", LIKE, tid.encode((1 << 52) + n << 10), value))
            await plain.put_many(items)
            await store.flush()
            rates: dict[str, list[float]] = {"plain": [], "covering": []}
            for r in range(rounds):
                order = [("plain", plain), ("covering", covering)]
                for name, repo in order if r % 2 == 0 else order[::-1]:
                    rates[name].append(await _pages(repo, hot))
            ratios = [c / p for c, p in zip(rates["covering"], rates["plain"], strict=True)]
            print(
                f"who liked X: {likes // 2} likes of one post, pages of 100 to the end, local "
                f"directory (flushed), {rounds} interleaved rounds, {load()}"
            )
            for name, found in rates.items():
                print(f"  {name:<10} {statistics.median(found):>8,.1f} pages/s")
            print(
                f"  covering / plain: {statistics.median(ratios):.2f}x "
                f"(range {min(ratios):.2f}-{max(ratios):.2f})"
            )
            start = time.perf_counter()
            best = await covering.top(10)
            took = time.perf_counter() - start
            groups = len(
                await store.index_scan(
                    COVERING_BACKLINKS.likes.counts.name, records=False
                ).to_list()
            )
            print(
                f"  top(10) over {groups:,} like count groups: {took * 1000:.1f} ms "
                f"({groups / took:,.0f} groups/s), most liked has {best[0][1]:,}"
            )
            start = time.perf_counter()
            distinct = await covering.distinct_likers(hot)
            took = time.perf_counter() - start
            print(
                f"  distinct_likers of the post ({distinct:,} DIDs): {took * 1000:.1f} ms "
                f"({distinct / took:,.0f} entries/s)"
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- ingest -------------------------------------------------------------------------------------


def stream(count: int, users: int = 2_000) -> list[str]:
    """Jetstream messages of an appview: records shaped as the atproto SDK writes them."""
    rng = random.Random(2)
    dids = [f"did:plc:{tid.encode(n + 1).rjust(24, 'a')}" for n in range(users)]
    live: list[tuple[str, str, str]] = []
    posts: list[str] = []
    out = []
    now = 1_725_000_000_000_000
    for n in range(count):
        now += rng.choice((1, 2, 7))
        did = rng.choice(dids)
        rkey = tid.from_parts(now, n % 1024)
        roll = rng.random()
        record: dict[str, Any] | None
        if roll < 0.2 or not posts:
            coll, op = POST, "create"
            record = {
                "$type": POST,
                "text": f"post {n}",
                "createdAt": "2024-09-01T00:00:00.000Z",
                "langs": ["en"],
            }
            posts.append(f"at://{did}/{POST}/{rkey}")
        elif roll < 0.7:
            coll, op = (LIKE if roll < 0.62 else REPOST), "create"
            ref = {"cid": CID, "uri": rng.choice(posts), "$type": "com.atproto.repo.strongRef"}
            record = {"$type": coll, "subject": ref, "createdAt": "2024-09-01T00:00:00.000Z"}
        elif roll < 0.85:
            coll, op = FOLLOW, "create"
            record = {
                "$type": FOLLOW,
                "subject": rng.choice(dids),
                "createdAt": "2024-09-01T00:00:00Z",
            }
        elif roll < 0.9:
            coll, op, rkey = PROFILE, "update", "self"
            record = {"$type": PROFILE, "displayName": f"user {n}"}
        else:
            target = rng.choice(live) if live and roll < 0.99 else (did, LIKE, rkey)
            did, coll, rkey = target
            op, record = "delete", None
        body: dict[str, Any] = {"rev": rkey, "operation": op, "collection": coll, "rkey": rkey}
        if record is not None:
            body["record"], body["cid"] = record, CID
            live.append((did, coll, rkey))
        out.append(json.dumps({"did": did, "time_us": now, "kind": "commit", "commit": body}))
    return out


async def _messages(messages: list[str]) -> AsyncIterator[str]:
    for message in messages:
        yield message


async def ours(messages: list[str], directory: str) -> float:
    schema = default_schema(*JETSTREAM.record_types)
    async with Store.open(directory, schema, indexes=COVERING_BACKLINKS.indexes) as store:
        records = RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS)
        ingest = Jetstream(records, batch_size=500)
        start = time.perf_counter()
        report = await ingest.run(_messages(messages))
        elapsed = time.perf_counter() - start
        assert report.taken == len(messages)
    return len(messages) / elapsed


LINKS = {LIKE: b"L", REPOST: b"R", FOLLOW: b"F"}


def _subject(coll: str, record: Any) -> str | None:
    if coll == FOLLOW:
        subject = record.get("subject")
        return subject if isinstance(subject, str) else None
    if coll in (LIKE, REPOST):
        ref = record.get("subject")
        uri = ref.get("uri") if isinstance(ref, dict) else None
        return uri if isinstance(uri, str) else None
    return None


class _RocksBatch:
    """One atomic rocksdict batch, read through its own pending writes."""

    def __init__(self, db: Any) -> None:
        from rocksdict import WriteBatch

        self.db = db
        self.batch = WriteBatch()
        self.pending: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.pending[key] if key in self.pending else self.db.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.pending[key] = value
        self.batch.put(key, value)

    def delete(self, key: bytes) -> None:
        self.pending[key] = None
        self.batch.delete(key)

    def count(self, key: bytes, step: int) -> None:
        left = int(self.get(key) or b"0") + step
        if left:
            self.put(key, str(left).encode())
        else:
            self.delete(key)

    def link(self, did: str, coll: str, rkey: str, record: Any, data: bytes, step: int) -> None:
        """Add (step 1) or remove (-1) a record's covering backlink entry and count."""
        subject = _subject(coll, record)
        if coll not in LINKS or subject is None:
            return
        tag = LINKS[coll]
        entry = tag + b"e" + f"{subject}\0{rkey}\0{did}".encode()
        if step > 0:
            self.put(entry, data)
        else:
            self.delete(entry)
        self.count(tag + b"c" + subject.encode(), step)


def rocks(messages: list[str], directory: str, batch_size: int = 500) -> float:
    """The hand-written consumer: the same semantics on rocksdict."""
    from rocksdict import Rdict

    db = Rdict(directory)
    stats = {"events": 0, "unknown_deletes": 0, "malformed": 0}
    start = time.perf_counter()
    for at in range(0, len(messages), batch_size):
        batch = _RocksBatch(db)
        last = 0
        for message in messages[at : at + batch_size]:
            stats["events"] += 1
            try:
                event = json.loads(message)
                last = event["time_us"]
                did, body = event["did"], event["commit"]
                coll, rkey, op = body["collection"], body["rkey"], body["operation"]
            except (ValueError, KeyError, TypeError):
                stats["malformed"] += 1
                continue
            key = f"{did}\0{coll}\0{rkey}".encode()
            old = batch.get(key)  # read before write: counts stay right on updates and deletes
            if op == "delete" and old is None:
                stats["unknown_deletes"] += 1
                continue
            if old is not None:
                batch.link(did, coll, rkey, msgpack.unpackb(old), old, -1)
            if op == "delete":
                batch.delete(key)
                continue
            record = body["record"]
            data = msgpack.packb(record)
            batch.put(key, data)
            batch.link(did, coll, rkey, record, data, 1)
        batch.put(b"\xffcursor", msgpack.packb({"cursor": last, **stats}))
        db.write(batch.batch)
    elapsed = time.perf_counter() - start
    db.close()
    return len(messages) / elapsed


def ingest(quick: bool) -> None:
    count, rounds = (5_000, 2) if quick else (30_000, 3)
    messages = stream(count)
    rates: dict[str, list[float]] = {"Jetstream": [], "rocksdict": []}
    for r in range(rounds):
        order = ["Jetstream", "rocksdict"] if r % 2 == 0 else ["rocksdict", "Jetstream"]
        for name in order:
            directory = tempfile.mkdtemp(prefix="bench-appview-ingest-")
            try:
                if name == "Jetstream":
                    rates[name].append(asyncio.run(ours(messages, directory)))
                else:
                    rates[name].append(rocks(messages, directory))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    ratios = [o / k for o, k in zip(rates["Jetstream"], rates["rocksdict"], strict=True)]
    print(
        f"Jetstream ingest: {count:,} events (posts, likes, reposts, follows, profile updates, "
        f"deletes) into a fresh local directory, batches of 500, covering backlinks; "
        f"{rounds} interleaved rounds, {load()}"
    )
    for name, found in rates.items():
        print(f"  {name:<10} {statistics.median(found):>9,.0f} events/s")
    print(
        f"  Jetstream / rocksdict: {statistics.median(ratios):.2f}x "
        f"(range {min(ratios):.2f}-{max(ratios):.2f})"
    )


def run(quick: bool) -> None:
    asyncio.run(pages(quick))
    ingest(quick)


if __name__ == "__main__":
    run("--quick" in sys.argv)
