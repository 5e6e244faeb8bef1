"""Key fields for the identifiers in opendata_kv.ids: tid, muid, url_key and rkey(key_type).

tid       8-byte big-endian integer (sorts like the 13-char string); takes exactly a TID
          string (an int is refused, as u64 refuses a str), decodes to the string
muid      the 16 packed bytes; takes and decodes to a Muid
url_key   8-byte big-endian int63 (bit 63 must be 0)
rkey      a terminated string validated as an AT Protocol record key of a Lexicon key type
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from opendata_kv.errors import IdError, KeyDecodeError, KeyEncodeError, SchemaError, show_bytes
from opendata_kv.ids import rkey as rkey_ids
from opendata_kv.ids import tid as tid_ids
from opendata_kv.ids.muid import Muid
from opendata_kv.keys.codecs import Field, TerminatedStr, public

_U64 = struct.Struct(">Q")
_TOP_BIT = 1 << 63


class _Int63(Field):
    """An 8-byte big-endian integer whose top bit must be 0 (TIDs, URL keys)."""

    __slots__ = ()

    def __init__(self, kind: str) -> None:
        super().__init__(kind, width=8, struct_code="Q")

    def _check(self, raw: int) -> int:
        if raw >= _TOP_BIT:
            raise KeyDecodeError(f"{self.kind}: 0x{raw:016x} has the top bit set")
        return raw

    def decode(self, data: bytes, pos: int = 0) -> tuple[Any, int]:
        if len(data) - pos < 8:
            raise self._short(data, pos, 8)
        return self.from_raw(self._check(_U64.unpack_from(data, pos)[0])), pos + 8

    def encode(self, value: Any) -> bytes:
        return _U64.pack(self.to_raw(value))

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + 8


class _Tid(_Int63):
    __slots__ = ()
    VALUE_TYPES = (str,)

    def to_raw(self, value: Any) -> int:
        if not isinstance(value, str):
            hint = " (for an integer n, give ids.tid.encode(n))" if isinstance(value, int) else ""
            raise KeyEncodeError(
                f"tid needs a TID string of 13 characters, got {type(value).__name__} "
                f"{value!r}{hint}",
                value=value,
            )
        try:
            return tid_ids.decode(value)
        except IdError as exc:
            raise KeyEncodeError(f"tid: {exc}") from None

    def from_raw(self, raw: int) -> str:
        return tid_ids.encode(self._check(raw))

    def from_raw_many(self, raws: Sequence[int]) -> list[Any]:
        if raws and max(raws) >= _TOP_BIT:  # the first such raw's error, as from_raw raises it
            return list(map(self.from_raw, raws))
        return tid_ids.encode_many(raws)


class _UrlKey(_Int63):
    __slots__ = ()
    VALUE_TYPES = (int,)

    def __init__(self) -> None:
        super().__init__("url_key")

    def to_raw(self, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _TOP_BIT:
            return value
        raise KeyEncodeError(f"url_key needs an int in 0..2**63-1, got {value!r}")

    def from_raw(self, raw: int) -> int:
        return self._check(raw)


class _Muid(Field):
    __slots__ = ()
    VALUE_TYPES = (Muid,)
    ALSO_TAKES = (str,)

    def __init__(self) -> None:
        super().__init__("muid", width=16)

    def encode(self, value: Any) -> bytes:
        if isinstance(value, Muid):
            return bytes(value)
        if isinstance(value, str):
            try:
                return bytes(Muid.parse(value))
            except IdError as exc:
                raise KeyEncodeError(f"muid: {exc}") from None
        raise KeyEncodeError(f"muid needs a Muid (or its string), got {value!r}")

    def decode(self, data: bytes, pos: int = 0) -> tuple[Muid, int]:
        end = pos + 16
        if end > len(data):
            raise self._short(data, pos, 16)
        return Muid.from_bytes(data[pos:end]), end

    def end(self, data: bytes, pos: int, inverted: bool) -> int:
        return pos + 16


#: NSIDs an rkey('nsid') field remembers as valid before it starts afresh
VALID_NSIDS = 4096


class _Rkey(TerminatedStr):
    """A terminated string that must be a record key of the given Lexicon key type."""

    __slots__ = ("_any", "_valid", "key_type")

    def __init__(self, key_type: str) -> None:
        try:
            self.key_type = rkey_ids.KeyType.parse(key_type)
        except IdError as exc:
            raise SchemaError(f"rkey field: {exc}") from None
        super().__init__(f"rkey({key_type})" if key_type != "any" else "rkey")
        #: NSIDs already found valid (key type 'nsid': a store's collection names, a few
        #: hundred at most), so a key of a known collection skips the NSID rules
        self._valid: set[str] = set()
        #: key type 'any': a syntactically valid record key is all it takes
        self._any = self.key_type.kind == "any"

    def _raw(self, value: Any) -> bytes:
        if value.__class__ is str and (
            value in self._valid or (self._any and rkey_ids.is_valid(value))
        ):  # a known NSID, or any valid record key for key type 'any' (no other rule)
            return super()._raw(value)
        try:
            rkey_ids.validate(value, self.key_type)
        except IdError as exc:
            raise KeyEncodeError(f"{self.kind}: {exc}") from None
        self._remember(value)
        return super()._raw(value)

    def _remember(self, value: str) -> None:
        """Keep a valid NSID (bounded: past VALID_NSIDS the set starts afresh)."""
        if self.key_type.kind == "nsid" and value.__class__ is str:
            if len(self._valid) >= VALID_NSIDS:
                self._valid.clear()
            self._valid.add(value)

    def encode_partial(self, value: Any) -> bytes:
        # A partial rkey need not be a whole valid one ("3k" for every TID starting so), but
        # it may only hold characters a record key can hold.
        if not isinstance(value, str) or (value and not rkey_ids.is_valid(value + "x")):
            raise KeyEncodeError(f"{self.kind}: {value!r} cannot start a record key")
        return super()._raw(value)

    def _value(self, raw: bytes, data: bytes, pos: int) -> str:
        text: str = super()._value(raw, data, pos)
        if text in self._valid or (self._any and rkey_ids.is_valid(text)):
            return text
        if not rkey_ids.is_valid_for(text, self.key_type):
            raise KeyDecodeError(
                f"{self.kind}: {text!r} at offset {pos} is not a valid record key "
                f"({show_bytes(raw)})"
            )
        self._remember(text)
        return text


tid = public("tid", _Tid("tid"))
url_key = public("url_key", _UrlKey())
muid = public("muid", _Muid())


def rkey(key_type: str = "any") -> Field:
    """A record-key field of a Lexicon key type: "any", "tid", "nsid" or "literal:<value>"."""
    return _Rkey(key_type)
