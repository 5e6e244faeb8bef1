"""Value codecs: raw bytes, msgpack of plain data, and msgpack maps of a dataclass by field name.

A codec turns a Python value into bytes and back. Decoding is all-or-nothing: bytes that are
not exactly one valid value raise ValueDecodeError; nothing comes back half-decoded.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import msgpack

from opendata_kv.errors import (
    ArgumentTypeError,
    ValueDecodeError,
    ValueEncodeError,
    ValueLimitError,
    show_bytes,
)
from opendata_kv.values.limits import (
    _CONTAINER_BYTES,
    DEFAULT_LIMITS,
    DecodeLimits,
    limited_unpackb,
)
from opendata_kv.values.typecheck import field_checkers
from opendata_kv.values.unknown import KEPT, UnknownFields, check_unknown, keep, merged

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class ValueCodec(Protocol[T]):
    """Turns values into bytes and back. `name` appears in errors and in the dump tool."""

    name: str

    def encode(self, value: T) -> bytes: ...

    def decode(self, data: bytes) -> T: ...


@runtime_checkable
class BatchDecoding(Protocol):
    """A codec's optional fast path for scans: decode a whole batch at once. It may raise
    anything on bad bytes (the scan then redoes the batch through `decode`, one value at a
    time, for the precise error), and must return exactly what `decode` returns."""

    def fast_decode_many(self, batch: list[bytes]) -> list[Any]: ...


@runtime_checkable
class LimitsAware(Protocol):
    """A codec that honours the store's decode caps (Values(schema, limits=...))."""

    def with_limits(self, limits: DecodeLimits) -> Any: ...


def batch_decoder(codec: ValueCodec[Any]) -> Callable[[list[bytes]], list[Any]]:
    """How a scan decodes a batch of values with `codec`: its fast path when it declares one
    (BatchDecoding), else `decode` value by value; raw bytes pass through."""
    if isinstance(codec, RawCodec):
        return _as_list
    if isinstance(codec, BatchDecoding):
        return codec.fast_decode_many
    decode = codec.decode
    return lambda batch: list(map(decode, batch))


def _as_list(batch: list[Any]) -> list[Any]:
    return batch


def with_limits(codec: ValueCodec[Any], limits: DecodeLimits) -> ValueCodec[Any]:
    """`codec` holding the store's decode caps when it honours them (LimitsAware)."""
    if isinstance(codec, LimitsAware):
        limited: ValueCodec[Any] = codec.with_limits(limits)
        return limited
    return codec


class RawCodec:
    """Values are bytes, stored as they are."""

    name = "raw"

    def encode(self, value: object) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise ValueEncodeError(f"raw value must be bytes, got {type(value).__name__}")

    def decode(self, data: bytes) -> bytes:
        return data

    def __repr__(self) -> str:
        return "RawCodec()"


def _packer() -> Callable[[Any], bytes]:
    # Timezone-aware datetimes use msgpack's standard timestamp extension (-1).
    packer = msgpack.Packer(use_bin_type=True, datetime=True)
    pack: Callable[[Any], bytes] = packer.pack
    return pack


_PACK = _packer()


def pack(value: Any, what: str = "value") -> bytes:
    """msgpack bytes of `value` (dict, list, str, bytes, int, float, bool, None, aware datetime)."""
    try:
        return _PACK(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueEncodeError(f"{what} cannot be msgpack-encoded: {exc}") from None


def unpack(data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> Any:
    """The one msgpack value in `data`; ValueDecodeError for garbage, truncation or extra
    bytes, ValueLimitError (a ValueDecodeError) for a value over one of the decode caps."""
    try:
        return limited_unpackb(data, limits)
    except ValueLimitError:
        raise
    except msgpack.ExtraData:
        raise ValueDecodeError(f"extra bytes after a msgpack value in {show_bytes(data)}") from None
    except Exception as exc:  # msgpack raises ValueError, TypeError, FormatError, ...
        raise ValueDecodeError(
            f"not a msgpack value ({type(exc).__name__}: {exc}): {show_bytes(data)}"
        ) from None


class _Limited:
    """Codecs whose decoding honours DecodeLimits: their own if given, else the store's
    (Values(schema, limits=...) hands them theirs through `with_limits`)."""

    limits: DecodeLimits
    explicit_limits: bool

    def _set_limits(self, limits: DecodeLimits | None) -> None:
        self.limits = DEFAULT_LIMITS if limits is None else limits
        self.explicit_limits = limits is not None

    def with_limits(self, limits: DecodeLimits) -> Any:
        """This codec with `limits`, unless it was given its own (then itself)."""
        if self.explicit_limits or limits == self.limits:
            return self
        clone = copy.copy(self)
        clone.limits = limits
        clone._limits_changed()
        return clone

    def _limits_changed(self) -> None:
        """Rebuild whatever was derived from `limits` (a copy with new limits)."""


_HEADER_MARKS = bytes(1 if byte in _CONTAINER_BYTES else 0 for byte in range(256))


def limited_unpack_many(batch: list[bytes], limits: DecodeLimits) -> list[Any]:
    """[limited_unpackb(data, limits) for data in batch], or an exception when any of them
    fails (the caller redoes the batch one by one for the precise error).

    The batch is decoded as one stream by an Unpacker holding the caps, the values separated
    by _SEPARATOR so that the stream proves each value is exactly one object: no keyword
    parsing per value, which is what the caps cost on unpackb (~0.3 µs of ~0.6 µs for a
    small map). The size-gated caps are checked first as limited_unpackb gates them: a value
    over max_objects or max_value_bytes bytes, or with more than max_depth container header
    bytes, sends the whole batch through limited_unpackb.
    """
    if not batch:
        return []
    longest = max(map(len, batch))
    if longest > limits.max_objects or longest > limits.max_value_bytes:
        return [limited_unpackb(data, limits) for data in batch]
    depth = limits.max_depth
    if longest > depth:
        sizes = list(map(len, batch))
        marks = b"".join(batch).translate(_HEADER_MARKS)
        count = marks.count
        if count(1) > depth:
            start = 0
            for size in sizes:
                if count(1, start, start + size) > depth:
                    return [limited_unpackb(data, limits) for data in batch]
                start += size
    keywords: dict[str, Any] = getattr(limits.unpackb, "keywords", {})  # the caps' partial
    separated = _SEPARATOR.join(batch) + _SEPARATOR  # the last one ends the last value
    unpacker = msgpack.Unpacker(max_buffer_size=len(separated), **keywords)
    unpacker.feed(separated)
    objects = list(unpacker)
    values = len(batch)
    if len(objects) != 2 * values or objects[1::2].count(_SECRET) != values:
        raise ValueError("a value is not exactly one msgpack object")
    return objects[0::2]


#: After each value of a batch decoded as one stream: a msgpack bin holding 16 random bytes
#: drawn per process. The stream decodes to value, separator, value, ... exactly when every
#: value is one whole msgpack object, unless stored bytes hold this process's secret, which
#: they cannot know. Checked by the C-level list.count instead of a position check per value
#: (~0.06 µs/value less, measured).
_SECRET = os.urandom(16)
_SEPARATOR: bytes = msgpack.packb(_SECRET)


class MsgpackCodec(_Limited):
    """Plain data (dicts, lists, scalars) as msgpack: the default codec.

    `limits`: decode caps (values/limits.py; default DEFAULT_LIMITS or the store's).
    `fast_decode` is `decode` without the error translation, and `fast_decode_many` the same
    over a list, for batch decoders (scans) that redo a failed batch through `decode` to get
    the precise error.
    """

    name = "msgpack"

    def __init__(self, *, limits: DecodeLimits | None = None) -> None:
        self._set_limits(limits)
        self._limits_changed()
        #: `encode` without the error translation (per-record put paths redo a failure
        #: through `encode` for the precise error)
        self.fast_encode: Callable[[Any], bytes] = _PACK

    def _limits_changed(self) -> None:
        self.fast_decode: Callable[[bytes], Any] = functools.partial(
            limited_unpackb, limits=self.limits
        )

    def fast_decode_many(self, batch: list[bytes]) -> list[Any]:
        return limited_unpack_many(batch, self.limits)

    def encode(self, value: Any) -> bytes:
        return pack(value)

    def decode(self, data: bytes) -> Any:
        return unpack(data, self.limits)

    def __repr__(self) -> str:
        extra = f"limits={self.limits!r}" if self.explicit_limits else ""
        return f"MsgpackCodec({extra})"


class DataclassCodec(_Limited, Generic[T]):
    """A dataclass stored as a msgpack map of its field names; fields with defaults may be
    absent from old records.

    `unknown` (values/unknown.py): "keep" (default) reads a stored field the dataclass does
    not declare and keeps it beside the object, so `encode` writes it back unchanged and in
    its stored order; "forbid" refuses it (ValueDecodeError naming the field). A slotted
    dataclass keeps them only with weakref_slot=True: without, a record with unknown fields
    is refused rather than half-read. `check_types` (default True): a stored value must match
    each field's declared type (values/typecheck.py), so {"text": 1} for `text: str` is a
    ValueDecodeError, not a dataclass holding an int. `limits`: decode caps, as for
    MsgpackCodec.
    """

    def __init__(
        self,
        cls: type[T],
        *,
        check_types: bool = True,
        limits: DecodeLimits | None = None,
        unknown: UnknownFields = "keep",
    ) -> None:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ArgumentTypeError(
                f"DataclassCodec needs a dataclass type, got {cls!r}", field="cls", value=cls
            )
        self._set_limits(limits)
        self.cls = cls
        self.name = f"dataclass:{cls.__qualname__}"
        self.check_types = check_types
        self.unknown = check_unknown(unknown)
        fields = dataclasses.fields(cls)
        self._names = tuple(f.name for f in fields if f.init)
        self._declared = frozenset(self._names)
        self._required = frozenset(
            f.name
            for f in fields
            if f.init
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        )
        extra_ok = self.unknown == "keep"
        self._checks = (
            tuple(field_checkers(cls, extra_keys=extra_ok).items()) if check_types else ()
        )

    def encode(self, value: T) -> bytes:
        if not isinstance(value, self.cls):
            raise ValueEncodeError(
                f"{self.name} value must be a {self.cls.__qualname__}, got {type(value).__name__}"
            )
        fresh = {n: getattr(value, n) for n in self._names}
        return pack(merged(fresh, KEPT.recall(value), self._declared), self.name)

    def decode(self, data: bytes) -> T:
        mapping = unpack(data, self.limits)
        if not isinstance(mapping, dict):
            raise ValueDecodeError(
                f"{self.name}: expected a msgpack map, got {type(mapping).__name__}"
            )
        unknown = [k for k in mapping if k not in self._declared]
        if unknown and self.unknown == "forbid":
            raise ValueDecodeError(
                f"{self.name}: unknown fields {unknown!r} (unknown='forbid'): {show_bytes(data)}",
                field=str(unknown[0]),
                value=data,
            )
        missing = sorted(self._required - mapping.keys())
        if missing:
            raise ValueDecodeError(f"{self.name}: missing fields {missing}")
        for name, (check, shown) in self._checks:
            if name in mapping and not check(mapping[name]):
                value = mapping[name]
                raise ValueDecodeError(
                    f"{self.name}: field {name!r} is declared {shown}, but the stored value is "
                    f"{type(value).__name__} {_show_value(value)}"
                )
        own = {k: v for k, v in mapping.items() if k in self._declared} if unknown else mapping
        try:
            made = self.cls(**own)
        except (TypeError, ValueError) as exc:
            raise ValueDecodeError(f"{self.name}: {exc}") from None
        keep(self.name, made, mapping, unknown, self._names, data)
        return made

    def __repr__(self) -> str:
        extra = "" if self.check_types else ", check_types=False"
        if self.unknown != "keep":
            extra += f", unknown={self.unknown!r}"
        if self.explicit_limits:
            extra += f", limits={self.limits!r}"
        return f"DataclassCodec({self.cls.__qualname__}{extra})"


def _show_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


raw = RawCodec()
msgpack_codec = MsgpackCodec()
