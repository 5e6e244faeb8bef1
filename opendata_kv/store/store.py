"""Store: an async, typed view of one SlateDB database (writer or read-only reader).

    async with Store.open("./data", schema) as store:
        await store.put(post, ("did:plc:x", "3k2a"), {"text": "hi"})
        await store.flush()                      # durable: survives a crash from here on
        async for record in store.scan("post", "did:plc:x"):
            ...
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, overload

from slatedb.uniffi import (
    DbBuilder,
    DbReaderBuilder,
    Error,
    IsolationLevel,
    KeyRange,
    PutOptions,
    ReaderOptions,
    Settings,
    Ttl,
    WriteBatch,
    WriteOptions,
)

from opendata_kv.errors import ReadOnlyError, StoreClosedError, StoreDataError, StoreError
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store import ffi_patch
from opendata_kv.store.failures import FOREIGN, call, translate
from opendata_kv.store.integrity import check_open, opening_error
from opendata_kv.store.location import Location, parse_location
from opendata_kv.store.scan import scan_options
from opendata_kv.store.views import (
    MISSING,
    Fields,
    ReadView,
    Target,
    TtlArg,
    encode_put,
    key_bytes,
)
from opendata_kv.values import Values

_WRITE_OPTIONS = WriteOptions()
_ISOLATION = {
    "snapshot": IsolationLevel.SNAPSHOT,
    "serializable": IsolationLevel.SERIALIZABLE_SNAPSHOT,
}


def _retries(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"object_store_max_retries must be an int >= 0, got {value!r}")
    return value


def _settings(settings: Mapping[str, Any] | None) -> Any:
    """slatedb Settings: defaults, overridden key by key (values as JSON-able Python)."""
    result = Settings.default()
    for name, value in (settings or {}).items():
        try:
            result.set(name, json.dumps(value))
        except FOREIGN as exc:
            raise translate(exc, f"setting {name}={value!r}") from exc
    return result


class Store(ReadView):
    """A typed SlateDB database. Open with `Store.open(...)` (writer) or
    `Store.open_reader(...)` (read-only; never fences the writer)."""

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

    # --- opening --------------------------------------------------------------------------------

    @staticmethod
    def open(
        url: str | os.PathLike[str],
        schema: Schema,
        *,
        values: Values | None = None,
        settings: Mapping[str, Any] | None = None,
        object_store_options: Mapping[str, str] | None = None,
        object_store_max_retries: int | None = None,
        check_expiry: bool = True,
        speedup: bool = True,
    ) -> _Opening:
        """Open (or create) the database as its writer: `async with Store.open(...) as s` or
        `s = await Store.open(...)`. A second writer on the same database fences this one.

        `settings`: slatedb Settings keys (e.g. {"flush_interval": "50ms"}).
        `object_store_options`: object_store config entries for s3:// (see location.py),
            applied over the AWS_* environment variables.
        `object_store_max_retries`: slatedb retries failed object-store calls forever by
            default, so opening a missing bucket or an endpoint that is down waits forever;
            a number makes such calls fail (StoreUnavailableError) after that many retries.
            The same limit then applies to the writer's background flushes.
        `check_expiry`: hide records whose TTL has passed (reads fetch each row's expiry);
            False skips that check for stores that never write a TTL (put(ttl=) then fails).
        `speedup`: install the binding byte-copy speed-up (see ffi_patch).
        """
        merged = dict(settings or {})
        if object_store_max_retries is not None:
            merged["object_store_max_retries"] = _retries(object_store_max_retries)
        return _Opening(
            _open_writer(
                url, schema, values, merged, object_store_options, check_expiry, speedup
            )
        )

    @staticmethod
    def open_reader(
        url: str | os.PathLike[str],
        schema: Schema,
        *,
        values: Values | None = None,
        poll_interval: float = 1.0,
        object_store_options: Mapping[str, str] | None = None,
        object_store_max_retries: int | None = None,
        check_expiry: bool = True,
        speedup: bool = True,
    ) -> _Opening:
        """Open read-only through DbReaderBuilder: sees flushed data (refreshed every
        `poll_interval` seconds) and never fences the writer. Options as for Store.open."""
        retries = None if object_store_max_retries is None else _retries(object_store_max_retries)
        return _Opening(
            _open_reader(
                url,
                schema,
                values,
                poll_interval,
                object_store_options,
                retries,
                check_expiry,
                speedup,
            )
        )

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
            await self._source.shutdown()
        except FOREIGN as exc:
            if not (stopped or isinstance(exc, Error.Closed)):
                raise translate(exc, f"close of {self.where}") from exc

    def _stopped(self) -> bool:
        """True when slatedb has closed the database underneath us (fenced, failed, ...)."""
        try:
            return self._source.status().close_reason is not None
        except Exception:
            return False

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        kind = "reader" if self.readonly else "writer"
        return f"<Store {kind} {self.where} {self.schema!r}>"

    # --- writes ---------------------------------------------------------------------------------

    def _writable(self) -> Any:
        if self.readonly:
            raise ReadOnlyError(f"{self.where} is open read-only; writes need Store.open()")
        if self._closed:
            raise StoreClosedError(f"{self.where} is closed")
        return self._source

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
                await db.put(key, data)
            else:
                await db.put_with_options(key, data, options, _WRITE_OPTIONS)
        except FOREIGN as exc:
            raise translate(exc, f"put on {self.where}") from exc

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key (no error when there is none)."""
        db = self._writable()
        _, key = key_bytes(self.schema, target, fields)
        try:
            await db.delete(key)
        except FOREIGN as exc:
            raise translate(exc, f"delete on {self.where}") from exc

    async def put_raw(self, key: bytes, data: bytes) -> None:
        """Store raw bytes under a raw key (tools and migrations)."""
        try:
            await self._writable().put(key, data)
        except FOREIGN as exc:
            raise translate(exc, f"put on {self.where}") from exc

    async def flush(self) -> None:
        """Make every write accepted so far durable in the object store.

        Explicitly flushing the WAL takes ~1 ms on a local directory, where awaiting a write's
        durability waits for the next background flush tick (~100 ms by default).
        """
        try:
            await self._writable().flush()
        except FOREIGN as exc:
            raise translate(exc, f"flush of {self.where}") from exc

    def batch(self, *, durable: bool = False) -> _BatchContext:
        """`async with store.batch() as b: b.put(...)`: one atomic write on exit (none if empty,
        none if the block raised). `durable=True` flushes after the write."""
        return _BatchContext(self, durable)

    async def write(self, batch: Batch, *, durable: bool = False) -> None:
        """Apply a Batch atomically (an empty batch sends nothing)."""
        db = self._writable()
        if batch:
            try:
                await db.write(batch.write_batch())
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
            raise ValueError(f"isolation must be one of {sorted(_ISOLATION)}, got {isolation!r}")
        txn = await call(db.begin(level), f"begin transaction on {self.where}")
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
        if self._closed:
            raise StoreClosedError(f"{self.where} is closed")
        if self.readonly:
            raise ReadOnlyError(f"{self.where}: snapshots need the writer (Store.open)")
        snap = await call(self._source.snapshot(), f"snapshot of {self.where}")
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
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
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
        iterator = await call(db.scan_with_options(key_range, scan_options(False)), where)
        values = self.values
        moved = 0
        now = time.time_ns() // 1_000_000
        while True:
            try:
                rows = await iterator.next_batch(batch_size)
            except FOREIGN as exc:
                raise translate(exc, where) from exc
            if not rows:
                return moved
            batch = Batch(self)
            live = 0
            for kv in rows:
                key, expire = kv.key, kv.expire_ts
                if expire is not None and expire <= now:
                    batch.delete_raw(key)  # expired: logically gone, nothing to move
                    continue
                value = values.decode(old, key, kv.value)  # upgraded to today's model
                new_key = values.upgraded_key(old.decode(key))
                batch.put_raw(new_key, values.encode(current, value, new_key), expire_at=expire)
                batch.delete_raw(key)
                live += 1
            await self.write(batch, durable=durable)
            if live:
                moved += live
                if progress is not None:
                    progress(before + moved)


class _Opening:
    """What Store.open returns: await it, or use it as an async context manager."""

    def __init__(self, opening: Awaitable[Store]) -> None:
        self._opening = opening
        self._store: Store | None = None

    def __await__(self) -> Generator[Any, None, Store]:
        return self._opening.__await__()

    async def __aenter__(self) -> Store:
        self._store = await self._opening
        return self._store

    async def __aexit__(self, *exc_info: object) -> None:
        if self._store is not None:
            await self._store.close()


async def _open_writer(
    url: str | os.PathLike[str],
    schema: Schema,
    values: Values | None,
    settings: Mapping[str, Any] | None,
    object_store_options: Mapping[str, str] | None,
    check_expiry: bool,
    speedup: bool,
) -> Store:
    if speedup:
        ffi_patch.install()
    location = parse_location(url)
    object_store = location.object_store(object_store_options, create=True)
    await check_open(location, object_store, f"open {location}")
    builder = DbBuilder(location.db_path, object_store)
    builder.with_settings(_settings(settings))
    try:
        db = await builder.build()
    except FOREIGN as exc:
        raise await opening_error(exc, location, object_store, f"open {location}") from exc
    return Store(
        db, location, schema, values or Values(schema), readonly=False, check_expiry=check_expiry
    )


async def _open_reader(
    url: str | os.PathLike[str],
    schema: Schema,
    values: Values | None,
    poll_interval: float,
    object_store_options: Mapping[str, str] | None,
    object_store_max_retries: int | None,
    check_expiry: bool,
    speedup: bool,
) -> Store:
    if speedup:
        ffi_patch.install()
    location = parse_location(url)
    object_store = location.object_store(object_store_options)
    await check_open(location, object_store, f"open reader on {location}")
    builder = DbReaderBuilder(location.db_path, object_store)
    builder.with_options(
        ReaderOptions(
            manifest_poll_interval_ms=max(1, round(poll_interval * 1000)),
            checkpoint_lifetime_ms=max(1000, round(poll_interval * 10_000)),
            max_memtable_bytes=64 << 20,
            skip_wal_replay=False,
            object_store_max_retries=object_store_max_retries,
        )
    )
    try:
        reader = await builder.build()
    except FOREIGN as exc:
        message = getattr(exc, "message", None) or str(exc)
        if isinstance(exc, Error.Data) and "failed to find latest" in message:
            # what a reader gets where no writer ever created the database
            raise StoreDataError(
                f"open reader on {location}: there is no database here (no manifest); "
                f"a writer must create it first with Store.open [{message}]"
            ) from exc
        where = f"open reader on {location}"
        raise await opening_error(exc, location, object_store, where) from exc
    return Store(
        reader, location, schema, values or Values(schema), readonly=True, check_expiry=check_expiry
    )


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
                self._wb().put(key, data)
            else:
                self._wb().put_with_options(key, data, options)
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self._store.where}") from exc
        self._count += 1

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Queue a typed delete."""
        _, key = key_bytes(self._store.schema, target, fields)
        self.delete_raw(key)

    def put_raw(self, key: bytes, data: bytes, *, expire_at: int | None = None) -> None:
        """Queue raw bytes under a raw key; `expire_at`: absolute expiry, Unix ms."""
        try:
            if expire_at is None:
                self._wb().put(key, data)
            else:
                options = PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(expire_at))
                self._wb().put_with_options(key, data, options)
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
            await call(self._source.put(key, data), f"put in {self.where}")
        else:
            await call(self._source.put_with_options(key, data, options), f"put in {self.where}")

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key when the transaction commits."""
        _, key = key_bytes(self.schema, target, fields)
        await call(self._source.delete(key), f"delete in {self.where}")

    async def commit(self) -> None:
        if not self._done:
            self._done = True
            await call(self._source.commit(), f"commit of {self.where}")

    async def rollback(self) -> None:
        if not self._done:
            self._done = True
            await call(self._source.rollback(), f"rollback of {self.where}")


class Snapshot(ReadView):
    """A consistent, read-only, point-in-time view (see Store.snapshot)."""

    def __init__(self, snap: Any, store: Store) -> None:
        self._view_of(snap, store, "snapshot of")
