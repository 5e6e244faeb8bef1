"""Scans as Arrow record batches (docs/arrow.md): key fields as typed columns, values flattened
by their codec, nothing dropped. pyarrow (the `arrow` extra) is imported here only, lazily."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from types import ModuleType, NoneType, UnionType
from typing import Any

from opendata_kv.errors import (
    InvalidArgumentError,
    MissingExtraError,
    OpendataKvError,
    ValueCodecError,
    show_bytes,
)
from opendata_kv.ids.muid import Muid
from opendata_kv.keys import Field, RecordType
from opendata_kv.keys.fields import Desc, Fixed, Typed
from opendata_kv.values import RawCodec, Values, pack, unpack

RECORD_COLUMN = "_record"
VERSION_COLUMN = "_version"
EXPIRES_COLUMN = "_expires"
KEY_COLUMN = "_key"
EXTRA_COLUMN = "_extra"
VALUE_COLUMN = "_value"
RESERVED = frozenset(
    (RECORD_COLUMN, VERSION_COLUMN, EXPIRES_COLUMN, KEY_COLUMN, EXTRA_COLUMN, VALUE_COLUMN)
)
#: Arrow field metadata keys
ROLE = b"opendata_kv.role"
KIND = b"opendata_kv.kind"
ENCODING = b"opendata_kv.encoding"
FIELD = b"opendata_kv.field"

_INT64 = (-(1 << 63), (1 << 63) - 1)


def require_pyarrow() -> ModuleType:
    """The pyarrow module, or MissingExtraError naming the `arrow` extra."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        raise MissingExtraError(
            "Arrow output needs pyarrow: pip install 'opendata-kv[arrow]'",
            field="arrow",
            value="pyarrow",
        ) from None


# --- key fields -------------------------------------------------------------------------------

_UNSIGNED = {"u8": 8, "u16": 16, "u32": 32, "u64": 64, "var_u32": 32, "var_u64": 64, "url_key": 64}
_STRINGS = ("string", "trailing_string", "lp_string", "tid")
_BYTES = ("bytes", "trailing_bytes", "lp_bytes")


def _key_form(field: Field) -> str:
    """How one key field is held in Arrow: a type tag shared by key_arrow_type and the
    converters (desc(f) is held as f)."""
    while isinstance(field, Desc):
        field = field.inner
    if isinstance(field, Fixed):
        return f"fixed:{field.size}"
    if isinstance(field, Typed):
        return "msgpack"
    kind = field.kind
    if kind in _UNSIGNED:
        return f"uint:{_UNSIGNED[kind]}"
    if kind in ("i32", "i64"):
        return f"int:{kind[1:]}"
    if kind in ("f64", "bool", "muid", "u128"):
        return kind
    if kind in _STRINGS or kind.startswith("rkey"):
        return "string"
    if kind in _BYTES:
        return "binary"
    return "msgpack"  # a codec this module does not know: kept exactly, as msgpack


def key_arrow_type(field: Field) -> Any:
    """The Arrow type of one key field's column."""
    pa = require_pyarrow()
    form = _key_form(field)
    if form.startswith("uint:"):
        return getattr(pa, f"uint{form[5:]}")()
    if form.startswith("int:"):
        return getattr(pa, f"int{form[4:]}")()
    if form.startswith("fixed:"):
        return pa.binary(int(form[6:]))
    simple = {
        "f64": pa.float64(),
        "bool": pa.bool_(),
        "muid": pa.binary(16),
        "u128": pa.binary(16),
        "string": pa.string(),
        "binary": pa.binary(),
        "msgpack": pa.binary(),
    }
    return simple[form]


def _key_out(field: Field) -> Callable[[Any], Any] | None:
    """Key field value -> its Arrow-ready Python value (None: the same value)."""
    form = _key_form(field)
    if form == "muid":
        return bytes
    if form == "u128":
        return lambda n: n.to_bytes(16, "big")
    if form == "msgpack":
        return lambda v: pack(v, "key field")
    return None


def key_to_arrow(field: Field, value: Any) -> Any:
    """One decoded key field value as its column holds it."""
    convert = _key_out(field)
    return value if convert is None or value is None else convert(value)


def key_from_arrow(field: Field, value: Any) -> Any:
    """A key field column's value back as the field's value (Muid, int, ...)."""
    form = _key_form(field)
    if value is None:
        return None
    if form == "muid":
        return Muid.from_bytes(value)
    if form == "u128":
        return int.from_bytes(value, "big")
    if form == "msgpack":
        return unpack(value)
    return value


# --- values -----------------------------------------------------------------------------------

#: Python type -> Arrow type name, for scalar value fields (exact types: a bool is no int)
_SCALARS: dict[type, str] = {
    bool: "bool_",
    int: "int64",
    float: "float64",
    str: "string",
    bytes: "binary",
}


@dataclasses.dataclass
class _ValueColumn:
    name: str  # the field's name in the value
    column: str  # the Arrow column's name
    scalar: type | None  # the Python type of its values (of its items when `listed`)
    listed: bool = False  # a list of `scalar`
    json: bool = False  # any value JSON holds exactly, as JSON text (None as "null")

    def arrow_type(self, pa: ModuleType) -> Any:
        if self.json or self.scalar is None:
            return pa.string()
        item = getattr(pa, _SCALARS[self.scalar])()
        return pa.list_(item) if self.listed else item

    def fits(self, value: Any) -> bool:
        if self.json:
            return _json_exact(value)
        if self.listed:
            return type(value) is list and all(_scalar_fits(self.scalar, v) for v in value)
        return _scalar_fits(self.scalar, value)


_JSON_SCALARS = (bool, int, str, NoneType)


def _json_exact(value: Any) -> bool:
    """Whether JSON holds `value` exactly (json.loads gives it back, types and all): maps with
    str keys, lists, str, int, finite float, bool, None; no bytes, no other key types."""
    kind = type(value)
    if kind in _JSON_SCALARS:
        return True
    if kind is float:
        return bool(math.isfinite(value))
    if kind is list:
        return all(map(_json_exact, value))
    if kind is dict:
        return all(type(k) is str for k in value) and all(map(_json_exact, value.values()))
    return False


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _scalar_fits(scalar: type | None, value: Any) -> bool:
    if type(value) is not scalar:
        return False
    return scalar is not int or _ints_fit([value])


def _hint_column(name: str, hint: Any) -> _ValueColumn:
    """A typed field's column from its declared type (Optional[X] as X, list[X] as a list)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _hint_column(name, typing.get_args(hint)[0])
    if origin in (typing.Union, UnionType):
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return _hint_column(name, args[0])
    if hint in _SCALARS:
        return _ValueColumn(name, name, hint)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        if item in _SCALARS:
            return _ValueColumn(name, name, item, listed=True)
    return _ValueColumn(name, name, None, json=True)


def typed_fields(codec: Any) -> list[tuple[str, Any]] | None:
    """(name, declared type) of each field of a typed codec's class (dataclass, TypedDict,
    msgspec Struct, found as the codec's `cls`), or None for an untyped codec."""
    cls = getattr(codec, "cls", None)
    if not isinstance(cls, type):
        return None
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # an unresolvable forward reference: the fields, held as JSON
        hints = {}
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
    elif hasattr(cls, "__struct_fields__"):
        names = list(cls.__struct_fields__)
    elif typing.is_typeddict(cls):
        names = list(cls.__annotations__)
    else:
        return None
    return [(n, hints.get(n, Any)) for n in names]


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The fields a dataclass or Struct class stores (init fields), None for other classes."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        pass
    names: tuple[str, ...] | None = None
    if dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    elif hasattr(cls, "__struct_fields__"):
        names = tuple(cls.__struct_fields__)
    _FIELD_NAMES[cls] = names
    return names


def _as_mapping(value: Any) -> dict[Any, Any] | None:
    """A value's fields as a dict (dataclass, Struct, map), or None for any other value."""
    if type(value) is dict:
        return value
    names = _field_names(type(value))
    if names is not None:
        return {n: getattr(value, n) for n in names}
    if isinstance(value, dict):
        return dict(value)
    return None


def _infer_columns(values: Sequence[Any]) -> list[_ValueColumn]:
    """A column for each str-keyed field of the maps among `values` (the first batch of a
    plain msgpack scan): typed when its non-None values all have one scalar type (or are lists
    of one), else JSON text."""
    seen: dict[str, set[Any]] = {}
    for value in values:
        mapping = _as_mapping(value)
        if mapping is None:
            continue
        for name, item in mapping.items():
            if type(name) is not str:
                continue
            kinds = seen.setdefault(name, set())
            if item is None:
                continue
            if type(item) is list:
                kinds.add((list, frozenset(map(type, item))))
            else:
                kinds.add(type(item))
    columns = []
    for name, kinds in seen.items():
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        if kind in _SCALARS:
            columns.append(_ValueColumn(name, name, kind))
            continue
        if isinstance(kind, tuple) and len(kind[1]) == 1:
            (item,) = kind[1]
            if item in _SCALARS:
                columns.append(_ValueColumn(name, name, item, listed=True))
                continue
        columns.append(_ValueColumn(name, name, None, json=True))
    return columns


class _ValueLayout:
    """How a scan's values become columns: `raw` (bytes in `_value`), or fields as typed or
    JSON columns plus `_extra` holding, as msgpack, what did not fit (a map of the leftover
    fields, or the whole value when it is not a map)."""

    def __init__(self, raw: bool, columns: list[_ValueColumn], none_is_null: bool) -> None:
        self.raw = raw
        self.columns = columns
        #: dataclass/Struct values always have every field: None is the column's null;
        #: for maps a null means "absent" and a stored None goes to _extra
        self.none_is_null = none_is_null

    def arrays(self, pa: ModuleType, values: list[Any], where: Callable[[int], str]) -> list[Any]:
        if self.raw:
            for i, value in enumerate(values):
                if type(value) is not bytes:
                    raise ValueCodecError(
                        f"{where(i)}: a raw codec's value is {type(value).__name__}, not bytes"
                    )
            return [pa.array(values, pa.binary())]
        names = {column.name for column in self.columns}
        kinds = set(map(type, values))
        stored = _field_names(next(iter(kinds))) if len(kinds) == 1 else None
        # objects of one class whose fields are the columns: read by attribute, no dicts
        objects = stored is not None and set(stored) == names
        mappings = [] if objects else list(map(_as_mapping, values))
        leftovers: dict[int, dict[Any, Any]] = {}
        out = []
        for column in self.columns:
            get = column.name
            if objects:
                cells = list(map(attrgetter(get), values))
            else:
                cells = [_MISSING if m is None else m.get(get, _MISSING) for m in mappings]
            if not column.json and _all_fit(column, cells, self.none_is_null):
                out.append(pa.array(cells, column.arrow_type(pa)))
                continue
            kept: list[Any] = []
            for i, cell in enumerate(cells):
                if cell is _MISSING or (cell is None and self.none_is_null):
                    kept.append(None)
                elif (cell is not None or column.json) and column.fits(cell):
                    kept.append(_to_json(cell) if column.json else cell)
                else:
                    kept.append(None)
                    leftovers.setdefault(i, {})[column.name] = cell
            out.append(pa.array(kept, column.arrow_type(pa)))
        if not leftovers and (
            objects or (None not in mappings and all(map(names.issuperset, mappings)))  # type: ignore[arg-type]
        ):  # everything fits the columns
            out.append(pa.nulls(len(values), pa.binary()))
            return out
        extra: list[bytes | None] = []
        if objects:
            for i in range(len(values)):
                left = leftovers.get(i)
                extra.append(None if left is None else pack(left, EXTRA_COLUMN))
        for i, mapping in enumerate(mappings):
            if mapping is None:
                extra.append(pack(values[i], EXTRA_COLUMN))
                continue
            left = leftovers.get(i, {})
            if not mapping.keys() <= names:
                left.update((n, v) for n, v in mapping.items() if n not in names)
            extra.append(pack(left, EXTRA_COLUMN) if left else None)
        out.append(pa.array(extra, pa.binary()))
        return out


class _Missing:
    pass


_MISSING = _Missing()
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def _all_fit(column: _ValueColumn, cells: list[Any], none_is_null: bool) -> bool:
    """Whether every cell fits the column (None too, as null, when `none_is_null`), checked a
    type set at a time: the common case, with no per-cell Python code."""
    scalar = column.scalar
    allowed: set[Any] = {scalar, NoneType} if none_is_null else {scalar}
    if column.listed:
        if not set(map(type, cells)) <= ({list, NoneType} if none_is_null else {list}):
            return False
        cells = list(chain.from_iterable(c for c in cells if c is not None))
        allowed = {scalar}
    if not set(map(type, cells)) <= allowed:
        return False
    if scalar is not int:
        return True
    return _ints_fit([c for c in cells if c is not None] if none_is_null else cells)


def _ints_fit(cells: list[Any]) -> bool:
    return not cells or (min(cells) >= _INT64[0] and max(cells) <= _INT64[1])


def _value_layout(codecs: list[Any], sample: list[Any]) -> _ValueLayout:
    """The layout for values decoded by `codecs` (one per record type a scan reads)."""
    if codecs and all(isinstance(c, RawCodec) for c in codecs):
        return _ValueLayout(True, [], False)
    classes = {getattr(c, "cls", None) for c in codecs}
    if len(classes) == 1:
        fields = typed_fields(codecs[0])
        if fields is not None:
            cls = next(iter(classes))
            none_is_null = not typing.is_typeddict(cls)
            return _ValueLayout(False, [_hint_column(n, h) for n, h in fields], none_is_null)
    return _ValueLayout(False, _infer_columns(sample), False)


def value_columns(schema: Any) -> list[tuple[str, str, bool]]:
    """(field name, column name, JSON text or not) of each value column of a to_arrow schema
    (from its metadata, so a Parquet file's schema serves as well)."""
    out = []
    for field in schema:
        meta = field.metadata or {}
        if meta.get(ROLE) == b"value" and field.name != VALUE_COLUMN:
            name = meta.get(FIELD, field.name.encode()).decode()
            out.append((name, field.name, meta.get(ENCODING) == b"json"))
    return out


def value_from_row(row: dict[str, Any], columns: Iterable[tuple[str, str, bool]]) -> Any:
    """A row's value put back together (a dict, or `_value`'s bytes): `columns` from
    value_columns; a null cell is an absent field, `_extra` adds the fields that did not fit or
    is the whole value when it was not a map. For dataclass/Struct codecs, absent means None."""
    if VALUE_COLUMN in row:
        return row[VALUE_COLUMN]
    extra = row.get(EXTRA_COLUMN)
    rest = None if extra is None else unpack(extra)
    if rest is not None and not isinstance(rest, dict):
        return rest
    value = {}
    for name, column, is_json in columns:
        cell = row.get(column)
        if cell is not None:
            value[name] = json.loads(cell) if is_json else cell
    if rest:
        value.update(rest)
    return value


# --- rows -> batches --------------------------------------------------------------------------


class RowLayout:
    """The Arrow schema of a scan's rows and the conversion of a list of Records to a batch."""

    def __init__(
        self,
        record_types: Sequence[RecordType],
        values: Values,
        sample: list[Any],
        *,
        upgrade: bool = True,
        expiry: bool = False,
        raw_key: bool = False,
    ) -> None:
        pa = self._pa = require_pyarrow()
        self.record_types = list(record_types)
        self.multi = len(self.record_types) != 1
        self.expiry = expiry
        self.raw_key = raw_key
        fields: list[Any] = []
        if self.multi:
            fields.append(pa.field(RECORD_COLUMN, pa.string(), metadata={ROLE: b"record"}))
            fields.append(pa.field(VERSION_COLUMN, pa.uint8(), metadata={ROLE: b"version"}))
        # key columns: the union of the record types' fields (by name and Arrow type)
        self._key_columns: dict[str, tuple[Any, Field]] = {}
        self._placement: dict[int, list[tuple[str, Callable[[Any], Any] | None]]] = {}
        for record_type in self.record_types:
            placed = []
            for name, field in record_type.fields:
                arrow_type = key_arrow_type(field)
                column = name
                known = self._key_columns.get(column)
                if (known is not None and known[0] != arrow_type) or column in RESERVED:
                    column = f"{record_type.name}.{name}"
                if column not in self._key_columns:
                    self._key_columns[column] = (arrow_type, field)
                    kind = field.kind.encode()
                    fields.append(pa.field(column, arrow_type, metadata={ROLE: b"key", KIND: kind}))
                placed.append((column, _key_out(field)))
            self._placement[id(record_type)] = placed
        codecs = []
        for record_type in self.record_types:
            plan = values.plan(record_type)
            if upgrade and plan.upgrade is not None:
                plan = values.plan(values.current(record_type))
            codecs.append(plan.codec)
        self.values = _value_layout(codecs, sample)
        taken = {f.name for f in fields} | RESERVED
        self.value_columns: list[tuple[str, str]] = []
        if self.values.raw:
            fields.append(pa.field(VALUE_COLUMN, pa.binary(), metadata={ROLE: b"value"}))
        else:
            for value_column in self.values.columns:
                if value_column.name in taken:
                    value_column.column = f"value.{value_column.name}"
                taken.add(value_column.column)
                self.value_columns.append((value_column.name, value_column.column))
                meta = {ROLE: b"value", FIELD: value_column.name.encode()}
                if value_column.json:
                    meta[ENCODING] = b"json"
                arrow_type = value_column.arrow_type(pa)
                fields.append(pa.field(value_column.column, arrow_type, metadata=meta))
            fields.append(
                pa.field(EXTRA_COLUMN, pa.binary(), metadata={ROLE: b"extra", ENCODING: b"msgpack"})
            )
        if expiry:
            fields.append(
                pa.field(EXPIRES_COLUMN, pa.timestamp("ms", tz="UTC"), metadata={ROLE: b"expires"})
            )
        if raw_key:
            fields.append(pa.field(KEY_COLUMN, pa.binary(), metadata={ROLE: b"raw_key"}))
        self.schema = pa.schema(fields)
        self._key_names = list(self._key_columns)

    def batch(self, records: list[Any], expires: list[int | None] | None = None) -> Any:
        """One RecordBatch of `records` (Records; anything else is refused), `expires` the
        expiry (Unix ms, None for none) of each for the `_expires` column."""
        pa = self._pa
        for kind in set(map(type, records)):
            if kind.__name__ == "RawRecord":
                record: Any = next(r for r in records if type(r) is kind)
                raise InvalidArgumentError(
                    f"to_arrow: the row at key {show_bytes(record.raw_key)} was not decoded"
                    + (f" ({record.error})" if record.error is not None else " (unknown record)")
                    + "; an Arrow scan takes decoded records only (on_error 'raise' or 'skip')",
                    field="on_error",
                    value=record.raw_key,
                )
        keys = list(map(_FIRST, records))
        arrays: list[Any] = []
        if self.multi:
            arrays.append(pa.array([k.record_type.name for k in keys], pa.string()))
            arrays.append(pa.array([k.record_type.version for k in keys], pa.uint8()))
        arrays += self._key_arrays(keys)

        def where(i: int) -> str:
            key = records[i].key
            return f"{key.record_type.name} key {show_bytes(records[i].raw_key)}"

        arrays += self.values.arrays(pa, list(map(_SECOND, records)), where)
        if self.expiry:
            ms = [None] * len(records) if expires is None else expires
            arrays.append(pa.array(ms, pa.timestamp("ms", tz="UTC")))
        if self.raw_key:
            arrays.append(pa.array([r.raw_key for r in records], pa.binary()))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _key_arrays(self, keys: list[Any]) -> list[Any]:
        pa = self._pa
        columns: dict[str, list[Any]]
        if not self.multi:
            (placed,) = self._placement.values()
            transposed = list(zip(*keys, strict=True)) if keys else [()] * len(placed)
            columns = {}
            for (column, convert), cells in zip(placed, transposed, strict=True):
                columns[column] = list(cells if convert is None else map(convert, cells))
        else:
            columns = {name: [None] * len(keys) for name in self._key_names}
            for i, key in enumerate(keys):
                found = self._placement.get(id(key.record_type))
                if found is None:
                    raise OpendataKvError(
                        f"to_arrow: a {key.record_type.name} record lies outside the scan's "
                        "record types",
                        record=key.record_type.name,
                    )
                for (column, convert), cell in zip(found, key, strict=True):
                    columns[column][i] = cell if convert is None else convert(cell)
        return [pa.array(columns[name], self._key_columns[name][0]) for name in self._key_names]


def record_batches(
    chunks: Iterator[list[Any]],
    record_types: Sequence[RecordType],
    values: Values,
    *,
    rows: int = 1024,
    upgrade: bool = True,
    expiry: bool = False,
    raw_key: bool = False,
) -> Any:
    """A pyarrow.RecordBatchReader over `chunks` (lists of Records), `rows` per batch.

    The first batch is read now (plain msgpack values take their columns from it); the rest
    as the reader is consumed, so memory stays bounded by `rows`. `expiry`: the chunks hold
    (Record, expiry in Unix ms or None) pairs, given as an `_expires` column.
    """
    pa = require_pyarrow()
    pending = _coalesce(chunks, rows)
    first = next(pending, [])
    sample = list(map(_FIRST, first)) if expiry else first
    layout = RowLayout(
        record_types,
        values,
        [r.value for r in sample if r.__class__.__name__ == "Record"],
        upgrade=upgrade,
        expiry=expiry,
        raw_key=raw_key,
    )
    del sample
    held = [first]  # popped when read: the stream then holds one batch, not the first as well

    def batches() -> Iterator[Any]:
        batch: list[Any] | None = held.pop()
        while batch:
            if expiry:
                yield layout.batch(list(map(_FIRST, batch)), list(map(_SECOND, batch)))
            else:
                yield layout.batch(batch)
            batch = next(pending, None)

    return pa.RecordBatchReader.from_batches(layout.schema, batches())


def _coalesce(chunks: Iterator[list[Any]], rows: int) -> Iterator[list[Any]]:
    """The chunks regrouped into lists of `rows` (the last one shorter)."""
    held: list[Any] = []
    for chunk in chunks:
        held += chunk
        while len(held) >= rows:
            yield held[:rows]
            held = held[rows:]
    if held:
        yield held
