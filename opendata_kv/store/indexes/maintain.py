"""Index maintenance: the index writes that go with a set of record writes (RFC 0010).

A batch of record writes (key -> new value, or deleted) is compared key by key with the live
values it replaces, entry keys compared as bytes: entries of the old value that the new one
lacks are deleted, the new ones put with the record's expiry,
each aggregate group touched is read and rewritten with its new count and sum. The caller
adds the returned writes to the same WriteBatch or transaction as the records, under the
store's index lock, so the old values read here are still the current ones when it writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opendata_kv.errors import IndexTtlError, OpendataKvError, UniqueIndexError, show_bytes
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.keys.fields import Field
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.layout import (
    decode_aggregate,
    encode_aggregate,
    encode_fields,
)
from opendata_kv.store.indexes.registry import IndexSet
from opendata_kv.store.views import options_at
from opendata_kv.values import Values


class Deleted:
    """The new value of a tracked delete."""

    def __repr__(self) -> str:
        return "<deleted>"


DELETED: Any = Deleted()


_UNDECODED: Any = object()


class Raw:
    """The new value of a tracked put: its stored bytes (None when a build of an index that
    keeps no copy did not read them), the value they encode when the writer had it (else
    decoded with the record's codec when needed), and its absolute expiry (Unix
    ms, None for none) with the put options that carry it, which every entry of the record
    takes too (RFC 0010: entries expire with their record)."""

    __slots__ = ("data", "expire_at", "options", "value")

    def __init__(
        self,
        data: bytes | None,
        value: Any = _UNDECODED,
        expire_at: int | None = None,
        options: Any = None,
    ) -> None:
        self.data = data
        self.value = value
        self.expire_at = expire_at
        self.options = options_at(expire_at) if options is None else options


#: one record write: (key bytes, its RecordType, new value / Raw / DELETED)
Tracked = tuple[bytes, RecordType, Any]
#: index writes: (key, data, put options or None) puts and (key, None, None) deletes
Writes = list[tuple[bytes, bytes | None, Any]]
Fetch = Callable[[list[bytes]], Awaitable[list[bytes | None]]]


class Expired(bytes):
    """A replaced value whose TTL has passed, as old_values returns it: its entries expired
    with it, yet are deleted by the write that replaces it, so that no reader (one with
    check_expiry=False, say) can find them pointing at a record that no longer holds them."""


class Expiring(bytes):
    """A replaced live value with a TTL, as old_values returns it (plain bytes there: no
    TTL). The entries a write keeps from it are rewritten to take the write's expiry; kept
    entries of a value without a TTL, written without one, stay as they are."""


def _old_value(indexes: IndexSet, values: Values, key: bytes, data: bytes | None) -> Any:
    """The decoded value a write replaces (None for none, or an expired one that no longer
    decodes: nothing of it is indexed live)."""
    if data is None:
        return None
    old_type = indexes.schema.record_type_of(key)
    if not isinstance(data, Expired):
        return values.decode(old_type, key, bytes(data) if type(data) is Expiring else data)
    try:
        return values.decode(old_type, key, bytes(data))
    except OpendataKvError:
        return None


def _value(values: Values, record_type: RecordType, key: bytes, new: Any) -> Any:
    if new is DELETED:
        return None
    if isinstance(new, Raw):
        if new.value is _UNDECODED:
            assert new.data is not None, "a Raw without bytes carries its value"
            new.value = values.decode(record_type, key, new.data)
        return new.value
    return new


def _copy(index: Index, key: bytes, new: Any) -> tuple[bytes, Any]:
    """What a covering index's entry holds for the put `new`: the record's stored bytes and
    the put's options."""
    if not isinstance(new, Raw) or new.data is None:
        raise AssertionError(
            f"index {index.name!r}: the put of {show_bytes(key)} came without "
            "its stored bytes, which a covering index copies"
        )
    return new.data, new.options


def show_key(schema: Schema, key: bytes) -> Any:
    """The primary key as a Key when it decodes, else its bytes."""
    try:
        return schema.decode(key)
    except Exception:
        return key


async def plan(
    indexes: IndexSet,
    values: Values,
    tracked: Sequence[Tracked],
    fetch: Fetch,
    only: Index | None = None,
    fetch_old: Fetch | None = None,
) -> Writes:
    """The index writes for `tracked` (the last write of a key wins, as in the batch),
    reading old values, unique holders and aggregates through `fetch` (live values only: an
    expired record's entries expired with it). UniqueIndexError before anything is written
    when a unique value would get a second live record; IndexTtlError when a record with a
    TTL meets a count or sum index.

    `only` (an online build): index these records into that one index as if new, whatever
    its state; nothing else. `fetch_old`: how the replaced values are read, when not by
    `fetch` (a batch walks its keys in order: old_values, which marks a replaced value
    whose TTL passed as Expired: its entries are deleted, it counts and holds nothing)."""
    final: dict[bytes, tuple[RecordType, Any]] = {}
    for key, record_type, new in tracked:
        if only is not None or indexes.of(record_type):
            final[key] = (record_type, new)
    if not final:
        return []
    keys = list(final)
    if only is not None:
        olds: list[bytes | None] = [None] * len(keys)
    else:
        olds = await (fetch if fetch_old is None else fetch_old)(keys)
    writes: Writes = []
    unique_adds: dict[bytes, tuple[Index, tuple[Any, ...], bytes, Any]] = {}
    unique_removes: dict[bytes, bytes] = {}
    deltas: dict[bytes, tuple[Index, int, int | float]] = {}
    encode_fields = _entry_cache()
    for key, old_data in zip(keys, olds, strict=True):
        record_type, new = final[key]
        if only is not None:
            active = [only]
        else:
            active = [i for i in indexes.of(record_type) if indexes.covers(i, key)]
        if isinstance(new, Raw) and new.expire_at is not None:
            _refuse_ttl(indexes, only, record_type, key)
        if not active:
            continue
        key_obj: Any = (
            record_type.decode(key)
            if any(_reads_key(indexes, i, record_type) for i in active)
            else None
        )
        old = _old_value(indexes, values, key, old_data)
        # an expired value's entries are removed (a store with check_expiry=False would show
        # them) but it counts in no aggregate and holds no unique value any more
        live_old = None if isinstance(old_data, Expired) else old
        new_value = _value(values, record_type, key, new)
        options = new.options if isinstance(new, Raw) else None
        # kept entries take the new expiry; with none before and none now they stay as they
        # are (only old_values' readers tell a value without a TTL by its plain bytes)
        keep = options is None and fetch_old is not None and type(old_data) is bytes
        for index in active:
            # entries compared as the bytes they encode to: (-0.0,) == (0.0,) as tuples
            after = _encoded(index, key_obj, new_value, encode_fields)
            if index.aggregate:
                before = _encoded(index, key_obj, live_old, encode_fields)
                _aggregate(index, key_obj, live_old, new_value, before, after, deltas)
                continue
            before = _encoded(index, key_obj, old, encode_fields)
            for gone in before.keys() - after.keys():
                if index.kind == "unique":
                    # the live holder giving a value up wins over an expired one in the batch
                    if live_old is not None or gone not in unique_removes:
                        unique_removes[gone] = key
                else:
                    writes.append((gone + key, None, None))
            if index.covering:  # every entry's copy follows the new value, changed or not
                if after:
                    copy, options = _copy(index, key, new)
                    for entry in after:
                        writes.append((entry + key, copy, options))
                continue
            # every entry of the new value is written, kept ones too (they take its expiry)
            # unless neither the old value nor the write has one
            for entry, added in after.items():
                if keep and entry in before:
                    continue
                if index.kind == "unique":
                    other = unique_adds.get(entry)
                    if other is not None and other[2] != key:
                        raise _violation(indexes.schema, index, added, other[2], key, only)
                    unique_adds[entry] = (index, added, key, options)
                else:
                    writes.append((entry + key, b"", options))
    if unique_adds or unique_removes:
        entries = list(unique_adds.keys() | unique_removes.keys())
        holders = dict(zip(entries, await fetch(entries), strict=True))
        for entry, key in unique_removes.items():
            # a unique entry is removed only while it points at the record giving it up
            if entry not in unique_adds and holders[entry] in (None, key):
                writes.append((entry, None, None))
        for entry, (index, added, key, options) in unique_adds.items():
            holder = holders[entry]
            if holder is not None and holder != key and unique_removes.get(entry) != holder:
                raise _violation(indexes.schema, index, added, holder, key, only)
            writes.append((entry, key, options))
    if deltas:
        groups = list(deltas)
        stored = await fetch(groups)
        for group, data in zip(groups, stored, strict=True):
            index, count, total = deltas[group]
            if count == 0 and total == 0:
                continue
            have = (0, 0) if data is None else decode_aggregate(index.name, group, data)
            new_count, new_total = have[0] + count, have[1] + total
            writes.append(
                (group, None if new_count <= 0 else encode_aggregate(new_count, new_total), None)
            )
    return writes


def _encoded(
    index: Index, key: Any, value: Any, encode: Callable[..., bytes]
) -> dict[bytes, tuple[Any, ...]]:
    """The entry keys (without the primary key) of a record's value, with their field values."""
    if value is None:
        return {}
    return {encode(index.name, index.fields, v): v for v in index.entries(key, value)}


def _refuse_ttl(indexes: IndexSet, only: Index | None, record_type: RecordType, key: bytes) -> None:
    """IndexTtlError when a count or sum index covers a record written with a TTL: an
    aggregate cannot expire with its records (RFC 0010)."""
    for index in [only] if only is not None else indexes.of(record_type):
        if index.aggregate:
            shown = show_key(indexes.schema, key)
            raise IndexTtlError(
                f"{index.kind} index {index.name!r} covers {record_type.name!r} records, which "
                f"cannot take a TTL (an aggregate keeps no expiry): the write of {shown!r} "
                "with a TTL was refused and nothing was written",
                index=index.name,
                record=record_type.name,
                key=shown,
            )


def _reads_key(indexes: IndexSet, index: Index, record_type: RecordType) -> bool:
    """Index.reads_key, remembered by the store's IndexSet per index and record type."""
    found = indexes.reads_key.get((index, record_type))
    if found is None:
        found = indexes.reads_key[index, record_type] = index.reads_key(record_type)
    return found


def _entry_cache() -> Callable[[str, Sequence[tuple[str, Field]], tuple[Any, ...]], bytes]:
    """layout.encode_fields, remembering each entry key for one plan: a batch's records share
    few groups and field values. Keyed by the values' types too, so 1 and True stay apart."""
    cache: dict[tuple[str, tuple[Any, ...], tuple[type, ...]], bytes] = {}

    def encode(name: str, fields: Sequence[tuple[str, Field]], values: tuple[Any, ...]) -> bytes:
        types = tuple(map(type, values))
        if float in types:  # 0.0 == -0.0 (and NaN != NaN), but they encode differently
            return encode_fields(name, fields, values)
        found_key = (name, values, types)
        entry = cache.get(found_key)
        if entry is None:
            entry = cache[found_key] = encode_fields(name, fields, values)
        return entry

    return encode


def _aggregate(
    index: Index,
    key: Key,
    old: Any,
    new: Any,
    before: dict[bytes, tuple[Any, ...]],
    after: dict[bytes, tuple[Any, ...]],
    deltas: dict[bytes, tuple[Index, int, int | float]],
) -> None:
    old_amount = index.amount_of(key, old) if before else 0
    new_amount = index.amount_of(key, new) if after else 0
    for entry, sign, amount in [(g, -1, old_amount) for g in before] + [
        (g, 1, new_amount) for g in after
    ]:
        _, count, total = deltas.get(entry, (index, 0, 0))
        deltas[entry] = (index, count + sign, total + sign * amount)


def _violation(
    schema: Schema,
    index: Index,
    value: tuple[Any, ...],
    holder: bytes,
    key: bytes,
    building: Index | None = None,
) -> UniqueIndexError:
    """A refused write names the holder; a build that meets two live holders of one value
    (written before the index existed, or while it was write_only: uniqueness is only known
    for the records a build has passed) names both and stays unfinished."""
    shown = value[0] if len(value) == 1 else value
    held = show_key(schema, holder)
    new = show_key(schema, key)
    if building is not None:
        message = (
            f"unique index {index.name!r}: the build found {shown!r} held by both {held!r} "
            f"({show_bytes(holder)}) and {new!r} ({show_bytes(key)}); the index stays "
            "write_only (its reads refused): change or delete one of them and build again"
        )
    else:
        message = (
            f"unique index {index.name!r}: {shown!r} already belongs to {held!r} "
            f"({show_bytes(holder)}); the write of {new!r} was refused and nothing was written"
        )
    return UniqueIndexError(
        message,
        index=index.name,
        value=shown,
        key=held,
        new_key=new,
    )
