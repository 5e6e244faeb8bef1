"""OpenData's current key layouts (RFC 0009): the 26 shared vectors through the public API and
the `key inspect` JSON contract, strict rejection with offsets, codec edge cases, and the
order of a type-selected field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process, run_process
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, SchemaError
from opendata_kv.keys import RecordType, Schema, fields
from opendata_kv.layouts import opendata

ROWS = [
    json.loads(line)
    for line in (Path(__file__).parent / "vectors/opendata/layouts.jsonl").read_text().splitlines()
]
IDS = [f"{r['subsystem']}-{r['record']}" for r in ROWS]


def expected_fields(row: dict[str, Any]) -> dict[str, Any]:
    """Every field of a vector row that is not a constant, as the CLI must print it."""
    return {
        name: value
        for name, encoding, value in row["fields"]
        if not encoding.startswith("u8 const")
    }


def python_value(encoding: str, value: Any) -> Any:
    return bytes.fromhex(value) if "(hex)" in encoding else value


def test_all_26_rows_are_here() -> None:
    assert len(ROWS) == 26


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_encodes_and_decodes_with_and_without_schema(row: dict[str, Any]) -> None:
    key = bytes.fromhex(row["key_hex"])
    schema = opendata.SCHEMAS[row["subsystem"]]
    record_type = schema.get(row["record"])
    values = {
        name: python_value(enc, v)
        for name, enc, v in row["fields"]
        if not enc.startswith("u8 const")
    }
    assert record_type.encode(**values) == key
    for decoded in (record_type.decode(key), schema.decode(key), opendata.decode_key(key)):
        assert decoded.record_type is record_type
        assert decoded.asdict() == values
        assert decoded.encode() == key


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_key_inspect_json_contract(row: dict[str, Any]) -> None:
    result = run_in_process("key", "inspect", row["key_hex"], "--json")
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["layout"] == "opendata"
    assert obj["subsystem"] == row["subsystem"]
    assert obj["record"] == row["record"]
    assert obj["fields"] == expected_fields(row)


def test_key_inspect_contract_end_to_end() -> None:
    result = run_process("key", "inspect", "03010000000020", "--json")
    assert result.returncode == 0
    obj = json.loads(result.stdout)
    assert (obj["layout"], obj["subsystem"], obj["record"], obj["fields"]) == (
        "opendata",
        "log",
        "SeqBlock",
        {"segment_id": 0},
    )


BAD = {
    # false length prefix: FieldStats says 5 bytes, 4 follow
    "020201f00005626f6479": 4,
    # wrong type byte (MetadataIndex value type 9)
    "0200017063617465676f7279000973686f657300": 13,
    # trailing junk after a log SeqBlock
    "03010000000020ff": 7,
    # timeseries record type byte 0x06 does not exist
    "0102000030390106": 7,
    # Deletions with a suffix that is neither ff nor 00
    "020201c0fe": 4,
    # log entry cut inside its varint
    "030100000001106b00f0": 9,
}


@pytest.mark.parametrize(("hex_key", "offset"), BAD.items())
def test_malformed_keys_name_the_offset(hex_key: str, offset: int) -> None:
    with pytest.raises(KeyDecodeError) as info:
        opendata.decode_key(bytes.fromhex(hex_key))
    assert info.value.offset == offset
    assert f"offset {offset}" in str(info.value)
    result = run_in_process("key", "inspect", hex_key, "--json")
    assert result.returncode == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and f"offset {offset}" in result.stderr


def test_seed_keys_still_read_as_seed() -> None:
    result = run_in_process("key", "inspect", "0110646964", "--json")
    obj = json.loads(result.stdout)
    assert "layout" not in obj  # the seed object is DESIGN's, unchanged
    assert (obj["version"], obj["record_type"], obj["rest_hex"]) == (1, 1, "646964")
    forced = run_in_process("key", "inspect", "03010000000020", "--layout", "seed")
    assert forced.returncode == 1 and "reserved record type" in forced.stderr
    raw = run_in_process("key", "inspect", "03010000000020", "--layout", "none", "--json")
    assert json.loads(raw.stdout)["layout"] == "none"


@given(st.binary(min_size=2, max_size=8))
def test_auto_detection_never_claims_a_valid_seed_key(key: bytes) -> None:
    if key[0] != 0 and key[1] >> 4:  # a valid seed prefix
        assert not opendata.is_opendata_key(key)


# --- codec edge cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x01", b"\xff", b"\x00\x01\xff" * 3])
def test_lp_bytes_edges(raw: bytes) -> None:
    encoded = fields.lp_bytes.encode(raw)
    assert encoded == len(raw).to_bytes(2, "big") + raw
    assert fields.lp_bytes.decode_all(encoded) == raw
    assert fields.desc(fields.lp_bytes).decode_all(fields.desc(fields.lp_bytes).encode(raw)) == raw


def test_lp_limits() -> None:
    assert fields.lp_string.decode_all(fields.lp_string.encode("x" * 0xFFFF)) == "x" * 0xFFFF
    with pytest.raises(KeyEncodeError):
        fields.lp_string.encode("x" * 0x10000)
    with pytest.raises(KeyDecodeError, match="offset 0"):
        fields.lp_string.decode_all(b"\x00")
    with pytest.raises(KeyDecodeError, match="offset 2"):
        fields.lp_string.decode_all(b"\x00\x01\xff")  # not UTF-8


def test_max_integers_and_segment_256() -> None:
    entry = opendata.LOG.get("LogEntry")
    for segment in (0, 255, 256, 0xFFFFFFFF):
        key = entry.encode(segment, b"\x00\x01\xff", (1 << 64) - 1)
        assert opendata.decode_key(key).asdict() == {
            "segment_id": segment,
            "key": b"\x00\x01\xff",
            "relative_seq": (1 << 64) - 1,
        }
    assert entry.encode(256, b"", 0)[2:6] == b"\x00\x00\x01\x00"
    with pytest.raises(KeyEncodeError):
        entry.encode(1 << 32, b"", 0)
    ts = opendata.TIMESERIES.get("SeriesDictionary")
    top = ts.encode(0xFFFFFFFF, 0xFF, (1 << 128) - 1)
    assert ts.decode(top).series_fingerprint == (1 << 128) - 1
    mi = opendata.VECTOR.get("MetadataIndex")
    for kind, value in ((1, -(1 << 63)), (1, (1 << 63) - 1), (2, -0.0), (3, True), (0, "")):
        assert mi.decode(mi.encode("f", kind, value)).value == value


def test_layout_definitions_are_checked() -> None:
    with pytest.raises(SchemaError):
        RecordType("x", 1, [], subsystem=0)
    with pytest.raises(SchemaError):
        RecordType("x", 0, [], tag="byte")
    with pytest.raises(SchemaError):
        RecordType("x", 1, [("t", fields.trailing_bytes)], suffix=b"\x00")
    with pytest.raises(SchemaError):  # selector must be an earlier u8
        RecordType("x", 1, [("v", fields.typed("k", {0: fields.u8})), ("k", fields.u8)])
    a = RecordType("a", 1, [], subsystem=9, suffix=b"\x00")
    with pytest.raises(SchemaError):  # same head and tag, no suffix to tell them apart
        Schema(a, RecordType("b", 1, [], subsystem=9))


TYPED = RecordType(
    "typed",
    1,
    [
        ("kind", fields.u8),
        ("value", fields.typed("kind", {0: fields.string, 1: fields.i64, 3: fields.boolean})),
        ("tail", fields.u8),
    ],
    subsystem=2,
)
typed_values = st.one_of(
    st.tuples(st.just(0), st.text(max_size=6)),
    st.tuples(st.just(1), st.integers(-(1 << 63), (1 << 63) - 1)),
    st.tuples(st.just(3), st.booleans()),
)


@given(typed_values, typed_values, st.integers(0, 255), st.integers(0, 255))
def test_typed_field_order_and_round_trip(a: Any, b: Any, ta: int, tb: int) -> None:
    ka, kb = TYPED.encode(*a, ta), TYPED.encode(*b, tb)
    assert tuple(TYPED.decode(ka)) == (*a, ta)

    def order(v: Any, t: int) -> Any:
        return (v[0], v[1].encode() if isinstance(v[1], str) else v[1], t)

    assert (ka < kb) == (order(a, ta) < order(b, tb))
    assert (ka == kb) == (order(a, ta) == order(b, tb))


@given(st.binary(max_size=12))
def test_typed_layout_rejects_garbage_only_with_key_decode_error(raw: bytes) -> None:
    key = TYPED.head + raw
    try:
        decoded = TYPED.decode(key)
    except KeyDecodeError as exc:
        assert exc.offset is not None
    else:
        assert decoded.encode() == key  # whatever decodes is canonical
