"""Value codecs of typed classes beside DataclassCodec: TypedDicts (checked dicts) and, when
msgspec is installed, msgspec Structs (encoded and validated by msgspec).

Every one stores a msgpack map of field names, so a record written through one reads back
through any other of the same fields, through MsgpackCodec, and in `opendata-kv dump`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from opendata_kv.errors import ArgumentTypeError, ValueDecodeError, ValueEncodeError, show_bytes
from opendata_kv.values.codecs import _Limited, _show_value, pack, unpack
from opendata_kv.values.limits import (
    DecodeLimits,
    limited_unpackb,
    may_exceed,
)
from opendata_kv.values.typecheck import Checker, checker_for
from opendata_kv.values.unknown import KEPT, UnknownFields, check_unknown, keep, merged

try:
    import msgspec
except ImportError:  # the optional extra `msgspec` is not installed
    msgspec = None  # type: ignore[assignment]

T = TypeVar("T")

#: Required[...] / NotRequired[...] (Python 3.11+): the type inside is what is checked
_WRAPPERS = tuple(
    wrapper
    for wrapper in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None))
    if wrapper is not None
)


def is_typeddict(spec: object) -> bool:
    """Whether `spec` is a TypedDict class."""
    return isinstance(spec, type) and typing.is_typeddict(spec)


def is_struct(spec: object) -> bool:
    """Whether `spec` is a msgspec.Struct class (False when msgspec is not installed)."""
    return msgspec is not None and isinstance(spec, type) and issubclass(spec, msgspec.Struct)


def _shown(annotation: Any) -> str:
    plain = isinstance(annotation, type) and typing.get_origin(annotation) is None
    return str(annotation.__name__ if plain else repr(annotation)).replace("typing.", "")


class TypedDictCodec(_Limited, Generic[T]):
    """A TypedDict stored as the msgpack map it is. Written and read values are checked the
    same way: missing required keys and values that do not match their declared type are
    refused (ValueEncodeError on write, ValueDecodeError on read), as DataclassCodec refuses
    them. Keys the TypedDict does not declare (nested TypedDicts' too) stay in the dict with
    `unknown="keep"` (the default: a read value is the stored map, written back as it was)
    and are refused with `unknown="forbid"`."""

    def __init__(
        self,
        cls: type[T],
        *,
        limits: DecodeLimits | None = None,
        unknown: UnknownFields = "keep",
    ) -> None:
        if not is_typeddict(cls):
            raise ArgumentTypeError(
                f"TypedDictCodec needs a TypedDict type, got {cls!r}", field="cls", value=cls
            )
        self._set_limits(limits)
        self.cls = cls
        self.name = f"typeddict:{cls.__qualname__}"
        self.unknown = check_unknown(unknown)
        extra_ok = self.unknown == "keep"
        self._required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        hints = typing.get_type_hints(cls, include_extras=True)
        self._names = frozenset(hints)
        checks: list[tuple[str, Checker, str]] = []
        for name, annotation in hints.items():
            while typing.get_origin(annotation) in _WRAPPERS:
                annotation = typing.get_args(annotation)[0]
            checker = checker_for(annotation, extra_keys=extra_ok)
            if checker is not None:
                checks.append((name, checker, _shown(annotation)))
        self._checks = tuple(checks)

    def _problem(self, value: object) -> tuple[str, str | None, object] | None:
        """(what is wrong, the field, the offending value) or None for a valid value."""
        if not isinstance(value, dict):
            return f"expected a dict, got {type(value).__name__}", None, value
        if self.unknown == "forbid":
            unknown = [k for k in value if k not in self._names]
            if unknown:
                return f"unknown keys {unknown!r} (unknown='forbid')", str(unknown[0]), unknown[0]
        missing = sorted(self._required - value.keys())
        if missing:
            return f"missing keys {missing}", missing[0], None
        for name, check, shown in self._checks:
            if name in value and not check(value[name]):
                found = value[name]
                return (
                    f"key {name!r} is declared {shown}, but the value is "
                    f"{type(found).__name__} {_show_value(found)}",
                    name,
                    found,
                )
        return None

    def encode(self, value: T) -> bytes:
        problem = self._problem(value)
        if problem is not None:
            message, field, found = problem
            raise ValueEncodeError(f"{self.name}: {message}", field=field, value=found)
        return pack(value, self.name)

    def decode(self, data: bytes) -> T:
        value = unpack(data, self.limits)
        problem = self._problem(value)
        if problem is not None:
            message, field, _found = problem
            raise ValueDecodeError(
                f"{self.name}: {message}: {show_bytes(data)}", field=field, value=data
            )
        decoded: T = value
        return decoded

    def __repr__(self) -> str:
        extra = f", unknown={self.unknown!r}" if self.unknown != "keep" else ""
        if self.explicit_limits:
            extra += f", limits={self.limits!r}"
        return f"TypedDictCodec({self.cls.__qualname__}{extra})"


class StructCodec(_Limited, Generic[T]):
    """A msgspec.Struct encoded and decoded by msgspec (validated on decode: a stored value
    of the wrong type or a missing field is a ValueDecodeError).

    The Struct must store a map (not `array_like`), so every codec and `opendata-kv dump`
    read it. Stored fields it does not declare: `unknown="keep"` (the default) keeps them
    beside the object (values/unknown.py) and `encode` writes them back; that needs a Struct
    that takes weak references (`weakref=True`): without, a record with unknown fields is
    refused rather than half-read. `unknown="forbid"`, or a Struct declared with
    `forbid_unknown_fields=True`, refuses them. The store's decode caps hold: a value long
    enough to reach one is checked by them first.
    """

    def __init__(
        self,
        cls: type[T],
        *,
        limits: DecodeLimits | None = None,
        unknown: UnknownFields = "keep",
    ) -> None:
        if msgspec is None:
            raise ArgumentTypeError(
                "StructCodec needs msgspec (pip install 'opendata-kv[msgspec]')",
                field="cls",
                value=cls,
            )
        if not is_struct(cls):
            raise ArgumentTypeError(
                f"StructCodec needs a msgspec.Struct type, got {cls!r}", field="cls", value=cls
            )
        config = cls.__struct_config__  # type: ignore[attr-defined]
        if config.array_like:
            raise ArgumentTypeError(
                f"StructCodec: {cls.__qualname__} is array_like; values are stored as maps so "
                "every codec and `opendata-kv dump` reads them",
                field="cls",
                value=cls,
            )
        self._set_limits(limits)
        self.cls = cls
        self.name = f"struct:{cls.__qualname__}"
        self.unknown = "forbid" if config.forbid_unknown_fields else check_unknown(unknown)
        #: msgspec itself refuses undeclared fields: nothing is left to look for
        self._strict = bool(config.forbid_unknown_fields)
        #: the stored names of its fields, in the order msgspec encodes them
        self._order: tuple[str, ...] = tuple(cls.__struct_encode_fields__)  # type: ignore[attr-defined]
        self._declared = frozenset(self._order)
        self._twin: Callable[[bytes], Any] = _twin_decoder(cls)
        self._encode: Callable[[Any], bytes] = msgspec.msgpack.Encoder().encode
        self._decode: Callable[[bytes], T] = msgspec.msgpack.Decoder(cls).decode

    def encode(self, value: T) -> bytes:
        if not isinstance(value, self.cls):
            raise ValueEncodeError(
                f"{self.name} value must be a {self.cls.__qualname__}, got {type(value).__name__}",
                value=value,
            )
        try:
            data = self._encode(value)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
            raise ValueEncodeError(f"{self.name}: {exc}", value=value) from None
        stored = KEPT.recall(value)
        if stored is None:
            return data
        return pack(merged(unpack(data, self.limits), stored, self._declared), self.name)

    def decode(self, data: bytes) -> T:
        if may_exceed(data, self.limits):
            limited_unpackb(data, self.limits)  # ValueLimitError for a value over a cap
        try:
            made = self._decode(data)
        except msgspec.ValidationError as exc:
            raise ValueDecodeError(f"{self.name}: {exc}: {show_bytes(data)}", value=data) from None
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise ValueDecodeError(
                f"{self.name}: not a msgpack value ({exc}): {show_bytes(data)}", value=data
            ) from None
        return self._unknown(made, data)

    def _unknown(self, made: T, data: bytes) -> T:
        """`made`, after the stored fields its Struct does not declare are refused (forbid)
        or kept beside it (keep). The map is first read by a twin Struct of the same field
        names that forbids unknown ones and decodes no value (msgspec.Raw): it passes, in C,
        for every record of only declared fields; one that fails is unpacked to find them."""
        if self._strict:
            return made
        try:
            self._twin(data)
            return made
        except msgspec.ValidationError:
            return self._undeclared(made, data)

    def _undeclared(self, made: T, data: bytes) -> T:
        """`_unknown` past the twin: `data` (which msgspec decoded, under the caps) unpacked
        with the caps' own unpacker to find its undeclared fields."""
        stored = self.limits.unpackb(data)
        unknown = [k for k in stored if k not in self._declared]
        if unknown and self.unknown == "forbid":
            raise ValueDecodeError(
                f"{self.name}: unknown fields {unknown!r} (unknown='forbid'): {show_bytes(data)}",
                field=str(unknown[0]),
                value=data,
            )
        keep(self.name, made, stored, unknown, self._order, data)
        return made

    def fast_decode_many(self, batch: list[bytes]) -> list[T]:
        """`decode` over a batch (a scan's path); any error sends the scan to `decode`."""
        if _any_may_exceed(batch, self.limits):
            return [self.decode(data) for data in batch]
        made = list(map(self._decode, batch))
        if not self._strict:
            try:
                list(map(self._twin, batch))  # no undeclared field anywhere: the common case
            except msgspec.ValidationError:
                pairs = zip(made, batch, strict=True)
                check = self._unknown
                return [check(value, data) for value, data in pairs]
        return made

    def __repr__(self) -> str:
        extra = f", unknown={self.unknown!r}" if self.unknown != "keep" else ""
        if self.explicit_limits:
            extra += f", limits={self.limits!r}"
        return f"StructCodec({self.cls.__qualname__}{extra})"


def _any_may_exceed(batch: list[bytes], limits: DecodeLimits) -> bool:
    """Whether any value of `batch` may_exceed `limits` (values no longer than max_depth
    bytes never do: one length check for the batch)."""
    if not batch:
        return False
    longest = max(map(len, batch))
    if longest > limits.uncapped_bytes:
        return True
    if longest <= limits.max_depth:
        return False
    return any(may_exceed(data, limits) for data in batch)


def _twin_decoder(cls: Any) -> Callable[[bytes], Any]:
    """A msgspec decoder of a Struct with `cls`'s stored field names (and tag), every one
    optional and left undecoded (msgspec.Raw), that refuses any other name: it checks, at
    msgspec's speed, that a stored map holds no field `cls` does not declare."""
    infos = msgspec.structs.fields(cls)
    config = cls.__struct_config__
    twin = msgspec.defstruct(
        f"{cls.__name__}Names",
        [(info.name, msgspec.Raw, msgspec.Raw()) for info in infos],
        rename={info.name: info.encode_name for info in infos},
        forbid_unknown_fields=True,
        tag=config.tag,
        tag_field=config.tag_field,
    )
    decode: Callable[[bytes], Any] = msgspec.msgpack.Decoder(twin).decode
    return decode
