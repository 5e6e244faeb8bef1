"""Store: the writer of one SlateDB database, a StoreReader that also writes: typed puts
and deletes, batches, transactions, snapshots, bulk loads and migrations.

    async with Store.open("./data", schema) as store:
        await store.put(post, ("did:plc:x", "3k2a"), {"text": "hi"})
        await store.flush()                      # durable: survives a crash from here on
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from opendata_kv.errors import (
    InvalidArgumentError,
    ReadOnlyError,
)
from opendata_kv.keys import Key, RecordType
from opendata_kv.native import calls
from opendata_kv.native.errors import FOREIGN, call, translate
from opendata_kv.native.slatedb import (
    DefaultMetricsRecorder,
    IsolationLevel,
    metric_kind,
)
from opendata_kv.objstore.deadline import READER_TIMEOUT
from opendata_kv.objstore.location import parse_location
from opendata_kv.store import gc_runner, metrics
from opendata_kv.store.absent import AbsentCheck
from opendata_kv.store.batch import Batch, Snapshot, Transaction, fill, native_batch
from opendata_kv.store.deletes import MAX_KEYS, check_max_keys, expired_in, keys_in
from opendata_kv.store.expiry import live_value
from opendata_kv.store.indexes import admin as index_admin
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.known import KnownValues, token_of
from opendata_kv.store.indexes.layout import is_index_key
from opendata_kv.store.indexes.maintain import IndexedOp, IndexRows, index_rows_for
from opendata_kv.store.indexes.old_values import WalkHistory, current_values, old_values
from opendata_kv.store.indexes.registry import IndexSet, WriteLock
from opendata_kv.store.open_options import OpenOptions, open_options
from opendata_kv.store.opening import (
    bounded,
    check_cache_dir,
    durable_seq,
    open_db,
    with_cache_dir,
)
from opendata_kv.store.ops import migrate as _migrate
from opendata_kv.store.ranges import RangeKeywords, ScanRange, scan_range
from opendata_kv.store.reader import Opening, StoreReader, _open_reader
from opendata_kv.store.record_cache import RecordCache
from opendata_kv.store.scan import V
from opendata_kv.store.schema_arg import SchemaArg, as_schema
from opendata_kv.store.views import (
    MISSING,
    Fields,
    Target,
    TtlArg,
    encode_put,
    in_windows,
    key_bytes,
    narrow,
    options_at,
)
from opendata_kv.store.writes import UNDECODED, Delete, Fetch, FetchReads, Op, Put
from opendata_kv.values import Values
from opendata_kv.values.limits import check_stored_size

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from opendata_kv.keys.record import Addressed, Fs

_ISOLATION = {
    "snapshot": IsolationLevel.SNAPSHOT,
    "serializable": IsolationLevel.SERIALIZABLE_SNAPSHOT,
}


def fill_index_rows(native: Any, rows: IndexRows, where: str) -> None:
    """Queue a plan's index rows in the native batch: its ops in order (batch.fill), then its
    plain puts in one call."""
    fill(native, rows.ops, where)
    if rows.keys:
        try:
            calls.batch_put_many(native, rows.keys, rows.data)
        except FOREIGN as exc:
            raise translate(exc, f"batch write on {where}") from exc


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
        options: OpenOptions | None = None,
        create_if_missing: bool = True,
        error_if_exists: bool = False,
        timeout: float | None = None,
        object_store_max_retries: int | None = None,
        settings: Mapping[str, Any] | None = None,
        object_store_options: Mapping[str, str] | None = None,
        check_expiry: bool = True,
        cache_bytes: int | None = None,
        indexes: Iterable[Index] = (),
        rebuild_later: Iterable[str] = (),
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
        `object_store_options`: object_store config entries for s3:// (see objstore/location.py),
            applied over the AWS_* environment variables.
        `check_expiry`: hide records whose TTL has passed (reads fetch each row's expiry);
            False skips that check for stores that never write a TTL (put(ttl=) then fails).
        `cache_bytes`: size of the in-memory SST block and metadata cache; None (default)
            keeps slatedb's default cache, 0 disables it. Scans with fill_cache=False leave
            it alone, so a long scan does not evict what point reads rely on.
        `indexes`: the secondary indexes (opendata_kv.Index) this writer maintains; one not
            yet stored is registered, readable at once on an empty store, else write_only
            until built (build_index). A stored index not declared here is maintained when
            its stored definition names no function (or only the library's own); one that
            needs a function refuses the open (IndexStateError) unless named in
            `rebuild_later`, which marks it write_only (reads refused) until built again.
            See docs/indexes.md.
        `options`: these settings as one OpenOptions value (a keyword given beside it must
            agree with it: InvalidArgumentError otherwise).
        """
        chosen = open_options(
            options,
            "Store.open",
            {
                "create_if_missing": create_if_missing,
                "error_if_exists": error_if_exists,
                "timeout": timeout,
                "object_store_max_retries": object_store_max_retries,
                "settings": settings,
                "object_store_options": object_store_options,
                "check_expiry": check_expiry,
                "cache_bytes": cache_bytes,
                "indexes": indexes,
                "rebuild_later": rebuild_later,
            },
        )
        return Opening(_open_writer(url, schema, values, chosen))

    @staticmethod
    def open_reader(
        url: str | os.PathLike[str],
        schema: SchemaArg,
        *,
        values: Values | None = None,
        options: OpenOptions | None = None,
        timeout: float | None = READER_TIMEOUT,
        object_store_max_retries: int | None = None,
        poll_interval: float = 1.0,
        object_store_options: Mapping[str, str] | None = None,
        check_expiry: bool = True,
        checkpoint: str | None = None,
        cache_bytes: int | None = None,
        indexes: Iterable[Index] = (),
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
        `cache_bytes`, `indexes` (the indexes to read), `options`: as for Store.open.
        """
        chosen = open_options(
            options,
            "Store.open_reader",
            {
                "timeout": timeout,
                "object_store_max_retries": object_store_max_retries,
                "poll_interval": poll_interval,
                "object_store_options": object_store_options,
                "check_expiry": check_expiry,
                "checkpoint": checkpoint,
                "cache_bytes": cache_bytes,
                "indexes": indexes,
            },
        )
        return Opening(_open_reader(url, schema, values, chosen))

    # --- writes ---------------------------------------------------------------------------------

    @overload
    async def put(
        self, target: Key | tuple[Any, ...], value: Any, /, *, ttl: TtlArg = None
    ) -> None: ...

    @overload
    async def put(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        value: V,
        *,
        ttl: TtlArg = None,
    ) -> None: ...

    @overload
    async def put(
        self, target: RecordType[Key, V], fields: Fields, value: V, *, ttl: TtlArg = None
    ) -> None: ...

    @overload
    async def put(self, target: str, fields: Fields, value: Any, *, ttl: TtlArg = None) -> None: ...

    async def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Store `value` under the key: `put(record, fields, value)` (record: a RecordType of
        the schema or a record name) or `put(key_obj, value)`; a missing value is an
        ArgumentTypeError. `ttl`: seconds (or a timedelta) until the record expires.

        Returns once SlateDB accepted the write; it is durable after `flush()`.
        """
        db = self._writable()
        key, data, expire_at, obj = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        indexes = self._indexes
        if indexes is not None:
            record_type = indexes.indexed(key)
            if record_type is not None:  # with its index changes, in one native write
                op = Put(key, data, expire_at, obj, options_at(expire_at))
                await self._write_indexed(db, [op], [(key, record_type, op)])
                return
        fence = self._fence
        cache = self._record_cache
        since = 0 if cache is None else cache.generation
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            if expire_at is None:
                await calls.put(db, key, data)
            else:  # a direct call as put's (no PutOptions object, no generated converters)
                await calls.put_expiring(db, key, data, expire_at)
        except FOREIGN as exc:
            self._uncached()
            raise fence.translated(exc, f"put on {self.where}") from exc
        except BaseException as exc:
            self._uncached()
            fence.uncertain(exc)
            raise
        fence.acked += 1
        fence.wrote = True
        if cache is not None:
            cache.wrote(key, data, expire_at, since)

    @overload
    async def delete(
        self, target: Addressed[Any, Unpack[Fs]], fields: tuple[Unpack[Fs]] | Mapping[str, Any]
    ) -> bool: ...

    @overload
    async def delete(
        self, target: Key | tuple[Any, ...] | str | RecordType[Key, Any], fields: Fields = None
    ) -> bool: ...

    async def delete(self, target: Target, fields: Fields = None) -> bool:
        """Remove the record under the key (no error when there is none); True when a live
        record was there. The key is read once and its tombstone written under the writer's
        lock, the one its other read-then-write paths (indexed writes, creates) hold, so none
        of those slips in between."""
        db = self._writable()
        _, key = key_bytes(self.schema, target, fields)
        return await self._delete_keys(db, [key], "delete") > 0

    @overload
    async def delete_many(
        self,
        target: Addressed[Any, Unpack[Fs]],
        many: Iterable[tuple[Unpack[Fs]] | Mapping[str, Any]],
    ) -> int: ...

    @overload
    async def delete_many(
        self,
        target: str | RecordType[Key, Any] | Iterable[Key | tuple[Any, ...]],
        many: Iterable[Fields] | None = None,
    ) -> int: ...

    async def delete_many(self, target: Any, many: Iterable[Fields] | None = None) -> int:
        """Remove many records in one atomic batch, addressed as get_many addresses them
        (`delete_many(record, [fields, ...])` or `delete_many([key, ...])`); returns how many
        distinct live records were there. Their keys are read together (one point read each,
        in flight at once) and the tombstones written under the writer's lock, as delete."""
        db = self._writable()
        keys = [key for _, key in self._addressed(target, many)]
        return await self._delete_keys(db, keys, "delete_many") if keys else 0

    async def _delete_keys(self, db: Any, keys: list[bytes], what: str) -> int:
        """Tombstones for `keys` (with their index ops) in one native write, the keys read
        first under the write lock; how many distinct keys held a live record."""
        unique = list(dict.fromkeys(keys))
        async with self._write_lock().held(self.where):
            try:
                if len(unique) == 1:
                    rows = [await calls.read_row(self._source, unique[0])]
                else:
                    read = functools.partial(calls.get_rows, self._source)
                    rows = await in_windows(read, unique, self.read_window)
            except FOREIGN as exc:
                raise self._fence.translated(exc, f"{what} on {self.where}") from exc
            live = sum(live_value(row) is not None for row in rows)
            await self._write_ops(db, [Delete(key) for key in unique], locked=True)
        return live

    async def delete_range(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        range: ScanRange | None = None,
        max_keys: int = MAX_KEYS,
        durable: bool = False,
        **bounds: Unpack[RangeKeywords],
    ) -> int:
        """Delete every record a scan with the same range would see (every version of a
        record name; or, with no record, every key in the range of raw keys), in one
        atomic batch; returns how many live records were deleted (keys whose TTL had passed
        get a tombstone too but are not counted).

        slatedb has no range tombstone: the keys are read first, then one tombstone per key is
        written. A range of more than `max_keys` keys is refused before anything is written;
        records written into the range after the keys were read are not deleted.
        """
        db = self._writable()
        found, _ = scan_range(range, leading, bounds, "delete_range")
        keys, live = await self._range_keys(record, found, max_keys)
        if keys:
            await self._write_ops(db, [Delete(key) for key in keys])
        if durable:
            await self.flush()
        return live

    async def purge_expired(
        self, record: RecordType | str, *leading: Any, max_keys: int = MAX_KEYS
    ) -> int:
        """Tombstone the stored rows of `record` (under `leading`) whose TTL has passed: reads
        hide them already, slatedb drops them only at a flush or compaction. Up to `max_keys`
        in one atomic batch, each re-read under the writer's lock first (a key written again
        meanwhile is kept); returns how many were tombstoned."""
        db = self._writable()
        max_keys = check_max_keys(max_keys)
        where = f"purge_expired on {self.where}"
        found, _ = scan_range(None, leading, {}, "purge_expired")
        spans = self._spans(record, found)
        candidates = await expired_in(self._source, spans, max_keys, where)
        if not candidates:
            return 0
        async with self._write_lock().held(self.where):
            try:
                read = functools.partial(calls.get_rows, self._source)
                rows = await in_windows(read, candidates, self.read_window)
            except FOREIGN as exc:
                raise self._fence.translated(exc, where) from exc
            gone = [
                key
                for key, row in zip(candidates, rows, strict=True)
                if row is not None and live_value(row) is None
            ]
            if gone:
                await self._write_ops(db, [Delete(key) for key in gone], locked=True)
        return len(gone)

    async def _range_keys(
        self, record: RecordType | str | None, found: ScanRange, max_keys: int
    ) -> tuple[list[bytes], int]:
        """The keys delete_range removes (see there), and how many of them are live."""
        max_keys = check_max_keys(max_keys)
        if record is None and not found.narrows_keys:
            raise InvalidArgumentError(
                "delete_range needs a record, a prefix or start/end bounds (it never deletes "
                "every key of the database by default)",
                field="record",
            )
        where = f"delete_range on {self.where}"
        spans = self._spans(record, found)
        cursor = self._cursor(spans, found.after, where)
        spans = self._bounded_spans(spans, found.start, found.end)
        if cursor is not None:  # keys in ascending order, strictly after the cursor
            spans = [narrow(span, None, cursor + b"\x00", None) for span in spans]
        return await keys_in(self._writable(), spans, max_keys, where)

    async def put_raw(self, key: bytes, data: bytes) -> None:
        """Store raw bytes under a raw key (tools and migrations); a key of an indexed record
        type is indexed as a typed put would be (its value decoded with its version's codec)."""
        db = self._writable()
        check_stored_size(data)
        found = self.schema.try_record_type_of(key)
        if found is not None:  # a value get would refuse is refused here
            self.values.check_caps(found, data, key)
        indexes = self._indexes
        if indexes is not None:
            if is_index_key(key):  # an index row outside upkeep: the group cache is dropped
                await self._write_ops(db, [Put(key, data, None, UNDECODED, None)])
                return
            record_type = indexes.indexed(key)
            if record_type is not None:  # with its index changes, in one native write
                op = Put(key, data, None, UNDECODED, None)
                await self._write_indexed(db, [op], [(key, record_type, op)])
                return
        fence = self._fence
        cache = self._record_cache
        since = 0 if cache is None else cache.generation
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            await calls.put(db, key, data)
        except FOREIGN as exc:
            self._uncached()
            raise fence.translated(exc, f"put on {self.where}") from exc
        except BaseException as exc:
            self._uncached()
            fence.uncertain(exc)
            raise
        fence.acked += 1
        fence.wrote = True
        if cache is not None:
            cache.wrote(key, data, None, since)

    async def flush(self) -> None:
        """Make every write accepted so far durable in the object store.

        Explicitly flushing the WAL takes ~1 ms on a local directory, where awaiting a write's
        durability waits for the next background flush tick (~100 ms by default). A writer
        another one fenced raises FencedError, `unflushed` writes since the last flush() that
        returned being lost, and refuses every later call (docs/store.md "One writer").
        """
        db = self._writable()
        fence = self._fence
        mark = fence.acked  # every write acknowledged so far is in the WAL this flush writes
        try:
            await calls.method(db, "flush")
        except FOREIGN as exc:
            raise fence.translated(exc, f"flush of {self.where}") from exc
        fence.covered(mark, durable_seq(db))

    async def put_many(
        self,
        records: Iterable[tuple[Any, ...]] | AsyncIterable[tuple[Any, ...]],
        *,
        batch_size: int = 1000,
        durable: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Put a stream of records, `batch_size` per atomic batch; returns how many were put.

        Each item is `(record_type, fields, value)` or `(key_obj, value)`, either with a TTL
        after the value (`(record_type, fields, value, ttl)`, `(key_obj, value, ttl)`; seconds,
        a timedelta or None, as put's `ttl=`). A generator (sync or async) is consumed lazily,
        so memory holds one batch, never the whole stream. Batches are atomic one by one, not
        as a whole; `durable=True` flushes once at the end. `progress(total_so_far)` is called
        after each batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._writable()
        total = 0
        batch = Batch(self)

        async def send() -> None:
            nonlocal batch, total
            total += len(batch)
            await self.write(batch)
            batch = Batch(self)
            if progress is not None:
                progress(total)

        if isinstance(records, AsyncIterable):
            async for item in records:
                batch.put_item(item)
                if len(batch) >= batch_size:
                    await send()
        else:  # a batch's items queued in one call (Batch.put_all), one batch in memory
            items = iter(records)
            while chunk := list(itertools.islice(items, batch_size - len(batch))):
                batch.put_all(chunk)
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
        """Apply a Batch atomically, with the index ops of its records, in one native write
        (an empty batch sends nothing)."""
        db = self._writable()
        if batch:
            indexed_ops, rows_of = self._select_indexed(batch.indexed_ops)
            try:
                creates = batch.creates()  # RecordExistsError: a key created after a put of it
                if indexed_ops or creates:
                    await self._write_indexed(
                        db,
                        batch,
                        indexed_ops,
                        creates,
                        known=batch.known,
                        key_fields=batch.key_fields(),
                    )
                else:
                    await self._sent(db, batch.write_batch(), batch)
            finally:
                if rows_of is not None:  # and again once they are written (groups.py)
                    rows_of.groups.drop()
        if durable:
            await self.flush()

    async def read_before_write(self, keys: Sequence[bytes]) -> KnownValues:
        """The values stored under `keys` now (KnownValues.live tells which hold a live
        record), for a Batch of this store to carry (Batch.replacing): its write's index
        upkeep takes them instead of reading them again while they are current."""
        self._writable()
        token = token_of(self._write_lock(), self._indexes)
        listed = list(keys)
        history = self._walk_histories()[0]
        found = await old_values(
            self._source, self.where, listed, self.check_expiry, history, self.read_window
        )
        return KnownValues(listed, found, token)

    async def _write_ops(self, db: Any, ops: list[Op], *, locked: bool = False) -> None:
        """Apply `ops` atomically, with their index ops, in one native write (`locked`: the
        caller holds the write lock already)."""
        indexed_ops, rows_of = self._select_indexed(lambda indexes: indexes.indexed_ops(ops))
        try:
            if indexed_ops:
                await self._write_indexed(db, ops, indexed_ops, locked=locked)
            else:
                await self._sent(db, native_batch(ops, (), self.where), ops)
        finally:
            if rows_of is not None:  # and again once they are written (groups.py)
                rows_of.groups.drop()

    def _select_indexed(
        self, select: Callable[[IndexSet], list[IndexedOp]]
    ) -> tuple[list[IndexedOp], IndexSet | None]:
        """The record writes with index upkeep (`select` of the IndexSet), and the IndexSet
        when they hold index rows written outside upkeep: `select` dropped its group cache
        then, and the caller drops it again once they are written (groups.py)."""
        indexes = self._indexes
        if indexes is None:
            return [], None
        epoch = indexes.groups.epoch
        indexed_ops = select(indexes)
        return indexed_ops, (indexes if indexes.groups.epoch != epoch else None)

    async def _write_indexed(
        self,
        db: Any,
        ops: Batch | Sequence[Op],
        indexed_ops: list[IndexedOp],
        creates: Sequence[bytes] = (),
        *,
        locked: bool = False,
        known: KnownValues | None = None,
        key_fields: Mapping[bytes, tuple[Any, ...]] | None = None,
    ) -> None:
        """Write record ops with the index ops of `indexed_ops` (planned from the values they
        replace), reading and writing under the write lock so no other writer slips in
        (`locked`: the caller holds it already); RecordExistsError, nothing written, when a
        key of `creates` holds a live record. `known`: values read ahead by read_before_write,
        taken in place of a read when still current (indexes/known.py); `key_fields`: the field
        tuples keys were encoded from (index_ops_for)."""
        indexes = self._indexes
        lock = self._write_lock()
        held = contextlib.nullcontext() if locked else lock.held(self.where)
        async with held:
            check = AbsentCheck(self.schema, self.where, creates)
            records_walks, groups_walks = self._walk_histories()
            read: Fetch = functools.partial(
                old_values,
                self._source,
                self.where,
                check_expiry=self.check_expiry,
                history=records_walks,
                window=self.read_window,
            )
            telemetry = self._telemetry
            index_rows = IndexRows([], [], [])
            groups = None
            try:
                if indexed_ops:  # created keys the plan reads anyway are checked from its read
                    assert indexes is not None
                    groups = indexes.groups
                    replaced = read
                    # unique holders and aggregate groups sit side by side in their index
                    current: Fetch = functools.partial(
                        current_values,
                        self._source,
                        self.where,
                        check_expiry=self.check_expiry,
                        history=groups_walks,
                        window=self.read_window,
                    )
                    if telemetry is not None:  # metrics on (store/metrics.py)
                        replaced, current = (
                            telemetry.counting(replaced),
                            telemetry.counting(current),
                        )
                    if known is not None and not locked and known.valid(lock, indexes):
                        replaced = known.reading(replaced)  # what the batch's writer read
                    if creates:
                        replaced = check.reading(replaced)
                    reads = FetchReads(replaced, current)
                    index_rows = await index_rows_for(
                        indexes,
                        self.values,
                        indexed_ops,
                        reads,
                        groups=groups,
                        key_fields=key_fields,
                    )
                unread = check.unread()
                if unread:  # the others in one read
                    check.seen(unread, await read(unread))
                if isinstance(ops, Batch):  # its records' ops are in its native batch already
                    native = ops.write_batch()
                    fill_index_rows(native, index_rows, self.where)
                else:
                    native = native_batch(ops, (), self.where)
                    fill_index_rows(native, index_rows, self.where)
                await self._sent(db, native, ops)
            except (
                BaseException
            ) as exc:  # written or not, uncertain: the cached groups may be wrong
                if indexes is not None:
                    indexes.groups.drop()
                self._fence.saw(exc)  # the fence, reported by a read of the plan too
                raise
            if groups is not None:  # acknowledged: the groups it wrote are current
                groups.written()
            if telemetry is not None and index_rows.total:
                telemetry.queue(telemetry.index_rows.add, index_rows.total, telemetry.base)

    async def _sent(self, db: Any, native: Any, ops: Batch | Sequence[Op] = ()) -> None:
        """Write a native batch, counted for the fence (store/fencing.py); the record cache
        drops the keys of `ops` (the batch's record ops) once acknowledged, and is emptied if
        uncertain."""
        fence = self._fence
        cache = self._record_cache
        try:
            await calls.write(db, native)
        except FOREIGN as exc:
            self._uncached()
            raise fence.translated(exc, f"batch write on {self.where}") from exc
        except BaseException as exc:
            self._uncached()
            fence.uncertain(exc)
            raise
        fence.acked += 1
        fence.wrote = fence.wrote or bool(ops)
        if cache is not None and ops:
            cache.dropped(ops.columns()[0] if isinstance(ops, Batch) else [op.key for op in ops])

    def _uncached(self) -> None:
        """A write whose outcome is not known: the record cache forgets everything."""
        if self._record_cache is not None:
            self._record_cache.clear()

    @property
    def record_cache(self) -> RecordCache | None:
        """The record cache (OpenOptions.record_cache_bytes; its `hits`, `misses`, `size` in
        bytes counted and `limit`), or None when it is off."""
        return self._record_cache

    def _walk_histories(self) -> tuple[WalkHistory, WalkHistory]:
        """The walks of this writer's reads of replaced records and of index groups
        (old_values.WalkHistory: each caller's keys scatter or run in their own way)."""
        found: tuple[WalkHistory, WalkHistory] | None = getattr(self, "_walks", None)
        if found is None:
            found = self._walks = (WalkHistory(), WalkHistory())
        return found

    def _write_lock(self) -> WriteLock:
        """The lock of reads-then-writes (index upkeep, creates): the IndexSet's, or one of
        this store's own when it has no indexes."""
        if self._indexes is not None:
            return self._indexes.lock
        lock: WriteLock | None = getattr(self, "_own_lock", None)
        if lock is None:
            lock = self._own_lock = WriteLock()
        return lock

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
        tx = Transaction(txn, self, self._write_lock())
        try:
            yield tx
        except BaseException:
            await tx.rollback()
            raise
        fence = self._fence
        try:
            await tx.commit()
        except BaseException as exc:
            self._uncached()
            fence.uncertain(exc)
            raise
        fence.acked += 1
        self._uncached()  # its writes are not listed here: the cache starts again
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
        version (key and value upgraded, remaining TTL kept), in atomic batches; returns how
        many records moved (see ops/migrate.py)."""
        return await _migrate.migrate(
            self, name, batch_size=batch_size, progress=progress, durable=durable
        )

    # --- secondary indexes (store/indexes, RFC 0010) -----------------------------------------

    async def build_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """Build a write_only index from the records already stored, `batch_size` records per
        atomic step with a persisted position (a killed build resumes); readable when done.
        Returns how many records this call indexed. `progress(done, state)` after each step."""
        return await index_admin.build(self, name, batch_size=batch_size, progress=progress)

    async def rebuild_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """Repair an index: clear every entry and build it again from the records (reads of it
        are refused until done). Returns how many records were indexed."""
        return await index_admin.rebuild(self, name, batch_size=batch_size, progress=progress)

    async def drop_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """Remove an index and every entry of it; returns how many entries were deleted."""
        return await index_admin.drop(self, name, batch_size=batch_size, progress=progress)


async def _open_writer(
    url: str | os.PathLike[str], schema_arg: SchemaArg, values: Values | None, options: OpenOptions
) -> Store:
    schema, values = as_schema(schema_arg, values)
    location = parse_location(url)
    telemetry = metrics.telemetry(options.meter_provider, str(location))
    recorder = (
        DefaultMetricsRecorder() if telemetry is not None and options.slatedb_metrics else None
    )
    settings = with_cache_dir(options.settings or {}, check_cache_dir(options.cache_dir))
    if options.object_store_max_retries is not None:
        settings["object_store_max_retries"] = options.object_store_max_retries
    db_settings, gc_options = gc_runner.split(settings)
    db, object_store = await bounded(
        open_db(
            location,
            options.object_store_options,
            db_settings,
            options.create_if_missing,
            options.error_if_exists,
            options.cache_bytes,
            recorder,
        ),
        options.timeout_for(reader=False),
        location,
        options.object_store_options,
        "open",
    )
    store = Store(db, location, schema, values, readonly=False, check_expiry=options.check_expiry)
    store._object_store = object_store
    store._fence.durable = durable_seq(db)  # what close() compares (store/fencing.py)
    if options.record_cache_bytes and options.check_expiry:
        store._record_cache = RecordCache(options.record_cache_bytes)
    if telemetry is not None:
        metrics.instrument(store, telemetry)
        if recorder is not None:
            metrics.bridge(telemetry, recorder, metric_kind)
    store._gc = gc_runner.GcRunner(location.db_path, object_store, gc_options)
    store._gc.start()
    try:
        store._indexes = await index_admin.load(
            store, options.indexes, rebuild_later=options.rebuild_later
        )
    except BaseException:
        await store.close()
        raise
    return store


#: what a put_many item's first element is when three elements are (record, fields, value)


@dataclass
class _BatchContext:
    store: Store
    durable: bool
    batch: Batch | None = None

    async def __aenter__(self) -> Batch:
        self.store._writable()
        self.batch = Batch(self.store, reader=self.store)
        return self.batch

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None and self.batch is not None:
            await self.store.write(self.batch, durable=self.durable)
