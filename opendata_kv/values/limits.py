"""Decode caps for msgpack values: a hostile value is refused quickly, before it takes the
memory or time it asks for.

A msgpack byte can become a Python object of 30-60 bytes (an empty array is one byte and a
56-byte list), so 8 MiB of empty arrays asks for ~600 MiB; a length header asks for any
amount; 500 nested arrays in 500 bytes break code that walks values recursively. The caps:

| cap | default | refuses |
|---|---|---|
| max_value_bytes | 64 MiB | stored value bytes longer than this, before decoding |
| max_str_len / max_bin_len | 16 MiB / 64 MiB | one string / binary longer than this |
| max_array_len / max_map_len | 500,000 | one array / map with more entries |
| max_ext_len | 1 MiB | one extension payload longer than this |
| max_objects | 500,000 | more containers + container entries in one value |
| max_depth | 100 | containers nested deeper than this |

Counting objects costs a Python call per container, so it runs only for values longer than
max_objects bytes (a shorter one cannot hold more objects: each takes at least a byte); the
depth walk runs only when the bytes could hold more than max_depth container headers. A value
no longer than every length cap is first decoded without passing the caps: msgpack's own
length limits default to the value's length, which is then no more than any cap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import msgpack

from opendata_kv.errors import InvalidArgumentError, ValueEncodeError, ValueLimitError

_MIB = 1 << 20

# Bytes that may start a msgpack map or array header (fixmap, fixarray, map16/32, array16/32).
_CONTAINER_BYTES = bytes([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])


@dataclass(frozen=True)
class DecodeLimits:
    """Caps applied when msgpack value bytes are decoded (see the module docstring);
    every cap is an int >= 1. Give a store its own with `Values(schema, limits=...)`, one
    codec its own with `MsgpackCodec(limits=...)` / `DataclassCodec(cls, limits=...)`."""

    max_value_bytes: int = 64 * _MIB
    max_str_len: int = 16 * _MIB
    max_bin_len: int = 64 * _MIB
    max_array_len: int = 500_000
    max_map_len: int = 500_000
    max_ext_len: int = _MIB
    max_objects: int = 500_000
    max_depth: int = 100
    unpackb: Callable[..., Any] = field(init=False, repr=False, compare=False)
    #: values of at most this many bytes cannot exceed a length cap (see limited_unpackb)
    uncapped_bytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for spec in fields(self):
            if not spec.init:
                continue
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(
                    f"DecodeLimits.{spec.name} must be an int >= 1, got {value!r}",
                    field=spec.name,
                    value=value,
                )
        # msgpack.unpackb with the caps bound once: cheaper than passing them on every call
        unpackb = functools.partial(
            msgpack.unpackb,
            raw=False,
            timestamp=3,
            strict_map_key=False,
            max_str_len=self.max_str_len,
            max_bin_len=self.max_bin_len,
            max_array_len=self.max_array_len,
            max_map_len=self.max_map_len,
            max_ext_len=self.max_ext_len,
        )
        object.__setattr__(self, "unpackb", unpackb)
        smallest = min(
            self.max_value_bytes,
            self.max_objects,
            self.max_str_len,
            self.max_bin_len,
            self.max_array_len,
            self.max_map_len,
            self.max_ext_len,
        )
        object.__setattr__(self, "uncapped_bytes", smallest)

    def but(self, **changes: Any) -> DecodeLimits:
        """A copy with some caps changed: `DEFAULT_LIMITS.but(max_depth=20)`."""
        return replace(self, **changes)


DEFAULT_LIMITS = DecodeLimits()

#: The largest value the slatedb binding can carry: it frames bytes with a signed 32-bit
#: length, so 2 GiB or more would fail inside it (struct.error).
MAX_STORED_VALUE_BYTES = 2**31 - 1


def check_stored_size(data: bytes, what: str = "value") -> bytes:
    """`data`, or ValueEncodeError when it is longer than a stored value can be."""
    if len(data) > MAX_STORED_VALUE_BYTES:
        raise ValueEncodeError(
            f"{what} of {len(data)} bytes is over the cap MAX_STORED_VALUE_BYTES="
            f"{MAX_STORED_VALUE_BYTES} (the slatedb binding frames values with a 32-bit length)"
        )
    return data


def _refuse(cap: str, limits: DecodeLimits, what: str) -> ValueLimitError:
    limit = getattr(limits, cap)
    return ValueLimitError(
        f"value refused: {what}, over the decode cap {cap}={limit} (raise it with "
        f"DecodeLimits({cap}=...) if such values are legitimate)",
        cap=cap,
        limit=limit,
    )


def _counting_hooks(limits: DecodeLimits) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """list_hook / object_hook that count containers and their entries, raising past the cap
    while decoding (so the refusal comes before the rest of the value is built)."""
    count = 0
    cap = limits.max_objects

    def seen(container: Any) -> Any:
        nonlocal count
        count += len(container) + 1
        if count > cap:
            raise _refuse("max_objects", limits, f"more than {cap} objects")
        return container

    return seen, seen


def _too_deep(value: Any, max_depth: int) -> bool:
    """True if containers nest deeper than max_depth (level by level: no recursion)."""
    level = [value] if type(value) is list or type(value) is dict else []
    depth = 1
    while level:
        if depth > max_depth:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            below += [c for c in children if type(c) is list or type(c) is dict]
        level = below
        depth += 1
    return False


def limited_unpackb(data: bytes | bytearray | memoryview, limits: DecodeLimits) -> Any:
    """msgpack.unpackb under the caps: ValueLimitError for a cap, msgpack's own exceptions
    (ValueError, FormatError, ExtraData, ...) for bytes that are not one msgpack value."""
    if not isinstance(data, bytes):
        data = bytes(data)
    size = len(data)
    if size <= limits.uncapped_bytes:
        # msgpack.unpackb limits each string, binary, array and extension to len(data) and
        # each map to len(data) // 2, none above its cap here, and a value this short needs
        # no object count: the caps would refuse nothing, and passing them costs ~0.4 us.
        try:
            value = msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)
        except Exception:
            return _capped_unpackb(data, size, limits)  # fails again, with the caps' errors
        _check_depth(data, size, value, limits)
        return value
    return _capped_unpackb(data, size, limits)


def _capped_unpackb(data: bytes, size: int, limits: DecodeLimits) -> Any:
    """limited_unpackb with every cap passed to msgpack: the reference path."""
    if size > limits.max_value_bytes:
        raise _refuse("max_value_bytes", limits, f"{size} bytes")
    try:
        if size > limits.max_objects:
            list_hook, object_hook = _counting_hooks(limits)
            value = limits.unpackb(data, list_hook=list_hook, object_hook=object_hook)
        else:
            value = limits.unpackb(data)
    except msgpack.StackError:
        raise _refuse("max_depth", limits, "containers nested too deep for msgpack") from None
    except ValueError as exc:
        text = str(exc)
        for cap in ("max_str_len", "max_bin_len", "max_array_len", "max_map_len", "max_ext_len"):
            if f"exceeds {cap}(" in text:
                raise _refuse(cap, limits, text.split(" exceeds")[0] + " entries/bytes") from None
        raise
    _check_depth(data, size, value, limits)
    return value


def may_exceed(data: bytes, limits: DecodeLimits) -> bool:
    """False when `data` is too short for any cap to refuse it (no longer than every length
    cap, and holding at most max_depth container headers): put need not decode it to know
    get will read it."""
    size = len(data)
    if size > limits.uncapped_bytes:
        return True
    return size > limits.max_depth and (
        size - len(data.translate(None, _CONTAINER_BYTES)) > limits.max_depth
    )


def _check_depth(data: bytes, size: int, value: Any, limits: DecodeLimits) -> None:
    """ValueLimitError when the decoded value nests containers deeper than max_depth (walked
    only when its bytes hold more than max_depth container headers)."""
    if size > limits.max_depth and (type(value) is list or type(value) is dict):
        headers = size - len(data.translate(None, _CONTAINER_BYTES))
        if headers > limits.max_depth and _too_deep(value, limits.max_depth):
            raise _refuse("max_depth", limits, f"containers nested deeper than {limits.max_depth}")
