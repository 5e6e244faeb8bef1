"""The change feed: every write the WAL still holds, typed, in sequence order, resumable.

Built on slatedb's SlateDbWalReader, which reads the WAL files one at a time. A cursor names
a position between two WAL rows (see rfcs/0008-change-feed.md for the format):

    wal      the WAL file to start reading at
    skip     how many rows of that file were already delivered
    min_seq  rows with a smaller sequence number were already delivered (a checkpoint's
             cursor skips what its state holds this way)

WAL files are immutable and their ids contiguous, so (file, row index) is a stable position:
resuming from a cursor yields the next change after it, with no gap and no repeat, whatever
happened to the writer in between (restart, kill -9, a new writer fencing the old one).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncGenerator
from typing import Any, NamedTuple

from slatedb.uniffi import AdminBuilder, Error, RowEntryKind, SlateDbWalReader

from opendata_kv.errors import (
    ChangeCursorError,
    ChangeCursorExpiredError,
    InvalidArgumentError,
    OpendataKvError,
    StoreError,
    check_count,
)
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store.native.errors import translate
from opendata_kv.values import Values

_OPS = {RowEntryKind.VALUE: "put", RowEntryKind.TOMBSTONE: "delete", RowEntryKind.MERGE: "merge"}
_VERSION = "1"
_TRUNCATED = "WAL was truncated"


class Change(NamedTuple):
    """One write, as the change feed yields it.

    `op` is "put", "delete" or "merge"; `key` the decoded Key (the raw bytes where no
    RecordType owns it); `value` decoded by the key version's codec (raw bytes for an unknown
    key, None for a delete). `cursor` resumes the feed right after this change.
    """

    cursor: str
    seq: int
    op: str
    key: Key | bytes
    value: Any
    raw_key: bytes
    raw_value: bytes | None
    expire_at: int | None  # Unix ms, for a put with a TTL


class Position(NamedTuple):
    """A decoded cursor: start at WAL file `wal`, skip its first `skip` rows and every row
    with a sequence number below `min_seq`."""

    wal: int
    skip: int
    min_seq: int

    def cursor(self) -> str:
        return encode_cursor(self.wal, self.skip, self.min_seq)


def encode_cursor(wal: int, skip: int, min_seq: int) -> str:
    """The opaque cursor string: "1-<wal>-<skip>-<min_seq>-<crc32>" (numbers in hex)."""
    body = f"{_VERSION}-{wal:x}-{skip:x}-{min_seq:x}"
    return f"{body}-{zlib.crc32(body.encode()):08x}"


def decode_cursor(cursor: str) -> Position:
    """Parse a cursor made by encode_cursor; ChangeCursorError for anything else."""
    if not isinstance(cursor, str):
        raise ChangeCursorError(
            f"a change cursor is a string, got {type(cursor).__name__} {cursor!r}", cursor
        )
    parts = cursor.split("-")
    if len(parts) != 5 or parts[0] != _VERSION:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: expected the string a Change's "
            "cursor holds (version 1, five dash-separated parts)",
            cursor,
        )
    body = cursor.rsplit("-", 1)[0]
    try:
        wal, skip, min_seq = (int(p, 16) for p in parts[1:4])
        check = int(parts[4], 16)
    except ValueError:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: its parts are not hex numbers", cursor
        ) from None
    if any(not p.isalnum() or p != p.lower() for p in parts[1:]) or len(parts[4]) != 8:
        raise ChangeCursorError(f"malformed change cursor {cursor[:80]!r}", cursor)
    if zlib.crc32(body.encode()) != check or wal < 1:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: its checksum does not match "
            "(was it edited or cut short?)",
            cursor,
        )
    return Position(wal, skip, min_seq)


class _Decoder:
    """Decode WAL rows into Changes, with each RecordType's key and value decoders looked up
    once (the codec's fast_decode where it has one; on any failure the value is decoded again
    through Values.decode, whose error names the key)."""

    def __init__(self, schema: Schema, values: Values) -> None:
        self._schema = schema
        self._values = values
        self._plans: dict[RecordType, tuple[Any, Any, Any]] = {}

    def _plan(self, record_type: RecordType) -> tuple[Any, Any, Any]:
        plan = self._values.plan(record_type)
        codec = plan.codec
        found = (
            record_type.decode,
            getattr(codec, "fast_decode", None) or codec.decode,
            plan.upgrade,
        )
        self._plans[record_type] = found
        return found

    def change(self, row: Any, cursor: str) -> Change:
        key = row.key
        data = row.value
        record_type = self._schema.try_record_type_of(key)
        if record_type is None:
            return Change(cursor, row.seq, _OPS[row.kind], key, data, key, data, row.expire_ts)
        plan = self._plans.get(record_type) or self._plan(record_type)
        value = None
        if data is not None:
            try:
                value = plan[1](data)
                if plan[2] is not None:
                    value = plan[2](value)
            except Exception:
                value = self._values.decode(record_type, key, data)
        return Change(
            cursor, row.seq, _OPS[row.kind], plan[0](key), value, key, data, row.expire_ts
        )


async def _iterator(reader: Any, start: int, where: str, cursor: str | None) -> Any:
    try:
        return await reader.iterator(start)
    except Error as exc:
        message = getattr(exc, "message", None) or str(exc)
        if _TRUNCATED in message and cursor is not None:
            raise expired(cursor, start, where) from exc
        raise translate(exc, where) from exc


def expired(cursor: str, wal: int, where: str) -> ChangeCursorExpiredError:
    return ChangeCursorExpiredError(
        f"{where}: change cursor {cursor!r} points into WAL file {wal}, which the garbage "
        "collector already deleted, so the changes after it are gone. Resync: take a "
        "checkpoint (store.checkpoint()), read its state with Store.open_reader(url, schema, "
        "checkpoint=<id>), then follow the feed from the checkpoint's cursor. Keep WAL files "
        "longer with the writer setting garbage_collector_options.wal_options.min_age.",
        cursor,
        wal,
    )


async def oldest_wal(reader: Any, tail: int, where: str) -> int:
    """The first WAL file id the reader can start at (1 until the GC deleted files):
    iterator() refuses a truncated start, so search for the smallest accepted one."""
    low, high = 1, max(tail, 1) + 1  # high is always accepted (nothing written there yet)
    while low < high:
        middle = (low + high) // 2
        try:
            await reader.iterator(middle)
        except Error as exc:
            message = getattr(exc, "message", None) or str(exc)
            if _TRUNCATED not in message:
                raise translate(exc, where) from exc
            low = middle + 1
        else:
            high = middle
    return low


def wal_reader(db_path: str, object_store: Any) -> Any:
    return SlateDbWalReader(db_path, object_store)


def admin(db_path: str, object_store: Any, where: str) -> Any:
    """slatedb's Admin handle (manifest reads; checkpoints)."""
    try:
        return AdminBuilder(db_path, object_store).build()
    except Error as exc:
        raise translate(exc, f"admin of {where}") from exc


async def flatten(batches: AsyncGenerator[list[Change], None]) -> AsyncGenerator[Change, None]:
    """The feed one Change at a time, from change_batches' lists; see Store.changes."""
    try:
        async for batch in batches:
            for change in batch:
                yield change
    finally:
        await batches.aclose()


async def change_batches(
    reader: Any,
    admin: Any,
    schema: Schema,
    values: Values,
    since: str | None,
    *,
    follow: bool,
    limit: int | None,
    poll_interval: float,
    where: str,
) -> AsyncGenerator[list[Change], None]:
    """The feed a WAL file at a time: each list holds the changes of one file (never empty)."""
    check_count(limit, "limit", 0, none_ok=True)
    if poll_interval <= 0:
        raise InvalidArgumentError(
            f"poll_interval must be > 0 seconds, got {poll_interval!r}",
            field="poll_interval",
            value=poll_interval,
        )
    position = None if since is None else decode_cursor(since)
    if limit == 0:
        return
    where = f"change feed of {where}"
    # WAL files up to the manifest's replay_after_wal_id are in SSTs already and are the
    # ones the garbage collector deletes; asking for the tail after an older one fails
    manifest = await _call(admin.read_manifest(None), where)
    floor = 0 if manifest is None else manifest.replay_after_wal_id
    if position is None:
        tail = await _call(reader.last_wal_file_id(floor), where)
        start, skip, min_seq = await oldest_wal(reader, tail, where), 0, 0
    else:
        start, skip, min_seq = position
        tail = await _call(reader.last_wal_file_id(max(floor, start - 1)), where)
    iterator = await _iterator(reader, start, where, since)
    decoder = _Decoder(schema, values)
    consumed = start - 1  # the last WAL file read
    remaining = limit
    while True:
        if consumed >= tail:
            if not follow:
                return
            while True:  # wait for the writer's next WAL file, polling its id
                tail = await _call(reader.last_wal_file_id(consumed), where)
                if tail > consumed:
                    break
                await asyncio.sleep(poll_interval)
            # a live iterator at the tail only notices new files on its own ~1 s poll; a
            # new one starting at the next file returns it at once
            iterator = await _iterator(reader, consumed + 1, where, None)
        try:
            rows = await iterator.next()
        except Error as exc:
            message = getattr(exc, "message", None) or str(exc)
            if _TRUNCATED in message and since is not None and consumed == start - 1:
                raise expired(since, start, where) from exc
            raise translate(exc, where) from exc
        if rows is None:
            return
        file_id = rows.last_consumed_wal_file_id
        if consumed == start - 1 and position is not None and file_id != start:
            # the cursor's own file is gone: the GC deleted it between our calls
            assert since is not None
            raise expired(since, start, where)
        consumed = file_id
        batch = rows.rows
        out: list[Change] = []
        crc32 = zlib.crc32
        change = decoder.change
        head = f"{_VERSION}-{file_id:x}-"
        for index in range(skip if file_id == start else 0, len(batch)):
            row = batch[index]
            seq = row.seq
            if seq < min_seq:
                continue
            body = f"{head}{index + 1:x}-{seq:x}"
            out.append(change(row, f"{body}-{crc32(body.encode()):08x}"))
            if remaining is not None and len(out) >= remaining:
                break
        if out:
            yield out
            if remaining is not None:
                remaining -= len(out)
                if remaining <= 0:
                    return


async def _call(awaitable: Any, where: str) -> Any:
    try:
        return await awaitable
    except Error as exc:
        raise translate(exc, where) from exc
    except OpendataKvError:
        raise
    except Exception as exc:  # the binding's own InternalError and the like
        raise StoreError(f"{where}: {type(exc).__name__}: {exc}") from exc
