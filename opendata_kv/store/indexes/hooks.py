"""The small hooks Store, Batch and Transaction call to keep indexes current (RFC 0010)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from opendata_kv.errors import TransactionConflictError
from opendata_kv.native import calls
from opendata_kv.native.errors import call, translating
from opendata_kv.store.indexes.layout import is_index_key
from opendata_kv.store.indexes.maintain import DELETED, Raw, Tracked, Writes, plan
from opendata_kv.store.indexes.old_values import old_values, point_reads
from opendata_kv.store.indexes.registry import IndexSet
from opendata_kv.store.views import put_args

if TYPE_CHECKING:
    from opendata_kv.store.batch import Batch, Transaction
    from opendata_kv.store.writer import Store

__all__ = [
    "DELETED",
    "Raw",
    "add_writes",
    "track",
    "tracked_list",
    "transaction_commit",
    "transaction_write",
    "write_tracked",
]


def tracked_list(indexes: IndexSet | None) -> list[Tracked] | None:
    """A new batch's list of tracked writes: None when the store maintains no index."""
    return [] if indexes is not None and indexes.active else None


def track(batch: Batch, key: bytes, new: Any) -> None:
    """Remember a write of `key` when its record type is indexed."""
    tracked = batch._tracked
    indexes = batch._store._indexes
    if tracked is None or indexes is None or is_index_key(key):
        return
    record_type = indexes.schema.try_record_type_of(key)
    if record_type is not None and indexes.of(record_type):
        tracked.append((key, record_type, new))


def put_value(target: Any, fields: Any, value: Any) -> Any:
    """The value object of a put's arguments (as Store.put reads them)."""
    return put_args(target, fields, value)[1]


async def write_tracked(store: Store, batch: Batch) -> None:
    """Write `batch` with the index changes of its tracked writes, reading the old values and
    writing under the index lock (so no other writer of this store slips in between)."""
    indexes = store._indexes
    assert indexes is not None and batch._tracked is not None
    db = store._writable()
    async with indexes.lock.held(store.where):
        replaced = functools.partial(
            old_values, store._source, store.where, check_expiry=store.check_expiry
        )
        writes = await plan(
            indexes, store.values, batch._tracked, store._fetch_many, fetch_old=replaced
        )
        add_writes(batch, writes)
        with translating(f"batch write on {store.where}"):
            await calls.write(db, batch.write_batch())


def add_writes(batch: Batch, writes: Writes) -> None:
    """Queue planned index writes in `batch` (puts with their options, deletes)."""
    wb = batch._wb()
    for key, data, options in writes:
        if data is None:
            wb.delete(key)
        elif options is None:
            calls.batch_put(wb, key, data)
        else:
            wb.put_with_options(key, data, options)  # a plain call: no future


async def transaction_write(tx: Transaction, key: bytes, new: Any) -> None:
    """Apply the index changes of one write inside a transaction (read through it, so its
    own earlier writes count), before the record write itself."""
    store = tx._store
    indexes = store._indexes
    if indexes is None or not indexes.active or is_index_key(key):
        return
    record_type = indexes.schema.try_record_type_of(key)
    if record_type is None or not indexes.of(record_type):
        return
    if tx._generation is None:
        tx._generation = indexes.generation
    # expired values marked (as the store's reads would judge them)
    replaced = functools.partial(point_reads, tx._source, tx.where, check_expiry=store.check_expiry)
    writes = await plan(
        indexes, store.values, [(key, record_type, new)], tx._fetch_many, fetch_old=replaced
    )
    for entry, data, options in writes:
        if data is None:
            await call(calls.method(tx._source, "delete", entry), f"delete in {tx.where}")
        elif options is None:
            await call(calls.method(tx._source, "put", entry, data), f"put in {tx.where}")
        else:
            put = calls.method(tx._source, "put_with_options", entry, data, options)
            await call(put, f"put in {tx.where}")


async def transaction_commit(tx: Transaction) -> None:
    """Commit a transaction that changed index entries under the index lock, refusing it when
    an index's state or build position moved since it planned them."""
    indexes = tx._store._indexes
    assert indexes is not None
    async with indexes.lock.held(tx._store.where):
        if tx._generation != indexes.generation:
            await call(calls.method(tx._source, "rollback"), f"rollback of {tx.where}")
            raise TransactionConflictError(
                f"commit of {tx.where}: an index build or state change happened while this "
                "transaction planned its index entries; retry it"
            )
        await call(calls.method(tx._source, "commit"), f"commit of {tx.where}")
