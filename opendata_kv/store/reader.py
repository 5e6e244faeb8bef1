"""StoreReader: the read side of a database (also what a read-only reader is), with the
operations that never write: the change feed, checkpoints, clones; and how stores open.

    async with Store.open_reader("./data", schema) as reader:
        async for record in reader.scan("post", "did:plc:x"):
            ...
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Generator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from opendata_kv.errors import (
    FencedError,
    ReadOnlyError,
    SnapshotGoneError,
    StoreClosedError,
)
from opendata_kv.keys import Schema
from opendata_kv.native import driver
from opendata_kv.native.slatedb import DefaultMetricsRecorder, metric_kind
from opendata_kv.objstore import sidecar
from opendata_kv.objstore.location import Location, parse_location
from opendata_kv.store import metrics, splitting
from opendata_kv.store.fencing import Fence
from opendata_kv.store.gc_runner import GcRunner
from opendata_kv.store.indexes import admin as index_admin
from opendata_kv.store.indexes.read import IndexReads
from opendata_kv.store.open_options import OpenOptions
from opendata_kv.store.opening import (
    bounded,
    durable_seq,
    is_stopped,
    open_reader_db,
    shut_down,
)
from opendata_kv.store.ops import feed
from opendata_kv.store.ops.checkpoints import Checkpoint, Checkpoints, require_id
from opendata_kv.store.ops.clone import CloneResult, clone
from opendata_kv.store.ops.feed import ChangeBatch
from opendata_kv.store.ops.feed_rows import (
    Change,
    IndexChange,
    IndexShape,
    RawChange,
    shapes_of,
)
from opendata_kv.store.ranges import KeyRange, RangeKeywords
from opendata_kv.store.schema_arg import SchemaArg, as_schema
from opendata_kv.store.splitting import SPLITS_TIMEOUT, SplitTarget
from opendata_kv.store.views import (
    ReadView,
    TtlArg,
    read_window,
)
from opendata_kv.values import Values

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from opendata_kv.store.indexes.registry import IndexSet

S = TypeVar("S", bound="StoreReader")
T = TypeVar("T")


class StoreReader(IndexReads, ReadView):
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
        self.read_window = read_window(location.scheme)
        self._closed = False
        self._object_store: Any = None  # set by the openers: admin and WAL reads share it
        self._gc: GcRunner | None = None  # the writer's garbage collection (gc_runner.py)
        self.checkpoint_id: str | None = None  # the checkpoint a pinned reader reads
        self.poll_interval = 1.0  # a reader's manifest poll interval, seconds
        self._indexes: IndexSet | None = None  # secondary indexes (store/indexes), set at open
        self._fence = Fence()  # a writer's acknowledged and flushed writes (store/fencing.py)

    # --- change feed and checkpoints -------------------------------------------------------------

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
    ) -> AsyncGenerator[Change, None]: ...

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
    ) -> AsyncGenerator[Change | IndexChange, None]: ...

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
    ) -> AsyncGenerator[Change | RawChange, None]: ...

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
    ) -> AsyncGenerator[Change | RawChange | IndexChange, None]: ...

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
    ) -> AsyncGenerator[Any, None]:
        """Every write still in the WAL after `since`, as typed Changes in sequence order.

        `since`: a cursor of any change this feed yields (or a Checkpoint's); None starts at
        the oldest WAL file the garbage collector has kept. Resuming from a cursor yields
        exactly the changes after it, across writer restarts and crashes. A cursor whose WAL
        file was already collected raises ChangeCursorExpiredError; a malformed one
        ChangeCursorError. `follow`: keep waiting for new changes (polling every
        `poll_interval` seconds) until the consumer stops iterating or the task is
        cancelled; otherwise stop at the WAL's end as it was when the call started. `limit`:
        stop after that many changes. The feed only reads: it works on a writer and on a
        reader alike.

        What it yields: `Change`s (key a Key) of the records the schema owns. `on_error`: a
        change that does not decode raises ChangeDecodeError (carrying the last delivered
        cursor and the bad change's), is skipped ("skip") or comes as a `RawChange` ("raw").
        `on_unknown`: a key no RecordType owns raises ChangeDecodeError (default), is
        skipped, or comes as a RawChange ("raw"). Writes of secondary indexes are left out
        unless `indexes=True`, which yields them as `IndexChange`s naming their index.
        """
        batches: Any = self.change_batches
        return feed.flatten(
            batches(
                since,
                follow=follow,
                limit=limit,
                poll_interval=poll_interval,
                on_error=on_error,
                on_unknown=on_unknown,
                indexes=indexes,
            )
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
    ) -> AsyncGenerator[ChangeBatch[Change], None]: ...

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
    ) -> AsyncGenerator[ChangeBatch[Change | IndexChange], None]: ...

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
    ) -> AsyncGenerator[ChangeBatch[Change | RawChange], None]: ...

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
    ) -> AsyncGenerator[ChangeBatch[Change | RawChange | IndexChange], None]: ...

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
    ) -> AsyncGenerator[ChangeBatch[Any], None]:
        """Store.changes a WAL file at a time: a ChangeBatch (a list, never empty) per WAL
        file, the first saying what the garbage collector took (docs/operations.md)."""
        self.check_open()
        side, identity = sidecar.of(self._object_store)
        source = feed.FeedSource(
            feed.wal_reader(self.location.db_path, self._object_store),
            feed.admin(self.location.db_path, self._object_store, self.where),
            self.schema,
            self.values,
            self.where,
            identity=identity,
            list_wal=lambda: sidecar.wal_ids(self.location, side),
            shapes=self._index_shapes,
        )
        options = feed.FeedOptions(
            follow=follow,
            limit=limit,
            poll_interval=poll_interval,
            on_error=on_error,  # type: ignore[arg-type]  # checked by the feed
            on_unknown=on_unknown,  # type: ignore[arg-type]
            indexes=indexes,
        )
        return feed.change_batches(source, since, options)

    async def _index_shapes(self) -> dict[str, IndexShape]:
        """How the entries of every index decode, for the feed: the declared Index objects
        and the definitions stored now (read again, so an index added later is known)."""
        stored = await index_admin.stored_metas(self)
        declared = {} if self._indexes is None else self._indexes.declared
        return shapes_of(declared, stored)

    @staticmethod
    async def clone(
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
        """Copy `source` (at `checkpoint`, or its latest state) into a new, independent
        database at `destination`; an unfinished clone of the same source resumes, `replace`
        starts over (see opendata_kv.store.ops.clone). Returns a CloneResult."""
        return await clone(
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

    async def checkpoint(self, name: str | None = None, lifetime: TtlArg = None) -> Checkpoint:
        """Pin the current state as a checkpoint holding every write acknowledged so far.

        On the writer the memtable is flushed to an SST first. On a reader nothing can be
        flushed: if the WAL holds writes not yet in an SST, CheckpointError says so and no
        checkpoint is kept. `lifetime` (seconds or a timedelta): the checkpoint expires after
        it; None keeps it until deleted. Returns its id, name, times and feed cursor.
        """
        writer = None if self.readonly else self._writable()
        mark = self._fence.acked  # the writer's memtable flush makes these durable
        made = await self._checkpoints().create(writer=writer, name=name, lifetime=lifetime)
        self._fence.covered(mark, None if writer is None else durable_seq(writer))
        return made

    async def splits(
        self,
        target: SplitTarget,
        *leading: Any,
        n: int | None = None,
        target_bytes: int | None = None,
        timeout: float | None = SPLITS_TIMEOUT,
        **bounds: Unpack[RangeKeywords],
    ) -> list[KeyRange]:
        """The key range of `target` cut into contiguous KeyRanges of about equal estimated
        bytes, for parallel reads (RFC 0014): each a `range=` for any scan form.

        `target`: a RecordType or record name (with leading field values and bounds as scan
        takes them), raw prefix bytes, a ScanRange (raw keys) or a KeyRange. The ranges are
        sorted and cover its range exactly once (the first starts at its start, each ends
        where the next starts, the last ends at its end), estimates within 2x of each other.
        `n`: at most that many (fewer when the data cannot be cut finer); `target_bytes`:
        about that many bytes each; neither: one per 64 MiB. Sizes come from the manifest
        (each SST's first and last key and size) and the WAL rows no SST holds yet; on a
        reader pinned to a checkpoint, from that checkpoint. `timeout` bounds those reads.
        """
        return await splitting.splits(self, target, leading, n, target_bytes, timeout, bounds)

    async def checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        """The store's checkpoints (only those named `name` if given), oldest first."""
        return await self._checkpoints().list(name)

    async def refresh_checkpoint(self, checkpoint_id: str, lifetime: TtlArg) -> Checkpoint:
        """Give a checkpoint a new lifetime from now (None: keep it until deleted)."""
        return await self._checkpoints().refresh(require_id(checkpoint_id), lifetime)

    async def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """Delete a checkpoint (id or unique name) and return what was deleted
        (CheckpointError if the store has none with this id)."""
        return await self._checkpoints().delete(require_id(checkpoint_id))

    async def close(self) -> None:
        """Shut the database down (flushing what the writer buffered). Idempotent.

        A writer another one fenced raises FencedError when it acknowledged writes after its
        last flush() that returned (they are lost; `unflushed` says how many), and `async with`
        does so too unless the block already raised a FencedError. Otherwise a database
        slatedb has already stopped (after an object-store failure an earlier call reported)
        closes quietly: raising again would only hide the error that stopped it.
        """
        if self._closed:
            return
        self._closed = True
        if self._gc is not None:
            self._gc.stop()  # without waiting for a pass in flight (gc_runner.py)
        # a database slatedb stopped earlier (a failure a call reported) wrote nothing since:
        # only a running one's durable sequence number says whether its close wrote
        running = not self.readonly and not is_stopped(self._source)
        was_fenced = await shut_down(self._source, self.where, self.readonly)
        if not self.readonly:
            durable = durable_seq(self._source) if running else None
            error = self._fence.closing_error(self.where, was_fenced, durable)
            if error is not None:
                raise error

    async def _close_after(self, raised: object) -> None:
        """close() at the end of a `with` block that raised `raised` (None if it did not): a
        FencedError from the block already says the writer was fenced, so close's is dropped."""
        try:
            await self.close()
        except FencedError:
            if not isinstance(raised, FencedError):
                raise

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._close_after(exc_info[1])

    def __repr__(self) -> str:
        kind = "reader" if self.readonly else "writer"
        return f"<{type(self).__name__} {kind} {self.where} {self.schema!r}>"

    def _writable(self) -> Any:
        """The slatedb Db to write through (ReadOnlyError on a reader, StoreClosedError once
        closed)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.where} is open read-only; writes need Store.open()")
        self.check_open()
        if self._fence.error is not None:  # told of a fence: refused (store/fencing.py)
            raise self._fence.refusal(self.where)
        return self._source


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
            await self._store._close_after(exc_info[1])


async def _open_reader(
    url: str | os.PathLike[str], schema_arg: SchemaArg, values: Values | None, options: OpenOptions
) -> StoreReader:
    schema, values = as_schema(schema_arg, values)
    location = parse_location(url)
    telemetry = metrics.telemetry(options.meter_provider, str(location))
    recorder = (
        DefaultMetricsRecorder() if telemetry is not None and options.slatedb_metrics else None
    )
    reader, object_store, checkpoint_id = await bounded(
        open_reader_db(
            location,
            options.object_store_options,
            options.poll_interval,
            options.object_store_max_retries,
            options.checkpoint,
            options.cache_bytes,
            recorder,
        ),
        options.timeout_for(reader=True),
        location,
        options.object_store_options,
        "open reader on",
    )
    store = StoreReader(
        reader, location, schema, values, readonly=True, check_expiry=options.check_expiry
    )
    store._object_store = object_store
    store.checkpoint_id = checkpoint_id
    store.poll_interval = options.poll_interval
    if telemetry is not None:
        metrics.instrument(store, telemetry)
        if recorder is not None:
            metrics.bridge(telemetry, recorder, metric_kind)
    store._indexes = await index_admin.load(store, options.indexes)
    return store


# --- batches, transactions, snapshots ------------------------------------------------------------
