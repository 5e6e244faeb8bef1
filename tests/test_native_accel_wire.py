"""The C accelerator's parsers (native/_accel/wire.c) against wire.py, the reference: on
well-formed buffers and on every kind of damage (truncations, flipped bytes, huge or negative
lengths and counts, bad option flags, trailing junk) both return the same value or raise the
same error. OPENDATA_KV_ACCEL_EXAMPLES raises the example count (CI: the default)."""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendata_kv.native import accel, calls, wire
from opendata_kv.native.binding import generated

B = generated()
EXAMPLES = int(os.environ.get("OPENDATA_KV_ACCEL_EXAMPLES", "150"))
calls.status()  # binds the extension (its errors are the binding's)
module = accel._import()[0] if accel.reason() == "C accelerator" else None
pytestmark = pytest.mark.skipif(module is None, reason="the C accelerator is off or not built")


def _rust_buffer(data: bytes) -> Any:
    """A RustBuffer holding exactly `data` (wire.read_columns takes and frees one)."""
    buffer = B._UniffiRustBuffer.alloc(len(data))
    if data:
        ctypes.memmove(buffer.data, data, len(data))
    buffer.len = len(data)
    return buffer


def _outcome(parse: Callable[[bytes], Any], data: bytes) -> tuple[str, Any]:
    try:
        return "returned", parse(data)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _frame_bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def _frame_row(key: bytes, value: bytes, expire: int | None) -> bytes:
    tail = b"\x00" if expire is None else b"\x01" + struct.pack(">q", expire)
    return _frame_bytes(key) + _frame_bytes(value) + struct.pack(">Qq", 7, -3) + tail


ROW = st.tuples(
    st.binary(max_size=24), st.binary(max_size=24), st.none() | st.integers(-(2**63), 2**63 - 1)
)


@st.composite
def damaged(draw: st.DrawFn, good: bytes) -> bytes:
    """`good`, or a damaged copy of it."""
    how = draw(st.sampled_from(["good", "cut", "flip", "huge", "negative", "junk", "flag"]))
    if how == "good" or not good:
        return good
    at = draw(st.integers(0, len(good) - 1))
    if how == "cut":
        return good[:at]
    if how == "flip":
        return good[:at] + bytes([good[at] ^ draw(st.integers(1, 255))]) + good[at + 1 :]
    if how in ("huge", "negative"):
        field = b"\x7f\xff\xff\xff" if how == "huge" else b"\x80\x00\x00\x01"
        return good[:at] + field + good[at + 4 :]
    if how == "junk":
        return good + draw(st.binary(min_size=1, max_size=9))
    return good[:at] + bytes([draw(st.integers(2, 255))]) + good[at + 1 :]


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.data(), st.lists(ROW, max_size=6))
def test_columns_parse_as_wire_reads_them(data: st.DataObject, rows: list[Any]) -> None:
    good = struct.pack(">i", len(rows)) + b"".join(_frame_row(*row) for row in rows)
    buffer = data.draw(damaged(good))
    assert module is not None
    assert _outcome(module._parse_columns, buffer) == _outcome(
        lambda b: wire.read_columns(_rust_buffer(b)), buffer
    )


@FUZZ
@given(st.data(), st.none() | ROW)
def test_point_rows_parse_as_wire_reads_them(data: st.DataObject, row: Any) -> None:
    good = b"\x00" if row is None else b"\x01" + _frame_row(*row)
    buffer = data.draw(damaged(good))
    assert module is not None
    assert _outcome(module._parse_point_row, buffer) == _outcome(wire.parse_point_row, buffer)


@FUZZ
@given(st.data(), st.none() | st.binary(max_size=40))
def test_optional_bytes_parse_as_wire_reads_them(data: st.DataObject, value: Any) -> None:
    good = b"\x00" if value is None else b"\x01" + _frame_bytes(value)
    buffer = data.draw(damaged(good))
    assert module is not None
    assert _outcome(module._parse_optional_bytes, buffer) == _outcome(
        wire.parse_optional_bytes, buffer
    )


@pytest.mark.parametrize(
    "buffer",
    [b"", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x01" + b"\x00" * 24, b"\xff\xff\xff\xff"],
)
def test_edge_buffers(buffer: bytes) -> None:
    assert module is not None
    for parse, reference in (
        (module._parse_columns, lambda b: wire.read_columns(_rust_buffer(b))),
        (module._parse_point_row, wire.parse_point_row),
        (module._parse_optional_bytes, wire.parse_optional_bytes),
    ):
        assert _outcome(parse, buffer) == _outcome(reference, buffer)
