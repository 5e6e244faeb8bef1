"""Codecs OpenData's newer layouts need beside RFC 0002's: a u16 BE length-prefixed string or
byte string, and a field whose codec a preceding type byte selects (RFC 0009).

A length-prefixed field sorts by (length, bytes), not by bytes alone: "b" sorts before "aa".
That is still a total order the bytes preserve (tested with hypothesis), and the encoding is
prefix-free and canonical; only a partial-value prefix scan is impossible, so partial_ok is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, SchemaError, show_bytes
from opendata_kv.keys.codecs import Field, _as_bytes, _as_utf8, _from_utf8, public

_MAX = 0xFFFF


class _LengthPrefixed(Field):
    """u16 big-endian byte count, then that many bytes; the count is checked on decode."""

    __slots__ = ()

    def __init__(self, kind: str) -> None:
        super().__init__(kind)

    def _raw(self, value: Any) -> bytes:
        raise NotImplementedError

    def _value(self, raw: bytes, pos: int) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        raw = self._raw(value)
        if len(raw) > _MAX:
            raise KeyEncodeError(
                f"{self.kind}: {len(raw)} bytes do not fit a u16 length (at most {_MAX})"
            )
        return len(raw).to_bytes(2, "big") + raw

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        if len(data) - pos < 2:
            raise self._short(data, pos, 2)
        size = int.from_bytes(data[pos : pos + 2], "big")
        end = pos + 2 + size
        if end > len(data):
            raise KeyDecodeError(
                f"{self.kind}: length prefix {show_bytes(data[pos : pos + 2])} at offset {pos} "
                f"claims {size} bytes, only {len(data) - pos - 2} follow in {show_bytes(data)}"
            )
        return self._value(data[pos + 2 : end], pos + 2), end

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        if len(data) - pos < 2:
            raise self._short(data, pos, 2)
        size = int.from_bytes(data[pos : pos + 2], "big")
        return pos + 2 + (size ^ _MAX if inverted else size)


class _LengthPrefixedBytes(_LengthPrefixed):
    __slots__ = ()
    VALUE_TYPES = (bytes,)
    ALSO_TAKES = (bytearray, memoryview)

    def _raw(self, value: Any) -> bytes:
        return _as_bytes(self.kind, value)

    def _value(self, raw: bytes, pos: int) -> bytes:
        return raw


class _LengthPrefixedStr(_LengthPrefixed):
    __slots__ = ()
    VALUE_TYPES = (str,)

    def _raw(self, value: Any) -> bytes:
        return _as_utf8(self.kind, value)

    def _value(self, raw: bytes, pos: int) -> str:
        return _from_utf8(self.kind, raw, pos)


class Typed(Field):
    """A value whose codec is chosen by an earlier u8 field of the same key (its `selector`).

    Only a RecordType can encode or decode it (it passes the selector's value in); the pair
    (type byte, value) sorts by type first, then by the chosen codec's order.
    """

    __slots__ = ("codecs", "selector")

    def __init__(self, selector: str, codecs: Mapping[int, Field]) -> None:
        if not isinstance(selector, str) or not selector:
            raise SchemaError(f"typed() needs the name of the selector field, got {selector!r}")
        if not codecs:
            raise SchemaError("typed() needs at least one (type byte, codec) pair")
        table: dict[int, Field] = {}
        for code, codec in codecs.items():
            if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 0xFF:
                raise SchemaError(f"typed(): type byte {code!r} is not 0..255")
            if not isinstance(codec, Field) or isinstance(codec, Typed) or codec.trailing:
                raise SchemaError(
                    f"typed(): type byte {code} needs a prefix-free field codec, got {codec!r}"
                )
            table[code] = codec
        inner = ", ".join(f"{code}: {c.kind}" for code, c in sorted(table.items()))
        super().__init__(f"typed({selector}: {inner})")
        self.selector = selector
        self.codecs = table

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Typed) and (other.selector, other.codecs) == (
            self.selector,
            self.codecs,
        )

    def __hash__(self) -> int:
        return hash((Typed, self.selector, tuple(sorted(self.codecs))))

    def value_types(self) -> tuple[type, ...] | None:
        """Every class one of its codecs decodes to (None when one of them does not say)."""
        found: list[type] = []
        for codec in self.codecs.values():
            types = codec.value_types()
            if types is None:
                return None
            found += [t for t in types if t not in found]
        return tuple(found)

    def input_types(self) -> tuple[type, ...]:
        found: list[type] = []
        for codec in self.codecs.values():
            found += [t for t in codec.input_types() if t not in found]
        return tuple(found)

    def codec_for(self, type_byte: int, pos: int | None = None) -> Field:
        """The codec type byte `type_byte` selects; a KeyDecodeError (with `pos`: the
        selector's offset) or KeyEncodeError when it selects none."""
        codec = self.codecs.get(type_byte)
        if codec is None:
            known = sorted(self.codecs)
            if pos is None:
                raise KeyEncodeError(
                    f"{self.kind}: type byte {type_byte!r} selects no codec (known: {known})"
                )
            raise KeyDecodeError(
                f"{self.kind}: type byte 0x{type_byte:02x} at offset {pos} selects no codec "
                f"(known: {known})",
                offset=pos,
            )
        return codec

    def encode(self, value: Any) -> bytes:
        raise KeyEncodeError(f"{self.kind} is encoded by its RecordType (it needs the type byte)")

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        raise KeyDecodeError(f"{self.kind} is decoded by its RecordType (it needs the type byte)")

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        raise KeyDecodeError(f"{self.kind} cannot be measured without its type byte")


lp_string = public("lp_string", _LengthPrefixedStr("lp_string"))
lp_bytes = public("lp_bytes", _LengthPrefixedBytes("lp_bytes"))


def typed(selector: str, codecs: Mapping[int, Field]) -> Typed:
    """A field whose codec the earlier u8 field `selector` picks: typed("kind", {0: string})."""
    return Typed(selector, codecs)
