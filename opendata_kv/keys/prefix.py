"""The RFC 0001 record prefix `[keyspace][version u8][record_tag u8]` and prefix successors."""

from __future__ import annotations

from typing import NamedTuple

from opendata_kv.errors import KeyDecodeError, SchemaError, show_bytes


class RecordPrefix(NamedTuple):
    """The decoded 2-byte prefix: version, record type (high nibble), reserved bits (low)."""

    version: int
    record_type: int
    reserved: int


def check_prefix(version: object, record_type: object, reserved: object) -> None:
    """Raise SchemaError unless the three prefix parts are in range and not reserved."""
    for label, value, top in (
        ("version", version, 0xFF),
        ("record type", record_type, 0xF),
        ("reserved bits", reserved, 0xF),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaError(f"{label} must be an int, got {value!r}")
        if not 0 <= value <= top:
            width = "one byte" if top == 0xFF else "4 bits"
            raise SchemaError(f"{label} {value} does not fit in {width} (0..{top})")
    if version == 0:
        raise SchemaError("version 0x00 is reserved")
    if record_type == 0:
        raise SchemaError("record type 0x0 is reserved")


def record_type_text(record_type: int) -> str:
    """How a record type number is written in every message and table: `0xA`."""
    return f"0x{record_type:X}"


def build_prefix(version: int, record_type: int, reserved: int = 0, keyspace: bytes = b"") -> bytes:
    """`keyspace + [version, record_type << 4 | reserved]`, validated."""
    check_prefix(version, record_type, reserved)
    if not isinstance(keyspace, bytes):
        raise SchemaError(f"keyspace must be bytes, got {type(keyspace).__name__}")
    return keyspace + bytes((version, record_type << 4 | reserved))


def parse_prefix(key: bytes, keyspace: bytes = b"") -> RecordPrefix:
    """Decode the prefix after `keyspace`; reserved values and short keys are KeyDecodeErrors."""
    if key.__class__ is not bytes:
        key = as_key_bytes(key)
    k = len(keyspace)
    if len(key) < k + 2:
        raise KeyDecodeError(
            f"key {show_bytes(key)} is too short for a record prefix: need {k + 2} bytes "
            f"(it ends at offset {len(key)})",
            value=key,
            offset=len(key),
        )
    if keyspace and not key.startswith(keyspace):
        raise KeyDecodeError(
            f"key {show_bytes(key)} does not start with keyspace {show_bytes(keyspace)} (offset 0)",
            value=key,
            offset=0,
        )
    version, tag = key[k], key[k + 1]
    if version == 0:
        raise KeyDecodeError(
            f"key {show_bytes(key)}: version 0x00 at offset {k} is reserved", value=key, offset=k
        )
    if tag >> 4 == 0:
        raise KeyDecodeError(
            f"key {show_bytes(key)}: record tag 0x{tag:02x} at offset {k + 1} has the reserved "
            "record type 0x0",
            value=key,
            offset=k + 1,
        )
    return RecordPrefix(version, tag >> 4, tag & 0xF)


def as_key_bytes(key: object) -> bytes:
    """`key` as bytes: bytes as is, bytearray and memoryview copied, anything else rejected."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        try:
            return bytes(key)
        except (TypeError, ValueError) as exc:  # e.g. a memoryview of a non-byte format
            raise KeyDecodeError(f"a key must be bytes: {exc}") from None
    raise KeyDecodeError(f"a key must be bytes, got {type(key).__name__}")


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with `prefix`.

    None when there is none (empty or all 0xFF): the range is unbounded above.
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))
