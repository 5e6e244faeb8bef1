"""Bulk load: exact (key, value) bytes written in atomic batches, each checked against the
store's schema first and indexed as a typed put would be (what `opendata-kv import` runs).

A load is a writer of records, so it never leaves a stored index stale (RFC 0010): the writer's
IndexSet maintains every index it can, a pair under the index key space (the library's own
rows: export leaves them out, the load's upkeep writes them) is refused, and so is a pair no
record of the schema owns while a stored index keeps entries (it might be one of its records,
and its entries cannot be computed); with no record in the schema at all, before anything is
written (check_loadable).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any, NamedTuple

from opendata_kv.errors import IndexStateError, InvalidArgumentError, check_count, show_bytes
from opendata_kv.keys import RecordType
from opendata_kv.store.indexes.access import OpWrites, RowReads
from opendata_kv.store.indexes.layout import ROOT, owned_part
from opendata_kv.store.views import options_at
from opendata_kv.store.writer import Store
from opendata_kv.store.writes import UNDECODED, Op, Put
from opendata_kv.values.limits import check_stored_size

#: One stored pair to load: its raw key and value bytes.
Pair = tuple[bytes, bytes]


class Checked(NamedTuple):
    """One pair as the schema read it (owner None: a key no record owns, stored raw)."""

    key: bytes
    data: bytes
    owner: RecordType | None
    fields: Any
    value: Any
    expire_at: int | None = None  # absolute expiry, Unix ms (None: no TTL)


def kept_indexes(store: RowReads) -> list[str]:
    """The stored indexes of `store` that keep entries now (IndexSet.keeping_entries): those
    a pair no record of its schema owns could leave stale."""
    indexes = store._indexes
    return [] if indexes is None else indexes.keeping_entries()


def check_loadable(store: Store, *, strict: bool) -> None:
    """Refuse, before anything is read or written, a load that could only leave stored indexes
    stale: not `strict` into a store whose schema has no record (every pair is raw: which are
    records of an index cannot be told) while a stored index keeps entries. IndexStateError
    naming them."""
    if strict or store.schema.names():
        return
    kept = kept_indexes(store)
    if kept:
        raise IndexStateError(
            f"{store.where} stores indexes that keep entries ({', '.join(kept)}), and a load "
            "whose schema defines no record cannot tell which pairs are their records, so it "
            "would leave them stale: load with the schema that defines their records (and the "
            "declarations of indexes that need a function), or drop them first and build them "
            "again after",
            index=", ".join(kept),
        )


def check_pair(
    store: Store, key: bytes, data: bytes, *, strict: bool, expire_at: int | None = None
) -> Checked:
    """The pair decoded by the store's schema and codecs, or the KeyDecodeError /
    ValueDecodeError (naming record, key and bytes) they raise; with `strict`, a key no record
    owns is refused too (UnknownRecordError), else it is stored as raw bytes like put_raw,
    unless a stored index keeps entries (IndexStateError: it might be one of its records). A
    key under the index key space is refused first (InvalidArgumentError naming the part)."""
    if key.startswith(ROOT):
        raise InvalidArgumentError(
            f"key {show_bytes(key)} is {owned_part(key)}, under the index key space "
            f"{show_bytes(ROOT)} that the library owns: a load writes records, and their index "
            "rows are written by its index upkeep (export leaves them out)",
            field="key",
            value=key,
        )
    check_stored_size(data)
    schema = store.schema
    owner = schema.record_type_of(key) if strict else schema.try_record_type_of(key)
    if owner is None:
        kept = kept_indexes(store)
        if kept:
            raise IndexStateError(
                f"key {show_bytes(key)} belongs to no record of the schema, so its index "
                f"entries cannot be computed, and {store.where} stores indexes that keep "
                f"entries ({', '.join(kept)}): it might be one of their records",
                index=", ".join(kept),
            )
        return Checked(key, data, None, None, UNDECODED, expire_at)
    fields = owner.decode(key)
    store.values.check_caps(owner, data, key)
    value = store.values.decode(owner, key, data, upgrade=False)
    return Checked(key, data, owner, fields, value, expire_at)


async def write_checked(store: OpWrites, pairs: list[Checked]) -> None:
    """Write checked pairs in one atomic native write with their index ops (the value each
    decoded to is handed on, so index upkeep does not decode it again), each with its expiry."""
    plan = store.values.plan
    ops: list[Op] = [
        Put(
            p.key,
            p.data,
            p.expire_at,
            p.value if p.owner is not None and plan(p.owner).upgrade is None else UNDECODED,
            options_at(p.expire_at),
        )
        for p in pairs
    ]
    await store._write_ops(store._writable(), ops)


async def load_pairs(
    store: Store,
    pairs: Iterable[Pair] | AsyncIterable[Pair],
    *,
    batch_size: int = 1000,
    strict: bool = True,
    progress: Callable[[int], Any] | None = None,
) -> int:
    """Check and write `pairs`, `batch_size` per atomic batch (a pair the schema refuses, or
    one under the index key space, raises before anything of its batch is written, the batches
    before it kept; check_loadable first); returns how many were written."""
    check_count(batch_size, "batch_size", 1)
    if not isinstance(strict, bool):
        raise InvalidArgumentError(f"strict must be a bool, got {strict!r}", field="strict")
    check_loadable(store, strict=strict)
    total = 0
    batch: list[Pair] = []

    async def send() -> None:
        nonlocal total, batch
        checked = [check_pair(store, key, data, strict=strict) for key, data in batch]
        await write_checked(store, checked)
        total += len(batch)
        batch = []
        if progress is not None:
            progress(total)

    if isinstance(pairs, AsyncIterable):
        async for pair in pairs:
            batch.append(pair)
            if len(batch) >= batch_size:
                await send()
    else:
        for pair in pairs:
            batch.append(pair)
            if len(batch) >= batch_size:
                await send()
    if batch:
        await send()
    return total
