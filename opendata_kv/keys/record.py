"""RecordType: one key layout (prefix + ordered named fields), compiled once into an encode and a
decode plan, and the immutable Key objects it decodes to."""

from __future__ import annotations

import functools
import operator
import os
import re
import struct
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, overload

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, SchemaError, show_bytes
from opendata_kv.keys.declared import key_pairs
from opendata_kv.keys.fields import Field
from opendata_kv.keys.lenfields import Typed
from opendata_kv.keys.plan import PlanMismatch, compile_decode_many, compile_plan
from opendata_kv.keys.prefix import (
    RecordPrefix,
    as_key_bytes,
    build_prefix,
    check_prefix,
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
        key: Key = self.record_type.key(**values)
        return key

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


if TYPE_CHECKING:  # defaults (PEP 696): a bare `RecordType` is RecordType[Any, Any, ...]
    from typing_extensions import ParamSpec, TypeVar

    #: A RecordType's key type: its declared NamedTuple class, or Key for the list form.
    K = TypeVar("K", bound=tuple[Any, ...], default=Any)
    #: A RecordType's value type: its declared `value=` class, or Any.
    V = TypeVar("V", default=Any)
    #: The key fields as parameters (`repo: str, rkey: str`): those of the declared
    #: NamedTuple's constructor, `...` (anything) for the list form.
    P = ParamSpec("P", default=...)

    from typing import Protocol

    from typing_extensions import TypeVarTuple, Unpack

    #: the key fields of a typed call as positional types (`str, str` for PostKey)
    Fs = TypeVarTuple("Fs")
    _V = TypeVar("_V")

    class Addressed(Protocol[_V, Unpack[Fs]]):
        """What a store call addressed as (record type, fields) reads off its RecordType: the
        value type, and the key fields as the positional parameters of its key() (those of
        the declared NamedTuple), so that a field tuple is checked field by field (RFC 0013).
        A type checker's view only: a RecordType[K, V, P] is an Addressed[V, <P's types>]."""

        value_type: type[_V] | None

        def key(self, *values: Unpack[Fs]) -> Any: ...

else:  # typing's TypeVar takes no default before Python 3.13
    from typing import ParamSpec, TypeVar

    K = TypeVar("K", bound=tuple)
    V = TypeVar("V")
    P = ParamSpec("P")

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


def check_field_name(owner: str, field_name: object) -> str:
    """`field_name` when it may name a field (an ASCII identifier: no control, format or
    look-alike characters can reach the tools through it); SchemaError naming `owner` (a
    record type, or `index 'name'`) otherwise."""
    if not isinstance(field_name, str) or not _IDENT.match(field_name):
        raise SchemaError(
            f"{owner}: field name {field_name!r} is not an identifier",
            field=field_name if isinstance(field_name, str) else None,
            value=field_name,
        )
    return field_name


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
    key: Key = record_type.key(*values)
    return key


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
    name, version, record_type, reserved, keyspace, pairs, *extra = definition
    names = ("subsystem", "header", "tag", "suffix")
    options = dict(zip(names, extra[0], strict=True)) if extra else {}
    declared, value = extra[1] if len(extra) > 1 else (None, None)
    return RecordType(
        name,
        record_type,
        pairs if declared is None else declared,
        version=version,
        reserved=reserved,
        keyspace=keyspace,
        value=value,
        **options,
    )


def _class_name(name: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", name)
    camel = "".join(p[:1].upper() + p[1:] for p in parts if p)
    if not camel or not camel[0].isalpha():
        camel = "Record" + camel
    return camel + "Key"


class RecordType(Generic[K, V, P]):
    """A key layout: `[keyspace][version][record_type << 4 | reserved]` then named fields.

    Beyond the seed's layout (RFC 0009, for OpenData's keys as they are today):
    `subsystem` puts one byte before the keyspace, `header` puts fields between the version
    byte and the record discriminator, `tag="byte"` makes the discriminator one plain byte
    (record_type 1..255) instead of the 4+4 tag, and `suffix` ends every key with constant
    bytes (records that share everything else). Header fields come first in the Key.

    Build it once (module level); it compiles its fields into struct runs and codec calls so
    encode/decode do no planning per call. Keys decode to instances of `self.Key`.

    `fields` is a list of (name, codec) pairs, a mapping, or a NamedTuple class whose fields
    are annotated `Annotated[type, codec]` (RFC 0013): its keys are then instances of that
    class too, and a type checker sees `RecordType[ThatClass, V]`, whose key() and encode()
    take that class's fields. `value` declares the value class (`V`), used as the value
    codec unless the store registers another.
    """

    __slots__ = (
        "Key",
        "__weakref__",
        "_declared",
        "_definition",
        "_encode",
        "_fields",
        "_index",
        "_selectors",
        "_steps",
        "_token",
        "decode",
        "decode_many",
        "extended",
        "fields",
        "head",
        "header",
        "keyspace",
        "lead",
        "name",
        "record_type",
        "reserved",
        "subsystem",
        "suffix",
        "tag",
        "tag_byte",
        "value_type",
        "version",
    )

    @overload
    def __init__(
        self: RecordType[Key, Any],
        name: str,
        record_type: int,
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
        subsystem: int | None = None,
        header: Mapping[str, Field] | Iterable[tuple[str, Field]] = (),
        tag: str = "nibble",
        suffix: bytes = b"",
        value: None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: RecordType[Key, V],
        name: str,
        record_type: int,
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
        subsystem: int | None = None,
        header: Mapping[str, Field] | Iterable[tuple[str, Field]] = (),
        tag: str = "nibble",
        suffix: bytes = b"",
        value: type[V],
    ) -> None: ...

    @overload
    def __init__(
        self: RecordType[K, Any, P],
        name: str,
        record_type: int,
        fields: Callable[P, K],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
        subsystem: int | None = None,
        header: Mapping[str, Field] | Iterable[tuple[str, Field]] = (),
        tag: str = "nibble",
        suffix: bytes = b"",
        value: None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: RecordType[K, V, P],
        name: str,
        record_type: int,
        fields: Callable[P, K],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
        subsystem: int | None = None,
        header: Mapping[str, Field] | Iterable[tuple[str, Field]] = (),
        tag: str = "nibble",
        suffix: bytes = b"",
        value: type[V],
    ) -> None: ...

    def __init__(
        self,
        name: str,
        record_type: int,
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]] | Callable[..., Any],
        *,
        version: int = 1,
        reserved: int = 0,
        keyspace: bytes = b"",
        subsystem: int | None = None,
        header: Mapping[str, Field] | Iterable[tuple[str, Field]] = (),
        tag: str = "nibble",
        suffix: bytes = b"",
        value: type[Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise SchemaError(f"a RecordType needs a non-empty name, got {name!r}")
        check_name(name, "record type name")
        self.name = name
        self.version = version
        self.record_type = record_type
        self.reserved = reserved
        self.keyspace = keyspace
        self.subsystem = subsystem
        self.tag = tag
        self.suffix = suffix
        if value is not None and not isinstance(value, type):
            raise SchemaError(f"{name}: value must be a class, got {value!r}", record=name)
        #: the declared value class (`value=`), or None
        self.value_type: type[V] | None = value
        #: the declared NamedTuple key class, or None for the list form
        self._declared: type[Any] | None = None
        given: Mapping[str, Field] | Iterable[tuple[str, Field]]
        if isinstance(fields, type):
            self._declared = fields
            given = key_pairs(name, fields)
        elif callable(fields):
            raise SchemaError(
                f"{name}: key fields are (name, codec) pairs, a mapping or a NamedTuple class, "
                f"got {fields!r}",
                record=name,
                value=fields,
            )
        else:
            given = fields
        if tag == "nibble":
            seed_head = build_prefix(version, record_type, reserved, keyspace)
            self.tag_byte = seed_head[-1]
        elif tag == "byte":
            check_byte_tag(version, record_type, reserved, keyspace)
            self.tag_byte = record_type
        else:
            raise SchemaError(f"{name}: tag must be 'nibble' or 'byte', got {tag!r}")
        if not isinstance(suffix, bytes):
            raise SchemaError(f"{name}: suffix must be bytes, got {type(suffix).__name__}")
        self.lead = subsystem_byte(name, subsystem) + keyspace + bytes((version,))
        head_pairs = tuple(header.items() if isinstance(header, Mapping) else header)
        body = tuple(given.items() if isinstance(given, Mapping) else given)
        pairs = head_pairs + body
        self._check_fields(pairs)
        #: every named field in key order: the header fields, then the fields after the tag
        self.fields: tuple[tuple[str, Field], ...] = pairs
        self.header: tuple[tuple[str, Field], ...] = head_pairs
        #: the constant bytes every key of this layout starts with (the subsystem, keyspace,
        #: version and tag; without the tag when header fields stand between)
        self.head = self.lead if head_pairs else self.lead + bytes((self.tag_byte,))
        self._fields: tuple[Field, ...] = tuple(f for _, f in pairs)
        self._index = {n: i for i, (n, _) in enumerate(pairs)}
        self._selectors = self._check_typed(pairs)
        self._steps = layout_steps(self)
        #: True when the layout goes beyond the seed's (header, suffix, typed fields, subsystem
        #: or plain tag byte): encode and decode then take the field-by-field path
        self.extended = bool(
            head_pairs or suffix or self._selectors or subsystem is not None or tag != "nibble"
        )
        self._definition: tuple[Any, ...] = (name, version, record_type, reserved, keyspace, pairs)
        if self.extended or self._declared or value:  # the rest of the layout, the classes
            extra = (subsystem, head_pairs, tag, suffix)
            declared = (self._declared, value)
            self._definition = (name, version, record_type, reserved, keyspace, body, extra)
            if self._declared or value:
                self._definition += (declared,)
        self._token = os.urandom(16)
        self.Key: type[Key] = self._key_class()
        #: decode(key: bytes) -> K: the compiled decoder; on bad input it re-walks the key
        #: codec by codec and raises a KeyDecodeError naming the field, offset and bytes.
        self.decode: Callable[[bytes], K]
        if self.extended:
            # OpenData's layouts are read by tools, not scanned by the million: the reference
            # path is their only path (no compiled plan to keep in step with it).
            self._encode = self._encode_steps
            self.decode = self._decode_fallback
            decode = self.decode

            def decode_each(keys: list[bytes], prefixed: bool = False) -> list[K]:
                return list(map(decode, keys))

            self.decode_many: Callable[..., list[K]] = decode_each
        else:
            # A declared key class inherits its NamedTuple's Python __new__ (and takes named
            # fields): build its keys with tuple's own, as a plain Key class is built.
            make = (
                self.Key if self._declared is None else functools.partial(tuple.__new__, self.Key)
            )
            self._encode, self.decode = compile_plan(
                self.head, self._fields, make, self._decode_fallback, _FAST_PATH_ERRORS
            )
            #: decode_many(keys: list[bytes], prefixed=False) -> list[Key]: decode over a batch
            #: (scans), equal to [decode(k) for k in keys] and raising the same error on the
            #: first bad key; prefixed=True: the caller guarantees every key starts with `head`.
            self.decode_many = compile_decode_many(self.head, self._fields, make, self.decode)
        _BY_TOKEN[self._token] = self
        _BY_DEFINITION.setdefault(self._definition, self)

    def _check_fields(self, pairs: tuple[tuple[str, Field], ...]) -> None:
        seen: set[str] = set()
        for pos, pair in enumerate(pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise SchemaError(f"{self.name}: fields must be (name, codec) pairs, got {pair!r}")
            field_name, field = pair
            check_field_name(self.name, field_name)
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
            if field.trailing and self.suffix:
                raise SchemaError(
                    f"{self.name}: field {field_name!r} ({field.kind}) runs to the end of the "
                    f"key, so no suffix ({show_bytes(self.suffix)}) can follow it"
                )

    def _check_typed(self, pairs: tuple[tuple[str, Field], ...]) -> dict[int, int]:
        """{index of each typed() field: index of its selector}; the selector must be an
        earlier u8 field."""
        selectors: dict[int, int] = {}
        for i, (field_name, field) in enumerate(pairs):
            if not isinstance(field, Typed):
                continue
            j = self._index.get(field.selector)
            if j is None or j >= i or pairs[j][1].kind != "u8":
                raise SchemaError(
                    f"{self.name}: typed field {field_name!r} needs its selector "
                    f"{field.selector!r} to be an earlier u8 field",
                    record=self.name,
                    field=field_name,
                )
            selectors[i] = j
        return selectors

    def _key_class(self) -> type[Key]:
        if self._declared is not None:  # the user's NamedTuple gives fields and repr
            return type(
                self._declared.__name__,
                (self._declared, Key),
                {
                    "__slots__": (),
                    # built from one tuple, as every Key (the compiled decoder calls Key(values))
                    "__new__": tuple.__new__,
                    "record_type": self,
                    "__doc__": self._declared.__doc__,
                    "__module__": self._declared.__module__,
                },
            )
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

    if not TYPE_CHECKING:

        def __class_getitem__(cls, params):
            """`RecordType[K, V]` at run time too: the key-fields parameter defaults to `...`
            (typing's defaults, PEP 696, only come with Python 3.13)."""
            params = params if isinstance(params, tuple) else (params,)
            return super().__class_getitem__((*params, ...) if len(params) == 2 else params)

    @property
    def declared(self) -> type[K] | None:
        """The NamedTuple class the key fields were declared with, or None (list form)."""
        return self._declared

    @property
    def field_names(self) -> tuple[str, ...]:
        return self.Key._fields

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_record_type, (self._token, self._definition))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={f!r}" for n, f in self.fields)
        if self.extended:
            return (
                f"RecordType({self.name!r}, tag=0x{self.tag_byte:02x} ({self.tag}), "
                f"lead={show_bytes(self.lead)}, header={len(self.header)}, "
                f"suffix={show_bytes(self.suffix) if self.suffix else 'none'}, "
                f"fields=({inner}))"
            )
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

    @property
    def fast_encode(self) -> Callable[..., bytes]:
        """encode(*values) without its fallback, for per-record paths: bad input may raise
        anything; redo it through `encode` for the error that names the field."""
        return self._encode

    def encode(self, *values: P.args, **named: P.kwargs) -> bytes:
        """The full key for these field values (positional in key order, or by name)."""
        given: tuple[Any, ...] = self._values(values, named) if named else values
        try:
            return self._encode(*given)
        except _FAST_PATH_ERRORS:
            pass
        return self.encode_by_field(given)

    def encode_by_field(self, values: Sequence[Any]) -> bytes:
        """Encode codec by codec: the reference path, and the one whose errors name the field."""
        if len(values) != len(self._fields):
            raise KeyEncodeError(
                f"{self.name}: needs {len(self._fields)} fields {list(self.field_names)}, "
                f"got {len(values)}"
            )
        return self._encode_steps(*values)

    def _encode_steps(self, *values: Any) -> bytes:
        """Encode by walking the layout (constants and fields in key order)."""
        if len(values) != len(self._fields):
            raise KeyEncodeError(
                f"{self.name}: needs {len(self._fields)} fields {list(self.field_names)}, "
                f"got {len(values)}"
            )
        parts: list[bytes] = []
        offset = 0
        for step in self._steps:
            if isinstance(step, bytes):
                part = step
            else:
                part = self._encode_field(
                    self.fields[step][0], self._codec(step, values).encode, values[step], offset
                )
            parts.append(part)
            offset += len(part)
        return b"".join(parts)

    def _codec(self, index: int, values: Sequence[Any], pos: int | None = None) -> Field:
        """The codec of field `index`: its own, or for a typed() field the one its selector's
        value (in `values`) picks."""
        field = self._fields[index]
        selector = self._selectors.get(index)
        if selector is None:
            return field
        assert isinstance(field, Typed)
        return field.codec_for(values[selector], pos)

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

    def key(self, *values: P.args, **named: P.kwargs) -> K:
        """A validated Key object, exactly as decoding its bytes would give it.

        The values go through encode and decode, so the key holds canonical types (bytes for
        a bytearray or memoryview, float for an int given to f64) and stays hashable.
        """
        return self.decode(self.encode(*values, **named))

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
        parts: list[bytes] = []
        offset = 0
        last = len(self._steps) - 1
        for i, step in enumerate(self._steps):
            if isinstance(step, bytes):
                if i == last and self.suffix and len(values) < len(self._fields):
                    break
                parts.append(step)
            elif step < len(values):
                encode = self._codec(step, values).encode
                parts.append(self._encode_field(self.fields[step][0], encode, values[step], offset))
            else:
                break
            offset += len(parts[-1])
        if partial is not None:
            if len(values) == len(self._fields):
                raise KeyEncodeError(f"{self.name}: partial given but every field is set")
            field_name, field = self.fields[len(values)]
            if len(values) in self._selectors:
                field = self._codec(len(values), values)
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

    def _decode_fallback(self, key: object) -> K:
        key_obj: Any = tuple.__new__(self.Key, self.decode_by_field(key))
        return key_obj  # type: ignore[no-any-return]

    def decode_by_field(self, key: object) -> tuple[Any, ...]:
        """Decode codec by codec: the reference path, whose errors name field, offset, bytes."""
        key = key if isinstance(key, bytes) else as_key_bytes(key)
        where = f"{self.name} key {show_bytes(key)}"
        if not self.extended and not key.startswith(self.head):
            raise KeyDecodeError(
                f"{where} does not start with this record type's prefix {show_bytes(self.head)}",
                record=self.name,
                value=key,
                offset=0,
            )
        pos = 0
        out: list[Any] = []
        offsets: list[int] = []
        final = len(self._steps) - 1
        for i, step in enumerate(self._steps):
            if isinstance(step, bytes):
                what = "prefix" if i == 0 else "suffix" if i == final and self.suffix else "tag"
                self._expect(key, pos, step, where, what)
                pos += len(step)
                continue
            field_name = self.fields[step][0]
            selector = self._selectors.get(step)
            try:
                field = self._codec(step, out, None if selector is None else offsets[selector])
                value, end = field.decode(key, pos)
            except KeyDecodeError as exc:
                raise KeyDecodeError(
                    f"{where}: field {field_name!r} at offset {pos}: {exc}",
                    record=self.name,
                    field=field_name,
                    value=key,
                    offset=exc.offset if exc.offset is not None else pos,
                ) from None
            out.append(value)
            offsets.append(pos)
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

    def _expect(self, key: bytes, pos: int, constant: bytes, where: str, what: str) -> None:
        """KeyDecodeError naming the first offset where `key` differs from `constant` at `pos`."""
        found = key[pos : pos + len(constant)]
        if found == constant:
            return
        at = pos + next(
            (i for i, (a, b) in enumerate(zip(found, constant, strict=False)) if a != b),
            len(found),
        )
        got = f"0x{key[at]:02x}" if at < len(key) else "the end of the key"
        raise KeyDecodeError(
            f"{where}: {what} {show_bytes(constant)} expected at offset {pos}, found {got} at "
            f"offset {at}",
            record=self.name,
            value=key,
            offset=at,
        )


def subsystem_byte(name: str, subsystem: int | None) -> bytes:
    """The subsystem byte (1..255) as bytes, b"" for None."""
    if subsystem is None:
        return b""
    if isinstance(subsystem, bool) or not isinstance(subsystem, int) or not 1 <= subsystem <= 255:
        raise SchemaError(
            f"{name}: subsystem must be an int 1..255 (0 is reserved), got {subsystem!r}"
        )
    return bytes((subsystem,))


def check_byte_tag(version: int, record_type: int, reserved: int, keyspace: bytes) -> None:
    """A plain record-type byte: 1..255 (0 reserved), no reserved bits beside it."""
    check_prefix(version, 1, 0)  # the version byte's own rules
    if isinstance(record_type, bool) or not isinstance(record_type, int):
        raise SchemaError(f"record type must be an int, got {record_type!r}")
    if not 1 <= record_type <= 0xFF:
        raise SchemaError(f"record type byte {record_type} is outside 1..255 (0 is reserved)")
    if reserved:
        raise SchemaError("a plain record-type byte has no reserved bits: leave reserved at 0")
    if not isinstance(keyspace, bytes):
        raise SchemaError(f"keyspace must be bytes, got {type(keyspace).__name__}")


def layout_steps(record_type: RecordType) -> tuple[bytes | int, ...]:
    """The key as a walk: constant bytes and field indexes, in byte order."""
    n = len(record_type.header)
    fields = range(len(record_type.fields))
    steps: list[bytes | int] = [record_type.lead, *fields[:n], bytes((record_type.tag_byte,))]
    steps += fields[n:]
    if record_type.suffix:
        steps.append(record_type.suffix)
    if not n:  # lead and tag are one constant: the head
        steps[0:2] = [record_type.head]
    return tuple(steps)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
