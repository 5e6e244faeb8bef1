"""Jetstream ingest (opendata_kv.atproto.jetstream): generated streams applied through any
async iterator and through a Jetstream-compatible websocket server on 127.0.0.1, a consumer
killed with SIGKILL at random batches and resumed; what the store holds, every backlink count
and page, and the consumer's counts equal a recount of the stream."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jetstreamkit import FOLLOW, LIKE, POST, REPOST, Stream, generate
from websockets.asyncio.server import ServerConnection, serve

from opendata_kv import Store
from opendata_kv.atproto import JETSTREAM, Jetstream, consume, parse_event
from opendata_kv.collections import (
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RecordCollection,
    default_schema,
)
from opendata_kv.errors import JetstreamConnectionError, JetstreamEventError

REPO = Path(__file__).resolve().parent.parent
SCHEMA = default_schema(*JETSTREAM.record_types)


async def source(messages: list[str]) -> AsyncIterator[str]:
    for message in messages:
        yield message


def replay(stream: Stream, cursor: int | None) -> list[str]:
    """What Jetstream sends for `cursor=`: every message standing at or after it."""
    if cursor is None:
        return list(stream.messages)
    return [m for m, at in zip(stream.messages, stream.times, strict=True) if at >= cursor]


async def check_holds(store: Store, stream: Stream, name: str = "default") -> None:
    """The store holds exactly the stream's live records, every backlink read equals a
    recount, and the consumer's counts are the stream's."""
    records = RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS)
    held = {(r.repo, r.collection, r.rkey): r.value async for r in records.scan()}
    assert held == stream.records
    assert await store.check_indexes() == []
    posts = {f"at://{did}/{coll}/{rkey}" for did, coll, rkey in held if coll == POST}
    posts |= {v["subject"]["uri"] for (_, c, _), v in held.items() if c in (LIKE, REPOST)}
    for uri in sorted(posts):
        assert await records.like_count(uri) == stream.count(LIKE, uri)
        assert await records.repost_count(uri) == stream.count(REPOST, uri)
        page = await records.likes(uri, limit=3)
        found = [(r.rkey, r.repo) for r in page]
        while page.cursor is not None:
            page = await records.likes(uri, limit=3, cursor=page.cursor)
            found += [(r.rkey, r.repo) for r in page]
        assert found == stream.likes_of(uri)
    for did in {k[0] for k in held} | set(stream.identities):
        assert await records.follower_count(did) == stream.count(FOLLOW, did)
        followers = await records.followers(did)  # in follow rkey order
        assert [(r.rkey, r.repo) for r in followers] == sorted(
            (rk, d) for (d, c, rk), v in held.items() if c == FOLLOW and v["subject"] == did
        )
    ingest = Jetstream(records, name=name)
    state = await ingest.state()
    for counter in (
        "events",
        "creates",
        "updates",
        "deletes",
        "identities",
        "accounts",
        "malformed",
        "unknown_updates",
        "unknown_deletes",
    ):
        assert getattr(state, counter) == stream.counts[counter], counter
    for did, handle in stream.identities.items():
        found = await ingest.identity(did)
        assert found is not None and found["handle"] == handle
    for did, (active, status) in stream.accounts.items():
        found = await ingest.account(did)
        assert found is not None and (found["active"], found["status"]) == (active, status)


def test_one_pass_holds_the_stream() -> None:
    stream = generate(1, 300)

    async def main() -> None:
        async with Store.open(
            "memory://js-one", SCHEMA, indexes=COVERING_BACKLINKS.indexes
        ) as store:
            records = RecordCollection(
                store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
            )
            errors: list[JetstreamEventError] = []
            ingest = Jetstream(records, batch_size=16, on_error=errors.append)
            report = await ingest.run(source(stream.messages))
            assert report.taken == len(stream.messages) and report.skipped == 0
            assert report.stopped == "end"
            assert len(errors) == stream.counts["malformed"] > 0
            assert all(isinstance(e, JetstreamEventError) and str(e) for e in errors)
            await check_holds(store, stream)
            # a second run over the same messages (Jetstream replaying them) takes nothing
            again = await ingest.run(source(replay(stream, report.state.cursor)))
            assert again.taken == 0 and again.skipped > 0
            await check_holds(store, stream)

    asyncio.run(main())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(1, 120),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    batch_size=st.integers(1, 40),
)
def test_stopped_anywhere_and_resumed_nothing_lost_or_twice(
    seed: int, size: int, cuts: list[int], batch_size: int
) -> None:
    """Runs stopped after any number of messages (max_events), each resumed from the stored
    cursor with Jetstream's inclusive replay, hold what one run holds."""
    stream = generate(seed, size)

    async def main() -> None:
        async with Store.open(
            f"memory://js-{seed}-{size}-{batch_size}", SCHEMA, indexes=COVERING_BACKLINKS.indexes
        ) as store:
            records = RecordCollection(
                store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
            )
            for cut in [*cuts, None]:
                ingest = Jetstream(records, batch_size=batch_size)  # a fresh consumer: a restart
                state = await ingest.state()
                await ingest.run(source(replay(stream, state.cursor)), max_events=cut)
            await check_holds(store, stream)

    asyncio.run(main())


def test_backpressure_reads_no_further_than_the_queue() -> None:
    """While the writer is held, the reader takes at most queue_size messages beyond what
    the writer has taken."""
    stream = generate(2, 200)
    pulled = 0

    async def counted() -> AsyncIterator[str]:
        nonlocal pulled
        for message in stream.messages:
            pulled += 1
            yield message

    async def main() -> None:
        async with Store.open(
            "memory://js-bp", SCHEMA, indexes=COVERING_BACKLINKS.indexes
        ) as store:
            records = RecordCollection(store, key_types=BSKY_KEY_TYPES)
            seen: list[int] = []
            ingest = Jetstream(records, batch_size=5, queue_size=10)
            original = ingest._write

            async def held_write(*args: Any) -> None:
                seen.append(pulled)
                if len(seen) == 2:
                    for _ in range(50):  # let the reader run as far as it can
                        await asyncio.sleep(0)
                    seen.append(pulled)
                await original(*args)

            ingest._write = held_write  # type: ignore[method-assign]
            await ingest.run(counted())
            # taken by the writer when held: 2 batches of 5 at most; read: the queue (10)
            # plus what the reader holds while waiting on the full queue (1)
            assert seen[2] <= 10 + 10 + 1
            assert pulled == len(stream.messages)

    asyncio.run(main())


def test_parse_event_refuses_with_path_and_time() -> None:
    with pytest.raises(JetstreamEventError) as caught:
        parse_event('{"did": "did:plc:a", "time_us": 5, "kind": "commit", "commit": {}}')
    assert caught.value.field == "commit.operation" and caught.value.time_us == 5
    with pytest.raises(JetstreamEventError) as caught:
        parse_event(b"\x00not json")
    assert caught.value.time_us is None
    event = parse_event(
        '{"did":"did:plc:a","time_us":7,"kind":"account","account":{"active":false,'
        '"status":"takendown"}}'
    )
    assert (event.time_us, getattr(event, "status", None)) == (7, "takendown")


def test_subscribe_url_sets_the_cursor() -> None:
    from opendata_kv.atproto import IngestState

    url = "ws://h/subscribe?wantedCollections=app.bsky.feed.like&cursor=1"
    assert Jetstream.subscribe_url(url, IngestState()) == url
    got = Jetstream.subscribe_url(url, IngestState(cursor=42, at_cursor=2))
    assert parse_qs(urlsplit(got).query) == {
        "wantedCollections": ["app.bsky.feed.like"],
        "cursor": ["42"],
    }


# --- a Jetstream-compatible server on 127.0.0.1, and kill -9 of a consuming subprocess ------


class Server:
    """Replays `stream` to every connection from its `cursor=` (inclusive), then keeps the
    connection open as a live Jetstream with nothing new would."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.cursors: list[int | None] = []
        self.port = 0

    async def handler(self, socket: ServerConnection) -> None:
        assert socket.request is not None
        query = parse_qs(urlsplit(socket.request.path).query)
        cursor = int(query["cursor"][0]) if "cursor" in query else None
        self.cursors.append(cursor)
        for message in replay(self.stream, cursor):
            await socket.send(message)
        await socket.wait_closed()


def consumer(port: int, db: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "opendata_kv",
        "jetstream",
        f"ws://127.0.0.1:{port}/subscribe?wantedCollections=app.bsky.*",
        "--db",
        db,
        "--batch-size",
        "8",
        "--progress",
        "--quiet",
        "--json",
        *extra,
    ]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_killed_consumer_resumes_over_a_websocket(tmp_path: Path) -> None:
    """Three consumers killed with SIGKILL after a random number of batches, then one run to
    the stream's last time_us: the store holds what one uninterrupted run would."""
    stream = generate(7, 400)
    rng = random.Random(7)
    db = str(tmp_path / "db")
    last = stream.times[-1]

    async def main() -> None:
        server = Server(stream)
        async with serve(server.handler, "127.0.0.1", 0) as running:
            port = next(iter(running.sockets)).getsockname()[1]
            kills = 0
            while kills < 3:
                # the first consumer flushes each batch before it reports it, so its kill
                # leaves a stored cursor to resume from whatever the WAL flush timing; the
                # others do not, so a kill may also drop acknowledged batches with their cursor
                durable = ["--durable"] if kills == 0 else []
                process = await asyncio.create_subprocess_exec(
                    *consumer(port, db, "--until", str(last), *durable),
                    stdout=asyncio.subprocess.PIPE,
                    env=env(),
                )
                assert process.stdout is not None
                batches = rng.randint(1, 12)
                lines = 0
                while lines < batches:
                    line = await asyncio.wait_for(process.stdout.readline(), 120)
                    if not line or b'"batch"' not in line:
                        break
                    lines += 1
                if lines == batches:
                    process.send_signal(signal.SIGKILL)
                    assert await asyncio.wait_for(process.wait(), 60) == -signal.SIGKILL
                    kills += 1
                else:  # it reached the end first: nothing left to kill
                    await asyncio.wait_for(process.wait(), 60)
                    break
            final = await asyncio.create_subprocess_exec(
                *consumer(port, db, "--until", str(last)),
                stdout=asyncio.subprocess.PIPE,
                env=env(),
            )
            out, _ = await asyncio.wait_for(final.communicate(), 120)
            assert final.returncode == 0, out
            report = json.loads(out.splitlines()[-1])
            assert report["state"]["cursor"] == last
            assert kills == 3, "every consumer reached the end before its kill"
            assert server.cursors[0] is None and any(c is not None for c in server.cursors[1:])
        async with Store.open(db, SCHEMA, indexes=COVERING_BACKLINKS.indexes) as store:
            await check_holds(store, stream)

    asyncio.run(main())


def test_consume_gives_up_after_its_retries() -> None:
    async def main() -> None:
        async with Store.open("memory://js-retry", SCHEMA) as store:
            ingest = Jetstream(RecordCollection(store))
            with pytest.raises(JetstreamConnectionError) as caught:
                await consume(ingest, "ws://127.0.0.1:9/subscribe", retries=0, open_timeout=5)
            assert caught.value.value == "ws://127.0.0.1:9/subscribe"

    asyncio.run(main())


def test_consume_opens_a_dropped_connection_again_from_the_cursor() -> None:
    """The first connection is closed after 50 messages; consume opens another with the
    stored cursor and ends at `until` holding the whole stream."""
    stream = generate(3, 150)

    class Dropping(Server):
        async def handler(self, socket: ServerConnection) -> None:
            if self.cursors:
                await super().handler(socket)
                return
            self.cursors.append(None)
            for message in stream.messages[:50]:
                await socket.send(message)
            await socket.close(1011, "going away")

    async def main() -> None:
        server = Dropping(stream)
        async with serve(server.handler, "127.0.0.1", 0) as running:
            port = next(iter(running.sockets)).getsockname()[1]
            async with Store.open(
                "memory://js-drop", SCHEMA, indexes=COVERING_BACKLINKS.indexes
            ) as store:
                records = RecordCollection(
                    store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
                )
                ingest = Jetstream(records, batch_size=10)
                url = f"ws://127.0.0.1:{port}/subscribe"
                report = await consume(ingest, url, until=stream.times[-1], retries=2)
                assert report.stopped == "until" and report.taken == len(stream.messages)
                assert len(server.cursors) == 2 and server.cursors[1] is not None
                await check_holds(store, stream)

    asyncio.run(main())
