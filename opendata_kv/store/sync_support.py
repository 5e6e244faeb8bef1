"""The hand-written part of the sync face: its two runners, the iterators, and the few members
with no async twin. Everything else in store/sync.py is generated (tools/gen_sync.py).

Every operation is written once, as the async method; a sync method only runs it for its
caller, on the calling thread, through the runner tools/gen_sync.py's RUNNERS table names:

- `run_inline` (native.calls.sync) for operations whose every wait is a native slatedb call (reads,
  writes, scans, batches, transactions, snapshots, migrations, index builds, close): driven
  inline, no event loop, no thread hand-off, so many threads may call one SyncStore at once,
  and a Ctrl-C while a call pends cancels that call and leaves the store usable;
- `run_on_loop` (native.driver.run) for operations that use asyncio itself (opening with a timeout,
  checkpoints, clone, the change feed's polling, put_many of an async iterable): on a private
  event loop of the calling thread (a short-lived thread when one already runs here).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.native import calls, driver, records
from opendata_kv.store.batch import Batch
from opendata_kv.store.indexes.read import IT, IndexScan
from opendata_kv.store.reader import StoreReader
from opendata_kv.store.scan import K, R, RawRecord, Record, Scan, V
from opendata_kv.store.views import MISSING, Fields, ReadView
from opendata_kv.values import Values

if TYPE_CHECKING:
    from opendata_kv.store.sync import SyncStore

T = TypeVar("T")
W = TypeVar("W")
C = TypeVar("C")
H = TypeVar("H", bound="BatchHolder")

#: drive a coroutine to completion on this thread, its waits native calls (no event loop)
run_inline: Callable[[Coroutine[Any, Any, Any]], Any] = calls.sync
#: run a coroutine that uses asyncio itself on a private event loop of this thread
run_on_loop: Callable[[Coroutine[Any, Any, Any]], Any] = driver.run


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _itself(value: T) -> T:
    return value


@contextmanager
def _entered(manager: AbstractAsyncContextManager[T], wrap: Callable[[T], W]) -> Iterator[W]:
    """An async context manager (batch, transaction, snapshot) entered and left for a sync
    caller, driven inline; the block's exception goes to its __aexit__ as `async with` would."""
    value = run_inline(manager.__aenter__())
    try:
        yield wrap(value)
    except BaseException as exc:
        if not run_inline(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        run_inline(manager.__aexit__(None, None, None))


class ScanIteration(Generic[R]):
    """SyncScan's iteration: `for record in scan` steps the Scan's own batch as its
    `__anext__` does (DECODE_CHUNK rows decoded at a time, no second buffer here)."""

    def __init__(self, scan: Scan[R]) -> None:
        self.scan = scan

    @property
    def failed(self) -> int:
        """Rows that failed to decode (on_error "skip" or "raw"), as Scan.failed."""
        return self.scan.failed

    @property
    def last_error(self) -> OpendataKvError | None:
        """The last such row's error, as Scan.last_error."""
        return self.scan.last_error

    def __iter__(self) -> Iterator[R]:
        # With the C accelerator, decoded rows are handed over in C (native/records.py);
        # __next__ below runs when the buffer is used up.
        rows: Iterator[R] | None = records.sync_scan_rows(self.scan, self.__next__)
        return self if rows is None else rows

    def __next__(self) -> R:
        scan = self.scan
        pos = scan._pos
        buffer = scan._buffer
        if pos >= len(buffer):
            if not run_inline(scan._fill()):
                raise StopIteration
            buffer, pos = scan._buffer, 0
        scan._pos = pos + 1
        return buffer[pos]

    def undecoded(self) -> ScanIteration[RawRecord]:
        """Every row as a RawRecord, nothing decoded, as Scan.undecoded."""
        self.scan.undecoded()
        return self  # type: ignore[return-value]

    @overload
    def keys(self: ScanIteration[Record[K, V]]) -> Iterator[K]: ...

    @overload
    def keys(self) -> Iterator[Key]: ...

    def keys(self) -> Iterator[Any]:
        """The keys only (values are not decoded), as Scan.keys."""
        self.scan.keys()
        return (record.key for record in self)

    @overload
    def values(self: ScanIteration[Record[K, V]]) -> Iterator[V]: ...

    @overload
    def values(self) -> Iterator[Any]: ...

    def values(self) -> Iterator[Any]:
        """The values only (keys are not decoded), as Scan.values."""
        self.scan.values()
        return (record[1] for record in self)


class IndexScanIteration(Generic[IT]):
    """SyncIndexScan's iteration: `for record in db.index_scan(...)`."""

    def __init__(self, scan: IndexScan[IT]) -> None:
        self.scan = scan

    def __iter__(self) -> Iterator[IT]:
        return self

    def __next__(self) -> IT:
        try:
            item: IT = run_inline(self.scan.__anext__())
            return item
        except StopAsyncIteration:
            raise StopIteration from None


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
            item: C = run_on_loop(self._next())
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
            run_on_loop(self._batches.aclose())

    def __enter__(self) -> SyncChanges[C]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ViewMapping:
    """SyncView's members with no async twin: the view it reads and the mapping conveniences,
    `view[key]` (KeyError when missing) and `key in view`."""

    def __init__(self, view: ReadView) -> None:
        self._view = view
        if getattr(view, "_telemetry", None) is not None:
            # metrics on: get and get_many are the view's timed twins, called straight. A
            # Python frame of this face around the timed call cost 4-6% of a memtable get
            # (docs/performance.md, "Metrics"); without metrics the generated methods stay.
            face = vars(self)
            face["get"] = view._get_now
            face["get_many"] = view._get_many_now

    @property
    def schema(self) -> Schema:
        return self._view.schema

    @property
    def values(self) -> Values:
        return self._view.values

    @property
    def where(self) -> str:
        return self._view.where

    if TYPE_CHECKING:  # generated in SyncView

        def get(  # the generated overload for a Key or (record, fields), as used below
            self, target: Key | tuple[Any, ...] | str, fields: Fields = None, *, default: Any = None
        ) -> Any: ...

        def exists(  # the generated overload for a Key or (record, fields), as used below
            self, target: Key | tuple[Any, ...] | str | RecordType[Key, Any], fields: Fields = None
        ) -> bool: ...

    def __getitem__(self, key: Key | tuple[Any, ...]) -> Any:
        """`db[key_obj]` or `db[record, fields]`: the value; KeyError when there is none."""
        target, fields = (key, None) if _is_key(key) else key
        value = self.get(target, fields, default=MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: Key | tuple[Any, ...]) -> bool:
        """`key_obj in db` or `(record, fields) in db`."""
        target, fields = (key, None) if _is_key(key) else key
        return self.exists(target, fields)


def _is_key(key: object) -> bool:
    """A Key, or an instance of a declared NamedTuple key class: `db[PostKey(...)]` (a plain
    tuple is `db[record, fields]`)."""
    return isinstance(key, tuple) and key.__class__ is not tuple


class ReaderContext(ViewMapping):
    """SyncStoreReader's members with no async twin: `with` closes it, its repr, readonly."""

    def __init__(self, store: StoreReader) -> None:
        super().__init__(store)
        self.store = store

    if TYPE_CHECKING:  # generated in SyncStoreReader

        def close(self) -> None: ...

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        run_inline(self.store._close_after(exc_info[1]))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.store.where}>"

    @property
    def readonly(self) -> bool:
        return self.store.readonly


class BatchHolder:
    """SyncBatch's construction (`SyncBatch(db)`, or around a Batch a `with` block made) and
    its length and truth, as Batch's."""

    batch: Batch

    def __init__(self, store: SyncStore) -> None:
        self._hold(Batch(store.store, reader=store.store))  # delete_range reads through it

    @classmethod
    def _of(cls: type[H], batch: Batch) -> H:
        wrapped = cls.__new__(cls)
        wrapped._hold(batch)
        return wrapped

    def _hold(self, batch: Batch) -> None:
        self.batch = batch
        # put is Batch.put itself (a sync call already), or on the accelerator its common case
        # in C (Batch._sync_put): the per-record path skips a frame, or two
        vars(self)["put"] = batch._sync_put()

    def __len__(self) -> int:
        return len(self.batch)

    def __bool__(self) -> bool:
        return bool(self.batch)
