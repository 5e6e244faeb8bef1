"""Store: an async, typed view of one SlateDB database (writer or read-only reader).

    async with Store.open("./data", schema) as store:
        await store.put(post, ("did:plc:x", "3k2a"), {"text": "hi"})
        await store.flush()                      # durable: survives a crash from here on
        async for record in store.scan("post", "did:plc:x"):
            ...
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from slatedb.uniffi import (
    Error,
    IsolationLevel,
    KeyRange,
    PutOptions,
    Ttl,
    WriteBatch,
    WriteOptions,
)

from opendata_kv.errors import (
    InvalidArgumentError,
    ReadOnlyError,
    SnapshotGoneError,
    StoreClosedError,
    StoreError,
    check_count,
)
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store import sidecar
from opendata_kv.store.deletes import MAX_KEYS, check_max_keys, keys_in
from opendata_kv.store.location import Location, parse_location
from opendata_kv.store.native import calls, driver
from opendata_kv.store.native.errors import FOREIGN, call, translate
from opendata_kv.store.opening import (
    READER_TIMEOUT,
    bounded,
    check_cache_bytes,
    check_retries,
    check_seconds,
    open_db,
    open_reader_db,
)
from opendata_kv.store.ops import feed
from opendata_kv.store.ops.checkpoints import Checkpoint, Checkpoints, require_id
from opendata_kv.store.scan import scan_options
from opendata_kv.store.schema_arg import SchemaArg, as_schema
from opendata_kv.store.views import (
    MISSING,
    Bound,
    Fields,
    ReadView,
    Target,
    TtlArg,
    encode_put,
    key_bytes,
)
from opendata_kv.values import Values
from opendata_kv.values.limits import check_stored_size

if TYPE_CHECKING:
    from opendata_kv.store.ops.clone import CloneResult

_WRITE_OPTIONS = WriteOptions()
S = TypeVar("S", bound="StoreReader")
_ISOLATION = {
    "snapshot": IsolationLevel.SNAPSHOT,
    "serializable": IsolationLevel.SERIALIZABLE_SNAPSHOT,
}


class StoreReader(ReadView):
    """A typed SlateDB database opened read-only (`Store.open_reader(...)`): reads, scans,
    the change feed and checkpoints; no write methods (so a type checker flags them). Store,
    the writer, is one of these with the writes added."""

    def __init__(
        self,
        db: Any,
        location: Location,
        schema: Schema,
        values: Values,
        readonly: bool,
        check_expiry: bool = True,
    ) -> None:
        self._source = db
        self.location = location
        self.schema = schema
        self.values = values
        self.readonly = readonly
        self.check_expiry = check_expiry
        self.where = str(location)
        self._closed = False
        self._object_store: Any = None  # set by the openers: admin and WAL reads share it
        self.checkpoint_id: str | None = None  # the checkpoint a pinned reader reads
        self.poll_interval = 1.0  # a reader's manifest poll interval, seconds

    # --- change feed and checkpoints -------------------------------------------------------------

    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: feed.ErrorPolicy = "raise",
    ) -> AsyncGenerator[feed.Change, None]:
        """Every write still in the WAL after `since`, as typed Changes in sequence order.

        `since`: a Change's (or a Checkpoint's) cursor; None starts at the oldest WAL file
        the garbage collector has kept. Resuming from a cursor yields exactly the changes
        after it, across writer restarts and crashes. A cursor whose WAL file was already
        collected raises ChangeCursorExpiredError; a malformed one ChangeCursorError.
        `follow`: keep waiting for new changes (polling every `poll_interval` seconds) until
        the consumer stops iterating or the task is cancelled; otherwise stop at the WAL's
        end as it was when the call started. `limit`: stop after that many changes.
        The feed only reads: it works on a writer and on a reader alike. `on_error`: a change
        that does not decode raises ChangeDecodeError (carrying the last delivered cursor and
        the bad change's), is skipped ("skip") or comes with raw bytes ("raw").
        """
        return feed.flatten(
            self.change_batches(
                since, follow=follow, limit=limit, poll_interval=poll_interval, on_error=on_error
            )
        )

    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: feed.ErrorPolicy = "raise",
    ) -> AsyncGenerator[list[feed.Change], None]:
        """Store.changes a WAL file at a time: lists of Changes (never empty)."""
        self.check_open()
        side, identity = sidecar.of(self._object_store)
        return feed.change_batches(
            feed.wal_reader(self.location.db_path, self._object_store),
            feed.admin(self.location.db_path, self._object_store, self.where),
            self.schema,
            self.values,
            since,
            follow=follow,
            limit=limit,
            poll_interval=poll_interval,
            where=self.where,
            identity=identity,
            list_wal=lambda: sidecar.wal_ids(self.location, side),
            on_error=on_error,
        )

    @staticmethod
    async def clone(
        source: str | os.PathLike[str],
        destination: str | os.PathLike[str],
        *,
        checkpoint: str | None = None,
        source_options: Mapping[str, str] | None = None,
        destination_options: Mapping[str, str] | None = None,
        **options: Any,
    ) -> CloneResult:
        """Copy `source` (at `checkpoint`, or its latest state) into a new, independent
        database at `destination` (see opendata_kv.store.ops.clone for `replace`, `timeout`,
        `progress`, `batch_size`); returns a CloneResult."""
        from opendata_kv.store.ops.clone import clone

        return await clone(
            source,
            destination,
            checkpoint=checkpoint,
            source_options=source_options,
            destination_options=destination_options,
            **options,
        )

    def _on_gone(self, where: str) -> Callable[[int], Awaitable[None]] | None:
        """A reader that follows the latest state pins nothing: when the writer's garbage
        collector deleted an SST a scan was reading, wait for the reader's next manifest poll
        and let the scan re-seek after its cursor; after three tries, SnapshotGoneError."""
        if not self.readonly or self.checkpoint_id is not None:
            return None
        poll = self.poll_interval

        async def gone(attempt: int) -> None:
            if attempt > 3:
                raise SnapshotGoneError(
                    f"{where}: the writer's garbage collector deleted SSTs this scan was "
                    f"reading, and {attempt - 1} re-seeks at newer states found more gone. This "
                    "reader follows the latest state and pins nothing: for long scans of a "
                    "busy store read a checkpoint (Store.open_reader(url, schema, "
                    "checkpoint=ID), or --checkpoint ID on the command line)"
                )
            if driver.syncing():  # a sync caller's scan: no event loop to sleep in
                time.sleep(poll)
            else:
                await asyncio.sleep(poll)

        return gone

    def _checkpoints(self) -> Checkpoints:
        self.check_open()
        return Checkpoints(self.location.db_path, self._object_store, self.where)

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    def check_open(self) -> None:
        """StoreClosedError once the store is closed: the one closed-store check (writes,
        snapshots, the change feed, checkpoints and the sync face's objects call it)."""
        if self._closed:
            raise StoreClosedError(f"{self.where} is closed")

    async def checkpoint(
        self, name: str | None = None, lifetime: TtlArg = None
    ) -> Checkpoint:
        """Pin the current state as a checkpoint holding every write acknowledged so far.

        On the writer the memtable is flushed to an SST first. On a reader nothing can be
        flushed: if the WAL holds writes not yet in an SST, CheckpointError says so and no
        checkpoint is kept. `lifetime` (seconds or a timedelta): the checkpoint expires after
        it; None keeps it until deleted. Returns its id, name, times and feed cursor.
        """
        writer = None if self.readonly else self._writable()
        return await self._checkpoints().create(writer=writer, name=name, lifetime=lifetime)

    async def checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        """The store's checkpoints (only those named `name` if given), oldest first."""
        return await self._checkpoints().list(name)

    async def refresh_checkpoint(
        self, checkpoint_id: str, lifetime: TtlArg
    ) -> Checkpoint:
        """Give a checkpoint a new lifetime from now (None: keep it until deleted)."""
        return await self._checkpoints().refresh(require_id(checkpoint_id), lifetime)

    async def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """Delete a checkpoint (id or unique name) and return what was deleted
        (CheckpointError if the store has none with this id)."""
        return await self._checkpoints().delete(require_id(checkpoint_id))

    async def close(self) -> None:
        """Shut the database down (flushing what the writer buffered). Idempotent.

        A database slatedb has already stopped (fenced, or after an object-store failure an
        earlier call reported) closes quietly: there is nothing left to flush, and raising
        again from `async with` would only hide the error that stopped it.
        """
        if self._closed:
            return
        self._closed = True
        stopped = self._stopped()
        try:
            await calls.method(self._source, "shutdown")
        except FOREIGN as exc:
            if not (stopped or isinstance(exc, Error.Closed)):
                raise translate(exc, f"close of {self.where}") from exc

    def _stopped(self) -> bool:
        """True when slatedb has closed the database underneath us (fenced, failed, ...)."""
        try:
            return self._source.status().close_reason is not None
        except Exception:
            return False

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        kind = "reader" if self.readonly else "writer"
        return f"<{type(self).__name__} {kind} {self.where} {self.schema!r}>"

    def _writable(self) -> Any:
        """The slatedb Db to write through (ReadOnlyError on a reader, StoreClosedError once
        closed)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.where} is open read-only; writes need Store.open()")
        self.check_open()
        return self._source


class Store(StoreReader):
    """A typed SlateDB database. Open with `Store.open(...)` (writer) or
    `Store.open_reader(...)` (a StoreReader: read-only; never fences the writer)."""

    # --- opening --------------------------------------------------------------------------------

    @staticmethod
    def open(
        url: str | os.PathLike[str],
        schema: SchemaArg,
        *,
        values: Values | None = None,
        create_if_missing: bool = True,
        error_if_exists: bool = False,
        timeout: float | None = None,
        object_store_max_retries: int | None = None,
        settings: Mapping[str, Any] | None = None,
        object_store_options: Mapping[str, str] | None = None,
        check_expiry: bool = True,
        cache_bytes: int | None = None,
    ) -> Opening[Store]:
        """Open the database as its writer: `async with Store.open(...) as s` or
        `s = await Store.open(...)`. A second writer on the same database fences this one.

        `schema`: a Schema, a RecordType, RecordTypes, or a Values (schema and codecs);
            anything else is a SchemaError here. `values`: the codecs, built for that schema.
        `create_if_missing` (default True, as SlateDB, LMDB, RocksDB's Python bindings and
            sqlite3 do): False refuses a location without a database (StoreNotFoundError), so a
            mistyped path fails instead of starting an empty store. `error_if_exists`: refuse
            a location that holds one (StoreExistsError). memory:// always starts empty.
        `timeout`: seconds the open may take before StoreUnavailableError; None (default)
            waits as long as slatedb retries.
        `object_store_max_retries`: slatedb retries failed object-store calls forever by
            default, so a writer rides out an outage but opening a missing bucket or a stopped
            endpoint waits forever; a number makes such calls fail (StoreUnavailableError)
            after that many retries, for the open and for the writer's background flushes.
        `settings`: slatedb Settings keys (e.g. {"flush_interval": "50ms"}).
        `object_store_options`: object_store config entries for s3:// (see location.py),
            applied over the AWS_* environment variables.
        `check_expiry`: hide records whose TTL has passed (reads fetch each row's expiry);
            False skips that check for stores that never write a TTL (put(ttl=) then fails).
        `cache_bytes`: size of the in-memory SST block and metadata cache; None (default)
            keeps slatedb's default cache, 0 disables it. Scans with fill_cache=False leave
            it alone, so a long scan does not evict what point reads rely on.
        """
        cache = check_cache_bytes(cache_bytes)
        merged = dict(settings or {})
        retries = check_retries(object_store_max_retries)
        if retries is not None:
            merged["object_store_max_retries"] = retries
        return Opening(
            _open_writer(
                url,
                schema,
                values,
                merged,
                object_store_options,
                check_expiry,
                bool(create_if_missing),
                bool(error_if_exists),
                check_seconds(timeout, "timeout"),
                cache,
            )
        )

    @staticmethod
    def open_reader(
        url: str | os.PathLike[str],
        schema: SchemaArg,
        *,
        values: Values | None = None,
        timeout: float | None = READER_TIMEOUT,
        object_store_max_retries: int | None = None,
        poll_interval: float = 1.0,
        object_store_options: Mapping[str, str] | None = None,
        check_expiry: bool = True,
        checkpoint: str | None = None,
        cache_bytes: int | None = None,
    ) -> Opening[StoreReader]:
        """Open read-only through DbReaderBuilder: sees flushed data (refreshed every
        `poll_interval` seconds), never fences the writer, creates and writes nothing (no
        database there: StoreNotFoundError).

        `timeout` (default 30 s): the open gives up with StoreUnavailableError naming the
        location, bucket and endpoint; None waits as long as slatedb retries. Other options
        as for Store.open.

        Without `checkpoint` it follows the latest state (slatedb's FOLLOW_LATEST mode: the
        default mode would write manifests). It pins nothing, so the writer's garbage
        collector may delete an SST a long scan still reads (SnapshotGoneError): scan a
        checkpoint for long reads of a busy store. With `checkpoint=ID` it reads that
        checkpoint's pinned state, which never changes (a unique checkpoint name works too).
        `cache_bytes`: as for Store.open.
        """
        cache = check_cache_bytes(cache_bytes)
        if checkpoint is not None:
            require_id(checkpoint)
        return Opening(
            _open_reader(
                url,
                schema,
                values,
                check_seconds(poll_interval, "poll_interval") or 1.0,
                object_store_options,
                check_retries(object_store_max_retries),
                check_expiry,
                check_seconds(timeout, "timeout"),
                checkpoint,
                cache,
            )
        )

    # --- writes ---------------------------------------------------------------------------------

    @overload
    async def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    async def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    async def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Store `value` under the key: `put(record, fields, value)` (record: a RecordType of
        the schema or a record name) or `put(key_obj, value)`; a missing value is an
        ArgumentTypeError. `ttl`: seconds (or a timedelta) until the record expires.

        Returns once SlateDB accepted the write; it is durable after `flush()`.
        """
        db = self._writable()
        key, data, options = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        try:
            if options is None:
                await calls.put(db, key, data)
            else:
                await calls.method(db, "put_with_options", key, data, options, _WRITE_OPTIONS)
        except FOREIGN as exc:
            raise translate(exc, f"put on {self.where}") from exc

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key (no error when there is none)."""
        db = self._writable()
        _, key = key_bytes(self.schema, target, fields)
        try:
            await calls.delete(db, key)
        except FOREIGN as exc:
            raise translate(exc, f"delete on {self.where}") from exc

    async def delete_range(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        max_keys: int = MAX_KEYS,
        durable: bool = False,
    ) -> int:
        """Delete every record a scan with the same arguments would see (every version of a
        record name; or, with no record, every key under `prefix` / in [start, end)), in one
        atomic batch; returns how many keys were deleted.

        slatedb has no range tombstone: the keys are read first, then one tombstone per key is
        written. A range of more than `max_keys` keys is refused before anything is written;
        records written into the range after the keys were read are not deleted.
        """
        self._writable()
        keys = await self._range_keys(
            record, leading, partial, version, prefix, start, end, max_keys
        )
        batch = Batch(self)
        for key in keys:
            batch.delete_raw(key)
        await self.write(batch, durable=durable)
        return len(keys)

    async def _range_keys(
        self,
        record: RecordType | str | None,
        leading: tuple[Any, ...],
        partial: Any,
        version: int | None,
        prefix: bytes | None,
        start: Bound,
        end: Bound,
        max_keys: int,
    ) -> list[bytes]:
        """The keys delete_range removes (see there)."""
        max_keys = check_max_keys(max_keys)
        if record is None and not prefix and start is None and end is None:
            raise InvalidArgumentError(
                "delete_range needs a record, a prefix or start/end bounds (it never deletes "
                "every key of the database by default)",
                field="record",
            )
        spans = self._bounded_spans(
            self._spans(record, leading, partial, version, prefix), start, end
        )
        return await keys_in(self._writable(), spans, max_keys, f"delete_range on {self.where}")

    async def put_raw(self, key: bytes, data: bytes) -> None:
        """Store raw bytes under a raw key (tools and migrations)."""
        check_stored_size(data)
        try:
            await calls.put(self._writable(), key, data)
        except FOREIGN as exc:
            raise translate(exc, f"put on {self.where}") from exc

    async def flush(self) -> None:
        """Make every write accepted so far durable in the object store.

        Explicitly flushing the WAL takes ~1 ms on a local directory, where awaiting a write's
        durability waits for the next background flush tick (~100 ms by default).
        """
        try:
            await calls.method(self._writable(), "flush")
        except FOREIGN as exc:
            raise translate(exc, f"flush of {self.where}") from exc

    async def put_many(
        self,
        records: Iterable[tuple[Any, ...]] | AsyncIterable[tuple[Any, ...]],
        *,
        batch_size: int = 1000,
        durable: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Put a stream of records, `batch_size` per atomic batch; returns how many were put.

        Each item is `(record_type, fields, value)` or `(key_obj, value)`. A generator (sync or
        async) is consumed lazily, so memory holds one batch, never the whole stream. Batches
        are atomic one by one, not as a whole; `durable=True` flushes once at the end.
        `progress(total_so_far)` is called after each batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._writable()
        total = 0
        batch = Batch(self)
        put = batch.put

        async def send() -> None:
            nonlocal batch, put, total
            total += len(batch)
            await self.write(batch)
            batch = Batch(self)
            put = batch.put
            if progress is not None:
                progress(total)

        if isinstance(records, AsyncIterable):
            async for item in records:
                put(*item)
                if len(batch) >= batch_size:
                    await send()
        else:
            for item in records:
                put(*item)
                if len(batch) >= batch_size:
                    await send()
        if batch:
            await send()
        if durable:
            await self.flush()
        return total

    def batch(self, *, durable: bool = False) -> _BatchContext:
        """`async with store.batch() as b: b.put(...)`: one atomic write on exit (none if empty,
        none if the block raised). `durable=True` flushes after the write."""
        return _BatchContext(self, durable)

    async def write(self, batch: Batch, *, durable: bool = False) -> None:
        """Apply a Batch atomically (an empty batch sends nothing)."""
        db = self._writable()
        if batch:
            try:
                await calls.write(db, batch.write_batch())
            except FOREIGN as exc:
                raise translate(exc, f"batch write on {self.where}") from exc
        if durable:
            await self.flush()

    @asynccontextmanager
    async def transaction(
        self, isolation: str = "serializable", *, durable: bool = False
    ) -> AsyncIterator[Transaction]:
        """`async with store.transaction() as tx:` reads see one snapshot; writes commit on exit,
        or roll back if the block raises. A conflicting concurrent write makes the commit raise
        TransactionConflictError (retry the block). isolation: "serializable" or "snapshot"."""
        db = self._writable()
        level = _ISOLATION.get(isolation)
        if level is None:
            raise InvalidArgumentError(
                f"isolation must be one of {sorted(_ISOLATION)}, got {isolation!r}",
                field="isolation",
                value=isolation,
            )
        txn = await call(calls.method(db, "begin", level), f"begin transaction on {self.where}")
        tx = Transaction(txn, self)
        try:
            yield tx
        except BaseException:
            await tx.rollback()
            raise
        await tx.commit()
        if durable:
            await self.flush()

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Snapshot]:
        """`async with store.snapshot() as snap:` a consistent point-in-time read view."""
        self.check_open()
        if self.readonly:
            raise ReadOnlyError(f"{self.where}: snapshots need the writer (Store.open)")
        snap = await call(calls.method(self._source, "snapshot"), f"snapshot of {self.where}")
        yield Snapshot(snap, self)

    async def migrate(
        self,
        name: str,
        *,
        batch_size: int = 500,
        progress: Callable[[int], None] | None = None,
        durable: bool = True,
    ) -> int:
        """Rewrite every record of `name` stored under an older key version as the newest
        version (key and value upgraded, remaining TTL kept), in atomic batches of
        `batch_size` old records: each batch puts the new records and deletes the old ones,
        so a record is never lost or doubled, whenever the migration stops.
        Returns how many records moved; `progress(total_so_far)` is called after each batch.

        Each older version is walked with one iterator per pass (never rescanning the
        tombstones of records already moved); passes repeat until one finds nothing, which
        also catches old-version records written by others during the migration.
        """
        check_count(batch_size, "batch_size", 1)
        db = self._writable()
        current = self.schema.get(name)
        moved = 0
        for old in self.schema.versions(name):
            if old is current:
                continue
            while True:
                count = await self._migrate_pass(
                    db, old, current, batch_size, moved, progress, durable
                )
                if not count:
                    break
                moved += count
        return moved

    async def _migrate_pass(
        self,
        db: Any,
        old: RecordType,
        current: RecordType,
        batch_size: int,
        before: int,
        progress: Callable[[int], None] | None,
        durable: bool,
    ) -> int:
        """One walk over `old`'s key range; the number of live records moved."""
        where = f"migrate of {old.name} v{old.version} on {self.where}"
        lo, hi = old.range()
        key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
        # The iterator reads at the sequence number of its creation: the batches this pass
        # writes (new records, tombstones of old ones) do not show up in it.
        iterator = await call(
            calls.method(db, "scan_with_options", key_range, scan_options(False, False)), where
        )
        values = self.values
        moved = 0
        now = time.time_ns() // 1_000_000
        while True:
            try:
                keys, data, expires = await calls.next_columns(iterator, batch_size)
            except FOREIGN as exc:
                raise translate(exc, where) from exc
            if not keys:
                return moved
            batch = Batch(self)
            live = 0
            for key, stored, expire in zip(keys, data, expires, strict=True):
                if expire is not None and expire <= now:
                    batch.delete_raw(key)  # expired: logically gone, nothing to move
                    continue
                value = values.decode(old, key, stored)  # upgraded to today's model
                new_key = values.upgraded_key(old.decode(key))
                batch.put_raw(new_key, values.encode(current, value, new_key), expire_at=expire)
                batch.delete_raw(key)
                live += 1
            await self.write(batch, durable=durable)
            if live:
                moved += live
                if progress is not None:
                    progress(before + moved)


class Opening(Generic[S]):
    """What Store.open (an `Opening[Store]`) and Store.open_reader (an `Opening[StoreReader]`)
    return: await it, or use it as an async context manager."""

    def __init__(self, opening: Awaitable[S]) -> None:
        self._opening = opening
        self._store: S | None = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._opening.__await__()

    async def __aenter__(self) -> S:
        self._store = await self._opening
        return self._store

    async def __aexit__(self, *exc_info: object) -> None:
        if self._store is not None:
            await self._store.close()


async def _open_writer(
    url: str | os.PathLike[str],
    schema_arg: SchemaArg,
    values: Values | None,
    settings: Mapping[str, Any],
    object_store_options: Mapping[str, str] | None,
    check_expiry: bool,
    create_if_missing: bool,
    error_if_exists: bool,
    timeout: float | None,
    cache_bytes: int | None = None,
) -> Store:
    schema, values = as_schema(schema_arg, values)
    location = parse_location(url)
    db, object_store = await bounded(
        open_db(
            location,
            object_store_options,
            settings,
            create_if_missing,
            error_if_exists,
            cache_bytes,
        ),
        timeout,
        location,
        object_store_options,
        "open",
    )
    store = Store(db, location, schema, values, readonly=False, check_expiry=check_expiry)
    store._object_store = object_store
    return store


async def _open_reader(
    url: str | os.PathLike[str],
    schema_arg: SchemaArg,
    values: Values | None,
    poll_interval: float,
    object_store_options: Mapping[str, str] | None,
    object_store_max_retries: int | None,
    check_expiry: bool,
    timeout: float | None,
    checkpoint: str | None,
    cache_bytes: int | None = None,
) -> StoreReader:
    schema, values = as_schema(schema_arg, values)
    location = parse_location(url)
    reader, object_store, checkpoint_id = await bounded(
        open_reader_db(
            location,
            object_store_options,
            poll_interval,
            object_store_max_retries,
            checkpoint,
            cache_bytes,
        ),
        timeout,
        location,
        object_store_options,
        "open reader on",
    )
    store = StoreReader(
        reader, location, schema, values, readonly=True, check_expiry=check_expiry
    )
    store._object_store = object_store
    store.checkpoint_id = checkpoint_id
    store.poll_interval = poll_interval
    return store


# --- batches, transactions, snapshots ------------------------------------------------------------


class Batch:
    """Writes collected in memory and applied atomically by Store.write (or on block exit)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._batch: Any = None
        self._count = 0
        self._written = False

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def _wb(self) -> Any:
        if self._written:
            raise StoreError(
                f"this batch was already written to {self._store.where}; "
                "a Batch is applied once: start a new one"
            )
        if self._batch is None:
            self._batch = WriteBatch()
        return self._batch

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put (addressed as for Store.put)."""
        store = self._store
        key, data, options = encode_put(
            store.schema, store.values, store.check_expiry, target, fields, value, ttl
        )
        try:
            if options is None:
                calls.batch_put(self._wb(), key, data)
            else:
                self._wb().put_with_options(key, data, options)  # a plain call: no future
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self._store.where}") from exc
        self._count += 1

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Queue a typed delete."""
        _, key = key_bytes(self._store.schema, target, fields)
        self.delete_raw(key)

    async def delete_range(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        max_keys: int = MAX_KEYS,
    ) -> int:
        """Queue a tombstone for every key Store.delete_range would delete (read now, deleted
        atomically with the rest of the batch); returns how many were queued."""
        keys = await self._store._range_keys(
            record, leading, partial, version, prefix, start, end, max_keys
        )
        for key in keys:
            self.delete_raw(key)
        return len(keys)

    def put_raw(self, key: bytes, data: bytes, *, expire_at: int | None = None) -> None:
        """Queue raw bytes under a raw key; `expire_at`: absolute expiry, Unix ms."""
        check_stored_size(data)
        try:
            if expire_at is None:
                calls.batch_put(self._wb(), key, data)
            else:
                options = PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(expire_at))
                self._wb().put_with_options(key, data, options)  # a plain call: no future
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self._store.where}") from exc
        self._count += 1

    def delete_raw(self, key: bytes) -> None:
        try:
            self._wb().delete(key)
        except FOREIGN as exc:
            raise translate(exc, f"batch delete on {self._store.where}") from exc
        self._count += 1

    def write_batch(self) -> Any:
        """The slatedb WriteBatch (only built once something was queued); handing it out for
        a write consumes it (slatedb takes ownership), so the Batch cannot be written twice."""
        batch = self._wb()
        self._written = True
        return batch


@dataclass
class _BatchContext:
    store: Store
    durable: bool
    batch: Batch | None = None

    async def __aenter__(self) -> Batch:
        self.store._writable()
        self.batch = Batch(self.store)
        return self.batch

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None and self.batch is not None:
            await self.store.write(self.batch, durable=self.durable)


class Transaction(ReadView):
    """Reads and writes inside one SlateDB transaction (see Store.transaction)."""

    def __init__(self, txn: Any, store: Store) -> None:
        self._view_of(txn, store, "transaction on")
        self._done = False

    @overload
    async def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    async def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    async def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put in the transaction (visible to its own reads at once)."""
        key, data, options = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        if options is None:
            await call(calls.method(self._source, "put", key, data), f"put in {self.where}")
        else:
            await call(
                calls.method(self._source, "put_with_options", key, data, options),
                f"put in {self.where}",
            )

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key when the transaction commits."""
        _, key = key_bytes(self.schema, target, fields)
        await call(calls.method(self._source, "delete", key), f"delete in {self.where}")

    async def commit(self) -> None:
        if not self._done:
            self._done = True
            await call(calls.method(self._source, "commit"), f"commit of {self.where}")

    async def rollback(self) -> None:
        if not self._done:
            self._done = True
            await call(calls.method(self._source, "rollback"), f"rollback of {self.where}")


class Snapshot(ReadView):
    """A consistent, read-only, point-in-time view (see Store.snapshot)."""

    def __init__(self, snap: Any, store: Store) -> None:
        self._view_of(snap, store, "snapshot of")
