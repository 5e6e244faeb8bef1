"""Clones: a new, independent, writable database holding a source database's state.

The clone is a copy of every live record (keys, values and remaining TTLs) read from the
source at a checkpoint (or, without one, from its latest state, WAL included) and written to a
destination that holds no database yet. It shares no object with the source: writes to either
never show in the other, and deleting the source leaves the clone whole, which is what a
backup, a restore or a branch to try a migration on needs. slatedb's own clone instead
references the source's SSTs by path inside one object store; rfcs/0008 says why that does
not fit two directories or two buckets.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slatedb.uniffi import AdminBuilder, Error, KeyRange

from opendata_kv.errors import InvalidArgumentError, StoreError
from opendata_kv.keys import Schema
from opendata_kv.store.location import parse_location
from opendata_kv.store.native.errors import call, translate
from opendata_kv.store.scan import scan_options
from opendata_kv.store.store import Batch, Store


@dataclass(frozen=True)
class CloneResult:
    """What `clone` made: source, destination, the checkpoint read (None: latest state) and
    how many records were copied."""

    source: str
    destination: str
    checkpoint: str | None
    records: int

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "checkpoint": self.checkpoint,
            "records": self.records,
        }


async def _refuse_existing(url: str, options: Mapping[str, str] | None) -> None:
    location = parse_location(url)
    if location.scheme == "file" and not os.path.isdir(location.path):
        return
    try:
        admin = AdminBuilder(location.db_path, location.object_store(options)).build()
        manifest = await admin.read_manifest(None)
    except Error as exc:
        raise translate(exc, f"clone destination {url}") from exc
    if manifest is not None:
        raise StoreError(
            f"clone destination {url} already holds a database (manifest {manifest.id}); "
            "a clone is made only into an empty location"
        )


async def clone(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    checkpoint: str | None = None,
    source_options: Mapping[str, str] | None = None,
    destination_options: Mapping[str, str] | None = None,
    batch_size: int = 1000,
) -> CloneResult:
    """Copy `source` (at `checkpoint`, or its latest state) into a new database at
    `destination`, which must not hold one. Reads the source only; returns a CloneResult."""
    if batch_size < 1:
        raise InvalidArgumentError(
            f"batch_size must be >= 1, got {batch_size}", field="batch_size", value=batch_size
        )
    src_url, dst_url = os.fspath(source), os.fspath(destination)
    await _refuse_existing(dst_url, destination_options)
    records = 0
    async with Store.open_reader(
        src_url, Schema(), checkpoint=checkpoint, object_store_options=source_options
    ) as reader:
        checkpoint = reader.checkpoint_id  # the id, also when `checkpoint` was a name
        where = f"clone of {src_url}"
        iterator = await call(
            reader._source.scan_with_options(
                KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False),
                scan_options(False, fill_cache=False),
            ),
            where,
        )
        async with Store.open(
            dst_url, Schema(), object_store_options=destination_options
        ) as target:
            while True:
                try:
                    rows = await iterator.next_batch(batch_size)
                except Error as exc:
                    raise translate(exc, where) from exc
                if not rows:
                    break
                now = time.time_ns() // 1_000_000
                batch = Batch(target)
                for kv in rows:
                    expire = kv.expire_ts
                    if expire is not None and expire <= now:
                        continue
                    batch.put_raw(kv.key, kv.value, expire_at=expire)
                records += len(batch)
                await target.write(batch)
            await target.flush()
    return CloneResult(src_url, dst_url, checkpoint, records)


def clone_sync(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    checkpoint: str | None = None,
    source_options: Mapping[str, str] | None = None,
    destination_options: Mapping[str, str] | None = None,
) -> CloneResult:
    """`clone` for code without an event loop (same arguments)."""
    return asyncio.run(
        clone(
            source,
            destination,
            checkpoint=checkpoint,
            source_options=source_options,
            destination_options=destination_options,
        )
    )
