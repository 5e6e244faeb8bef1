"""Index maintainers, one per index kind: each turns the record changes of a write into the
index operations that keep its entries current (RFC 0010, "Writes as values").

A maintainer sees a record change as a `RecordWrite` (the replaced value as read, the new one),
returns plain ops (writes.Put / writes.Delete), and reads what else it needs (unique holders,
aggregate groups) through the `current` values the coordinator (maintain.index_ops_for) reads
for all maintainers at once. It imports nothing from the writer, reader, batch or views and touches
nothing private of anyone else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from opendata_kv.errors import IndexAmountError, UniqueIndexError, show_bytes
from opendata_kv.keys import Schema
from opendata_kv.keys.codecs import TerminatedStr
from opendata_kv.keys.fields import Field
from opendata_kv.keys.plan import compile_plan
from opendata_kv.native import accel, calls
from opendata_kv.store.indexes.field_values import field_of
from opendata_kv.store.indexes.groups import Group
from opendata_kv.store.indexes.layout import decode_entry, decode_sum, encode_sum, entry_prefix
from opendata_kv.store.indexes.str_tuples import all_str
from opendata_kv.store.indexes.sums import (
    FINE,
    INT_MAX,
    INT_MIN,
    ZERO,
    Sum,
    amount_problem,
    fine_units,
    total_problem,
)
from opendata_kv.store.writes import UNDECODED, Delete, Op, Put

if TYPE_CHECKING:
    from opendata_kv.store.indexes.declare import Index

Encode = Callable[[str, Sequence[tuple[str, Field]], tuple[Any, ...]], bytes]
_new = tuple.__new__  # ops built without NamedTuple.__new__'s argument handling (per entry)


class RecordWrite(NamedTuple):
    """One record write as maintainers see it (the last write of its key in the batch)."""

    key: bytes
    key_obj: Any  # the decoded Key when an index reads key fields, else None
    old: Any  # the replaced value (None: none), an expired one included
    live_old: Any  # the replaced value while live (None: none, or expired)
    new: Any  # the new value (None for a delete)
    put: Put | None  # the put (None for a delete)
    keep: bool  # kept entries stay as they are: neither old nor new value has a TTL


class Changes(NamedTuple):
    """The record writes of one plan for one index (or one record type's indexes), as
    columns: RecordWrite's fields, one list each, read by name once per batch rather than a
    tuple per record by position (the per-record loops zip the columns they need)."""

    keys: list[bytes]
    key_objs: list[Any]
    olds: list[Any]
    live_olds: list[Any]
    news: list[Any]
    puts: list[Put | None]
    keeps: list[bool]

    @staticmethod
    def of(records: Sequence[RecordWrite]) -> Changes:
        """The columns of `records` (one RecordWrite each, in order)."""
        keys, key_objs, olds, live_olds, news, puts, keeps = map(list, zip(*records, strict=True))
        return Changes(keys, key_objs, olds, live_olds, news, puts, keeps)

    def taking(self, positions: Sequence[int]) -> Changes:
        """The changes at `positions` only (in that order)."""
        columns: list[list[Any]] = [[column[at] for at in positions] for column in self]
        return Changes(*columns)

    def records(self) -> list[RecordWrite]:
        """The changes one RecordWrite each, in order (for kinds that take them one by one)."""
        return [_new(RecordWrite, fields) for fields in zip(*self, strict=True)]


#: Put's field positions (writes.Put), for the per-entry loops that index it as a plain tuple
PUT_DATA: Final = 1
PUT_EXPIRE_AT: Final = 2
PUT_VALUE: Final = 3
PUT_OPTIONS: Final = 4
assert Put._fields[PUT_EXPIRE_AT] == "expire_at" and Put._fields[PUT_OPTIONS] == "options"
_EXPIRE_AT_OF = itemgetter(PUT_EXPIRE_AT)
_OPTIONS_OF = itemgetter(PUT_OPTIONS)


def column_passes() -> Any:
    """The C accelerator when it is in use (its `entry_column` and `count_into`), else None:
    Maintainer.column and CountMaintainer.change_columns then loop in Python."""
    if not calls.active():
        return None
    module = accel.active_module()
    return module if module is not None and hasattr(module, "count_into") else None


def plain_puts(puts: list[Any]) -> bool:
    """Whether every one of `puts` is None (no put) or a Put without an expiry and options:
    for puts only, two C passes (itemgetter) instead of a generator over the column."""
    if None in puts:
        return all(
            put is None or (put[PUT_EXPIRE_AT] is None and put[PUT_OPTIONS] is None) for put in puts
        )
    count = len(puts)
    return (
        list(map(_EXPIRE_AT_OF, puts)).count(None) == count
        and list(map(_OPTIONS_OF, puts)).count(None) == count
    )


#: positions in a CountMaintainer's per-group delta list [index, count, ints, floats, fine, key]
D_COUNT: Final = 1
D_INTS: Final = 2
D_FLOATS: Final = 3
D_FINE: Final = 4
D_KEY: Final = 5


#: the test that an entry tuple is n str values, by n
_STRS = [all_str(n) for n in range(16)]


def string_plan(index: Index) -> Callable[..., bytes] | None:
    """The compiled encoder (keys/plan.py) of `index`'s entry prefix and fields when every
    field is a plain string (fields.string), else None."""
    fields = [field for _, field in index.fields]
    if not fields or len(fields) >= len(_STRS) or any(type(f) is not TerminatedStr for f in fields):
        return None
    encode, _ = compile_plan(entry_prefix(index.name), fields, tuple, _no_decode, ())
    return encode


def _no_decode(key: bytes) -> Any:
    raise AssertionError("entry plans only encode")


def show_key(schema: Schema, key: bytes) -> Any:
    """The primary key as a Key when it decodes, else its bytes."""
    try:
        return schema.decode(key)
    except Exception:
        return key


class Maintainer:
    """Collects the index ops of one index kind for one write (see the subclasses)."""

    #: maintainers settle in this order (unique clashes refuse a write before aggregates)
    settle_order = 0

    def __init__(
        self,
        schema: Schema,
        encode: Encode,
        building: Index | None,
        strings: dict[str, dict[str, bytes]] | None = None,
        plans: dict[Index, Callable[..., bytes] | None] | None = None,
    ) -> None:
        self.schema = schema
        self.encode = encode
        self.building = building  # the index an online build fills, else None
        self.ops: list[Op] = []
        #: the plain puts (no expiry, no options) among its rows, as columns (IndexRows)
        self.put_keys: list[bytes] = []
        self.put_data: list[bytes] = []
        #: index name -> string field value -> entry key, of single-field indexes (the
        #: IndexSet's, kept across writes: a stream of likes points at few subjects)
        self.strings = {} if strings is None else strings
        #: index -> the compiled encoder of its entry fields, None: not all strings (the
        #: IndexSet's, kept across writes)
        self.plans: dict[Index, Callable[..., bytes] | None] = {} if plans is None else plans
        #: the C accelerator's column passes (native/_accel/columns.c), None on the pure path
        self.passes = column_passes()
        #: (id of a values column, id of its key column, field name) -> (the columns, the
        #: field's values): shared by one plan's maintainers (field_column)
        self.fields: dict[tuple[int, int, str], tuple[list[Any], Sequence[Any], list[Any]]] = {}

    def entries(
        self, index: Index, change: RecordWrite, value: Any
    ) -> dict[bytes, tuple[Any, ...]]:
        """Entry keys (without the primary key) of a value, with their field values; compared
        as the bytes they encode to, since (-0.0,) == (0.0,) as tuples."""
        if value is None:
            return {}
        if index.using is not None:
            return self.using_entries(index, change.key_obj, value)
        encode = self.encode
        return {
            encode(index.name, index.fields, v): v for v in index.entries(change.key_obj, value)
        }

    def using_entries(self, index: Index, key_obj: Any, value: Any) -> dict[bytes, tuple[Any, ...]]:
        """`entries` of an index with `using`: when every field is a string and the function
        yields tuples of str, each encoded by the fields' compiled key plan (keys/plan.py)
        without the per-field codecs; anything else (another type, a wrong width, a string
        UTF-8 refuses) goes the checked way (Index.checked_entries), which names the fault."""
        using = index.using
        assert using is not None
        items = using(key_obj, value)
        if items.__class__ is not list:
            items = list(items)
        plans = self.plans
        encode = plans[index] if index in plans else plans.setdefault(index, string_plan(index))
        if encode is not None:
            width = len(index.fields)
            strings = _STRS[width]
            out: dict[bytes, tuple[Any, ...]] = {}
            for item in items:
                # the common case (the width and every class) told at once; the rest is
                # sorted out only when that fails
                if item.__class__ is not tuple or not strings(item):
                    if item.__class__ is tuple and len(item) == width and None in item:
                        continue  # no entry (as checked_entries)
                    break
                try:
                    entry = encode(*item)
                except UnicodeEncodeError:
                    break
                if entry not in out:
                    out[entry] = item
            else:
                return out
        slow = self.encode
        return {slow(index.name, index.fields, v): v for v in index.checked_entries(key_obj, items)}

    def change(self, index: Index, change: RecordWrite) -> None:
        raise NotImplementedError

    def change_all(self, index: Index, changes: Changes) -> None:
        """`change` for each of `changes` (record writes of one type, in batch order); a kind
        with `change_columns` does it column by column when a record has one entry at most
        (no `using`)."""
        if index.using is None and type(self).change_columns is not Maintainer.change_columns:
            self.change_columns(index, changes)
            return
        for change in changes.records():
            self.change(index, change)

    def change_columns(self, index: Index, changes: Changes) -> None:
        """`change_all` for an index without `using`, column by column (kinds that can)."""
        raise NotImplementedError

    def entry_columns(
        self, index: Index, changes: Changes, *, live: bool = False
    ) -> tuple[list[Any], list[Any]]:
        """(before, after): the entry key of each change's replaced value (its live one with
        `live`, as aggregates count) and of its new value."""
        key_objs = changes.key_objs
        before = self.column(index, key_objs, changes.live_olds if live else changes.olds)
        return before, self.column(index, key_objs, changes.news)

    def column(self, index: Index, key_objs: Sequence[Any], values: list[Any]) -> list[Any]:
        """The entry key of each value (None: none) for an index without `using` (one entry
        at most per record), a string field value's remembered across writes. A single
        field's values are taken a column at a time, once per plan for all indexes on that
        field (`fields`), then mapped to entry keys in one pass; what that pass cannot map (a
        value not a str, a str not seen before) goes the per-record way."""
        if values.count(None) == len(values):  # no value (new records): no entry
            return [None] * len(values)
        if len(index.field_names) != 1:
            return self._column_slow(index, key_objs, values, None, None)
        name, single = index.name, index.field_names[0]
        strings = self.strings.get(name)
        if strings is None:
            strings = self.strings[name] = {}
        passes = self.passes
        if passes is not None and key_objs.count(None) == len(key_objs):
            # every value a dict whose field's str is a string seen before: in one C loop
            found_entries: list[Any] | None = passes.entry_column(values, single, strings)
            if found_entries is not None and None not in found_entries:
                return found_entries
        founds = self.field_column(single, key_objs, values)
        got = strings.get
        out = [got(found) if found.__class__ is str else None for found in founds]
        if None in out:  # none, a new string, or not a str: record by record
            return self._column_slow(index, key_objs, values, founds, out)
        return out

    def field_column(self, single: str, key_objs: Sequence[Any], values: list[Any]) -> list[Any]:
        """field_of(key_obj, value, single) of each record (None for no value), found once
        per plan for the same columns (the maintainers of one plan share `fields`)."""
        cached = self.fields.get((id(values), id(key_objs), single))
        if cached is not None and cached[0] is values and cached[1] is key_objs:
            return cached[2]
        if key_objs.count(None) == len(key_objs) and all(v.__class__ is dict for v in values):
            founds = [value.get(single) for value in values]
        else:
            founds = [
                None if value is None else field_of(key_obj, value, single)
                for key_obj, value in zip(key_objs, values, strict=True)
            ]
        self.fields[id(values), id(key_objs), single] = (values, key_objs, founds)
        return founds

    def _column_slow(
        self,
        index: Index,
        key_objs: Sequence[Any],
        values: list[Any],
        founds: list[Any] | None,
        mapped: list[Any] | None,
    ) -> list[Any]:
        """column's per-record way: `founds` and `mapped` (single-field indexes) are the
        field values and the entry keys already known (None: not known)."""
        name, fields, encode = index.name, index.fields, self.encode
        single = founds is not None
        strings = self.strings.get(name, {})
        out: list[bytes | None] = []
        append = out.append
        for at, (key_obj, value) in enumerate(zip(key_objs, values, strict=True)):
            if value is None:
                append(None)
                continue
            if single:
                assert founds is not None and mapped is not None
                entry = mapped[at]
                if entry is not None:
                    append(entry)
                    continue
                found = founds[at]
                if found is None:
                    append(None)
                    continue
                if found.__class__ is str:
                    entry = strings[found] = encode(name, fields, (found,))
                    append(entry)
                    continue
            tuples = index.entries(key_obj, value)  # checks what it holds (hashable)
            append(encode(name, fields, next(iter(tuples))) if tuples else None)
        return out

    def wanted(self) -> list[bytes]:
        """Index rows whose current values `settle` needs."""
        return []

    def settle(self, current: Mapping[bytes, bytes | None]) -> None:
        """Finish with the current values of `wanted` rows."""


class ValueMaintainer(Maintainer):
    """A value index: an empty entry per field value, deleted when the record gives it up."""

    def change(self, index: Index, change: RecordWrite) -> None:
        # unpacked and inlined: this runs once per record and index, on the batched put path
        key, key_obj, old, _, new, put, keep = change
        encode, name, fields, ops = self.encode, index.name, index.fields, self.ops
        if index.using is not None:
            after, before = self.entries(index, change, new), self.entries(index, change, old)
        else:
            after = (
                {}
                if new is None
                else {encode(name, fields, v): v for v in index.entries(key_obj, new)}
            )
            before = (
                {}
                if old is None
                else {encode(name, fields, v): v for v in index.entries(key_obj, old)}
            )
        if before:
            for gone in before.keys() - after.keys():
                ops.append(Delete(gone + key))
        if not after:
            return
        expire_at = options = None
        if put is not None:
            expire_at, options = put[PUT_EXPIRE_AT], put[PUT_OPTIONS]
        for entry in after:  # kept entries too (they take the write's expiry) unless `keep`
            if not (keep and entry in before):
                ops.append(_new(Put, (entry + key, b"", expire_at, UNDECODED, options)))

    def change_columns(self, index: Index, changes: Changes) -> None:
        before, after = self.entry_columns(index, changes)
        ops = self.ops
        append = ops.append
        if before.count(None) == len(before):  # new records (put_many's case): puts only
            puts: list[Any] = changes.puts  # a record with an entry is a put
            if plain_puts(puts):
                if None in after:
                    found = [
                        new + key
                        for key, new in zip(changes.keys, after, strict=True)
                        if new is not None
                    ]
                else:  # an entry each (the common case), joined in one map
                    found = list(map(bytes.__add__, after, changes.keys))
                self.put_keys += found
                self.put_data += [b""] * len(found)
                return
            ops += [
                _new(Put, (new + key, b"", put[PUT_EXPIRE_AT], UNDECODED, put[PUT_OPTIONS]))
                for key, new, put in zip(changes.keys, after, puts, strict=True)
                if new is not None
            ]
            return
        for key, new, old, put, keep in zip(
            changes.keys, after, before, changes.puts, changes.keeps, strict=True
        ):
            if old is not None and old != new:
                append(Delete(old + key))
            if new is not None and not (keep and old == new):
                assert put is not None  # a record with an entry is a put
                entry = (new + key, b"", put[PUT_EXPIRE_AT], UNDECODED, put[PUT_OPTIONS])
                append(_new(Put, entry))


class CoveringMaintainer(Maintainer):
    """A covering value index: every entry holds the record's stored bytes, so each write
    rewrites all of them, changed or not."""

    settle_order = 1

    def change(self, index: Index, change: RecordWrite) -> None:
        after = self.entries(index, change, change.new)
        before = self.entries(index, change, change.old)
        key, put = change.key, change.put
        for gone in before.keys() - after.keys():
            self.ops.append(Delete(gone + key))
        if not after:
            return
        if put is None or put.data is None:
            raise AssertionError(
                f"index {index.name!r}: the put of {show_bytes(key)} came without "
                "its stored bytes, which a covering index copies"
            )
        for entry in after:
            copy = (entry + key, put.data, put.expire_at, UNDECODED, put.options)
            self.ops.append(_new(Put, copy))

    def change_columns(self, index: Index, changes: Changes) -> None:
        before, after = self.entry_columns(index, changes)
        ops = self.ops
        for key, put, new, old in zip(changes.keys, changes.puts, after, before, strict=True):
            if old is not None and old != new:
                ops.append(Delete(old + key))
            if new is None:
                continue
            if put is None or put.data is None:
                raise AssertionError(
                    f"index {index.name!r}: the put of {show_bytes(key)} came without "
                    "its stored bytes, which a covering index copies"
                )
            ops.append(_new(Put, (new + key, put.data, put.expire_at, UNDECODED, put.options)))

    def change_all(self, index: Index, changes: Changes) -> None:
        """`change` of each record, its columns zipped (no RecordWrite each), for an index
        with `using` (a covering backlink: several entries a record); the copies of a plain
        put go to the plain put columns."""
        if index.using is None:
            self.change_columns(index, changes)
            return
        entries, ops = self.using_entries, self.ops
        put_keys, put_data = self.put_keys, self.put_data
        for key, key_obj, old, new, put in zip(
            changes.keys, changes.key_objs, changes.olds, changes.news, changes.puts, strict=True
        ):
            after = {} if new is None else entries(index, key_obj, new)
            if old is not None:
                for gone in entries(index, key_obj, old).keys() - after.keys():
                    ops.append(Delete(gone + key))
            if not after:
                continue
            if put is None or put.data is None:
                raise AssertionError(
                    f"index {index.name!r}: the put of {show_bytes(key)} came without "
                    "its stored bytes, which a covering index copies"
                )
            data, expire_at, options = put.data, put[PUT_EXPIRE_AT], put[PUT_OPTIONS]
            if expire_at is None and options is None:
                put_keys += [entry + key for entry in after]
                put_data += [data] * len(after)
                continue
            for entry in after:
                ops.append(_new(Put, (entry + key, data, expire_at, UNDECODED, options)))


class UniqueMaintainer(Maintainer):
    """A unique index: one entry per value, holding the primary key; a value held by another
    live record refuses the write (UniqueIndexError) before anything is written."""

    settle_order = 2

    def __init__(
        self,
        schema: Schema,
        encode: Encode,
        building: Index | None,
        strings: dict[str, dict[str, bytes]] | None = None,
        plans: dict[Index, Callable[..., bytes] | None] | None = None,
    ) -> None:
        super().__init__(schema, encode, building, strings, plans)
        self.adds: dict[bytes, tuple[Index, tuple[Any, ...], bytes, Put | None]] = {}
        self.removes: dict[bytes, bytes] = {}

    def change(self, index: Index, change: RecordWrite) -> None:
        after = self.entries(index, change, change.new)
        before = self.entries(index, change, change.old)
        key = change.key
        for gone in before.keys() - after.keys():
            # the live holder giving a value up wins over an expired one in the batch
            if change.live_old is not None or gone not in self.removes:
                self.removes[gone] = key
        for entry, added in after.items():
            if change.keep and entry in before:
                continue
            other = self.adds.get(entry)
            if other is not None and other[2] != key:
                raise self.violation(index, added, other[2], key)
            self.adds[entry] = (index, added, key, change.put)

    def wanted(self) -> list[bytes]:
        return list(self.adds.keys() | self.removes.keys())

    def settle(self, current: Mapping[bytes, bytes | None]) -> None:
        for entry, key in self.removes.items():
            # a unique entry is removed only while it points at the record giving it up
            if entry not in self.adds and current[entry] in (None, key):
                self.ops.append(Delete(entry))
        for entry, (index, added, key, put) in self.adds.items():
            holder = current[entry]
            if holder is not None and holder != key and self.removes.get(entry) != holder:
                raise self.violation(index, added, holder, key)
            expire_at, options = (None, None) if put is None else (put.expire_at, put.options)
            self.ops.append(Put(entry, key, expire_at, UNDECODED, options))

    def violation(
        self, index: Index, value: tuple[Any, ...], holder: bytes, key: bytes
    ) -> UniqueIndexError:
        """A refused write names the holder; a build that meets two live holders of one value
        (written before the index existed, or while it was write_only) names both and stays
        unfinished."""
        shown = value[0] if len(value) == 1 else value
        held = show_key(self.schema, holder)
        new = show_key(self.schema, key)
        if self.building is not None:
            message = (
                f"unique index {index.name!r}: the build found {shown!r} held by both "
                f"{held!r} ({show_bytes(holder)}) and {new!r} ({show_bytes(key)}); the index "
                "stays write_only (its reads refused): change or delete one of them and build "
                "again"
            )
        else:
            message = (
                f"unique index {index.name!r}: {shown!r} already belongs to {held!r} "
                f"({show_bytes(holder)}); the write of {new!r} was refused and nothing was "
                "written"
            )
        return UniqueIndexError(message, index=index.name, value=shown, key=held, new_key=new)


class CountMaintainer(Maintainer):
    """A count index: one row per group with its live record count (and, for a sum index, the
    exact total of its amounts, sums.py), read and rewritten with the write's net change."""

    settle_order = 3

    def __init__(
        self,
        schema: Schema,
        encode: Encode,
        building: Index | None,
        strings: dict[str, dict[str, bytes]] | None = None,
        plans: dict[Index, Callable[..., bytes] | None] | None = None,
    ) -> None:
        super().__init__(schema, encode, building, strings, plans)
        #: group -> [its index, the write's net change of count, ints, floats and fine (as in
        #: sums.Sum), the key of the last record changing it], mutable: added to in place
        self.deltas: dict[bytes, list[Any]] = {}
        #: groups whose current value is known without a read (the writer's GroupCache)
        self.known: Mapping[bytes, Group] = {}
        #: the value each group written here will have (what the GroupCache learns)
        self.learnt: dict[bytes, Group] = {}

    def amount(self, index: Index, key: bytes, key_obj: Any, value: Any, group: bytes) -> Any:
        """What a record adds to its groups' sums; IndexAmountError when a sum cannot take it
        exactly."""
        found = index.amount_of(key_obj, value)
        why = amount_problem(found)
        if why is not None:
            raise self.refusal(index, group, key, found, f"its amount {found!r} {why}")
        return found

    def _add(self, index: Index, group: bytes, key: bytes, sign: int, amount: Any) -> None:
        """One record of `amount` (None: a count index) into `group`'s net change."""
        delta = self.deltas.get(group)
        if delta is None:
            delta = self.deltas[group] = [index, 0, 0, 0, 0, key]
        else:
            delta[D_KEY] = key
        delta[D_COUNT] += sign
        if amount is None or amount.__class__ is int:
            if amount:
                delta[D_INTS] += sign * amount
        elif isinstance(amount, float):
            delta[D_FLOATS] += sign
            delta[D_FINE] += sign * fine_units(amount)
        else:  # an int subclass
            delta[D_INTS] += sign * int(amount)

    def change(self, index: Index, change: RecordWrite) -> None:
        # An expired value counts in no aggregate any more: only the live one is taken out
        key, key_obj, _, live_old, new, _, _ = change
        encode, name, fields, add_one = self.encode, index.name, index.fields, self._add
        for sign, value in ((-1, live_old), (1, new)):
            if value is None:
                continue
            if index.using is not None:
                groups = list(self.using_entries(index, key_obj, value))
            else:
                groups = [encode(name, fields, v) for v in index.entries(key_obj, value)]
            if groups:
                amount = None
                if index.amount is not None:
                    amount = self.amount(index, key, key_obj, value, groups[0])
                for group in dict.fromkeys(groups):  # distinct, as entries() are
                    add_one(index, group, key, sign, amount)

    def change_all(self, index: Index, changes: Changes) -> None:
        """`change` of each record for a count index with `using` (a backlink count: the
        groups a record links to), its columns zipped and its groups added inline; a sum
        index or one without `using` as Maintainer.change_all."""
        if index.using is None or index.amount is not None:
            super().change_all(index, changes)
            return
        deltas, get, entries = self.deltas, self.deltas.get, self.using_entries
        for key, key_obj, live_old, new in zip(
            changes.keys, changes.key_objs, changes.live_olds, changes.news, strict=True
        ):
            # an expired value counts in no aggregate any more: only the live one is taken out
            for sign, value in ((-1, live_old), (1, new)):
                if value is None:
                    continue
                for group in entries(index, key_obj, value):  # distinct, as entries() are
                    delta = get(group)
                    if delta is None:
                        deltas[group] = [index, sign, 0, 0, 0, key]
                    else:
                        delta[D_COUNT] += sign
                        delta[D_KEY] = key

    def change_columns(self, index: Index, changes: Changes) -> None:
        deltas, get = self.deltas, self.deltas.get
        # an expired value counts in no aggregate any more: only the live one is taken out
        gone, added = self.entry_columns(index, changes, live=True)
        keys = changes.keys
        if index.amount is None:  # a count index: counts only, inlined (the put_many path)
            signed = [(added, 1)]
            if gone.count(None) != len(gone):  # new records take nothing out
                signed.insert(0, (gone, -1))
            passes = self.passes
            for groups, sign in signed:  # each group's records counted at once
                if passes is not None and groups.__class__ is list and keys.__class__ is list:
                    # record by record in one C loop: the same deltas
                    passes.count_into(deltas, groups, keys, index, sign)
                    continue
                counted = Counter(groups)
                counted.pop(None, None)
                last = dict(zip(groups, keys, strict=True))  # its last record's key
                for group, many in counted.items():
                    delta = get(group)
                    if delta is None:
                        deltas[group] = [index, sign * many, 0, 0, 0, last[group]]
                    else:
                        delta[D_COUNT] += sign * many
                        delta[D_KEY] = last[group]
            return
        amount_of, amount, add_one = index.amount_of, self.amount, self._add
        for key, key_obj, group_gone, group_added, live_old, new in zip(
            keys, changes.key_objs, gone, added, changes.live_olds, changes.news, strict=True
        ):  # in record order, as change() adds up
            for group, sign, value in ((group_gone, -1, live_old), (group_added, 1, new)):
                if group is None:
                    continue
                found = amount_of(key_obj, value)
                if found.__class__ is int and INT_MIN <= found <= INT_MAX:  # inlined _add
                    delta = get(group)
                    if delta is None:
                        deltas[group] = [index, sign, sign * found, 0, 0, key]
                    else:
                        delta[D_COUNT] += sign
                        delta[D_INTS] += sign * found
                        delta[D_KEY] = key
                else:
                    add_one(index, group, key, sign, amount(index, key, key_obj, value, group))

    def wanted(self) -> list[bytes]:
        known = self.known
        return [group for group in self.deltas if group not in known]

    def settle(self, current: Mapping[bytes, bytes | None]) -> None:
        """The new row of each group changed; IndexAmountError before any op when a total
        would leave the range (sums.total_problem)."""
        known = self.known
        ops: list[Op] = []
        staged: dict[bytes, Group] = {}
        counts = _COUNT_STATES
        put_keys, put_data = self.put_keys, self.put_data
        deltas: Any = self.deltas.items()
        if self.passes is not None and known.__class__ is dict:
            # the known count-only groups in one C loop, then the rest
            left = self.passes.settle_counts(self.deltas, known, counts, put_keys, put_data, staged)
            deltas = [(group, self.deltas[group]) for group in left]
        for group, (index, count, ints, floats, fine, key) in deltas:
            if not (count or ints or floats or fine):
                continue
            if group in known:
                have = known[group] or ZERO
            else:
                data = current[group]
                have = ZERO if data is None else decode_sum(index.name, group, data)
            if not (ints or floats or fine or have[1] or have[2] or have[3]):
                # a count only (a count index's rows): its state and bytes made once per count
                made = counts.get(have[0] + count)
                if made is not None:
                    put_keys.append(group)
                    put_data.append(made[1])
                    staged[group] = made[0]
                    continue
            state = _new(Sum, (have[0] + count, have[1] + ints, have[2] + floats, have[3] + fine))
            if state[0] <= 0:
                ops.append(Delete(group))
                staged[group] = None
                continue
            if floats or fine or (ints and (state[2] or not INT_MIN <= state[1] <= INT_MAX)):
                why = total_problem(state)
                if why is not None:
                    exact = Fraction((state.ints << FINE) + state.fine, 1 << FINE)
                    raise self.refusal(index, group, key, exact, f"the write {why}")
            ops.append(_new(Put, (group, encode_sum(state), None, UNDECODED, None)))
            staged[group] = state
        self.ops += ops
        self.learnt.update(staged)

    def refusal(
        self, index: Index, group: bytes, key: bytes, value: Any, why: str
    ) -> IndexAmountError:
        """A sum's refusal naming the index, the group's values, the record and its key."""
        values, _ = decode_entry(index.name, index.fields, group)
        shown_group = values[0] if len(values) == 1 else values
        record_type = self.schema.try_record_type_of(key)
        record = "?" if record_type is None else record_type.name
        shown = show_key(self.schema, key)
        return IndexAmountError(
            f"sum index {index.name!r}, group {shown_group!r}: {why} (record {record!r}, key "
            f'{shown!r}); a sum must equal a recount exactly (RFC 0010, "Exact sums"), so '
            "the write was refused and nothing was written",
            index=index.name,
            fields=index.field_names,
            group=shown_group,
            record=record,
            key=shown,
            value=value,
        )


#: count -> (Sum(count, 0, 0, 0), its row's bytes), for the counts of count rows (settle)
_COUNT_STATES: dict[int, tuple[Sum, bytes]] = {
    n: (Sum(n, 0, 0, 0), encode_sum(Sum(n, 0, 0, 0))) for n in range(1, 4096)
}


class SumMaintainer(CountMaintainer):
    """A sum index: a count index whose rows also total each record's amount."""

    settle_order = 4
