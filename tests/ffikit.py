"""Raw uniffi buffers for the ffi_patch tests: rows lowered to bytes, bytes read back."""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from opendata_kv.store import ffi_patch

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


def fresh_patch_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For an autouse fixture: the test starts with the original binding and a fresh patch
    state (no env switch, no remembered self-check failure or warning) and ends uninstalled,
    with whatever it swapped into the binding put back."""
    monkeypatch.delenv(ffi_patch.ENV_DISABLE, raising=False)
    ffi_patch.uninstall()
    monkeypatch.setattr(ffi_patch, "_self_check_failure", None)
    monkeypatch.setattr(ffi_patch, "_warned", False)
    yield
    ffi_patch.uninstall()
    monkeypatch.undo()
