"""The appview's reads and ingest (issue 39), side by side in one run.

    python tools/bench.py appview [--quick]
    python tools/bench_appview.py [pages|ingest] [--quick] [--base CHECKOUT] [--rounds N]
        [--base-covering CHECKOUT]

- pages: "who liked X", pages of 100 read to the end, through the plain backlinks (each
  entry's record read) and the covering ones (entries only), and with `--base` (or
  OPENDATA_KV_BENCH_BASE) the plain pages of another checkout (issue 39's "today", main at
  76eed7e) read by tools/bench_appview_base.py in a child process; rounds alternate, each
  path first in turn: pages/s, CPU per page and the ratios round by round (with
  `--base-covering`, another checkout's covering pages too); `top(10)` over the like count
  index and `distinct_likers` beside them.
- ingest: one generated Jetstream stream (posts, likes, reposts, follows, profile updates,
  deletes, a few deletes of unknown records), applied by `Jetstream` with the covering
  backlinks, and by a hand-written rocksdict consumer with the same semantics (JSON parsed,
  the record read before every write and delete, backlink entries holding the record's copy
  and counts kept right, the cursor in each batch's atomic write), each into a fresh local
  directory, rounds interleaved: events/s and the ratio, and each consumer's CPU an event
  (process, and its own thread) with the ratio in process CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout, uninstalled
sys.path.insert(1, str(Path(__file__).resolve().parent))  # bench_appview_base, run directly
import msgpack
from bench_appview_base import hot_uri, like_items, read_pages

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

#: a checkout whose plain pages are read beside this one's (issue 39's "today": 76eed7e)
BASE_ENV = "OPENDATA_KV_BENCH_BASE"


class _BasePages:
    """The plain pages of another checkout, read by tools/bench_appview_base.py in a child
    process whose opendata_kv is that checkout's; one `round()` reads the hot post's likes
    to the end there."""

    def __init__(self, checkout: str, likes: int, covering: bool = False) -> None:
        worker = Path(__file__).resolve().parent / "bench_appview_base.py"
        env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}
        self.process = subprocess.Popen(
            [sys.executable, str(worker), str(likes), *(["covering"] if covering else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        #: the opendata_kv package the child reads with
        self.package = str(self._answer()["ready"])

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the base checkout's page reader ended ({self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def round(self) -> tuple[float, float]:
        """(pages/s, CPU ms per page) of one read of every page."""
        assert self.process.stdin is not None
        self.process.stdin.write("round\n")
        self.process.stdin.flush()
        answer = self._answer()
        return answer["pages_per_s"], answer["cpu_ms_per_page"]

    def close(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
        self.process.wait(60)


async def _round(repo: RecordCollection, uri: str) -> tuple[float, float]:
    pages, wall, cpu = await read_pages(repo, uri)
    return pages / wall, cpu * 1e3 / pages


async def pages(
    quick: bool,
    base: str | None = None,
    rounds: int | None = None,
    base_covering: str | None = None,
) -> None:
    """Covering pages against plain ones (this checkout's, and `base`'s when given) and
    against `base_covering`'s covering pages when given, rounds alternating in one session:
    the paths take turns first, so a change of machine load falls on each; the ratios are
    taken round by round."""
    likes = 5_000 if quick else 20_000
    rounds = rounds or (3 if quick else 5)
    directory = tempfile.mkdtemp(prefix="bench-appview-")
    indexes = (*BACKLINKS.indexes, *(link.entries for link in COVERING_BACKLINKS))
    other = _BasePages(base, likes) if base else None
    earlier = _BasePages(base_covering, likes, covering=True) if base_covering else None
    try:
        async with Store.open(directory, default_schema(), indexes=indexes) as store:
            plain = RecordCollection(store, key_types=BSKY_KEY_TYPES)
            covering = RecordCollection(
                store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
            )
            hot = hot_uri()
            await plain.put_many(like_items(likes))
            await store.flush()
            for repo in (plain, covering):
                await read_pages(repo, hot)  # warm: the block cache and the bound plans
            paths: dict[str, Any] = {"covering": covering, "plain": plain}
            if other is not None:
                paths["plain@base"] = other
            if earlier is not None:
                paths["covering@base"] = earlier
            names = list(paths)
            found: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
            loads = []
            for r in range(rounds):
                loads.append(os.getloadavg()[0])
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    path = paths[name]
                    found[name].append(path.round() if "@" in name else await _round(path, hot))
            print(
                f"who liked X: {likes // 2} likes of one post, pages of 100 to the end, local "
                f"directory (flushed), {rounds} alternating rounds, {load()} (at the rounds' "
                f"starts: {', '.join(f'{x:.1f}' for x in loads)})"
            )
            for label, child in (("plain@base", other), ("covering@base", earlier)):
                if child is not None:
                    print(f"  {label} reads with {child.package}")
            for name in names:
                rates = [rate for rate, _ in found[name]]
                cpu = [ms for _, ms in found[name]]
                print(
                    f"  {name:<11} {statistics.median(rates):>8,.1f} pages/s "
                    f"(range {min(rates):,.1f}-{max(rates):,.1f}), "
                    f"{statistics.median(cpu):.2f} ms CPU a page"
                )
            for against in names[1:]:
                ratios = [
                    c[0] / p[0] for c, p in zip(found["covering"], found[against], strict=True)
                ]
                cpu_ratios = [
                    p[1] / c[1] for c, p in zip(found["covering"], found[against], strict=True)
                ]
                print(
                    f"  covering / {against}: {statistics.median(ratios):.2f}x pages/s "
                    f"(range {min(ratios):.2f}-{max(ratios):.2f}), "
                    f"{statistics.median(cpu_ratios):.2f}x in CPU a page"
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
        for child in (other, earlier):
            if child is not None:
                child.close()
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
        start, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
        report = await ingest.run(_messages(messages))
        elapsed = time.perf_counter() - start
        CPU["Jetstream"].append(_per_event(cpu, thread, len(messages)))
        assert report.taken == len(messages)
    return len(messages) / elapsed


#: (process CPU, this thread's CPU) in µs an event, per round, of each consumer
CPU: dict[str, list[tuple[float, float]]] = {"Jetstream": [], "rocksdict": []}


def _per_event(cpu: float, thread: float, count: int) -> tuple[float, float]:
    return (
        (time.process_time() - cpu) / count * 1e6,
        (time.thread_time() - thread) / count * 1e6,
    )


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
    start, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
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
    CPU["rocksdict"].append(_per_event(cpu, thread, len(messages)))
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
        process = statistics.median(c for c, _ in CPU[name][-rounds:])
        thread = statistics.median(t for _, t in CPU[name][-rounds:])
        print(
            f"  {name:<10} {statistics.median(found):>9,.0f} events/s, CPU {process:.1f} µs an "
            f"event (process), {thread:.1f} (the consumer's thread)"
        )
    print(
        f"  Jetstream / rocksdict: {statistics.median(ratios):.2f}x "
        f"(range {min(ratios):.2f}-{max(ratios):.2f})"
    )
    in_cpu = [
        k[0] / o[0]
        for o, k in zip(CPU["Jetstream"][-rounds:], CPU["rocksdict"][-rounds:], strict=True)
    ]
    print(
        f"  in process CPU, rocksdict / Jetstream: {statistics.median(in_cpu):.2f}x "
        f"(range {min(in_cpu):.2f}-{max(in_cpu):.2f}; the wall-clock ratio's measure on a loaded "
        "machine)"
    )


def run(quick: bool) -> None:
    """Both parts; the pages part also reads the plain pages of the checkout that
    OPENDATA_KV_BENCH_BASE names, when set."""
    asyncio.run(pages(quick, os.environ.get(BASE_ENV) or None))
    ingest(quick)


def main(argv: list[str]) -> int:
    """`python tools/bench_appview.py [pages|ingest] [--quick] [--base CHECKOUT]
    [--rounds N]`: one part, or both."""
    parser = argparse.ArgumentParser(prog="bench_appview.py")
    parser.add_argument("part", nargs="?", choices=("pages", "ingest"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--base", default=os.environ.get(BASE_ENV) or None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--base-covering", default=None)
    args = parser.parse_args(argv)
    if args.part in (None, "pages"):
        asyncio.run(pages(args.quick, args.base, args.rounds, args.base_covering))
    if args.part in (None, "ingest"):
        ingest(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
