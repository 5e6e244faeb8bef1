"""Index maintenance: the index writes that go with a set of record writes (RFC 0010).

A batch of record ops (writes.Put / writes.Delete) is compared key by key with the live
values it replaces, entry keys compared as bytes, by one maintainer per index kind
(maintainers.py): entries of the old value that the new one lacks are deleted, the new ones
put with the record's expiry, each aggregate group touched is read and rewritten with its new
count and sum. The writer adds the returned ops to the same native write or transaction as
the records, under the store's index lock, so the values read here are still current.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from opendata_kv.errors import IndexTtlError, OpendataKvError
from opendata_kv.keys import RecordType, idfields
from opendata_kv.keys.codecs import TerminatedStr
from opendata_kv.keys.fields import Field
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.groups import GroupCache
from opendata_kv.store.indexes.layout import encode_fields
from opendata_kv.store.indexes.maintainers import (
    PUT_EXPIRE_AT,
    PUT_VALUE,
    Changes,
    CountMaintainer,
    Maintainer,
    RecordWrite,
    show_key,
)
from opendata_kv.store.indexes.registry import IndexSet
from opendata_kv.store.indexes.str_tuples import all_str
from opendata_kv.store.writes import UNDECODED, Delete, MaintenanceReads, Op, Put
from opendata_kv.values import Values

__all__ = [
    "Expired",
    "Expiring",
    "IndexRows",
    "IndexedOp",
    "index_ops_for",
    "index_rows_for",
    "show_key",
]

_new = tuple.__new__  # a RecordWrite without NamedTuple.__new__'s argument handling (per record)
#: one record write: (key bytes, its RecordType, the Put or Delete)
IndexedOp = tuple[bytes, RecordType, Op]


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


def _value(values: Values, record_type: RecordType, key: bytes, new: Op) -> Any:
    if type(new) is Delete:
        return None
    assert type(new) is Put
    if new.value is UNDECODED:
        assert new.data is not None, "a put without bytes carries its value"
        return values.decode(record_type, key, new.data)
    return new.value


class IndexRows(NamedTuple):
    """A plan's index writes: `ops` (writes.Put / writes.Delete) and the plain puts (no
    expiry, no options) as two columns, `keys` and `data`, queued in one native call without
    a Put each. Their keys are distinct, so their order in a write does not matter."""

    ops: list[Op]
    keys: list[bytes]
    data: list[bytes]

    @property
    def total(self) -> int:
        """How many rows in all."""
        return len(self.ops) + len(self.keys)

    def as_ops(self) -> list[Op]:
        """Every row as an op (the plain puts after the others)."""
        puts = [
            _new(Put, (key, data, None, UNDECODED, None))
            for key, data in zip(self.keys, self.data, strict=True)
        ]
        return self.ops + puts


async def index_ops_for(
    indexes: IndexSet,
    values: Values,
    writes: Sequence[IndexedOp],
    reads: MaintenanceReads,
    only: Index | None = None,
    groups: GroupCache | None = None,
    key_fields: Mapping[bytes, tuple[Any, ...]] | None = None,
) -> list[Op]:
    """index_rows_for's rows as ops (transactions, builds, tests)."""
    rows = await index_rows_for(indexes, values, writes, reads, only, groups, key_fields)
    return rows.as_ops()


async def index_rows_for(
    indexes: IndexSet,
    values: Values,
    writes: Sequence[IndexedOp],
    reads: MaintenanceReads,
    only: Index | None = None,
    groups: GroupCache | None = None,
    key_fields: Mapping[bytes, tuple[Any, ...]] | None = None,
) -> IndexRows:
    """The index rows (IndexRows) for `writes` (the last write of a key wins, as in the
    batch), reading the replaced values with `reads.replaced` and unique holders and aggregates with
    `reads.current` (live values only: an expired record's entries expired with it).
    UniqueIndexError before anything is written when a unique value would get a second live
    record; IndexTtlError when a record with a TTL meets a count or sum index.

    `only` (an online build): index these records into that one index as if new, whatever
    its state; nothing else (no replaced value is read).

    `groups` (the writer's): aggregate groups it knows are not read, and the values this plan
    gives the groups it writes are staged in it (learnt once the write is acknowledged).

    `key_fields` (a Batch's): the field tuples some keys were encoded from, taken for the
    key's fields instead of decoding it where that gives the same (_key_decoder)."""
    nothing = IndexRows([], [], [])
    final: dict[bytes, IndexedOp]  # key -> its last write
    types = set(map(_TYPE_OF, writes))
    if only is not None or all(indexes.of(record_type) for record_type in types):
        final = dict(zip(map(_KEY_OF, writes), writes, strict=True))  # no filter per record
    else:
        final = {write[0]: write for write in writes if indexes.of(write[1])}
    if not final:
        return nothing
    keys = list(final)
    if only is not None:
        olds: list[bytes | None] = [None] * len(keys)
    else:
        olds = await reads.replaced(keys)
    maintainers: dict[type[Maintainer], Maintainer] = {}
    field_columns: dict[Any, Any] = {}  # Maintainer.field_column's, shared by the plan's
    encode = _entry_cache(indexes.entry_keys)
    if sum(map(len, indexes.entry_strings.values())) > ENTRY_CACHE_SIZE:
        indexes.entry_strings.clear()
    by_index = None
    if only is None and olds.count(None) == len(olds):  # new records only: column by column
        by_index = _new_records(indexes, values, keys, final, types, key_fields)
    if by_index is None:
        by_index = _changes(indexes, values, keys, olds, final, only, key_fields)
    for index, changes in by_index.items():  # each index's changes at once (change_all)
        made = index.index_kind.maintainer(index)
        maintainer = maintainers.get(made)
        if maintainer is None:
            maintainer = maintainers[made] = made(
                indexes.schema, encode, only, indexes.entry_strings, indexes.entry_plans
            )
            maintainer.fields = field_columns
        maintainer.change_all(index, changes)
    ordered = sorted(maintainers.values(), key=_settle_order)
    counters = [m for m in ordered if isinstance(m, CountMaintainer)]
    if groups is not None and only is None:
        cached = groups.known(indexes.generation)
        for counter in counters:
            counter.known = cached
    wanted = [row for maintainer in ordered for row in maintainer.wanted()]
    # unique holders and aggregate groups not known, in one read
    current = dict(zip(wanted, await reads.current(wanted), strict=True)) if wanted else {}
    for maintainer in ordered:
        maintainer.settle(current)
    if groups is not None and only is None:
        if len(counters) == 1:
            groups.stage(counters[0].learnt)
        else:
            groups.stage({g: v for counter in counters for g, v in counter.learnt.items()})
    if len(ordered) == 1:
        only_one = ordered[0]
        return IndexRows(only_one.ops, only_one.put_keys, only_one.put_data)
    ops: list[Op] = []
    put_keys: list[bytes] = []
    put_data: list[bytes] = []
    for maintainer in ordered:  # list extends (C), not a comprehension over every row
        ops += maintainer.ops
        put_keys += maintainer.put_keys
        put_data += maintainer.put_data
    return IndexRows(ops, put_keys, put_data)


def _new_records(
    indexes: IndexSet,
    values: Values,
    keys: list[bytes],
    final: dict[bytes, IndexedOp],
    types: set[RecordType],
    key_fields: Mapping[bytes, tuple[Any, ...]] | None,
) -> dict[Index, Changes] | None:
    """The changes of each index when every write (of `types`) is a put of a new record of
    one record type whose indexes cover every key, none with a TTL (put_many's common case):
    built a column at a time, the columns taken in C passes (map, itemgetter); None otherwise
    (index_ops_for then goes record by record)."""
    if len(types) != 1:
        return None
    record_type = next(iter(types))
    known = _whole(indexes, record_type)
    if known is None:
        return None
    active, reads_key = known
    puts: list[Any] = list(map(_OP_OF, final.values()))
    if set(map(type, puts)) != {Put} or list(map(_EXPIRE_AT_OF, puts)).count(None) != len(puts):
        return None  # a delete (of nothing) or a TTL: record by record
    if not active:
        return {}
    news = list(map(_VALUE_OF, puts))
    if UNDECODED in news:  # (a value equal to UNDECODED only takes the decoding way)
        news = [_value(values, record_type, key, op) for key, op in zip(keys, puts, strict=True)]
    nothing: list[Any] = [None] * len(keys)
    key_objs = list(map(_key_decoder(record_type, key_fields), keys)) if reads_key else nothing
    changes = Changes(keys, key_objs, nothing, nothing, news, puts, [False] * len(keys))
    router = _Router.of(record_type, active)
    if router is None:
        return dict.fromkeys(active, changes)
    positions: dict[Index, list[int]] = {index: [] for index in active}
    for at, key_obj in enumerate(key_objs):
        for index in router.indexes_for(key_obj):
            positions[index].append(at)
    return {
        index: changes.taking(picked) if len(picked) < len(keys) else changes
        for index, picked in positions.items()
        if picked
    }


def _changes(
    indexes: IndexSet,
    values: Values,
    keys: list[bytes],
    olds: list[bytes | None],
    final: dict[bytes, IndexedOp],
    only: Index | None,
    key_fields: Mapping[bytes, tuple[Any, ...]] | None = None,
) -> dict[Index, Changes]:
    """The changes of each index, record by record against the values they replace."""
    decoders: dict[RecordType, Callable[[bytes], Any]] = {}
    by_index: dict[Index, list[RecordWrite]] = {}  # the changes of each index, in batch order
    # per record type whose indexes are all readable: (its indexes, whether any reads the
    # key), decided once per plan instead of per record; None: asked key by key (a build)
    per_type: dict[RecordType, tuple[Sequence[Index], bool] | None] = {}
    # the change lists of a record type's indexes, when known once per plan (per_type); an
    # index may cover several record types, whose changes share its list
    lists: dict[RecordType, list[list[RecordWrite]]] = {}
    # per record type whose indexes route on key fields (Index.route): its router
    routers: dict[RecordType, _Router | None] = {}
    for key, old_data in zip(keys, olds, strict=True):
        _, record_type, new = final[key]
        active: Sequence[Index]
        targets = lists.get(record_type)
        if only is not None:
            active = [only]
            reads_key = _reads_key(indexes, only, record_type)
        else:
            if record_type in per_type:
                known = per_type[record_type]
            else:
                known = per_type[record_type] = _whole(indexes, record_type)
                if known is not None:
                    targets = lists[record_type] = [by_index.setdefault(i, []) for i in known[0]]
                    routers[record_type] = _Router.of(record_type, known[0])
            if known is None:
                active = [i for i in indexes.of(record_type) if indexes.covers(i, key)]
                reads_key = any(_reads_key(indexes, i, record_type) for i in active)
            else:
                active, reads_key = known
        put = new if type(new) is Put else None
        if put is not None and put.expire_at is not None:
            _refuse_ttl(indexes, only, record_type, key)
        if not active:
            continue
        key_obj: Any = None
        if reads_key:
            decode = decoders.get(record_type)
            if decode is None:
                decode = decoders[record_type] = _key_decoder(record_type, key_fields)
            key_obj = decode(key)
        router = routers.get(record_type) if targets is not None else None
        if router is not None:  # only the indexes whose `using` reads this record's key
            targets = [by_index[index] for index in router.indexes_for(key_obj)]
            if not targets:
                continue
        if old_data is None:  # a new record
            old = live_old = None
            keep = False
        else:
            old = _old_value(indexes, values, key, old_data)
            # an expired value's entries are removed (a store with check_expiry=False would
            # show them) but it counts in no aggregate and holds no unique value any more
            live_old = None if isinstance(old_data, Expired) else old
            # kept entries take the new expiry; with none before and none now they stay as
            # they are (only old_values' readers tell a value without a TTL by its plain bytes)
            keep = (put is None or put.options is None) and type(old_data) is bytes
        if put is not None and put.value is not UNDECODED:
            new_value = put.value
        else:
            new_value = _value(values, record_type, key, new)
        change = _new(RecordWrite, (key, key_obj, old, live_old, new_value, put, keep))
        if targets is not None:  # every index of the type, lists made once
            for changes in targets:
                changes.append(change)
            continue
        for index in active:
            by_index.setdefault(index, []).append(change)
    return {index: Changes.of(changes) for index, changes in by_index.items() if changes}


_KEY_OF, _TYPE_OF, _OP_OF = itemgetter(0), itemgetter(1), itemgetter(2)  # of an IndexedOp
_EXPIRE_AT_OF, _VALUE_OF = itemgetter(PUT_EXPIRE_AT), itemgetter(PUT_VALUE)  # of a Put

#: field codecs whose decode gives back exactly the str a key was encoded from (no
#: normalising: a str in, the same str out; the key's encode checked it already)
_EXACT_STRINGS = (TerminatedStr, idfields._Rkey)


def _key_decoder(
    record_type: RecordType, key_fields: Mapping[bytes, tuple[Any, ...]] | None
) -> Callable[[bytes], Any]:
    """record_type.decode, or where `key_fields` holds the str fields a key of an all-string
    record type was encoded from, its Key built from them (what decode would give, without
    walking the bytes and checking each field again)."""
    decode = record_type.decode
    if not key_fields or record_type.extended:
        return decode
    if any(type(field) not in _EXACT_STRINGS for _, field in record_type.fields):
        return decode
    make = record_type.Key
    strings = all_str(len(record_type.field_names))
    found = key_fields.get

    def from_fields(key: bytes) -> Any:
        fields = found(key)
        if fields is None or not strings(fields):  # the width and every field's class
            return decode(key)
        return _new(make, fields)

    return from_fields


class _Router:
    """Which of a record type's indexes a record's changes go to when some index's `using`
    declares the key field values it reads (Index.route: a likes index reads like records
    only): the indexes of each distinct value found once, instead of every index called for
    every record."""

    __slots__ = ("field", "found", "indexes")

    def __init__(self, field: str, indexes: Sequence[Index]) -> None:
        self.field = field
        self.indexes = indexes
        self.found: dict[Any, tuple[Index, ...]] = {}

    @staticmethod
    def of(record_type: RecordType, indexes: Sequence[Index]) -> _Router | None:
        """The router of `indexes` when at least one routes on a key field of `record_type`
        (all on the same one; others take every record), else None."""
        fields = {
            route[0]
            for route in (index.route for index in indexes)
            if route is not None and route[0] in record_type.field_names
        }
        if len(fields) != 1:
            return None
        return _Router(fields.pop(), indexes)

    def indexes_for(self, key_obj: Any) -> tuple[Index, ...]:
        """The indexes a record of this key may have entries in."""
        value = getattr(key_obj, self.field)
        found = self.found.get(value)
        if found is None:
            found = self.found[value] = tuple(
                index
                for index in self.indexes
                if (route := index.route) is None or route[0] != self.field or route[1] == value
            )
        return found


def _refuse_ttl(indexes: IndexSet, only: Index | None, record_type: RecordType, key: bytes) -> None:
    """IndexTtlError when a count or sum index covers a record written with a TTL: an
    aggregate cannot expire with its records (RFC 0010)."""
    for index in [only] if only is not None else indexes.of(record_type):
        if not index.index_kind.takes_ttl:
            shown = show_key(indexes.schema, key)
            raise IndexTtlError(
                f"{index.kind} index {index.name!r} covers {record_type.name!r} records, which "
                f"cannot take a TTL (an aggregate keeps no expiry): the write of {shown!r} "
                "with a TTL was refused and nothing was written",
                index=index.name,
                record=record_type.name,
                key=shown,
            )


def _settle_order(maintainer: Maintainer) -> int:
    return maintainer.settle_order


def _whole(indexes: IndexSet, record_type: RecordType) -> tuple[Sequence[Index], bool] | None:
    """(the indexes of `record_type`, whether any reads the key) when every one covers every
    key (IndexSet.covers_all), else None."""
    if not indexes.covers_all(record_type):
        return None
    found = indexes.of(record_type)
    return found, any(_reads_key(indexes, i, record_type) for i in found)


def _reads_key(indexes: IndexSet, index: Index, record_type: RecordType) -> bool:
    """Index.reads_key, remembered by the store's IndexSet per index and record type."""
    found = indexes.reads_key.get((index, record_type))
    if found is None:
        found = indexes.reads_key[index, record_type] = index.reads_key(record_type)
    return found


#: entry keys an IndexSet remembers before it starts afresh (~100 B each: a few MB at most)
ENTRY_CACHE_SIZE = 32_768


def _entry_cache(
    cache: dict[tuple[str, tuple[Any, ...], tuple[type, ...]], bytes],
) -> Callable[[str, Sequence[tuple[str, Field]], tuple[Any, ...]], bytes]:
    """layout.encode_fields, remembering each entry key in the store's IndexSet: writes share
    few groups and field values (the subjects a stream of likes points at), within a batch
    and across batches. Keyed by the values' types too, so 1 and True stay apart."""
    if len(cache) > ENTRY_CACHE_SIZE:
        cache.clear()

    def encode(name: str, fields: Sequence[tuple[str, Field]], values: tuple[Any, ...]) -> bytes:
        # the values' types (1, 1.0 and True are equal keys): one value, the common case,
        # without the map and tuple calls (~0.4 µs a record)
        types = (type(values[0]),) if len(values) == 1 else tuple(map(type, values))
        if float in types:  # 0.0 == -0.0 (and NaN != NaN), but they encode differently
            return encode_fields(name, fields, values)
        found_key = (name, values, types)
        entry = cache.get(found_key)
        if entry is None:
            entry = cache[found_key] = encode_fields(name, fields, values)
        return entry

    return encode
