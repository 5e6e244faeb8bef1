"""Migration: rewrite the records of older key versions as the newest version, in atomic
batches that put the new record and delete the old one, so a record is never lost or doubled
wherever the migration stops."""

from __future__ import annotations

from collections.abc import (
    Callable,
)
from typing import TYPE_CHECKING, Any

from opendata_kv.errors import (
    check_count,
)
from opendata_kv.keys import RecordType
from opendata_kv.native import calls
from opendata_kv.native.errors import call, translating
from opendata_kv.native.slatedb import (
    KeyRange,
)
from opendata_kv.store.batch import Batch
from opendata_kv.store.expiry import is_expired, now_ms
from opendata_kv.store.scan import native_scan_options

if TYPE_CHECKING:
    from opendata_kv.store.writer import Store


async def migrate(
    store: Store,
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
    db = store._writable()
    current = store.schema.get(name)
    moved = 0
    for old in store.schema.versions(name):
        if old is current:
            continue
        while True:
            count = await _pass(store, db, old, current, batch_size, moved, progress, durable)
            if not count:
                break
            moved += count
    return moved


async def _pass(
    store: Store,
    db: Any,
    old: RecordType,
    current: RecordType,
    batch_size: int,
    before: int,
    progress: Callable[[int], None] | None,
    durable: bool,
) -> int:
    """One walk over `old`'s key range; the number of live records moved."""
    where = f"migrate of {old.name} v{old.version} on {store.where}"
    lo, hi = old.range()
    key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
    # The iterator reads at the sequence number of its creation: the batches this pass
    # writes (new records, tombstones of old ones) do not show up in it.
    iterator = await call(
        calls.method(db, "scan_with_options", key_range, native_scan_options(False, False)), where
    )
    values = store.values
    moved = 0
    now = now_ms()
    while True:
        with translating(where):
            keys, data, expires = await calls.next_columns(iterator, batch_size)
        if not keys:
            return moved
        batch = Batch(store)
        live = 0
        for key, stored, expire in zip(keys, data, expires, strict=True):
            if is_expired(expire, now):
                batch.delete_raw(key)  # expired: logically gone, nothing to move
                continue
            value = values.decode(old, key, stored)  # upgraded to today's model
            new_key = values.upgraded_key(old.decode(key))
            batch.put_raw(new_key, values.encode(current, value, new_key), expire_at=expire)
            batch.delete_raw(key)
            live += 1
        await store.write(batch, durable=durable)
        if live:
            moved += live
            if progress is not None:
                progress(before + moved)
