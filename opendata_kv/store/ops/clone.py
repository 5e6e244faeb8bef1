"""Clones: a new, independent, writable database holding a source database's state.

The clone is a copy of every live record (keys, values and remaining TTLs) read from the
source at a checkpoint (or, without one, from its latest state, WAL included) and written to a
destination that holds no database yet. It shares no object with the source: writes to either
never show in the other, and deleting the source leaves the clone whole, which is what a
backup, a restore or a branch to try a migration on needs. slatedb's own clone instead
references the source's SSTs by path inside one object store; rfcs/0008 says why that does
not fit two directories or two buckets.

A clone is complete or visibly not: `opendata-kv/clone.json` (objstore/sidecar.py) is written
beside the destination before its first record and removed only after its last record and
its source position are written. While it is there every open, dump and verify of the
destination fails with IncompleteCloneError; running the same clone again resumes after the
last key it wrote (`replace=True` starts over). A checkpoint made away from the writer is read
through the copy it keeps (checkpoints.py), WAL included, like every reader of it.

It copies raw rows, so it opens both databases below the typed store (store/opening.py: the
same opens Store.open_reader and Store.open make, without a schema) and writes slatedb
WriteBatches itself; StoreReader.clone calls it.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opendata_kv.errors import (
    InvalidArgumentError,
    StoreError,
)
from opendata_kv.native import calls, driver
from opendata_kv.native.errors import FOREIGN, call, translate, translating
from opendata_kv.native.slatedb import AdminBuilder, KeyRange, WriteBatch
from opendata_kv.objstore import sidecar
from opendata_kv.objstore.deadline import bounded
from opendata_kv.objstore.location import Location, parse_location
from opendata_kv.store import opening
from opendata_kv.store.expiry import is_expired, now_ms
from opendata_kv.store.indexes.layout import is_index_key
from opendata_kv.store.ops.checkpoints import Checkpoints, require_id
from opendata_kv.store.scan import native_scan_options
from opendata_kv.store.views import options_at
from opendata_kv.values.limits import check_stored_size

T = TypeVar("T")

#: Progress callback: (records copied so far, phase "copy" or "replay")
Progress = Callable[[int, str], None]


@dataclass(frozen=True)
class CloneResult:
    """What `clone` made: source, destination, the checkpoint read (None: latest state), how
    many records were copied and, apart, how many index rows (entries, metadata, catalog:
    RFC 0010) (in total, also over a resumed run), the source's feed cursor at the cloned
    state and whether this run resumed an interrupted clone."""

    source: str
    destination: str
    checkpoint: str | None
    records: int
    source_cursor: str | None = None
    resumed: bool = False
    index_rows: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "checkpoint": self.checkpoint,
            "records": self.records,
            "index_rows": self.index_rows,
            "source_cursor": self.source_cursor,
            "resumed": self.resumed,
        }


async def _manifest(location: Location, object_store: Any, where: str) -> Any:
    admin = AdminBuilder(location.db_path, object_store).build()
    return await call(admin.read_manifest(None), where)


async def _prepare(
    location: Location,
    options: Mapping[str, str] | None,
    side: sidecar.Sidecar,
    wanted: dict[str, Any],
    replace: bool,
) -> dict[str, Any] | None:
    """The marker of the interrupted clone to resume (None: start afresh); StoreError when
    the destination holds a database that is not an unfinished clone of the same source."""
    url = location.url
    if location.scheme == "file" and not os.path.isdir(location.path):
        return None
    marker = await side.get_json(sidecar.CLONE_MARKER)
    object_store = location.object_store(options)
    manifest = await _manifest(location, object_store, f"clone destination {url}")
    if marker is None:
        if manifest is not None:
            raise StoreError(
                f"clone destination {url} already holds a database (manifest {manifest.id}); "
                "a clone is made only into an empty location"
            )
        return None
    same = all(marker.get(k) == v for k, v in wanted.items())
    if not replace and not same:
        raise StoreError(
            f"clone destination {url} holds an unfinished clone of {marker.get('source')!r} "
            f"(checkpoint {marker.get('checkpoint')}), not of {wanted['source']!r} (checkpoint "
            f"{wanted['checkpoint']}): run that clone again to finish it, or pass "
            "replace=True (--replace) to start over"
        )
    if replace:
        if manifest is not None:
            admin = AdminBuilder(location.db_path, object_store).build()
            await call(admin.delete_db(True), f"clone destination {url}: delete")
        await side.delete(sidecar.CLONE_MARKER)
        return None
    return dict(marker)


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
    progress: Progress | None = None,
) -> CloneResult:
    """Copy `source` (at `checkpoint`, or its latest state) into a new database at
    `destination`, which must not hold one (an unfinished clone of the same source is
    resumed; `replace` starts it over). Reads the source only. `timeout` bounds each open and
    each read or write round trip (None: no bound). Returns a CloneResult."""
    if batch_size < 1:
        raise InvalidArgumentError(
            f"batch_size must be >= 1, got {batch_size}", field="batch_size", value=batch_size
        )
    src_url, dst_url = os.fspath(source), os.fspath(destination)
    src_location, dst_location = parse_location(src_url), parse_location(dst_url)
    for location, options in ((src_location, source_options), (dst_location, destination_options)):
        await bounded(sidecar.probe(location, options, timeout), timeout, f"clone: {location}")
    side = sidecar.Sidecar(dst_location, destination_options, timeout)
    reader = await _Source.open(src_location, source_options, checkpoint, timeout)
    async with reader:
        checkpoint = reader.checkpoint_id  # the id, also when `checkpoint` was a name
        wanted = {"source": src_url, "checkpoint": checkpoint}
        marker = await bounded(
            _prepare(dst_location, destination_options, side, wanted, replace),
            timeout,
            f"clone destination {dst_url}",
        )
        resumed = marker is not None
        if marker is None:
            started = datetime.datetime.now(datetime.timezone.utc).isoformat()
            marker = {**wanted, "started": started, "records": 0, "last_key": None}
            await side.put_json(sidecar.CLONE_MARKER, marker)  # refused writes fail here, at once
        copier = _Copier(reader, side, marker, batch_size, timeout, progress)
        flag = sidecar.CLONING.set(True)
        try:
            target = await _Target.open(dst_location, destination_options, timeout)
        finally:
            sidecar.CLONING.reset(flag)
        async with target:
            await copier.copy(target)
            cursor = await copier.source_cursor()
            await bounded(target.flush(), timeout, f"clone: flush {dst_url}")
        await side.put_json(
            "origin.json",
            {
                **wanted,
                "source_cursor": cursor,
                "records": copier.records,
                "index_rows": copier.index_rows,
            },
        )
    await side.delete(sidecar.CLONE_MARKER)
    return CloneResult(
        src_url, dst_url, checkpoint, copier.records, cursor, resumed, copier.index_rows
    )


@dataclass
class _Source:
    """The source, open read-only as Store.open_reader opens it (without a schema)."""

    db: Any
    location: Location
    object_store: Any
    checkpoint_id: str | None

    @property
    def where(self) -> str:
        return str(self.location)

    @classmethod
    async def open(
        cls,
        location: Location,
        options: Mapping[str, str] | None,
        checkpoint: str | None,
        timeout: float | None,
    ) -> _Source:
        if checkpoint is not None:
            require_id(checkpoint)
        timeout = opening.check_seconds(timeout, "timeout")
        db, object_store, checkpoint_id = await opening.bounded(
            opening.open_reader_db(location, options, 1.0, None, checkpoint),
            timeout,
            location,
            options,
            "open reader on",
        )
        return cls(db, location, object_store, checkpoint_id)

    async def __aenter__(self) -> _Source:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await opening.shut_down(self.db, self.where, readonly=True)


@dataclass
class _Target:
    """The destination, open as its writer as Store.open opens it (without a schema)."""

    db: Any
    where: str

    @classmethod
    async def open(
        cls, location: Location, options: Mapping[str, str] | None, timeout: float | None
    ) -> _Target:
        timeout = opening.check_seconds(timeout, "timeout")
        db, _ = await opening.bounded(
            opening.open_db(location, options, {}, True, False),
            timeout,
            location,
            options,
            "open",
        )
        return cls(db, str(location))

    async def write(self, batch: Any) -> None:
        """Apply a WriteBatch and make it durable."""
        with translating(f"batch write on {self.where}"):
            await calls.write(self.db, batch)
        await self.flush()

    async def flush(self) -> None:
        with translating(f"flush of {self.where}"):
            await calls.method(self.db, "flush")

    async def __aenter__(self) -> _Target:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await opening.shut_down(self.db, self.where, readonly=False)


class _Copier:
    """Copies the source's records in key order, noting progress in the clone marker."""

    def __init__(
        self,
        reader: _Source,
        side: sidecar.Sidecar,
        marker: dict[str, Any],
        batch_size: int,
        timeout: float | None,
        progress: Progress | None,
    ) -> None:
        self.reader = reader
        self.side = side
        self.marker = marker
        self.batch_size = batch_size
        self.timeout = timeout
        self.progress = progress
        self.records = int(marker.get("records") or 0)
        self.index_rows = int(marker.get("index_rows") or 0)
        self.where = f"clone of {reader.where}"

    async def copy(self, target: _Target) -> None:
        last = self.marker.get("last_key")
        start = None if last is None else bytes.fromhex(last)
        iterator = await bounded(
            call(
                self.reader.db.scan_with_options(
                    KeyRange(
                        start=start, start_inclusive=start is None, end=None, end_inclusive=False
                    ),
                    native_scan_options(False, fill_cache=False),
                ),
                self.where,
            ),
            self.timeout,
            self.where,
        )
        while True:
            with translating(self.where):
                rows = await bounded(iterator.next_batch(self.batch_size), self.timeout, self.where)
            if not rows:
                return
            now = now_ms()
            batch = WriteBatch()
            count = index_rows = 0
            for kv in rows:
                expire = kv.expire_ts
                if is_expired(expire, now):
                    continue
                _put(batch, kv.key, kv.value, expire, target.where)
                count += 1
                index_rows += is_index_key(kv.key)
            if count:
                await bounded(target.write(batch), self.timeout, self.where)
            self.records += count - index_rows
            self.index_rows += index_rows
            self.marker["records"] = self.records
            self.marker["index_rows"] = self.index_rows
            self.marker["last_key"] = rows[-1].key.hex()
            await self.side.put_json(sidecar.CLONE_MARKER, self.marker)
            if self.progress is not None:
                self.progress(self.records, "copy")

    async def source_cursor(self) -> str | None:
        """The source's feed cursor right after the cloned state: the checkpoint's; None for
        a latest-state clone (no pinned position)."""
        source = self.reader
        if source.checkpoint_id is None:
            return None
        checkpoints = Checkpoints(source.location.db_path, source.object_store, source.where)
        found = [cp for cp in await checkpoints.list() if cp.id == source.checkpoint_id]
        return found[0].cursor if found else None


def _put(batch: Any, key: bytes, value: bytes, expire: int | None, where: str) -> None:
    """Queue one row as a raw put does (size checked, expiry kept)."""
    check_stored_size(value)
    options = options_at(expire)
    try:
        if options is None:
            calls.batch_put(batch, key, value)
        else:
            batch.put_with_options(key, value, options)
    except FOREIGN as exc:
        raise translate(exc, f"batch put on {where}") from exc


def clone_sync(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    checkpoint: str | None = None,
    source_options: Mapping[str, str] | None = None,
    destination_options: Mapping[str, str] | None = None,
    batch_size: int = 1000,
    replace: bool = False,
    timeout: float | None = None,
    progress: Progress | None = None,
) -> CloneResult:
    """`clone` for code without an event loop (same arguments), run as SyncStore.clone is:
    on a private event loop, also when called from inside a running one."""
    return driver.run(
        clone(
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
