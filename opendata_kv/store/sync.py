"""SyncStore: the Store API, blocking, for code without an event loop.

Each SyncStore runs a private asyncio loop on a daemon thread and submits every call to it,
so one SyncStore may be used from many threads at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, Literal, TypeVar, overload

from opendata_kv.errors import ReentrantCallError, StoreClosedError
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store.deletes import MAX_KEYS
from opendata_kv.store.opening import READER_TIMEOUT
from opendata_kv.store.ops.checkpoints import Checkpoint
from opendata_kv.store.ops.clone import CloneResult, clone_sync
from opendata_kv.store.ops.feed import Change
from opendata_kv.store.scan import R, RawRecord, Record, Scan
from opendata_kv.store.schema_arg import SchemaArg
from opendata_kv.store.store import Batch, Snapshot, Store, Transaction
from opendata_kv.store.views import Bound, Fields, ReadView, Target, TtlArg
from opendata_kv.values import Values

T = TypeVar("T")


class _LoopThread:
    """A private event loop on a daemon thread."""

    def __init__(self, where: str = "the store") -> None:
        self.where = where
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="opendata-kv-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.loop.is_closed():
            coro.close()  # never awaited on purpose: no "coroutine was never awaited" warning
            raise StoreClosedError(f"{self.where} is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise ReentrantCallError(
                f"{self.where}: a SyncStore cannot be called from its own event loop thread "
                "(a callback it runs calling it back would wait for itself forever)"
            )
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # closed between the check and the submit
            coro.close()
            raise StoreClosedError(f"{self.where} is closed") from None
        return future.result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncScan(Generic[R]):
    """A blocking iterator over a Scan, fetched a batch at a time."""

    def __init__(self, scan: Scan[R], run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._scan = scan
        self._run = run
        self._chunk: list[R] = []
        self._pos = 0

    @property
    def cursor(self) -> bytes | None:
        """Raw key of the last record yielded; pass as `after=` to resume."""
        if self._pos:
            return self._chunk[self._pos - 1].raw_key
        return self._scan.cursor if not self._chunk else None

    def __iter__(self) -> Iterator[R]:
        return self

    def __next__(self) -> R:
        if self._pos >= len(self._chunk):
            self._chunk = self._run(self._scan.next_chunk())
            self._pos = 0
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
        fetched: list[R] = self._run(self._scan.next_chunk(size))
        return fetched

    def has_more(self) -> bool:
        """As Scan.has_more: another record follows (past `limit` once it is reached)."""
        if self._pos < len(self._chunk):
            return True
        more: bool = self._run(self._scan.has_more())
        return more

    def to_list(self) -> list[R]:
        """Every remaining record."""
        return list(self)


class SyncChanges:
    """A blocking iterator over Store.changes, fetched a WAL file at a time.

    With follow=True it blocks until the next change; stop it with close() (or leave the
    `with` block): a KeyboardInterrupt while waiting cancels the wait before propagating.
    """

    def __init__(self, batches: Any, loop: _LoopThread) -> None:
        self._batches = batches
        self._loop = loop
        self._chunk: list[Change] = []
        self._pos = 0
        self._done = False

    def __iter__(self) -> Iterator[Change]:
        return self

    def __next__(self) -> Change:
        if self._pos >= len(self._chunk):
            if self._done:
                raise StopIteration
            future = asyncio.run_coroutine_threadsafe(self._next_batch(), self._loop.loop)
            try:
                chunk = future.result()
            except BaseException:
                future.cancel()
                self.close()
                raise
            if chunk is None:
                self.close()
                raise StopIteration
            self._chunk, self._pos = chunk, 0
        change = self._chunk[self._pos]
        self._pos += 1
        return change

    async def _next_batch(self) -> list[Change] | None:
        try:
            batch: list[Change] = await self._batches.__anext__()
        except StopAsyncIteration:
            return None
        return batch

    def close(self) -> None:
        """Stop the feed (idempotent)."""
        self._chunk, self._pos = [], 0
        if self._done:
            return
        self._done = True
        if not self._loop.loop.is_closed():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(
                    self._batches.aclose(), self._loop.loop
                ).result(timeout=10)

    def __enter__(self) -> SyncChanges:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncView:
    """Blocking get / exists / scan over an async ReadView."""

    def __init__(self, view: ReadView, loop: _LoopThread) -> None:
        self._view = view
        self._loop = loop

    @property
    def schema(self) -> Schema:
        return self._view.schema

    @property
    def values(self) -> Values:
        return self._view.values

    def get(
        self, target: Target, fields: Fields = None, *, default: Any = None, upgrade: bool = True
    ) -> Any:
        """The decoded value under the key, or `default` (as Store.get)."""
        return self._loop.run(self._view.get(target, fields, default=default, upgrade=upgrade))

    def get_raw(self, key: bytes) -> bytes | None:
        return self._loop.run(self._view.get_raw(key))

    def exists(self, target: Target, fields: Fields = None) -> bool:
        return self._loop.run(self._view.exists(target, fields))

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
        reverse: bool = False,
        limit: int | None = None,
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        on_error: Literal["raise", "skip"] = "raise",
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
        reverse: bool = False,
        limit: int | None = None,
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        on_error: str,
    ) -> SyncScan[Record | RawRecord]: ...

    def scan(
        self, record: RecordType | str, *leading: Any, **options: Any
    ) -> SyncScan[Record] | SyncScan[Record | RawRecord]:
        """As Store.scan, blocking (the overloads above are the typed signature; the
        options and their defaults have one home, ReadView.scan)."""
        return SyncScan[Any](self._view.scan(record, *leading, **options), self._loop.run)

    @overload
    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
        on_unknown: Literal["raise", "skip"] = "raise",
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        on_error: Literal["raise", "skip"] = "raise",
    ) -> SyncScan[Record]: ...

    @overload
    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
        on_unknown: str,
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        on_error: str = "raise",
    ) -> SyncScan[Record | RawRecord]: ...

    @overload
    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | Key | None = None,
        end: bytes | Key | None = None,
        after: bytes | Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
        on_unknown: str = "raise",
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        on_error: str,
    ) -> SyncScan[Record | RawRecord]: ...

    def scan_all(self, **options: Any) -> SyncScan[Record] | SyncScan[Record | RawRecord]:
        """As Store.scan_all, blocking (options and defaults: ReadView.scan_all's)."""
        return SyncScan[Any](self._view.scan_all(**options), self._loop.run)


class SyncWriteView(SyncView):
    """Blocking typed put / delete over a Store or a Transaction."""

    _view: Store | Transaction

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(self, *args: Any, **options: Any) -> None:
        """As Store.put, blocking (the overloads above are the typed signature)."""
        self._loop.run(self._view.put(*args, **options))

    def delete(self, target: Target, fields: Fields = None) -> None:
        self._loop.run(self._view.delete(target, fields))


class SyncTransaction(SyncWriteView):
    """Blocking reads and writes inside a transaction."""

    _view: Transaction


class SyncStore(SyncWriteView):
    """Blocking Store: `with SyncStore.open("./data", schema) as store: store.put(...)`."""

    _view: Store

    def __init__(self, store: Store, loop: _LoopThread) -> None:
        super().__init__(store, loop)
        self.store = store

    @classmethod
    def open(
        cls,
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
    ) -> SyncStore:
        """Open as the writer; the arguments are Store.open's."""
        return cls._start(
            url,
            Store.open(
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
            ),
        )

    @classmethod
    def open_reader(
        cls,
        url: str | os.PathLike[str],
        schema: SchemaArg,
        *,
        values: Values | None = None,
        timeout: float | None = READER_TIMEOUT,
        object_store_max_retries: int | None = None,
        poll_interval: float = 1.0,
        object_store_options: Mapping[str, str] | None = None,
        check_expiry: bool = True,
        cache_bytes: int | None = None,
    ) -> SyncStore:
        """Open read-only; the arguments are Store.open_reader's."""
        return cls._start(
            url,
            Store.open_reader(
                url,
                schema,
                values=values,
                timeout=timeout,
                object_store_max_retries=object_store_max_retries,
                poll_interval=poll_interval,
                object_store_options=object_store_options,
                check_expiry=check_expiry,
                cache_bytes=cache_bytes,
            ),
        )

    @classmethod
    def _start(cls, url: str | os.PathLike[str], opening: Any) -> SyncStore:
        """Run `opening` (a Store.open or open_reader) on a new loop thread."""
        loop = _LoopThread(str(url))
        try:
            store = loop.run(_await(opening))
        except BaseException:
            loop.stop()
            raise
        loop.where = store.where
        return cls(store, loop)

    def __enter__(self) -> SyncStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store and stop its loop thread. Idempotent."""
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self.store.close())
        finally:
            self._loop.stop()

    @property
    def readonly(self) -> bool:
        return self.store.readonly

    def put_raw(self, key: bytes, data: bytes) -> None:
        self._loop.run(self.store.put_raw(key, data))

    def flush(self) -> None:
        self._loop.run(self.store.flush())

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
        return self._loop.run(
            self.store.delete_range(
                record,
                *leading,
                partial=partial,
                version=version,
                prefix=prefix,
                start=start,
                end=end,
                max_keys=max_keys,
                durable=durable,
            )
        )

    def write(self, batch: Batch, *, durable: bool = False) -> None:
        self._loop.run(self.store.write(batch, durable=durable))

    @contextmanager
    def batch(self, *, durable: bool = False) -> Iterator[Batch]:
        """`with store.batch() as b:` one atomic write on exit (none if empty or on error)."""
        self.store._writable()
        batch = Batch(self.store)
        yield batch
        self.write(batch, durable=durable)

    @contextmanager
    def transaction(
        self, isolation: str = "serializable", *, durable: bool = False
    ) -> Iterator[SyncTransaction]:
        """`with store.transaction() as tx:` commits on exit, rolls back on error."""
        manager = self.store.transaction(isolation, durable=durable)
        tx = self._loop.run(manager.__aenter__())
        try:
            yield SyncTransaction(tx, self._loop)
        except BaseException as exc:
            self._loop.run(manager.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        self._loop.run(manager.__aexit__(None, None, None))

    @contextmanager
    def snapshot(self) -> Iterator[SyncView]:
        """`with store.snapshot() as snap:` a consistent point-in-time read view."""
        manager = self.store.snapshot()
        snap: Snapshot = self._loop.run(manager.__aenter__())
        try:
            yield SyncView(snap, self._loop)
        finally:
            self._loop.run(manager.__aexit__(None, None, None))

    def migrate(
        self,
        name: str,
        *,
        batch_size: int = 500,
        progress: Callable[[int], None] | None = None,
        durable: bool = True,
    ) -> int:
        """As Store.migrate, blocking."""
        return self._loop.run(
            self.store.migrate(name, batch_size=batch_size, progress=progress, durable=durable)
        )

    @staticmethod
    def clone(
        source: str | os.PathLike[str],
        destination: str | os.PathLike[str],
        *,
        checkpoint: str | None = None,
        source_options: Mapping[str, str] | None = None,
        destination_options: Mapping[str, str] | None = None,
    ) -> CloneResult:
        """Same as Store.clone, blocking."""
        return clone_sync(
            source,
            destination,
            checkpoint=checkpoint,
            source_options=source_options,
            destination_options=destination_options,
        )

    def changes(
        self,
        since: str | None = None,
        *,
        follow: bool = False,
        limit: int | None = None,
        poll_interval: float = 0.1,
    ) -> SyncChanges:
        """Same as Store.changes, blocking: `for change in store.changes(since=cursor):`."""
        batches = self.store.change_batches(
            since, follow=follow, limit=limit, poll_interval=poll_interval
        )
        return SyncChanges(batches, self._loop)

    def checkpoint(
        self, name: str | None = None, lifetime: TtlArg = None
    ) -> Checkpoint:
        """Same as Store.checkpoint."""
        return self._loop.run(self.store.checkpoint(name, lifetime))

    def checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        return self._loop.run(self.store.checkpoints(name))

    def refresh_checkpoint(
        self, checkpoint_id: str, lifetime: TtlArg
    ) -> Checkpoint:
        return self._loop.run(self.store.refresh_checkpoint(checkpoint_id, lifetime))

    def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        return self._loop.run(self.store.delete_checkpoint(checkpoint_id))


async def _await(opening: Any) -> Store:
    store: Store = await opening
    return store
