"""Byte-level conformance with $OPENDATA_KV_VECTORS/opendata/encodings.json.

Every case in every section is checked, in both directions where the codec has two.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from opendata_kv.errors import KeyDecodeError, OpendataKvError, SchemaError
from opendata_kv.keys import RecordType, Schema, build_prefix, fields, parse_prefix
from opendata_kv.keys import prefix_successor as successor

SECTIONS = (
    "record_prefix",
    "record_prefix_invalid",
    "terminated_bytes",
    "terminated_bytes_invalid_decode",
    "var_u64",
    "var_u32",
    "sortable_i64",
    "sortable_f64",
    "prefix_successor",
)


@pytest.fixture(scope="module")
def enc(vectors: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((vectors / "opendata" / "encodings.json").read_text())
    return data


def cases(enc: dict[str, Any], section: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = enc[section]
    assert found, f"vector section {section} is empty"
    return found


def test_every_section_is_covered(enc: dict[str, Any]) -> None:
    """A new section in the vector file must get a test here, not be skipped silently."""
    present = {k for k in enc if not k.startswith("_")}
    assert present == set(SECTIONS), f"untested or missing sections: {present ^ set(SECTIONS)}"


# --- record prefix ---------------------------------------------------------------------------


def test_record_prefix(enc: dict[str, Any]) -> None:
    for case in cases(enc, "record_prefix"):
        v, t, r = case["version"], case["record_type"], case["reserved"]
        want = bytes.fromhex(case["prefix"])
        assert build_prefix(v, t, r) == want, case
        assert parse_prefix(want) == (v, t, r), case
        assert parse_prefix(want + b"\x00\xff") == (v, t, r), case
        assert build_prefix(v, t, r, keyspace=b"\x07") == b"\x07" + want, case
        assert parse_prefix(b"\x07" + want, b"\x07") == (v, t, r), case
        rt = RecordType("x", t, [("n", fields.u8)], version=v, reserved=r)
        assert rt.head == want, case
        assert rt.prefix() == want, case
        assert rt.encode(5) == want + b"\x05", case
        assert rt.prefix_parts == (v, t, r), case


def test_record_prefix_invalid(enc: dict[str, Any]) -> None:
    for case in cases(enc, "record_prefix_invalid"):
        v, t, r = case["version"], case["record_type"], case["reserved"]
        with pytest.raises(SchemaError):
            build_prefix(v, t, r)
        with pytest.raises(SchemaError):
            RecordType("x", t, [("n", fields.u8)], version=v, reserved=r)
        if 0 <= v <= 0xFF and 0 <= t <= 0xF and 0 <= r <= 0xF:
            # Representable in two bytes but reserved: decoding such a key must fail too.
            raw = bytes((v, t << 4 | r)) + b"\x05"
            with pytest.raises(KeyDecodeError):
                parse_prefix(raw)
            with pytest.raises(KeyDecodeError):
                parse_prefix(b"\x07" + raw, b"\x07")
            schema = Schema(RecordType("ok", 1, [("n", fields.u8)]))
            with pytest.raises(KeyDecodeError):
                schema.decode(raw)


def test_short_prefix_is_a_decode_error() -> None:
    for raw in (b"", b"\x01", b"\x07\x01"):
        with pytest.raises(KeyDecodeError):
            parse_prefix(raw, b"\x07" if raw.startswith(b"\x07") else b"")


# --- terminated bytes / strings ----------------------------------------------------------------


def test_terminated_bytes(enc: dict[str, Any]) -> None:
    for case in cases(enc, "terminated_bytes"):
        raw, want = bytes.fromhex(case["input"]), bytes.fromhex(case["encoded"])
        assert fields.bytes_.encode(raw) == want, case
        assert fields.bytes_.decode_all(want) == raw, case
        assert fields.bytes_.decode(want + b"tail", 0) == (raw, len(want)), case
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert fields.string.encode(text) == want, case
        assert fields.string.decode_all(want) == text, case


def test_terminated_bytes_inside_a_key(enc: dict[str, Any]) -> None:
    """The compiled plan inlines terminated fields; it must produce the same bytes."""
    rt = RecordType("t", 1, [("b", fields.bytes_), ("n", fields.u8)])
    for case in cases(enc, "terminated_bytes"):
        raw, want = bytes.fromhex(case["input"]), bytes.fromhex(case["encoded"])
        key = rt.encode(raw, 7)
        assert key == b"\x01\x10" + want + b"\x07", case
        assert rt.decode(key) == rt.Key((raw, 7)), case


def test_terminated_bytes_invalid_decode(enc: dict[str, Any]) -> None:
    rt = RecordType("t", 1, [("b", fields.bytes_)])
    for case in cases(enc, "terminated_bytes_invalid_decode"):
        bad = bytes.fromhex(case["encoded"])
        for codec in (fields.bytes_, fields.string):
            with pytest.raises(KeyDecodeError):
                codec.decode_all(bad)
        with pytest.raises(KeyDecodeError):
            rt.decode(b"\x01\x10" + bad)
        with pytest.raises(KeyDecodeError):
            Schema(rt).decode(b"\x01\x10" + bad)


# --- integers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["var_u64", "var_u32"])
def test_varints(enc: dict[str, Any], section: str) -> None:
    codec = getattr(fields, section)
    for case in cases(enc, section):
        value, want = case["value"], bytes.fromhex(case["encoded"])
        assert codec.encode(value) == want, case
        assert codec.decode_all(want) == value, case
        assert codec.decode(want + b"\xff", 0) == (value, len(want)), case
        assert fields.desc(codec).decode_all(fields.invert(want)) == value, case


def test_sortable_i64(enc: dict[str, Any]) -> None:
    found = cases(enc, "sortable_i64")
    for case in found:
        value, want = case["value"], bytes.fromhex(case["encoded"])
        assert fields.i64.encode(value) == want, case
        assert fields.i64.decode_all(want) == value, case
    ordered = sorted(found, key=lambda c: c["value"])
    assert [c["encoded"] for c in ordered] == sorted(c["encoded"] for c in found)


def _float(text: str) -> float:
    return float(text)  # float() takes "inf", "-inf", "-0.0", "1e+300"


def _bits(value: float) -> int:
    bits: int = struct.unpack(">Q", struct.pack(">d", value))[0]
    return bits


def test_sortable_f64(enc: dict[str, Any]) -> None:
    found = cases(enc, "sortable_f64")
    for case in found:
        value, want = _float(case["value"]), bytes.fromhex(case["encoded"])
        assert fields.f64.encode(value) == want, case
        back = fields.f64.decode_all(want)
        assert _bits(back) == _bits(value), case
        if value == 0.0:
            assert math.copysign(1.0, back) == math.copysign(1.0, value), case
    # Listed in ascending total order: the encodings must be ascending too.
    encoded = [c["encoded"] for c in found]
    assert encoded == sorted(encoded)


def test_prefix_successor(enc: dict[str, Any]) -> None:
    for case in cases(enc, "prefix_successor"):
        raw = bytes.fromhex(case["input"])
        want = None if case["successor"] is None else bytes.fromhex(case["successor"])
        assert successor(raw) == want, case
        if want is not None:
            assert want > raw and not want.startswith(raw)


def test_errors_are_library_errors() -> None:
    assert issubclass(KeyDecodeError, OpendataKvError)
    assert issubclass(SchemaError, OpendataKvError)
