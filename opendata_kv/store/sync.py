"""SyncStore: the Store API, blocking, for code without an event loop.

Each SyncStore runs a private asyncio loop on a daemon thread and submits every call to it,
so one SyncStore may be used from many threads at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from opendata_kv.keys import Schema
from opendata_kv.store.checkpoints import Checkpoint
from opendata_kv.store.clone import CloneResult, clone_sync
from opendata_kv.store.feed import Change
from opendata_kv.store.scan import Record, Scan
from opendata_kv.store.store import Batch, Snapshot, Store, Transaction
from opendata_kv.store.views import Fields, ReadView, Target
from opendata_kv.values import Values

T = TypeVar("T")


class _LoopThread:
    """A private event loop on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="opendata-kv-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a SyncStore cannot be called from its own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncScan:
    """A blocking iterator over a Scan, fetched a batch at a time."""

    def __init__(self, scan: Scan, run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._scan = scan
        self._run = run
        self._chunk: list[Record] = []
        self._pos = 0

    @property
    def cursor(self) -> bytes | None:
        """Raw key of the last record yielded; pass as `after=` to resume."""
        if self._pos:
            return self._chunk[self._pos - 1].raw_key
        return self._scan.cursor if not self._chunk else None

    def __iter__(self) -> Iterator[Record]:
        return self

    def __next__(self) -> Record:
        if self._pos >= len(self._chunk):
            self._chunk = self._run(self._scan.next_chunk())
            self._pos = 0
            if not self._chunk:
                raise StopIteration
        record = self._chunk[self._pos]
        self._pos += 1
        return record

    def to_list(self) -> list[Record]:
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
        return self._loop.run(self._view.get(target, fields, default=default, upgrade=upgrade))

    def get_raw(self, key: bytes) -> bytes | None:
        return self._loop.run(self._view.get_raw(key))

    def exists(self, target: Target, fields: Fields = None) -> bool:
        return self._loop.run(self._view.exists(target, fields))

    def scan(self, record: Any, *leading: Any, **options: Any) -> SyncScan:
        """Same arguments as Store.scan."""
        return SyncScan(self._view.scan(record, *leading, **options), self._loop.run)

    def scan_all(self, **options: Any) -> SyncScan:
        """Same arguments as Store.scan_all."""
        return SyncScan(self._view.scan_all(**options), self._loop.run)


class SyncWriteView(SyncView):
    """Blocking typed put / delete over a Store or a Transaction."""

    _view: Store | Transaction

    def put(
        self,
        target: Target,
        fields: Fields = None,
        value: Any = None,
        *,
        ttl: float | datetime.timedelta | None = None,
    ) -> None:
        self._loop.run(self._view.put(target, fields, value, ttl=ttl))

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
    def open(cls, url: str | os.PathLike[str], schema: Schema, **options: Any) -> SyncStore:
        """Open as the writer; same options as Store.open."""
        loop = _LoopThread()
        try:
            store = loop.run(_await(Store.open(url, schema, **options)))
        except BaseException:
            loop.stop()
            raise
        return cls(store, loop)

    @classmethod
    def open_reader(
        cls, url: str | os.PathLike[str], schema: Schema, **options: Any
    ) -> SyncStore:
        """Open read-only; same options as Store.open_reader."""
        loop = _LoopThread()
        try:
            store = loop.run(_await(Store.open_reader(url, schema, **options)))
        except BaseException:
            loop.stop()
            raise
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

    def migrate(self, name: str, **options: Any) -> int:
        return self._loop.run(self.store.migrate(name, **options))

    @staticmethod
    def clone(
        source: str | os.PathLike[str], destination: str | os.PathLike[str], **options: Any
    ) -> CloneResult:
        """Same as Store.clone, blocking."""
        return clone_sync(source, destination, **options)

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
        self, name: str | None = None, lifetime: float | datetime.timedelta | None = None
    ) -> Checkpoint:
        """Same as Store.checkpoint."""
        return self._loop.run(self.store.checkpoint(name, lifetime))

    def checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        return self._loop.run(self.store.checkpoints(name))

    def refresh_checkpoint(
        self, checkpoint_id: str, lifetime: float | datetime.timedelta | None
    ) -> Checkpoint:
        return self._loop.run(self.store.refresh_checkpoint(checkpoint_id, lifetime))

    def delete_checkpoint(self, checkpoint_id: str) -> None:
        self._loop.run(self.store.delete_checkpoint(checkpoint_id))


async def _await(opening: Any) -> Store:
    store: Store = await opening
    return store
