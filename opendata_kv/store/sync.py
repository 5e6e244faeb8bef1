"""The sync face: SyncStore and its objects, blocking, for code without an event loop.

Every operation is written once, as the async method; a sync method only runs it for its
caller, on the calling thread:

- `_now` (native.calls.sync) for operations whose every wait is a native slatedb call (reads,
  writes, scans, batches, transactions, snapshots, close): driven inline, no event loop, no
  thread hand-off, so many threads may call one SyncStore at once, and a Ctrl-C while a call
  pends cancels that call and leaves the store usable;
- `_loop` (native.driver.run) for operations that use asyncio itself (opening with a timeout,
  checkpoints, clone, the change feed's polling, migrate's progress across batches): on a
  private event loop of the calling thread (a short-lived thread when one already runs here).

tests/test_store_sync_face.py compares every public signature with its async counterpart.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from opendata_kv.checks.integrity import Problem
from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.native import calls, driver
from opendata_kv.objstore.deadline import READER_TIMEOUT
from opendata_kv.store.batch import Batch, Snapshot, Transaction
from opendata_kv.store.deletes import MAX_KEYS
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.read import IndexScan
from opendata_kv.store.ops.checkpoints import Checkpoint
from opendata_kv.store.ops.clone import CloneResult
from opendata_kv.store.ops.feed import ChangeBatch
from opendata_kv.store.ops.feed_rows import Change, IndexChange, RawChange
from opendata_kv.store.options import ScanKeywords, ScanOptions
from opendata_kv.store.reader import StoreReader
from opendata_kv.store.scan import DECODE_CHUNK, R, RawRecord, Record, Scan
from opendata_kv.store.schema_arg import SchemaArg
from opendata_kv.store.views import MISSING, Bound, Fields, ReadView, Target, TtlArg
from opendata_kv.store.writer import Store
from opendata_kv.values import Values

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")
W = TypeVar("W")
C = TypeVar("C")

_now: Callable[[Coroutine[Any, Any, Any]], Any] = calls.sync
_loop: Callable[[Coroutine[Any, Any, Any]], Any] = driver.run


async def _await(awaitable: Any) -> Any:
    return await awaitable


@contextmanager
def _entered(
    manager: AbstractAsyncContextManager[T], wrap: Callable[[T], W]
) -> Iterator[W]:
    """An async context manager (batch, transaction, snapshot) entered and left for a sync
    caller, driven inline; the block's exception goes to its __aexit__ as `async with` would."""
    value = _now(manager.__aenter__())
    try:
        yield wrap(value)
    except BaseException as exc:
        if not _now(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        _now(manager.__aexit__(None, None, None))


class SyncScan(Generic[R]):
    """A blocking iterator over a Scan, fetched a batch at a time (`for record in scan`)."""

    def __init__(self, scan: Scan[R]) -> None:
        self.scan = scan
        self._chunk: list[R] = []
        self._pos = 0
        self._before: bytes | None = None  # the scan's cursor before the chunk held here

    @property
    def cursor(self) -> bytes | None:
        """Raw key of the last record yielded; pass as `after=` to resume."""
        if self._pos:
            raw_key: bytes = self._chunk[self._pos - 1].raw_key
            return raw_key
        return self._before if self._chunk else self.scan.cursor

    @property
    def failed(self) -> int:
        """Rows that failed to decode (on_error "skip" or "raw"), as Scan.failed."""
        return self.scan.failed

    @property
    def last_error(self) -> OpendataKvError | None:
        """The last such row's error, as Scan.last_error."""
        return self.scan.last_error

    def __iter__(self) -> Iterator[R]:
        return self

    def __next__(self) -> R:
        if self._pos >= len(self._chunk):
            self._before = self.scan.cursor
            self._chunk, self._pos = [], 0
            # DECODE_CHUNK rows at a time, as `async for` decodes them: a whole batch decoded
            # ahead outlives the young GC generation and cost ~0.5 µs/row more (measured)
            self._chunk = _now(self.scan.next_chunk(DECODE_CHUNK))
            if not self._chunk:
                raise StopIteration
        record = self._chunk[self._pos]
        self._pos += 1
        return record

    def next_chunk(self, size: int | None = None) -> list[R]:
        """Up to `size` records (the rest of the current batch by default); [] at the end."""
        if self._pos < len(self._chunk):
            end = len(self._chunk) if size is None else min(len(self._chunk), self._pos + size)
            chunk = self._chunk[self._pos : end]
            self._pos = end
            return chunk
        self._chunk, self._pos = [], 0
        fetched: list[R] = _now(self.scan.next_chunk(size))
        return fetched

    def has_more(self) -> bool:
        """As Scan.has_more: another record follows (past `limit` once it is reached)."""
        if self._pos < len(self._chunk):
            return True
        more: bool = _now(self.scan.has_more())
        return more

    def to_list(self) -> list[R]:
        """Every remaining record."""
        return list(self)

    def undecoded(self) -> SyncScan[RawRecord]:
        """Every row as a RawRecord, nothing decoded, as Scan.undecoded."""
        self.scan.undecoded()
        return self  # type: ignore[return-value]

    def keys(self) -> Iterator[Key]:
        """The keys only (values are not decoded), as Scan.keys."""
        self.scan.keys()
        return (record.key for record in self)  # type: ignore[misc]

    def values(self) -> Iterator[Any]:
        """The values only (keys are not decoded), as Scan.values."""
        self.scan.values()
        return (record[1] for record in self)

    def count(self) -> int:
        """How many live rows remain, nothing decoded (consumes the scan), as Scan.count."""
        held = len(self._chunk) - self._pos
        self._chunk, self._pos = [], 0
        total: int = held + _now(self.scan.count())
        return total


class SyncIndexScan:
    """A blocking iterator over an IndexScan (`for record in db.index_scan(...)`)."""

    def __init__(self, scan: IndexScan) -> None:
        self.scan = scan

    @property
    def cursor(self) -> bytes | None:
        """The entry key of the last item yielded; pass as `after=` to resume."""
        return self.scan.cursor

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return _now(self.scan.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def next_chunk(self, size: int | None = None) -> list[Any]:
        """As IndexScan.next_chunk."""
        chunk: list[Any] = _now(self.scan.next_chunk(size))
        return chunk

    def has_more(self) -> bool:
        """As IndexScan.has_more."""
        more: bool = _now(self.scan.has_more())
        return more

    def to_list(self) -> list[Any]:
        return list(self)


class SyncChanges(Generic[C]):
    """A blocking iterator over a change feed (Store.changes / Store.change_batches).

    With follow=True it blocks until the next change; stop it with close() (or leave the
    `with` block). Once the store is closed, the next step raises StoreClosedError.
    """

    def __init__(self, batches: AsyncGenerator[Any, None], store: StoreReader) -> None:
        self._batches = batches
        self._store = store
        self._done = False

    def __iter__(self) -> Iterator[C]:
        return self

    def __next__(self) -> C:
        if self._done:
            raise StopIteration
        self._store.check_open()
        try:
            item: C = _loop(self._next())
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None
        except BaseException:
            self._done = True  # an interrupted or failed feed is finished
            raise
        return item

    async def _next(self) -> C:
        item: C = await self._batches.__anext__()
        return item

    def close(self) -> None:
        """Stop the feed (idempotent)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(RuntimeError):  # still running after an interrupt: dropped
            _loop(self._batches.aclose())

    def __enter__(self) -> SyncChanges[C]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncView:
    """Blocking reads (get, get_many, exists, scans, count) over an async ReadView, and the
    mapping conveniences: `view[key]` (KeyError when missing), `key in view`."""

    def __init__(self, view: ReadView) -> None:
        self._view = view

    @property
    def schema(self) -> Schema:
        return self._view.schema

    @property
    def values(self) -> Values:
        return self._view.values

    @property
    def where(self) -> str:
        return self._view.where

    def get(
        self, target: Target, fields: Fields = None, *, default: Any = None, upgrade: bool = True
    ) -> Any:
        """The decoded value under the key, or `default` (as Store.get)."""
        return self._view._get_now(target, fields, default=default, upgrade=upgrade)

    def get_many(
        self,
        target: RecordType | str | Iterable[Key],
        many: Iterable[Fields] | None = None,
        *,
        default: Any = None,
        upgrade: bool = True,
    ) -> list[Any]:
        """Many values in one go, in the order asked (as Store.get_many)."""
        return self._view._get_many_now(target, many, default=default, upgrade=upgrade)

    def get_raw(self, key: bytes) -> bytes | None:
        """The stored bytes under a raw key, or None (as Store.get_raw)."""
        found: bytes | None = _now(self._view.get_raw(key))
        return found

    def exists(self, target: Target, fields: Fields = None) -> bool:
        """True when a record is stored under the key."""
        found: bool = _now(self._view.exists(target, fields))
        return found

    def count(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
    ) -> int:
        """How many live records a scan would yield, nothing decoded (as Store.count)."""
        total: int = _now(
            self._view.count(
                record, *leading, partial=partial, version=version, prefix=prefix,
                start=start, end=end,
            )
        )
        return total

    def __getitem__(self, key: Key | tuple[RecordType | str, Fields]) -> Any:
        """`db[key_obj]` or `db[record, fields]`: the value; KeyError when there is none."""
        target, fields = (key, None) if isinstance(key, Key) else key
        value = self.get(target, fields, default=MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: Key | tuple[RecordType | str, Fields]) -> bool:
        """`key_obj in db` or `(record, fields) in db`."""
        target, fields = (key, None) if isinstance(key, Key) else key
        return self.exists(target, fields)

    @overload
    def scan(
        self,
        record: RecordType | str,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        after: bytes | Key | None = None,
        options: ScanOptions | None = None,
        on_error: Literal["raise", "skip"] | None = None,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record]: ...

    @overload
    def scan(
        self,
        record: RecordType | str,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        after: bytes | Key | None = None,
        options: ScanOptions | None = None,
        on_error: str,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record | RawRecord]: ...

    def scan(
        self,
        record: RecordType | str,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        after: bytes | Key | None = None,
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record] | SyncScan[Record | RawRecord]:
        """As Store.scan, blocking."""
        view: Any = self._view  # the implementation's signature, not an overload's
        return SyncScan[Any](
            view.scan(
                record, *leading, partial=partial, version=version, prefix=prefix, start=start,
                end=end, after=after, options=options, on_error=on_error, **keywords,
            )
        )

    @overload
    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        on_unknown: Literal["raise", "skip"] = "raise",
        options: ScanOptions | None = None,
        on_error: Literal["raise", "skip"] | None = None,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record]: ...

    @overload
    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        on_unknown: str = "raise",
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record | RawRecord]: ...

    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        on_unknown: str = "raise",
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanKeywords],
    ) -> SyncScan[Record] | SyncScan[Record | RawRecord]:
        """As Store.scan_all, blocking."""
        view: Any = self._view
        return SyncScan[Any](
            view.scan_all(
                prefix=prefix, start=start, end=end, after=after, on_unknown=on_unknown,
                options=options, on_error=on_error, **keywords,
            )
        )


class SyncSnapshot(SyncView):
    """A consistent, read-only, point-in-time view (SyncStore.snapshot)."""

    _view: Snapshot


class SyncTransaction(SyncView):
    """Blocking reads and writes inside a transaction (SyncStore.transaction)."""

    _view: Transaction

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put in the transaction (as Transaction.put)."""
        _now(self._view.put(target, fields, value, ttl=ttl))  # type: ignore[arg-type]

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key when the transaction commits."""
        _now(self._view.delete(target, fields))

    def commit(self) -> None:
        _now(self._view.commit())

    def rollback(self) -> None:
        _now(self._view.rollback())


class SyncBatch:
    """Writes collected in memory, applied atomically on leaving `with db.batch() as b:` (or by
    SyncStore.write)."""

    def __init__(self, store: SyncStore) -> None:
        self.batch = Batch(store.store)

    def __len__(self) -> int:
        return len(self.batch)

    def __bool__(self) -> bool:
        return bool(self.batch)

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put (as Batch.put)."""
        self.batch.put(target, fields, value, ttl=ttl)  # type: ignore[arg-type]

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Queue a typed delete."""
        self.batch.delete(target, fields)

    def delete_range(
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
        """Queue a tombstone for every key in the range (as Batch.delete_range)."""
        queued: int = _now(
            self.batch.delete_range(
                record, *leading, partial=partial, version=version, prefix=prefix,
                start=start, end=end, max_keys=max_keys,
            )
        )
        return queued

    def put_raw(self, key: bytes, data: bytes, *, expire_at: int | None = None) -> None:
        """Queue raw bytes under a raw key (as Batch.put_raw)."""
        self.batch.put_raw(key, data, expire_at=expire_at)

    def delete_raw(self, key: bytes) -> None:
        self.batch.delete_raw(key)

    def write_batch(self) -> Any:
        """The slatedb WriteBatch (as Batch.write_batch)."""
        return self.batch.write_batch()


class SyncStoreReader(SyncView):
    """A read-only SyncStore (SyncStore.open_reader): reads, scans, the change feed and
    checkpoints; no write methods."""

    _view: StoreReader

    def __init__(self, store: StoreReader) -> None:
        super().__init__(store)
        self.store = store

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where}>"

    @property
    def readonly(self) -> bool:
        return self.store.readonly

    @property
    def closed(self) -> bool:
        return self.store.closed

    def check_open(self) -> None:
        """StoreClosedError once closed (as Store.check_open)."""
        self.store.check_open()

    def close(self) -> None:
        """Close the store. Idempotent."""
        _now(self.store.close())

    @overload
    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: Literal["raise", "skip"] = "raise",
        on_unknown: Literal["raise", "skip"] = "raise",
        indexes: Literal[False] = False,
    ) -> SyncChanges[Change]: ...

    @overload
    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: Literal["raise", "skip"] = "raise",
        on_unknown: Literal["raise", "skip"] = "raise",
        indexes: Literal[True],
    ) -> SyncChanges[Change | IndexChange]: ...

    @overload
    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: Literal[False] = False,
    ) -> SyncChanges[Change | RawChange]: ...

    @overload
    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: bool = False,
    ) -> SyncChanges[Change | RawChange | IndexChange]: ...

    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: bool = False,
    ) -> SyncChanges[Any]:
        """As Store.changes, blocking: `for change in db.changes(since=cursor):`."""
        store: Any = self.store  # the implementation's signature, not an overload's
        return SyncChanges(
            store.changes(
                since, follow=follow, limit=limit, poll_interval=poll_interval,
                on_error=on_error, on_unknown=on_unknown, indexes=indexes,
            ),
            self.store,
        )

    @overload
    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: Literal["raise", "skip"] = "raise",
        on_unknown: Literal["raise", "skip"] = "raise",
        indexes: Literal[False] = False,
    ) -> SyncChanges[ChangeBatch[Change]]: ...

    @overload
    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: Literal["raise", "skip"] = "raise",
        on_unknown: Literal["raise", "skip"] = "raise",
        indexes: Literal[True],
    ) -> SyncChanges[ChangeBatch[Change | IndexChange]]: ...

    @overload
    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: Literal[False] = False,
    ) -> SyncChanges[ChangeBatch[Change | RawChange]]: ...

    @overload
    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: bool = False,
    ) -> SyncChanges[ChangeBatch[Change | RawChange | IndexChange]]: ...

    def change_batches(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
        on_error: str = "raise",
        on_unknown: str = "raise",
        indexes: bool = False,
    ) -> SyncChanges[Any]:
        """As Store.change_batches, blocking: a ChangeBatch (a list) per WAL file."""
        store: Any = self.store
        return SyncChanges(
            store.change_batches(
                since, follow=follow, limit=limit, poll_interval=poll_interval,
                on_error=on_error, on_unknown=on_unknown, indexes=indexes,
            ),
            self.store,
        )

    @staticmethod
    def clone(
        source: str | os.PathLike[str],
        destination: str | os.PathLike[str],
        *,
        checkpoint: str | None = None,
        source_options: Mapping[str, str] | None = None,
        destination_options: Mapping[str, str] | None = None,
        batch_size: int = 1000,
        replace: bool = False,
        timeout: float | None = None,
        progress: Callable[[int, str], None] | None = None,
    ) -> CloneResult:
        """As Store.clone, blocking (also when called from inside a running event loop)."""
        result: CloneResult = _loop(
            Store.clone(
                source,
                destination,
                checkpoint=checkpoint,
                source_options=source_options,
                destination_options=destination_options,
                batch_size=batch_size,
                replace=replace,
                timeout=timeout,
                progress=progress,
            )
        )
        return result

    def index_scan(
        self,
        index: Index | str,
        *leading: Any,
        prefix: Any = None,
        start: tuple[Any, ...] | bytes | None = None,
        end: tuple[Any, ...] | bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: bytes | None = None,
        records: bool = True,
        batch_size: int = 256,
    ) -> SyncIndexScan:
        """As Store.index_scan, blocking."""
        return SyncIndexScan(
            self.store.index_scan(
                index, *leading, prefix=prefix, start=start, end=end, reverse=reverse,
                limit=limit, after=after, records=records, batch_size=batch_size,
            )
        )

    def lookup(self, index: Index | str, *values: Any) -> Record | None:
        """As Store.lookup."""
        found: Record | None = _now(self.store.lookup(index, *values))
        return found

    def index_count(self, index: Index | str, *group: Any) -> int:
        """As Store.index_count."""
        count: int = _now(self.store.index_count(index, *group))
        return count

    def index_sum(self, index: Index | str, *group: Any) -> int | float:
        """As Store.index_sum."""
        total: int | float = _now(self.store.index_sum(index, *group))
        return total

    def index_info(self) -> dict[str, dict[str, Any]]:
        """As Store.index_info."""
        info: dict[str, dict[str, Any]] = _now(self.store.index_info())
        return info

    def check_indexes(self, *names: str) -> list[Problem]:
        """As Store.check_indexes."""
        problems: list[Problem] = _now(self.store.check_indexes(*names))
        return problems

    def checkpoint(self, name: str | None = None, lifetime: TtlArg = None) -> Checkpoint:
        """As Store.checkpoint."""
        made: Checkpoint = _loop(self.store.checkpoint(name, lifetime))
        return made

    def checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        """As Store.checkpoints."""
        found: list[Checkpoint] = _loop(self.store.checkpoints(name))
        return found

    def refresh_checkpoint(self, checkpoint_id: str, lifetime: TtlArg) -> Checkpoint:
        """As Store.refresh_checkpoint."""
        made: Checkpoint = _loop(self.store.refresh_checkpoint(checkpoint_id, lifetime))
        return made

    def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """As Store.delete_checkpoint."""
        gone: Checkpoint = _loop(self.store.delete_checkpoint(checkpoint_id))
        return gone


class SyncStore(SyncStoreReader):
    """Blocking Store: `with SyncStore.open("./data", schema) as db: db.put(...)`."""

    _view: Store
    store: Store

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
        indexes: Iterable[Index] = (),
        rebuild_later: Iterable[str] = (),
    ) -> SyncStore:
        """Open as the writer; the arguments are Store.open's."""
        opening = Store.open(
            url,
            schema,
            values=values,
            create_if_missing=create_if_missing,
            error_if_exists=error_if_exists,
            timeout=timeout,
            object_store_max_retries=object_store_max_retries,
            settings=settings,
            object_store_options=object_store_options,
            check_expiry=check_expiry,
            cache_bytes=cache_bytes,
            indexes=indexes,
            rebuild_later=rebuild_later,
        )
        return SyncStore(_loop(_await(opening)))

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
        indexes: Iterable[Index] = (),
    ) -> SyncStoreReader:
        """Open read-only; the arguments are Store.open_reader's."""
        opening = Store.open_reader(
            url,
            schema,
            values=values,
            timeout=timeout,
            object_store_max_retries=object_store_max_retries,
            poll_interval=poll_interval,
            object_store_options=object_store_options,
            check_expiry=check_expiry,
            checkpoint=checkpoint,
            cache_bytes=cache_bytes,
            indexes=indexes,
        )
        return SyncStoreReader(_loop(_await(opening)))

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Store `value` under the key (as Store.put)."""
        _now(self.store.put(target, fields, value, ttl=ttl))  # type: ignore[arg-type]

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key (as Store.delete)."""
        _now(self.store.delete(target, fields))

    def delete_range(
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
        """As Store.delete_range, blocking."""
        deleted: int = _now(
            self.store.delete_range(
                record, *leading, partial=partial, version=version, prefix=prefix,
                start=start, end=end, max_keys=max_keys, durable=durable,
            )
        )
        return deleted

    def put_raw(self, key: bytes, data: bytes) -> None:
        """Store raw bytes under a raw key (as Store.put_raw)."""
        _now(self.store.put_raw(key, data))

    def flush(self) -> None:
        """Make every write accepted so far durable (as Store.flush)."""
        _now(self.store.flush())

    def put_many(
        self,
        records: Iterable[tuple[Any, ...]] | AsyncIterable[tuple[Any, ...]],
        *,
        batch_size: int = 1000,
        durable: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Put a stream of records in atomic batches (as Store.put_many; an async iterable
        is consumed on a private event loop)."""
        run = _loop if isinstance(records, AsyncIterable) else _now
        total: int = run(
            self.store.put_many(
                records, batch_size=batch_size, durable=durable, progress=progress
            )
        )
        return total

    def write(self, batch: SyncBatch, *, durable: bool = False) -> None:
        """Apply a SyncBatch atomically (as Store.write)."""
        _now(self.store.write(batch.batch, durable=durable))

    def batch(self, *, durable: bool = False) -> AbstractContextManager[SyncBatch]:
        """`with db.batch() as b:` one atomic write on exit (none if empty or on error)."""
        return _entered(self.store.batch(durable=durable), self._wrap_batch)

    def _wrap_batch(self, batch: Batch) -> SyncBatch:
        wrapped = SyncBatch.__new__(SyncBatch)
        wrapped.batch = batch
        return wrapped

    def transaction(
        self, isolation: str = "serializable", *, durable: bool = False
    ) -> AbstractContextManager[SyncTransaction]:
        """`with db.transaction() as tx:` commits on exit, rolls back on error."""
        return _entered(self.store.transaction(isolation, durable=durable), SyncTransaction)

    def snapshot(self) -> AbstractContextManager[SyncSnapshot]:
        """`with db.snapshot() as snap:` a consistent point-in-time read view."""
        return _entered(self.store.snapshot(), SyncSnapshot)

    def migrate(
        self,
        name: str,
        *,
        batch_size: int = 500,
        progress: Callable[[int], None] | None = None,
        durable: bool = True,
    ) -> int:
        """As Store.migrate, blocking."""
        moved: int = _now(
            self.store.migrate(name, batch_size=batch_size, progress=progress, durable=durable)
        )
        return moved

    def build_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """As Store.build_index, blocking."""
        done: int = _now(self.store.build_index(name, batch_size=batch_size, progress=progress))
        return done

    def rebuild_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """As Store.rebuild_index, blocking."""
        done: int = _now(
            self.store.rebuild_index(name, batch_size=batch_size, progress=progress)
        )
        return done

    def drop_index(
        self,
        name: str,
        *,
        batch_size: int = 1000,
        progress: Callable[[int, str], None] | None = None,
    ) -> int:
        """As Store.drop_index, blocking."""
        done: int = _now(self.store.drop_index(name, batch_size=batch_size, progress=progress))
        return done


__all__ = [
    "SyncBatch",
    "SyncChanges",
    "SyncIndexScan",
    "SyncScan",
    "SyncSnapshot",
    "SyncStore",
    "SyncStoreReader",
    "SyncTransaction",
    "SyncView",
]
