"""RecordType: one key layout (prefix + ordered named fields), compiled once into an encode and a
decode plan, and the immutable Key objects it decodes to."""

from __future__ import annotations

import operator
import os
import re
import struct
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, SchemaError, show_bytes
from opendata_kv.keys.fields import Field
from opendata_kv.keys.plan import PlanMismatch, compile_decode_many, compile_plan
from opendata_kv.keys.prefix import (
    RecordPrefix,
    as_key_bytes,
    build_prefix,
    prefix_successor,
    record_type_text,
)

# Exceptions a fast path may hit on bad input; the slow path then names the field.
_FAST_PATH_ERRORS = (
    PlanMismatch,
    struct.error,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
    IndexError,
)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Key(tuple):  # type: ignore[type-arg]
    """Base of every RecordType's key class: an immutable, hashable tuple of field values.

    Fields are also attributes (`key.rkey`); `key.record_type` is the RecordType that owns it.
    Two keys are equal only if they belong to the same RecordType object and hold equal values;
    a key is never equal to a plain tuple, nor to a key of a look-alike RecordType.
    """

    __slots__ = ()
    record_type: ClassVar[RecordType]
    _fields: ClassVar[tuple[str, ...]] = ()

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...

    def encode(self) -> bytes:
        """The full key bytes."""
        return self.record_type.encode(*self)

    def asdict(self) -> dict[str, Any]:
        """Field name -> value, in key order."""
        return dict(zip(self._fields, self, strict=True))

    def replace(self, **changes: Any) -> Key:
        """A copy with some fields changed (validated like any new key)."""
        values = self.asdict()
        unknown = set(changes) - set(values)
        if unknown:
            raise KeyEncodeError(f"{self.record_type.name}: no field named {sorted(unknown)}")
        values.update(changes)
        return self.record_type.key(**values)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__ and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.__class__, tuple.__hash__(self)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_key, (self.record_type, tuple(self)))


#: Field names a RecordType refuses: every public attribute of Key (its methods, tuple's count
#: and index, and `record_type`, set on each key class), which a field property of the same
#: name would hide. Derived from the class, so a method added to Key is reserved with it.
RESERVED_FIELD_NAMES: frozenset[str] = frozenset(
    name for name in (*dir(Key), *Key.__annotations__) if not name.startswith("_")
)


def check_name(name: str, what: str) -> None:
    """Refuse a name a terminal would act on or that hides its spelling: control and format
    characters (escape sequences, newlines, bidi overrides) and a form Unicode normalisation
    (NFC) changes, which would let two names that look alike be told apart only by bytes."""
    if not name.isprintable():
        bad = next(c for c in name if not c.isprintable())
        raise SchemaError(
            f"{what} {name!r} contains the control or format character U+{ord(bad):04X}; "
            "names are printed by the tools and must be plain printable text",
            value=name,
        )
    if unicodedata.normalize("NFC", name) != name:
        raise SchemaError(
            f"{what} {name!r} is not in Unicode normal form NFC; write it as "
            f"{unicodedata.normalize('NFC', name)!r}, so that names which look alike are alike",
            value=name,
        )


def _reserved_because(field_name: str) -> str | None:
    """Why a key field may not be called `field_name`, or None when it may."""
    if field_name.startswith("_"):
        return "names starting with '_' are kept for the Key class's internals"
    if field_name not in RESERVED_FIELD_NAMES:
        return None
    if callable(getattr(Key, field_name, None)):
        return f"every Key has the method {field_name}(), which the field would hide"
    return f"every Key has the attribute .{field_name}, which the field would hide"


def _rebuild_key(record_type: RecordType, values: tuple[Any, ...]) -> Key:
    return record_type.key(*values)


# RecordTypes compare by identity (a look-alike built elsewhere is another layout), so
# unpickling must find the very object that was pickled. Each RecordType gets a random token;
# in the process that made it (or a fork of it) the token finds it again. Elsewhere the
# definition finds the first live RecordType built from it (typically the module-level one
# of the program's schema), and only when there is none is a new one compiled.
_BY_TOKEN: weakref.WeakValueDictionary[bytes, RecordType] = weakref.WeakValueDictionary()
_BY_DEFINITION: weakref.WeakValueDictionary[tuple[Any, ...], RecordType] = (
    weakref.WeakValueDictionary()
)


def _rebuild_record_type(token: bytes, definition: tuple[Any, ...]) -> RecordType:
    found = _BY_TOKEN.get(token) or _BY_DEFINITION.get(definition)
    if found is not None:
        return found
    name, version, record_type, reserved, keyspace, pairs = definition
    return RecordType(
        name, record_type, pairs, version=version, reserved=reserved, keyspace=keyspace
    )


def _class_name(name: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", name)
    camel = "".join(p[:1].upper() + p[1:] for p in parts if p)
    if not camel or not camel[0].isalpha():
        camel = "Record" + camel
    return camel + "Key"


class RecordType:
    """A key layout: `[keyspace][version][record_type << 4 | reserved]` then named fields.

    Build it once (module level); it compiles its fields into struct runs and codec calls so
    encode/decode do no planning per call. Keys decode to instances of `self.Key`.
    """

    __slots__ = (
        "Key",
        "__weakref__",
        "_definition",
        "_encode",
        "_fields",
        "_index",
        "_token",
        "decode",
        "decode_many",
        "fields",
        "head",
        "keyspace",
        "name",
        "record_type",
        "reserved",
        "version",
    )

    def __init__(
        self,
        name: str,
        record_type: int,
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
    ) -> None:
        if not isinstance(name, str) or not name:
            raise SchemaError(f"a RecordType needs a non-empty name, got {name!r}")
        check_name(name, "record type name")
        self.name = name
        self.version = version
        self.record_type = record_type
        self.reserved = reserved
        self.keyspace = keyspace
        self.head = build_prefix(version, record_type, reserved, keyspace)
        pairs = tuple(fields.items() if isinstance(fields, Mapping) else fields)
        self._check_fields(pairs)
        self.fields: tuple[tuple[str, Field], ...] = pairs
        self._fields = tuple(f for _, f in pairs)
        self._index = {n: i for i, (n, _) in enumerate(pairs)}
        self._definition = (name, version, record_type, reserved, keyspace, pairs)
        self._token = os.urandom(16)
        self.Key: type[Key] = self._key_class()
        #: decode(key: bytes) -> Key: the compiled decoder; on bad input it re-walks the key
        #: codec by codec and raises a KeyDecodeError naming the field, offset and bytes.
        self.decode: Callable[[bytes], Key]
        self._encode, self.decode = compile_plan(
            self.head, self._fields, self.Key, self._decode_fallback, _FAST_PATH_ERRORS
        )
        #: decode_many(keys: list[bytes], prefixed=False) -> list[Key]: decode over a batch
        #: (scans), equal to [decode(k) for k in keys] and raising the same error on the first
        #: bad key; prefixed=True: the caller guarantees every key starts with `head`.
        self.decode_many: Callable[..., list[Key]] = compile_decode_many(
            self.head, self._fields, self.Key, self.decode
        )
        _BY_TOKEN[self._token] = self
        _BY_DEFINITION.setdefault(self._definition, self)

    def _check_fields(self, pairs: tuple[tuple[str, Field], ...]) -> None:
        seen: set[str] = set()
        for pos, pair in enumerate(pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise SchemaError(f"{self.name}: fields must be (name, codec) pairs, got {pair!r}")
            field_name, field = pair
            if not isinstance(field_name, str) or not _IDENT.match(field_name):
                raise SchemaError(f"{self.name}: field name {field_name!r} is not an identifier")
            reserved = _reserved_because(field_name)
            if reserved is not None:
                raise SchemaError(
                    f"{self.name}: field name {field_name!r} is reserved: {reserved}; "
                    "rename the field",
                    record=self.name,
                    field=field_name,
                    value=field_name,
                )
            if field_name in seen:
                raise SchemaError(f"{self.name}: duplicate field name {field_name!r}")
            seen.add(field_name)
            if not isinstance(field, Field):
                raise SchemaError(f"{self.name}: field {field_name!r} needs a codec, got {field!r}")
            if field.trailing and pos != len(pairs) - 1:
                raise SchemaError(
                    f"{self.name}: field {field_name!r} ({field.kind}) is unterminated and may "
                    "only be the last field"
                )

    def _key_class(self) -> type[Key]:
        namespace: dict[str, Any] = {
            "__slots__": (),
            "record_type": self,
            "_fields": tuple(n for n, _ in self.fields),
            "__doc__": f"Key of record type {self.name!r} (version {self.version}).",
        }
        for i, (field_name, field) in enumerate(self.fields):
            namespace[field_name] = property(operator.itemgetter(i), doc=f"{field.kind} field")
        return type(_class_name(self.name), (Key,), namespace)

    # --- identity -------------------------------------------------------------------------------

    @property
    def prefix_parts(self) -> RecordPrefix:
        """(version, record_type, reserved) of this layout."""
        return RecordPrefix(self.version, self.record_type, self.reserved)

    @property
    def field_names(self) -> tuple[str, ...]:
        return self.Key._fields

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_record_type, (self._token, self._definition))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={f!r}" for n, f in self.fields)
        return (
            f"RecordType({self.name!r}, type={record_type_text(self.record_type)}, "
            f"version={self.version}, "
            f"reserved={self.reserved}, prefix={show_bytes(self.head)}, fields=({inner}))"
        )

    # --- encode ---------------------------------------------------------------------------------

    def _values(self, values: tuple[Any, ...], named: dict[str, Any]) -> tuple[Any, ...]:
        if named:
            merged = list(values) + [_MISSING] * (len(self._fields) - len(values))
            for field_name, value in named.items():
                i = self._index.get(field_name)
                if i is None:
                    raise KeyEncodeError(f"{self.name}: no field named {field_name!r}")
                if i < len(values):
                    raise KeyEncodeError(f"{self.name}: field {field_name!r} given twice")
                merged[i] = value
            missing = [n for n, v in zip(self.field_names, merged, strict=True) if v is _MISSING]
            if missing:
                raise KeyEncodeError(f"{self.name}: missing fields {missing}")
            return tuple(merged)
        return values

    def encode(self, *values: Any, **named: Any) -> bytes:
        """The full key for these field values (positional in key order, or by name)."""
        if named:
            values = self._values(values, named)
        try:
            return self._encode(*values)
        except _FAST_PATH_ERRORS:
            pass
        return self.encode_by_field(values)

    def encode_by_field(self, values: Sequence[Any]) -> bytes:
        """Encode codec by codec: the reference path, and the one whose errors name the field."""
        if len(values) != len(self._fields):
            raise KeyEncodeError(
                f"{self.name}: needs {len(self._fields)} fields {list(self.field_names)}, "
                f"got {len(values)}"
            )
        parts = [self.head]
        offset = len(self.head)
        for (field_name, field), value in zip(self.fields, values, strict=True):
            part = self._encode_field(field_name, field.encode, value, offset)
            parts.append(part)
            offset += len(part)
        return b"".join(parts)

    def _encode_field(
        self, field_name: str, encode: Callable[[Any], bytes], value: Any, offset: int
    ) -> bytes:
        """`encode(value)` (a field's encode or encode_partial); a KeyEncodeError comes back
        naming the record, the field and the offset."""
        try:
            return encode(value)
        except KeyEncodeError as exc:
            raise KeyEncodeError(
                f"{self.name}: field {field_name!r} at offset {offset}: {exc}",
                record=self.name,
                field=field_name,
                value=value,
                offset=offset,
            ) from None

    def key(self, *values: Any, **named: Any) -> Key:
        """A validated Key object, exactly as decoding its bytes would give it.

        The values go through encode and decode, so the key holds canonical types (bytes for
        a bytearray or memoryview, float for an int given to f64) and stays hashable.
        """
        if named:
            values = self._values(values, named)
        return self.decode(self.encode(*values))

    def prefix(self, *values: Any, partial: Any = None) -> bytes:
        """Bytes shared by every key whose leading fields equal `values`.

        `partial` extends the prefix into the next (string or bytes) field: every key whose
        next field starts with it. With no values: all keys of this layout.
        """
        if len(values) > len(self._fields):
            raise KeyEncodeError(
                f"{self.name}: a prefix of {len(values)} fields, but the key has "
                f"{len(self._fields)}"
            )
        parts = [self.head]
        offset = len(self.head)
        for (field_name, field), value in zip(self.fields, values, strict=False):
            parts.append(self._encode_field(field_name, field.encode, value, offset))
            offset += len(parts[-1])
        if partial is not None:
            if len(values) == len(self._fields):
                raise KeyEncodeError(f"{self.name}: partial given but every field is set")
            field_name, field = self.fields[len(values)]
            if not field.partial_ok:
                raise KeyEncodeError(
                    f"{self.name}: field {field_name!r} ({field.kind}) cannot take a partial value"
                )
            parts.append(self._encode_field(field_name, field.encode_partial, partial, offset))
        return b"".join(parts)

    def range(self, *values: Any, partial: Any = None) -> tuple[bytes, bytes | None]:
        """(start, end) bounds of the prefix: start inclusive, end exclusive, None = unbounded."""
        start = self.prefix(*values, partial=partial)
        return start, prefix_successor(start)

    # --- decode ---------------------------------------------------------------------------------

    def owns(self, key: bytes) -> bool:
        """True when `key` starts with this layout's prefix (keyspace, version, record tag)."""
        return key.startswith(self.head)

    def _decode_fallback(self, key: object) -> Key:
        key_obj: Key = tuple.__new__(self.Key, self.decode_by_field(key))
        return key_obj

    def decode_by_field(self, key: object) -> tuple[Any, ...]:
        """Decode codec by codec: the reference path, whose errors name field, offset, bytes."""
        key = key if isinstance(key, bytes) else as_key_bytes(key)
        where = f"{self.name} key {show_bytes(key)}"
        if not key.startswith(self.head):
            raise KeyDecodeError(
                f"{where} does not start with this record type's prefix {show_bytes(self.head)}",
                record=self.name,
                value=key,
                offset=0,
            )
        pos = len(self.head)
        out: list[Any] = []
        for field_name, field in self.fields:
            try:
                value, end = field.decode(key, pos)
            except KeyDecodeError as exc:
                raise KeyDecodeError(
                    f"{where}: field {field_name!r} at offset {pos}: {exc}",
                    record=self.name,
                    field=field_name,
                    value=key,
                    offset=pos,
                ) from None
            out.append(value)
            pos = end
        if pos != len(key):
            last = f"last field {self.fields[-1][0]!r}" if self.fields else "prefix"
            raise KeyDecodeError(
                f"{where}: {len(key) - pos} unexpected bytes {show_bytes(key[pos:])} after the "
                f"{last} at offset {pos}",
                record=self.name,
                field=self.fields[-1][0] if self.fields else None,
                value=key,
                offset=pos,
            )
        return tuple(out)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
