"""Raw uniffi buffers for the ffi_patch tests: rows lowered to bytes, bytes read back."""

from __future__ import annotations

import ctypes
import importlib
from typing import Any

# slatedb is a runtime dependency: its binding missing is a failure, not a reason to skip
binding: Any = importlib.import_module("slatedb.uniffi._slatedb_uniffi.slatedb")


def lower(converter: Any, rows: list[Any]) -> bytes:
    """The bytes `converter` lowers `rows` to (the buffer is freed)."""
    buffer = converter.lower(rows)
    raw: bytes = buffer.data[0 : buffer.len]
    buffer.free()
    return raw


def read(converter: Any, raw: bytes) -> Any:
    """Read `raw` back with `converter`'s currently installed reader."""
    buffer = binding._UniffiRustBuffer.alloc(len(raw))
    ctypes.memmove(ctypes.addressof(buffer.data.contents), raw, len(raw))
    buffer.len = len(raw)
    try:
        with buffer.read_with_stream() as stream:
            return converter.read(stream)
    finally:
        buffer.free()
