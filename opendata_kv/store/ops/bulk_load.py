"""Bulk load: exact (key, value) bytes written in atomic batches, each checked against the
store's schema first and indexed as a typed put would be (what `opendata-kv import` runs)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any, NamedTuple

from opendata_kv.errors import InvalidArgumentError, check_count
from opendata_kv.keys import RecordType
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


def check_pair(
    store: Store, key: bytes, data: bytes, *, strict: bool, expire_at: int | None = None
) -> Checked:
    """The pair decoded by the store's schema and codecs, or the KeyDecodeError /
    ValueDecodeError (naming record, key and bytes) they raise; with `strict`, a key no record
    owns is refused too (UnknownRecordError), else it is stored as raw bytes like put_raw."""
    check_stored_size(data)
    schema = store.schema
    owner = schema.record_type_of(key) if strict else schema.try_record_type_of(key)
    if owner is None:
        return Checked(key, data, None, None, UNDECODED, expire_at)
    fields = owner.decode(key)
    store.values.check_caps(owner, data, key)
    value = store.values.decode(owner, key, data, upgrade=False)
    return Checked(key, data, owner, fields, value, expire_at)


async def write_checked(store: Store, pairs: list[Checked]) -> None:
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
    """Check and write `pairs`, `batch_size` per atomic batch (a pair the schema refuses
    raises before anything of its batch is written); returns how many were written."""
    check_count(batch_size, "batch_size", 1)
    if not isinstance(strict, bool):
        raise InvalidArgumentError(f"strict must be a bool, got {strict!r}", field="strict")
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
