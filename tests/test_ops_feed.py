"""The change feed (Store.changes): typed changes in sequence order, cursors that resume
exactly, across a kill -9 of the writer; expired and malformed cursors; follow mode."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import crash_writer as cw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opskit import collect_garbage
from storekit import SCHEMA, VALUES, Post, aio, blob, like, post2
from writer_process import WriterProcess

from opendata_kv.errors import ChangeCursorError, ChangeCursorExpiredError, ChangeDecodeError
from opendata_kv.store import Change, RawChange, Store, SyncStore
from opendata_kv.store.ops import feed as feed_module
from opendata_kv.store.ops.feed import decode_cursor, encode_cursor


async def feed(store: Store, since: str | None = None, **options: Any) -> list[Change]:
    return [change async for change in store.changes(since, **options)]


@aio
async def test_changes_are_typed_and_in_order(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "db", SCHEMA, values=VALUES) as store:
        await store.put(post2, ("did:plc:a", "3k"), Post("hi"))
        async with store.batch() as batch:
            batch.put(like, (1,), {"n": 1})
            batch.delete(post2, ("did:plc:a", "3k"))
        await store.put(blob, (7,), b"\x00\xff")
        await store.put_raw(b"\xf0\xf1", b"not msgpack")
        await store.flush()
        changes = await feed(store, on_unknown="raw")
        with pytest.raises(ChangeDecodeError, match="on_unknown='skip' or 'raw'") as caught:
            await feed(store)  # a key no RecordType owns: an error by default
        assert caught.value.raw_key == b"\xf0\xf1"
        assert caught.value.cursor == changes[-2].cursor  # resume after the last good one
        assert await feed(store, caught.value.bad_cursor) == []
        assert [c.key for c in await feed(store, on_unknown="skip")] == [
            c.key for c in changes[:-1]
        ]
    assert [type(c) for c in changes] == [Change] * 4 + [RawChange]
    assert [(c.op, c.key, c.value) for c in changes] == [
        ("put", post2.key("did:plc:a", "3k"), Post("hi")),
        ("put", like.key(1), {"n": 1}),
        ("delete", post2.key("did:plc:a", "3k"), None),
        ("put", blob.key(7), b"\x00\xff"),
        ("put", b"\xf0\xf1", b"not msgpack"),  # no RecordType owns it: raw bytes
    ]
    seqs = [c.seq for c in changes]
    assert seqs == sorted(seqs) and seqs[1] == seqs[2]  # one batch, one sequence number
    assert len({c.cursor for c in changes}) == len(changes)


def test_every_acknowledged_write_once_after_kill_9(url: str) -> None:
    """Two writers killed with SIGKILL mid-stream, then a clean reopen that writes more: the
    feed holds every acknowledged batch whole, no record twice, and resuming from any cursor
    of the first writer's changes gives exactly the rest."""
    acked: list[int] = []
    for _ in range(2):
        writer = WriterProcess(url)
        writer.wait_open()
        writer.wait_acks(3)
        writer.kill()
        acked += writer.acked

    async def reopen_and_read() -> tuple[list[Change], list[Change]]:
        async with Store.open(url, cw.SCHEMA, values=cw.VALUES) as store:
            before = await feed(store)
            entries = [c.key for c in before if c.key.record_type is cw.ENTRY]
            last = max(key.batch for key in entries)
            async with store.batch(durable=True) as batch:
                for record_type, fields, value in cw.expected_batch(last + 1):
                    batch.put(record_type, fields, value)
            acked.append(last + 1)
        async with Store.open_reader(url, cw.SCHEMA, values=cw.VALUES) as reader:
            return before, await feed(reader)

    before, changes = aio(reopen_and_read)()
    assert all(c.op == "put" for c in changes)
    keys = Counter(c.raw_key for c in changes)
    assert max(keys.values()) == 1, "a record appears twice in the feed"
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    by_key = {c.raw_key: c.value for c in changes}
    for batch_id in acked:
        for record_type, fields, value in cw.expected_batch(batch_id):
            assert by_key[record_type.encode(*fields)] == value, (batch_id, fields)
    # resume at a few positions spread over the first writers' changes: exactly the rest
    cursors = [c.cursor for c in changes]
    assert [c.cursor for c in before] == cursors[: len(before)]

    async def resumed(cursor: str) -> list[str]:
        async with Store.open_reader(url, cw.SCHEMA, values=cw.VALUES) as reader:
            return [c.cursor for c in await feed(reader, cursor)]

    for index in sorted({0, len(before) // 2, len(before) - 1}):
        assert aio(resumed)(cursors[index]) == cursors[index + 1 :]


def first(pair: tuple[int, int]) -> int:
    return pair[0]


# one step of a random history: put/delete one key, a batch, a WAL flush, a writer reopen
step = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 5), st.integers(0, 1000)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    # a batch writes each key once (slatedb keeps only the last write of a key in a batch)
    st.tuples(
        st.just("batch"),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9)), max_size=4, unique_by=first),
    ),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen")),
)


async def check_resume(path: str, history: list[tuple[Any, ...]]) -> None:
    """Write `history`; the feed must replay it in order, and resuming from every change's
    cursor (and reading with every limit) must yield exactly the changes after it."""
    expected: list[tuple[str, int, Any]] = []
    store = await Store.open(path, SCHEMA, values=VALUES)
    try:
        for action, *args in history:
            if action == "put":
                await store.put(like, (args[0],), {"v": args[1]})
                expected.append(("put", args[0], {"v": args[1]}))
            elif action == "delete":
                await store.delete(like, (args[0],))
                expected.append(("delete", args[0], None))
            elif action == "batch":
                async with store.batch() as batch:
                    for n, v in args[0]:
                        batch.put(like, (n,), {"v": v})
                # one batch: one sequence number, its rows in key order
                expected += [("put", n, {"v": v}) for n, v in sorted(args[0])]
            elif action == "flush":
                await store.flush()
            else:
                await store.close()
                store = await Store.open(path, SCHEMA, values=VALUES)
        await store.flush()
        changes = await feed(store)
        assert [(c.op, c.key.n, c.value) for c in changes] == expected
        cursors = [c.cursor for c in changes]
        for index, cursor in enumerate(cursors):
            assert [c.cursor for c in await feed(store, cursor)] == cursors[index + 1 :]
            assert [c.cursor for c in await feed(store, cursor, limit=1)] == cursors[
                index + 1 : index + 2
            ]
        for limit in range(len(cursors) + 1):
            assert [c.cursor for c in await feed(store, limit=limit)] == cursors[:limit]
    finally:
        await store.close()


@settings(max_examples=15)
@given(history=st.lists(step, min_size=1, max_size=10))
def test_resume_at_every_position(history: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(check_resume(tmp + "/db", history))


@settings(max_examples=10)
@given(history=st.lists(step, min_size=1, max_size=10), ahead=st.integers(1, 3))
def test_resume_at_every_position_across_read_windows(
    history: list[tuple[Any, ...]], ahead: int
) -> None:
    """The same property with the feed reading 1-3 WAL files at once (16 in use), so the
    changes, cursors and limits cross the edges of its read windows."""
    with mock.patch.object(feed_module, "_AHEAD", ahead), tempfile.TemporaryDirectory() as tmp:
        asyncio.run(check_resume(tmp + "/db", history))


def test_resume_at_every_position_on_s3(s3_env: Any) -> None:
    """The same property against the S3 endpoint (fewer examples: each costs round trips)."""

    @settings(max_examples=4)
    @given(history=st.lists(step, min_size=1, max_size=6))
    def on_s3(history: list[tuple[Any, ...]]) -> None:
        asyncio.run(check_resume(f"s3://opendata-kv-test/feed/{uuid.uuid4().hex[:12]}", history))

    on_s3()


@given(text=st.text(max_size=40))
def test_malformed_cursor_text_is_a_clean_error(text: str) -> None:
    try:
        position = decode_cursor(text)
    except ChangeCursorError as exc:
        assert exc.cursor == text
    else:
        assert encode_cursor(*position) == text


@given(
    wal=st.integers(1, 2**40),
    skip=st.integers(0, 2**20),
    seq=st.integers(0, 2**40),
    data=st.data(),
)
def test_edited_cursor_is_refused(wal: int, skip: int, seq: int, data: st.DataObject) -> None:
    cursor = encode_cursor(wal, skip, seq)
    assert decode_cursor(cursor)[:3] == (wal, skip, seq)
    index = data.draw(st.integers(0, len(cursor) - 1))
    other = data.draw(st.sampled_from("0123456789abcdef-xZ").filter(lambda c: c != cursor[index]))
    with pytest.raises(ChangeCursorError):
        decode_cursor(cursor[:index] + other + cursor[index + 1 :])
    with pytest.raises(ChangeCursorError):
        decode_cursor(cursor[:-1])


@aio
async def test_malformed_cursor_from_the_store(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "db", SCHEMA) as store:
        with pytest.raises(ChangeCursorError, match="malformed change cursor"):
            await feed(store, "1-2-3")
        with pytest.raises(ValueError):
            await feed(store, limit=-1)


def test_expired_cursor_after_gc_and_resync(url: str) -> None:
    """Once the garbage collector deleted the WAL file a cursor points into, the cursor is
    refused with ChangeCursorExpiredError; resync from a checkpoint and its cursor."""

    async def run() -> None:
        async with Store.open(url, SCHEMA, values=VALUES) as store:
            for n in range(5):
                await store.put(like, (n,), {"v": n})
                await store.flush()
            old = (await feed(store))[1].cursor
            # a checkpoint flushes the memtable into an SST: the WAL files before it are
            # no longer needed for recovery, and the collector may delete them
            first = await store.checkpoint()
            await store.delete_checkpoint(first.id)
            await store.put(like, (10,), {"v": 10})
            await store.flush()
            await collect_garbage(url)
            with pytest.raises(ChangeCursorExpiredError, match="checkpoint") as info:
                await feed(store, old)
            assert info.value.cursor == old
            # resync: the state from a checkpoint, then the feed from its cursor
            checkpoint = await store.checkpoint("resync")
            await store.put(like, (11,), {"v": 11})
            await store.flush()
            async with Store.open_reader(url, SCHEMA, values=VALUES, checkpoint=checkpoint.id) as r:
                state = {rec.key.n async for rec in r.scan("like")}
            assert state == {0, 1, 2, 3, 4, 10}
            after = await feed(store, checkpoint.cursor)
            assert [(c.op, c.key.n) for c in after] == [("put", 11)]

    aio(run)()


@aio
async def test_follow_waits_for_new_changes_and_cancels_cleanly(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "db", SCHEMA, values=VALUES) as store:
        await store.put(like, (0,), {"v": 0})
        await store.flush()
        start = (await feed(store))[-1].cursor

        async def follow() -> list[int]:
            following = store.changes(start, follow=True, limit=3, poll_interval=0.01)
            return [c.key.n async for c in following]

        task = asyncio.create_task(follow())
        for n in (1, 2, 3):
            await asyncio.sleep(0.02)
            await store.put(like, (n,), {"v": n})
            await store.flush()
        assert await asyncio.wait_for(task, 30) == [1, 2, 3]

        idle = asyncio.create_task(feed(store, None, follow=True, poll_interval=0.01))
        await asyncio.sleep(0.1)
        assert not idle.done()  # caught up with the WAL and waiting
        idle.cancel()
        with pytest.raises(asyncio.CancelledError):
            await idle


def test_sync_changes(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA, values=VALUES) as store:
        for n in range(4):
            store.put(like, (n,), {"v": n})
        store.flush()
        changes = list(store.changes())
        assert [c.key.n for c in changes] == [0, 1, 2, 3]
        assert [c.key.n for c in store.changes(changes[1].cursor)] == [2, 3]
        with store.changes(follow=True, poll_interval=0.01) as following:
            assert next(following).key.n == 0
        assert list(following) == []  # closed


def test_a_cursor_past_u64_is_a_cursor_error() -> None:
    """A crafted cursor with a valid checksum but a WAL id of 2^64 (past slatedb's u64) is a
    ChangeCursorError naming the cursor, never a raw ValueError."""
    import zlib

    from opendata_kv.errors import ChangeCursorError

    parts = encode_cursor(5, 0, 0, "abc").split("-")
    parts[2] = format(2**64, "x")
    body = "-".join(parts[:5])
    crafted = f"{body}-{zlib.crc32(body.encode()):08x}"
    with pytest.raises(ChangeCursorError) as caught:
        decode_cursor(crafted)
    assert crafted[:20] in str(caught.value)
