"""Order-preserving field codecs (RFC 0002), byte-compatible with OpenData's `common::serde`:
the Field base and the scalar codecs. keys/fields.py is the public namespace of all codecs
(these and the identifier fields of keys/idfields.py).

Every codec is a small immutable object with `encode(value) -> bytes` and
`decode(data, pos) -> (value, end)`. Comparing encodings as bytes gives the order of the values.
Fixed-width integer codecs also expose a `struct` format character so a RecordType can fold a
run of them into one precompiled `struct.Struct`.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from itertools import repeat
from typing import Any, ClassVar

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, SchemaError, show_bytes

_INVERT = bytes(255 - b for b in range(256))


def invert(data: bytes) -> bytes:
    """Every byte complemented: the encoding trick behind desc()."""
    return data.translate(_INVERT)


def _type_name(value: object) -> str:
    return type(value).__name__


def _as_int(kind: str, value: Any) -> int:
    """An int, or an integer type that says it is one through __index__ (numpy ints); never
    a bool (a bool in an int field is a bug, and struct.pack would take it as 0 or 1)."""
    if value.__class__ is int:
        return value
    if isinstance(value, bool):
        raise KeyEncodeError(f"{kind} needs an int, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise KeyEncodeError(f"{kind} needs an int, got {_type_name(value)} {value!r}") from None


class Field:
    """Base of all field codecs. Subclasses implement encode/decode/end (and to_raw/from_raw
    when they fold into a struct run)."""

    __slots__ = (
        "kind",
        "partial_ok",
        "public_name",
        "raw_identity",
        "struct_code",
        "trailing",
        "width",
    )

    def __init__(
        self,
        kind: str,
        *,
        width: int | None = None,
        struct_code: str | None = None,
        partial_ok: bool = False,
        trailing: bool = False,
        raw_identity: bool = False,
    ) -> None:
        #: name shown in errors and reprs, e.g. "u64", "desc(string)"
        self.kind = kind
        #: byte width when fixed, else None
        self.width = width
        #: struct format character when the field folds into a struct.Struct run, else None
        self.struct_code = struct_code
        #: True for codecs that can build a prefix from a partial value (strings, bytes)
        self.partial_ok = partial_ok
        #: True for codecs that may only stand as the last field (raw, unterminated)
        self.trailing = trailing
        #: True when to_raw/from_raw are the identity (a RecordType can skip the call)
        self.raw_identity = raw_identity
        #: the name under which keys.fields exports this very codec (see public), else None
        self.public_name: str | None = None

    #: the classes decode returns (see value_types); None: not known, so not checked
    VALUE_TYPES: ClassVar[tuple[type, ...] | None] = None
    #: the classes encode takes besides VALUE_TYPES (bytearray for a bytes field, ...)
    ALSO_TAKES: ClassVar[tuple[type, ...]] = ()

    def value_types(self) -> tuple[type, ...] | None:
        """The Python classes this codec decodes to: a declared key field's annotation must
        hold each of them (RFC 0013). None for a codec that does not say (not checked)."""
        return self.VALUE_TYPES

    def input_types(self) -> tuple[type, ...]:
        """The Python classes encode takes: value_types() and ALSO_TAKES."""
        return (*(self.value_types() or ()), *self.ALSO_TAKES)

    def __repr__(self) -> str:
        return f"fields.{self.kind}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Field) and type(other) is type(self) and other.kind == self.kind

    def __hash__(self) -> int:
        return hash((type(self), self.kind))

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A codec that keys.fields exports (u8, string, tid, ...) pickles as that name and
        # unpickles as the same object (its struct.Struct could not be pickled anyway); others
        # (fixed(n), desc(f), parametrised codecs) pickle their slots.
        if self.public_name is not None:
            return (by_name, (self.public_name,))
        state: dict[str, Any] = {}
        for klass in type(self).__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for slot in (slots,) if isinstance(slots, str) else slots:
                if hasattr(self, slot):
                    state[slot] = getattr(self, slot)
        return (_restore_codec, (type(self), state))

    def encode(self, value: Any) -> bytes:
        """The order-preserving encoding of `value`; KeyEncodeError if it does not fit."""
        raise NotImplementedError

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        """(value, position after the field) read from `data` at `pos`; KeyDecodeError if bad."""
        raise NotImplementedError

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        """Where this field's bytes end, found without decoding (used by desc)."""
        raise NotImplementedError

    def encode_partial(self, value: Any) -> bytes:
        """Bytes that every encoding of a value starting with `value` starts with."""
        raise KeyEncodeError(f"{self.kind} cannot take a partial value for a prefix")

    def to_raw(self, value: Any) -> int:
        """The unsigned integer packed by `struct_code` (struct-folded codecs only)."""
        raise NotImplementedError

    def from_raw(self, raw: int) -> Any:
        """Inverse of to_raw."""
        raise NotImplementedError

    def from_raw_many(self, raws: Sequence[int]) -> list[Any]:
        """[from_raw(r) for r in raws], raising what from_raw raises for the first bad one;
        codecs override it where a whole batch converts faster (scans, RecordType.decode_many)."""
        return list(map(self.from_raw, raws))

    def decode_all(self, data: bytes) -> Any:
        """Decode `data` that must hold exactly one encoded value."""
        value, end = self.decode(data, 0)
        if end != len(data):
            raise KeyDecodeError(
                f"{self.kind}: {len(data) - end} unexpected bytes after the value "
                f"in {show_bytes(data)}"
            )
        return value

    def _short(self, data: bytes, pos: int, need: int) -> KeyDecodeError:
        return KeyDecodeError(
            f"{self.kind}: needs {need} bytes at offset {pos}, only {len(data) - pos} left "
            f"in {show_bytes(data)}"
        )


# --- fixed-width integers ----------------------------------------------------------------------


class _Unsigned(Field):
    __slots__ = ("_max", "_struct")
    VALUE_TYPES = (int,)

    def __init__(self, kind: str, code: str, width: int) -> None:
        super().__init__(kind, width=width, struct_code=code, raw_identity=True)
        self._struct = struct.Struct(">" + code)
        self._max = (1 << (8 * width)) - 1

    def encode(self, value: Any) -> bytes:
        return self._struct.pack(self.to_raw(value))

    def to_raw(self, value: Any) -> int:
        n = _as_int(self.kind, value)
        if not 0 <= n <= self._max:
            raise KeyEncodeError(f"{self.kind} value {n} is outside 0..{self._max}")
        return n

    def from_raw(self, raw: int) -> int:
        return raw

    def decode(self, data: bytes, pos: int = 0) -> tuple[int, int]:
        width = self._struct.size
        if len(data) - pos < width:
            raise self._short(data, pos, width)
        return self._struct.unpack_from(data, pos)[0], pos + width

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + self._struct.size


class _Signed(Field):
    """Two's complement with the sign bit flipped: i + 2**(bits-1) as unsigned."""

    __slots__ = ("_bias", "_struct")
    VALUE_TYPES = (int,)

    def __init__(self, kind: str, code: str, width: int) -> None:
        super().__init__(kind, width=width, struct_code=code)
        self._struct = struct.Struct(">" + code)
        self._bias = 1 << (8 * width - 1)

    def to_raw(self, value: Any) -> int:
        n = _as_int(self.kind, value)
        if not -self._bias <= n < self._bias:
            raise KeyEncodeError(
                f"{self.kind} value {n} is outside {-self._bias}..{self._bias - 1}"
            )
        return n + self._bias

    def from_raw(self, raw: int) -> int:
        return raw - self._bias

    def from_raw_many(self, raws: Sequence[int]) -> list[Any]:
        return list(map(operator.sub, raws, repeat(self._bias)))

    def encode(self, value: Any) -> bytes:
        return self._struct.pack(self.to_raw(value))

    def decode(self, data: bytes, pos: int = 0) -> tuple[int, int]:
        width = self._struct.size
        if len(data) - pos < width:
            raise self._short(data, pos, width)
        return self._struct.unpack_from(data, pos)[0] - self._bias, pos + width

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + self._struct.size


class _U128(Field):
    __slots__ = ()
    VALUE_TYPES = (int,)

    def __init__(self) -> None:
        super().__init__("u128", width=16)

    def encode(self, value: Any) -> bytes:
        n = _as_int("u128", value)
        if not 0 <= n < 1 << 128:
            raise KeyEncodeError(f"u128 value {n} is outside 0..2**128-1")
        return n.to_bytes(16, "big")

    def decode(self, data: bytes, pos: int = 0) -> tuple[int, int]:
        if len(data) - pos < 16:
            raise self._short(data, pos, 16)
        return int.from_bytes(data[pos : pos + 16], "big"), pos + 16

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + 16


class _F64(Field):
    """IEEE-754 bits: negatives have every bit inverted, others the sign bit set (total order)."""

    __slots__ = ()
    VALUE_TYPES = (float,)
    ALSO_TAKES = (int,)
    _D = struct.Struct(">d")
    _Q = struct.Struct(">Q")

    def __init__(self) -> None:
        super().__init__("f64", width=8, struct_code="Q")

    def to_raw(self, value: Any) -> int:
        if not isinstance(value, (float, int)) or isinstance(value, bool):
            raise KeyEncodeError(f"f64 needs a float, got {_type_name(value)} {value!r}")
        try:
            bits: int = self._Q.unpack(self._D.pack(value))[0]
        except (OverflowError, struct.error) as exc:
            raise KeyEncodeError(f"f64 cannot hold {value!r}: {exc}") from None
        if not isinstance(value, float) and value != float(value):
            # An int that would round: the key would decode to another number.
            raise KeyEncodeError(f"f64 cannot hold the int {value} exactly")
        return bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 0x8000000000000000

    def from_raw(self, raw: int) -> float:
        bits = raw ^ 0x8000000000000000 if raw >> 63 else raw ^ 0xFFFFFFFFFFFFFFFF
        value: float = self._D.unpack(self._Q.pack(bits))[0]
        return value

    def encode(self, value: Any) -> bytes:
        return self._Q.pack(self.to_raw(value))

    def decode(self, data: bytes, pos: int = 0) -> tuple[float, int]:
        if len(data) - pos < 8:
            raise self._short(data, pos, 8)
        return self.from_raw(self._Q.unpack_from(data, pos)[0]), pos + 8

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + 8


class _Bool(Field):
    __slots__ = ()
    VALUE_TYPES = (bool,)

    def __init__(self) -> None:
        super().__init__("bool", width=1)

    def encode(self, value: Any) -> bytes:
        if value is True:
            return b"\x01"
        if value is False:
            return b"\x00"
        raise KeyEncodeError(f"bool needs True or False, got {_type_name(value)} {value!r}")

    def decode(self, data: bytes, pos: int = 0) -> tuple[bool, int]:
        if pos >= len(data):
            raise self._short(data, pos, 1)
        byte = data[pos]
        if byte > 1:
            raise KeyDecodeError(f"bool: byte 0x{byte:02x} at offset {pos} is not 0x00 or 0x01")
        return byte == 1, pos + 1

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + 1


class Fixed(Field):
    """Exactly n raw bytes (hashes, fixed ids)."""

    __slots__ = ("size",)
    VALUE_TYPES = (bytes,)
    ALSO_TAKES = (bytearray, memoryview)

    def __init__(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise SchemaError(f"fixed() needs a positive byte count, got {size!r}")
        super().__init__(f"fixed({size})", width=size)
        self.size = size

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise KeyEncodeError(f"{self.kind} needs bytes, got {_type_name(value)} {value!r}")
        raw = bytes(value)
        if len(raw) != self.size:
            raise KeyEncodeError(
                f"{self.kind} needs exactly {self.size} bytes, got {len(raw)}: {show_bytes(raw)}"
            )
        return raw

    def decode(self, data: bytes, pos: int = 0) -> tuple[bytes, int]:
        end = pos + self.size
        if end > len(data):
            raise self._short(data, pos, self.size)
        return data[pos:end], end

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + self.size


# --- terminated and trailing byte strings ------------------------------------------------------


def escape(raw: bytes) -> bytes:
    """0x01 -> 01 02, then 0x00 -> 01 01 (no terminator): the body of a terminated field."""
    return raw.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01")


def unescape(body: bytes) -> bytes | None:
    """Inverse of escape, or None when an 0x01 is not followed by 0x01 or 0x02."""
    if 1 not in body:
        return body
    # Scanning left to right, an escape pair never straddles another, so the two replaces
    # see exactly the pairs a byte-by-byte parser would.
    body = body.replace(b"\x01\x01", b"\x00")
    if body.count(b"\x01") != body.count(b"\x01\x02"):
        return None
    return body.replace(b"\x01\x02", b"\x01")


class _Terminated(Field):
    """Escaped bytes then 0x00: sorts like the raw bytes, and a shorter value sorts first."""

    __slots__ = ()

    def __init__(self, kind: str) -> None:
        super().__init__(kind, partial_ok=True)

    def _raw(self, value: Any) -> bytes:
        raise NotImplementedError

    def _value(self, raw: bytes, data: bytes, pos: int) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        return escape(self._raw(value)) + b"\x00"

    def encode_partial(self, value: Any) -> bytes:
        return escape(self._raw(value))

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        end = data.find(b"\x00", pos)
        if end < 0:
            raise KeyDecodeError(
                f"{self.kind}: no 0x00 terminator after offset {pos} in {show_bytes(data)}"
            )
        raw = unescape(data[pos:end])
        if raw is None:
            raise KeyDecodeError(
                f"{self.kind}: 0x01 not followed by 0x01 or 0x02 in {show_bytes(data[pos:end])} "
                f"at offset {pos}"
            )
        return self._value(raw, data, pos), end + 1

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        end = data.find(b"\xff" if inverted else b"\x00", pos)
        if end < 0:
            raise KeyDecodeError(
                f"{self.kind}: no terminator after offset {pos} in {show_bytes(data)}"
            )
        return end + 1


def _as_bytes(kind: str, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise KeyEncodeError(f"{kind} needs bytes, got {_type_name(value)} {value!r}")


def _as_utf8(kind: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise KeyEncodeError(f"{kind} needs a str, got {_type_name(value)} {value!r}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KeyEncodeError(
            f"{kind}: {value!r} has a character UTF-8 cannot encode at index {exc.start}"
        ) from None


def _from_utf8(kind: str, raw: bytes, pos: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeyDecodeError(
            f"{kind}: invalid UTF-8 {show_bytes(raw[exc.start : exc.end])} at offset "
            f"{pos + exc.start}"
        ) from None


class TerminatedBytes(_Terminated):
    __slots__ = ()
    VALUE_TYPES = (bytes,)
    ALSO_TAKES = (bytearray, memoryview)

    def _raw(self, value: Any) -> bytes:
        return _as_bytes(self.kind, value)

    def _value(self, raw: bytes, data: bytes, pos: int) -> bytes:
        return raw


class TerminatedStr(_Terminated):
    __slots__ = ()
    VALUE_TYPES = (str,)

    def _raw(self, value: Any) -> bytes:
        return _as_utf8(self.kind, value)

    def _value(self, raw: bytes, data: bytes, pos: int) -> str:
        return _from_utf8(self.kind, raw, pos)


class _Trailing(Field):
    """Raw, unterminated: only as the last field; a prefix scan on it is a plain prefix."""

    __slots__ = ()

    def __init__(self, kind: str) -> None:
        super().__init__(kind, partial_ok=True, trailing=True)

    def encode_partial(self, value: Any) -> bytes:
        return self.encode(value)

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return len(data)


class _TrailingBytes(_Trailing):
    __slots__ = ()
    VALUE_TYPES = (bytes,)
    ALSO_TAKES = (bytearray, memoryview)

    def encode(self, value: Any) -> bytes:
        return _as_bytes(self.kind, value)

    def decode(self, data: bytes, pos: int = 0) -> tuple[bytes, int]:
        return data[pos:], len(data)


class _TrailingStr(_Trailing):
    __slots__ = ()
    VALUE_TYPES = (str,)

    def encode(self, value: Any) -> bytes:
        return _as_utf8(self.kind, value)

    def decode(self, data: bytes, pos: int = 0) -> tuple[str, int]:
        return _from_utf8(self.kind, data[pos:], pos), len(data)


# --- OpenData order-preserving varints ---------------------------------------------------------


class _VarUInt(Field):
    """First byte: a length code (extra byte count) in its top bits, then big-endian value bits.

    The shortest form is the only valid one, so equal values have equal bytes and a longer
    encoding always holds a larger number.
    """

    __slots__ = ("_code_bits", "_limit", "_max_extra")
    VALUE_TYPES = (int,)

    def __init__(self, kind: str, code_bits: int, max_extra: int, limit: int) -> None:
        super().__init__(kind)
        self._code_bits = code_bits
        self._max_extra = max_extra
        self._limit = limit

    def encode(self, value: Any) -> bytes:
        n = _as_int(self.kind, value)
        if not 0 <= n < self._limit:
            raise KeyEncodeError(f"{self.kind} value {n} is outside 0..{self._limit - 1}")
        low_bits = 8 - self._code_bits
        extra = 0
        while n >> (low_bits + 8 * extra):
            extra += 1
        return ((extra << (low_bits + 8 * extra)) | n).to_bytes(extra + 1, "big")

    def _extra(self, first: int, pos: int) -> int:
        extra = first >> (8 - self._code_bits)
        if extra > self._max_extra:
            raise KeyDecodeError(
                f"{self.kind}: length code {extra} in byte 0x{first:02x} at offset {pos} "
                f"exceeds {self._max_extra}"
            )
        return extra

    def decode(self, data: bytes, pos: int = 0) -> tuple[int, int]:
        if pos >= len(data):
            raise self._short(data, pos, 1)
        extra = self._extra(data[pos], pos)
        end = pos + 1 + extra
        if end > len(data):
            raise self._short(data, pos, extra + 1)
        low_bits = 8 - self._code_bits
        value = int.from_bytes(data[pos:end], "big") & ((1 << (low_bits + 8 * extra)) - 1)
        if value >= self._limit:
            raise KeyDecodeError(
                f"{self.kind}: {show_bytes(data[pos:end])} at offset {pos} exceeds the maximum"
            )
        if extra and value >> (low_bits + 8 * (extra - 1)) == 0:
            raise KeyDecodeError(
                f"{self.kind}: {show_bytes(data[pos:end])} at offset {pos} is not the shortest "
                "encoding of its value"
            )
        return value, end

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        if pos >= len(data):
            raise self._short(data, pos, 1)
        first = data[pos] ^ 0xFF if inverted else data[pos]
        return pos + 1 + self._extra(first, pos)


# --- desc --------------------------------------------------------------------------------------


class Desc(Field):
    """Every byte of the inner encoding inverted: that field sorts in reverse.

    Sound because each inner codec is prefix-free (fixed width, terminated or length-coded):
    two encodings differ at a byte inside both, and inverting that byte flips the comparison.
    """

    __slots__ = ("_max", "inner")

    def __init__(self, inner: Field) -> None:
        if not isinstance(inner, Field):
            raise SchemaError(f"desc() needs a field codec, got {inner!r}")
        if inner.trailing:
            raise SchemaError(
                f"desc({inner.kind}) is not order-reversing: a trailing field is not prefix-free"
            )
        if isinstance(inner, Desc):
            raise SchemaError("desc(desc(...)) is the field itself; use it directly")
        super().__init__(
            f"desc({inner.kind})",
            width=inner.width,
            struct_code=inner.struct_code,
            partial_ok=inner.partial_ok,
        )
        self.inner = inner
        self._max = (1 << (8 * inner.width)) - 1 if inner.width else 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Desc) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash((Desc, self.inner))

    def value_types(self) -> tuple[type, ...] | None:
        return self.inner.value_types()

    def input_types(self) -> tuple[type, ...]:
        return self.inner.input_types()

    def encode(self, value: Any) -> bytes:
        return invert(self.inner.encode(value))

    def encode_partial(self, value: Any) -> bytes:
        return invert(self.inner.encode_partial(value))

    def to_raw(self, value: Any) -> int:
        return self._max - self.inner.to_raw(value)

    def from_raw(self, raw: int) -> Any:
        return self.inner.from_raw(self._max - raw)

    def from_raw_many(self, raws: Sequence[int]) -> list[Any]:
        return self.inner.from_raw_many(list(map(operator.sub, repeat(self._max), raws)))

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        # Offsets and bytes in errors are those of `data` (the whole key), never of the
        # inverted copy the inner codec reads.
        inner = self.inner
        if inner.width:
            end = pos + inner.width
            if end > len(data):
                raise self._short(data, pos, inner.width)
        else:
            end = inner.end(data, pos, True)
        segment = invert(data[pos:end])
        try:
            value, used = inner.decode(segment, 0)
        except KeyDecodeError as exc:
            raise KeyDecodeError(
                f"{self.kind}: the {end - pos} bytes {show_bytes(data[pos:end])} at offset "
                f"{pos} of {show_bytes(data)} do not decode once inverted: {exc}"
            ) from None
        if used != len(segment):
            raise KeyDecodeError(
                f"{self.kind}: malformed field at offset {pos} of {show_bytes(data)}"
            )
        return value, end

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return self.inner.end(data, pos, not inverted)


# --- the public codec instances ----------------------------------------------------------------

_PUBLIC: dict[str, Field] = {}


def public(name: str, codec: Field) -> Field:
    """Register `codec` as the one exported as keys.fields.<name> (pickled by that name)."""
    if name in _PUBLIC:
        raise SchemaError(f"field codec name {name!r} is taken")
    codec.public_name = name
    _PUBLIC[name] = codec
    return codec


def by_name(name: str) -> Field:
    """The codec exported as keys.fields.<name> (the unpickling side of Field.__reduce_ex__).

    Importing any module of opendata_kv.keys imports keys.fields, so every public codec,
    identifier fields included, is registered by the time a pickle calls this.
    """
    codec = _PUBLIC.get(name)
    if codec is None:
        raise SchemaError(f"no field codec named {name!r}")
    return codec


def _restore_codec(cls: type[Field], state: dict[str, Any]) -> Field:
    codec = object.__new__(cls)
    for slot, value in state.items():
        object.__setattr__(codec, slot, value)
    return codec


u8 = public("u8", _Unsigned("u8", "B", 1))
u16 = public("u16", _Unsigned("u16", "H", 2))
u32 = public("u32", _Unsigned("u32", "I", 4))
u64 = public("u64", _Unsigned("u64", "Q", 8))
u128 = public("u128", _U128())
i32 = public("i32", _Signed("i32", "I", 4))
i64 = public("i64", _Signed("i64", "Q", 8))
f64 = public("f64", _F64())
boolean = public("boolean", _Bool())
string = public("string", TerminatedStr("string"))
bytes_ = public("bytes_", TerminatedBytes("bytes"))
trailing_string = public("trailing_string", _TrailingStr("trailing_string"))
trailing_bytes = public("trailing_bytes", _TrailingBytes("trailing_bytes"))
var_u32 = public("var_u32", _VarUInt("var_u32", 3, 4, 1 << 32))
var_u64 = public("var_u64", _VarUInt("var_u64", 4, 8, 1 << 64))
