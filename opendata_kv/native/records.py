"""Compiles a record type's key layout and value codec into the C accelerator's RecordDecoder
(native/_accel/records.c), which turns a batch of scanned rows into the typed Records that
store/scan.py's fast path builds in Python: same classes, same values, same raw keys.

Only what the C side does exactly as the Python codecs is handed to it: the key codecs
listed in _FIELDS (and desc() of them), record types with no extended layout,
key classes built by tuple.__new__, and msgpack values (MsgpackCodec, decoded in C within its
uncapped size) or any other codec through its Python batch decoder. decoder() returns None
otherwise, and the scan stays on its Python path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Final

from opendata_kv.keys import RecordType
from opendata_kv.keys import fields as F
from opendata_kv.keys.codecs import Field
from opendata_kv.native import accel
from opendata_kv.values import batch_decoder
from opendata_kv.values.codecs import MsgpackCodec, RawCodec

#: records.c's spec of one key field: (kind, width, inverted, code_bits, max_extra, max_value)
FieldSpec = tuple[int, int, bool, int, int, int]
#: RowDecoder(keys, values, prefixed) -> the rows' Records, or None when the C side does not
#: take one of the rows (the caller decodes the batch in Python)
RowDecoder = Callable[[list[bytes], list[bytes], bool], list[Any] | None]

# records.c's field kinds and value modes
FIELD_UINT, FIELD_INT, FIELD_F64, FIELD_BOOL, FIELD_FIXED = 0, 1, 2, 3, 4
FIELD_STR, FIELD_BYTES, FIELD_TRAIL_STR, FIELD_TRAIL_BYTES, FIELD_VARUINT = 5, 6, 7, 8, 9
FIELD_INT63, FIELD_TID = 10, 11
VALUE_NONE, VALUE_RAW, VALUE_MSGPACK, VALUE_CALL = 0, 1, 2, 3

#: the public codecs decoded in C, by identity: field -> its kind
_FIELDS: Final[dict[Field, int]] = {
    F.u8: FIELD_UINT,
    F.u16: FIELD_UINT,
    F.u32: FIELD_UINT,
    F.u64: FIELD_UINT,
    F.i32: FIELD_INT,
    F.i64: FIELD_INT,
    F.f64: FIELD_F64,
    F.boolean: FIELD_BOOL,
    F.string: FIELD_STR,
    F.bytes_: FIELD_BYTES,
    F.trailing_string: FIELD_TRAIL_STR,
    F.trailing_bytes: FIELD_TRAIL_BYTES,
    F.var_u32: FIELD_VARUINT,
    F.var_u64: FIELD_VARUINT,
    F.url_key: FIELD_INT63,
    F.tid: FIELD_TID,
}


def _field_spec(field: Field, inverted: bool = False) -> FieldSpec | None:
    """records.c's spec of `field` (desc(f): f's, inverted), None when it has none."""
    if type(field) is F.Desc and not inverted:
        return _field_spec(field.inner, inverted=True)
    if type(field) is F.Fixed:
        return FIELD_FIXED, field.size, inverted, 0, 0, 0
    kind = next((k for f, k in _FIELDS.items() if f is field), None)
    if kind is None:
        return None
    if kind == FIELD_VARUINT:  # the shape of keys/codecs.py's _VarUInt
        limit: int = getattr(field, "_limit")  # noqa: B009
        bits: int = getattr(field, "_code_bits")  # noqa: B009
        extra: int = getattr(field, "_max_extra")  # noqa: B009
        return kind, 0, inverted, bits, extra, limit - 1
    return kind, field.width or 0, inverted, 0, 0, 0


def key_specs(record_type: RecordType) -> tuple[FieldSpec, ...] | None:
    """The C field specs of `record_type`'s key, or None when it has a field (or a layout, or
    a key class) the C side does not decode."""
    if record_type.extended or record_type.Key.__new__ is not tuple.__new__:
        return None
    specs = []
    for _, field in record_type.fields:
        spec = _field_spec(field)
        if spec is None:
            return None
        specs.append(spec)
    return tuple(specs)


def key_encoder(record_type: RecordType) -> Callable[..., bytes] | None:
    """The C accelerator's KeyEncoder of `record_type` (native/_accel/keyenc.c): called as
    RecordType.fast_encode is, `encoder(*fields) -> key bytes`, raising ValueError for fields
    it does not encode (redo them through RecordType.encode, whose error names the field).
    None when the accelerator is off or a field (or the layout) has no C spec. Cached per
    record type."""
    make = getattr(accel.active_module(), "KeyEncoder", None)
    if make is None:
        return None
    ident = (id(make), id(record_type))
    found = _ENCODERS.get(ident)
    if found is not None:
        return found[1]
    if len(_ENCODERS) >= _CACHE_SIZE:
        _ENCODERS.clear()
    specs = key_specs(record_type)
    built = None if specs is None else make(head=record_type.head, fields=specs)
    _ENCODERS[ident] = ((make, record_type), built)  # holds them: their ids stay theirs
    return built


_ENCODERS: dict[tuple[int, int], tuple[tuple[Any, ...], Callable[..., bytes] | None]] = {}


def _value_mode(codec: Any) -> tuple[int, Any, int, int]:
    """(mode, batch function, max bytes, max depth) for values of `codec`."""
    if type(codec) is MsgpackCodec:
        limits = codec.limits
        return VALUE_MSGPACK, None, limits.uncapped_bytes, limits.max_depth
    if type(codec) is RawCodec:
        return VALUE_RAW, None, 0, 0
    return VALUE_CALL, batch_decoder(codec), 0, 0


def decoder(
    record_type: RecordType,
    codec: Any,
    upgrade: Callable[[Any], Any] | None,
    shape: str,
    record_class: type[tuple[Any, ...]],
) -> RowDecoder | None:
    """The C decoder of rows of `record_type` whose values `codec` decodes (then `upgrade`),
    building `record_class` tuples; `shape` "keys" or "values" leaves the other half None.
    None when the accelerator is off or does not take this record type."""
    module = accel.active_module()
    if module is None or getattr(module, "RecordDecoder", None) is None:
        return None
    return _compile(module.RecordDecoder, record_type, codec, upgrade, shape, record_class)


def entry_decoder(
    head: bytes,
    fields: Sequence[Field],
    codec: Any,
    record_class: type[tuple[Any, ...]],
) -> RowDecoder | None:
    """The C decoder of rows whose keys are `head`, then `fields`, then any trailing bytes
    (an index entry: its fields, then its record's key), and whose values `codec` decodes:
    each row a `record_class` of (the fields and the trailing bytes as a tuple, the value,
    the raw key). None when the accelerator is off or a field has no C spec. Not cached:
    the caller binds it once (a plan per index)."""
    module = accel.active_module()
    make = getattr(module, "RecordDecoder", None)
    if make is None:
        return None
    specs = [_field_spec(field) for field in fields]
    if any(spec is None for spec in specs):
        return None
    specs.append((FIELD_TRAIL_BYTES, 0, False, 0, 0, 0))
    mode, function, max_bytes, max_depth = _value_mode(codec)
    built = make(
        head=head,
        fields=tuple(specs),
        key_class=tuple,
        record_class=record_class,
        value_mode=mode,
        value_fn=function,
        upgrade=None,
        max_bytes=max_bytes,
        max_depth=max_depth,
    )
    decode: RowDecoder = built.decode
    return decode


def scan_rows(scan: Any) -> AsyncIterator[Any] | None:
    """`async for` over a store/scan.py Scan's rows with the decoded ones handed over in C
    (records.c's ScanRows), or None when the accelerator is off."""
    kind = getattr(accel.active_module(), "ScanRows", None)
    if kind is None:
        return None
    rows: AsyncIterator[Any] = kind(scan)
    return rows


def sync_scan_rows(scan: Any, step: Callable[[], Any]) -> Iterator[Any] | None:
    """`for` over a Scan's rows with the decoded ones handed over in C and `step()` (the sync
    face's __next__) called when the buffer is used up; None when the accelerator is off."""
    kind = getattr(accel.active_module(), "ScanRows", None)
    if kind is None:
        return None
    rows: Iterator[Any] = kind(scan, step)
    return rows


_CACHE: dict[tuple[int, ...], tuple[tuple[Any, ...], RowDecoder | None]] = {}
_CACHE_SIZE: Final = 512


def _compile(
    make: Any,
    record_type: RecordType,
    codec: Any,
    upgrade: Callable[[Any], Any] | None,
    shape: str,
    record_class: type[tuple[Any, ...]],
) -> RowDecoder | None:
    """One RecordDecoder per record type plan (and scan shape), built on first use; cached by
    the identity of its parts (a look-alike RecordType has other Key objects)."""
    parts = (make, record_type, codec, upgrade, shape, record_class)
    ident = tuple(map(id, parts))
    found = _CACHE.get(ident)
    if found is not None:
        return found[1]
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    built = _build(*parts)
    _CACHE[ident] = (parts, built)  # holds the parts: their ids stay theirs
    return built


def _build(
    make: Any,
    record_type: RecordType,
    codec: Any,
    upgrade: Callable[[Any], Any] | None,
    shape: str,
    record_class: type[tuple[Any, ...]],
) -> RowDecoder | None:
    specs = None if shape == "values" else key_specs(record_type)
    if specs is None and shape != "values":
        return None
    if shape == "keys":
        mode, function, max_bytes, max_depth = VALUE_NONE, None, 0, 0
    else:
        mode, function, max_bytes, max_depth = _value_mode(codec)
    built = make(
        head=record_type.head,
        fields=specs,
        key_class=record_type.Key,
        record_class=record_class,
        value_mode=mode,
        value_fn=function,
        upgrade=None if shape == "keys" else upgrade,
        max_bytes=max_bytes,
        max_depth=max_depth,
    )
    decode: RowDecoder = built.decode
    return decode
