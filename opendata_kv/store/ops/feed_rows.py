"""What the change feed yields, and how a WAL row becomes one (RFC 0008, RFC 0010).

Three types, so that a consumer's type checker knows what it holds:

    Change       a write of a record the schema owns: `key` is a Key, `value` decoded
    RawChange    a row delivered undecoded: a key no RecordType owns (on_unknown="raw") or
                 one whose key or value failed to decode (on_error="raw", `error` says why)
    IndexChange  a write of the secondary-index key space (indexes=True): which index, and
                 the entry's fields decoded where its definition is known

With the default policies the feed yields Changes only; index rows are left out unless asked
for, as they are index bookkeeping, not records.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar

import msgpack

from opendata_kv.errors import OpendataKvError, SchemaError
from opendata_kv.keys import Key, RecordType, Schema, codec_names
from opendata_kv.keys.codecs import Field
from opendata_kv.native.slatedb import RowEntryKind
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.kinds import KINDS
from opendata_kv.store.indexes.layout import (
    CATALOG,
    ENTRIES,
    META,
    ROOT,
    decode_entry,
    decode_meta,
)
from opendata_kv.store.scan import K, V
from opendata_kv.values import Values

OPS = {RowEntryKind.VALUE: "put", RowEntryKind.TOMBSTONE: "delete", RowEntryKind.MERGE: "merge"}

UnknownPolicy = Literal["raise", "skip", "raw"]


K2 = TypeVar("K2", bound=tuple[Any, ...])
V2 = TypeVar("V2")


def _change_of(change: Any, record_type: RecordType) -> Any:
    """Change.of (one body for both definitions of Change)."""
    return change if change.key.record_type is record_type else None


if TYPE_CHECKING or sys.version_info >= (3, 11):

    class Change(NamedTuple, Generic[K, V]):
        """One write of a record the schema owns, as the change feed yields it.

        `op` is "put", "delete" or "merge"; `key` the decoded Key; `value` decoded by the key
        version's codec (None for a delete). `cursor` resumes the feed right after this
        change. The feed mixes record types, so it yields `Change[Key, Any]`; `change.of(post)`
        is the same change as a `Change[PostKey, Post]` when it is a post's, else None.
        """

        cursor: str
        seq: int
        op: str
        key: K
        value: V | None
        raw_key: bytes
        raw_value: bytes | None
        expire_at: int | None  # Unix ms, for a put with a TTL

        def of(self, record_type: RecordType[K2, V2, Any]) -> Change[K2, V2] | None:
            """This change typed as one of `record_type`'s (key a K2, value a V2 or None for
            a delete) when its key is of that very RecordType, else None."""
            typed: Change[K2, V2] | None = _change_of(self, record_type)
            return typed

else:  # Python 3.10 has no generic NamedTuple: the same class, subscriptable

    class Change(NamedTuple):
        """One write of a record the schema owns, as the change feed yields it (see above)."""

        cursor: str
        seq: int
        op: str
        key: Key
        value: Any
        raw_key: bytes
        raw_value: bytes | None
        expire_at: int | None

        __class_getitem__ = classmethod(GenericAlias)
        of = _change_of


class RawChange(NamedTuple):
    """One write delivered undecoded: a key no RecordType owns (on_unknown="raw", `error`
    None) or one whose key or value failed to decode (on_error="raw", `error` says why).
    `key` and `raw_key` are the key bytes, `value` and `raw_value` the stored bytes."""

    cursor: str
    seq: int
    op: str
    key: bytes
    value: bytes | None
    raw_key: bytes
    raw_value: bytes | None
    expire_at: int | None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class IndexChange:
    """One write of the secondary-index key space (RFC 0010), yielded with indexes=True.

    `part` is "entry", "meta" (an index's metadata) or "catalog" (the list of index names);
    `index` the index name (None for the catalog). For an entry whose index definition is
    known: `fields` its field values by name, `record_key` the record it points at (a value entry's
    key, a unique entry's stored value; None for aggregates and unique deletes), `value`
    an aggregate's (count, sum). Metadata and catalog values are decoded maps and lists.
    An entry of an unknown index, or with a codec this process does not know, comes with
    `fields` None and `value` the raw bytes.
    """

    cursor: str
    seq: int
    op: str
    index: str | None
    part: str
    fields: dict[str, Any] | None
    record_key: Key | bytes | None
    value: Any
    raw_key: bytes
    raw_value: bytes | None
    expire_at: int | None
    error: Exception | None = None


AnyChange = Change | RawChange | IndexChange


class UnknownKey(Exception):
    """Raised by Decoder.change for a key no RecordType owns under on_unknown="raise"; the
    feed turns it into ChangeDecodeError whatever on_error says."""

    def __init__(self, error: OpendataKvError) -> None:
        super().__init__(str(error))
        self.error = error


def field_named(name: str) -> Field | None:
    """The key field codec a stored index definition names ("string", "desc(u64)"), or None
    for one this process cannot rebuild from its name."""
    try:
        return codec_names.field_named(name)
    except SchemaError:
        return None


class IndexShape(NamedTuple):
    """What the feed needs to decode one index's entries: kind and field codecs."""

    kind: str
    fields: tuple[tuple[str, Field], ...] | None  # None: a codec is not known by name


def shape_of(index: Index | Mapping[str, Any]) -> IndexShape:
    """The IndexShape of a declared Index or of a stored definition (metadata's map)."""
    if isinstance(index, Index):
        return IndexShape(index.kind, index.fields)
    fields: list[tuple[str, Field]] = []
    for pair in index.get("fields") or ():
        codec = field_named(str(pair[1])) if len(pair) == 2 else None
        if codec is None:
            return IndexShape(str(index.get("kind")), None)
        fields.append((str(pair[0]), codec))
    return IndexShape(str(index.get("kind")), tuple(fields))


class Decoder:
    """Decode WAL rows into changes, with each RecordType's key and value decoders looked up
    once (the codec's fast_decode where it has one; on any failure the value is decoded again
    through Values.decode, whose error names the key). Index rows are left out (None) unless
    `indexes`; `shapes` maps index names to how their entries decode."""

    def __init__(
        self,
        schema: Schema,
        values: Values,
        *,
        on_unknown: UnknownPolicy = "raise",
        indexes: bool = False,
        shapes: dict[str, IndexShape] | None = None,
    ) -> None:
        self._schema = schema
        self._values = values
        self._plans: dict[RecordType, tuple[Any, Any, Any]] = {}
        self._on_unknown = on_unknown
        self._indexes = indexes
        self.shapes: dict[str, IndexShape] = shapes if shapes is not None else {}

    def _plan(self, record_type: RecordType) -> tuple[Any, Any, Any]:
        plan = self._values.plan(record_type)
        codec = plan.codec
        found = (
            record_type.decode,
            getattr(codec, "fast_decode", None) or codec.decode,
            plan.upgrade,
        )
        self._plans[record_type] = found
        return found

    def change(self, row: Any, cursor: str) -> AnyChange | None:
        """The change of `row` (None: left out); OpendataKvError (a ValueDecodeError or
        KeyDecodeError naming the key) when its key or value does not decode, UnknownKey
        when no RecordType owns it and on_unknown is "raise"."""
        key = row.key
        data = row.value
        record_type = self._schema.try_record_type_of(key)
        if record_type is None:
            if key[:2] == ROOT:  # no record type owns the index key space (check_schema)
                return self.index_change(row, cursor) if self._indexes else None
            if self._on_unknown == "raw":
                return RawChange(
                    cursor, row.seq, OPS[row.kind], key, data, key, data, row.expire_ts
                )
            if self._on_unknown == "skip":
                return None
            raise UnknownKey(self._values.unknown(key))
        plan = self._plans.get(record_type) or self._plan(record_type)
        value = None
        if data is not None:
            try:
                value = plan[1](data)
                if plan[2] is not None:
                    value = plan[2](value)
            except Exception:
                value = self._values.decode(record_type, key, data)
        return Change(cursor, row.seq, OPS[row.kind], plan[0](key), value, key, data, row.expire_ts)

    def index_change(self, row: Any, cursor: str) -> IndexChange:
        """An index row decoded as far as its definition allows; OpendataKvError (a
        StoreDataError naming the index and key) when a known definition does not decode it."""
        key: bytes = row.key
        data: bytes | None = row.value
        op = OPS[row.kind]

        def made(index: str | None, part: str, fields: Any, record: Any, value: Any) -> IndexChange:
            return IndexChange(
                cursor, row.seq, op, index, part, fields, record, value, key, data, row.expire_ts
            )

        if key == CATALOG:
            return made(None, "catalog", None, None, _unpacked(data))
        if key.startswith(META):
            name = key[len(META) :].decode(errors="replace")
            meta = None if data is None else decode_meta(key, data)
            if meta is not None:  # a newly registered index: its entries decode from now on
                self.shapes[name] = shape_of(meta["definition"])
            return made(name, "meta", None, None, meta)
        end = key.find(b"\x00", len(ENTRIES))
        if not key.startswith(ENTRIES) or end < 0:
            return made(None, "unknown", None, None, data)
        name = key[len(ENTRIES) : end].decode(errors="replace")
        shape = self.shapes.get(name)
        kind = None if shape is None else KINDS.get(shape.kind)
        if shape is None or shape.fields is None or kind is None:
            return made(name, "entry", None, None, data)  # a kind this version does not know
        values, rest = decode_entry(name, shape.fields, key)
        fields = {field: value for (field, _), value in zip(shape.fields, values, strict=True)}
        if kind.aggregate:
            value = None if data is None else kind.counts(name, key, data)
            return made(name, "entry", fields, None, value)
        return made(name, "entry", fields, self._record_key(kind.primary(rest, data)), None)

    def _record_key(self, primary: bytes | None) -> Key | bytes | None:
        if not primary:
            return None
        owner = self._schema.try_record_type_of(primary)
        if owner is None:
            return primary
        try:
            key: Key = owner.decode(primary)
            return key
        except OpendataKvError:
            return primary


def _unpacked(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return msgpack.unpackb(data)
    except Exception:
        return data


def shapes_of(
    declared: Mapping[str, Index], stored: Mapping[str, Mapping[str, Any]]
) -> dict[str, IndexShape]:
    """Index shapes by name: stored definitions, overridden by the declared Index objects."""
    out = {name: shape_of(meta["definition"]) for name, meta in stored.items()}
    out.update({name: shape_of(index) for name, index in declared.items()})
    return out
