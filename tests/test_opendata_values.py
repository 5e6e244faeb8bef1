"""OpenData value decoding (issue 28): only frames built by this process's merge operator are
read as merge operands, the operator never raises, and the decoders stop at DecodeLimits' caps
before building what a hostile value asks for."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.errors import ValueDecodeError, ValueLimitError
from opendata_kv.layouts import merge_frame, opendata
from opendata_kv.layouts.opendata import EXTRACTORS
from opendata_kv.layouts.opendata_values import decode_value
from opendata_kv.native.opendata_compat import OpendataExtractor, ShowOperands
from opendata_kv.values.limits import DecodeLimits

MARKER = b"\xffopendata-kv:operands\x00"  # the marker without this process's token
payloads = st.binary(max_size=64)
stored = st.one_of(payloads, payloads.map(lambda b: MARKER + b))


@settings(max_examples=200)
@given(stored)
def test_stored_bytes_are_never_a_frame(data: bytes) -> None:
    assert not merge_frame.is_frame(data) and merge_frame.failure(data) is None
    assert decode_value("log", "LogEntry", data) == {"bytes": data}
    assert decode_value("keyvalue", "KeyValue", data) == {"bytes": data}


@settings(max_examples=200)
@given(st.one_of(st.none(), stored), st.lists(stored, min_size=1, max_size=5))
def test_merging_keeps_base_and_operands_apart(base: bytes | None, operands: list[bytes]) -> None:
    """Folded as slatedb folds them (each result is the next existing value), the parts come
    back in order, even those that start with the marker."""
    value = base
    for operand in operands:
        value = ShowOperands().merge(b"k", value, operand)
    assert value is not None and merge_frame.is_frame(value)
    assert merge_frame.split(value) == (base, operands)


@settings(max_examples=100)
@given(st.one_of(st.none(), st.binary(max_size=40)), st.binary(max_size=40))
def test_merge_never_raises(existing: bytes | None, operand: bytes) -> None:
    """Any bytes, even a forged frame head with this process's token: bytes back, no raise."""
    for head in (b"", merge_frame.MERGE_FRAME + merge_frame.TOKEN):
        prior = None if existing is None else head + existing
        assert isinstance(ShowOperands().merge(b"k", prior, head + operand), bytes)


def test_a_failed_merge_stays_failed_and_is_a_decode_error() -> None:
    failed = ShowOperands().merge(b"k", None, None)  # type: ignore[arg-type]  # slatedb never
    assert merge_frame.failure(failed) is not None
    assert ShowOperands().merge(b"k", failed, b"\x01\x00\x00\x00") == failed
    with pytest.raises(ValueDecodeError, match="CentroidStats the merge failed for this key"):
        decode_value("vector", "CentroidStats", failed)


TIGHT = DecodeLimits(max_value_bytes=4096, max_array_len=100, max_objects=200)


def _s(text: str) -> bytes:
    return struct.pack("<H", len(text)) + text.encode()


#: (record, value, cap): one value past one cap of TIGHT per expanding decoder
OVER = [
    ("TermPostings", b"\x00\x00\x00\x00\x00" * 60, "max_objects"),  # 60 empty blocks
    ("PostingList", struct.pack("<I", 101) + b"\x00" * 12 * 101, "max_array_len"),
    ("VectorData", _s("d") + _s("v") + b"\xff" + b"\x00" * 4 * 101, "max_array_len"),
    ("CentroidInfo", b"\x01" + struct.pack("<H", 101) + b"\x00" * (404 + 8), "max_array_len"),
    ("VectorFieldStats", struct.pack("<H", 101) + (_s("f") + b"\x00" * 4) * 101, "max_array_len"),
    (
        "CollectionMeta",
        b"\x00" * 9 + struct.pack("<H", 60) + (_s("f") + b"\x00\x00") * 60,
        "max_objects",
    ),
    ("VectorData", _s("d") + (_s("a") + b"\x01" + b"\x00" * 8) * 120, "max_objects"),
    ("VectorIndexData", b"\x00" * 4097, "max_value_bytes"),  # shown as hex: 2x
]


@pytest.mark.parametrize(("record", "value", "cap"), OVER)
def test_each_expanding_decoder_is_capped(record: str, value: bytes, cap: str) -> None:
    with pytest.raises(ValueLimitError) as refused:
        decode_value("vector", record, value, TIGHT)
    assert refused.value.cap == cap and refused.value.limit == getattr(TIGHT, cap)
    assert refused.value.record == record and refused.value.value == value
    assert str(refused.value).startswith(f"{record} value of {len(value)} bytes refused")
    decode_value("vector", record, value)  # the same value is fine under the defaults


def test_operands_share_one_budget() -> None:
    """Many small operands cannot add up past max_objects either."""
    block = b"\x00" * 5 * 30
    framed = merge_frame.frame(None, [block] * 3)
    with pytest.raises(ValueLimitError, match="max_objects"):
        decode_value("vector", "TermPostings", framed, TIGHT)
    assert len(decode_value("vector", "TermPostings", framed)["operands"]) == 3


def test_a_huge_posting_count_fails_before_building() -> None:
    with pytest.raises(ValueDecodeError, match="4294967295 postings need"):
        decode_value("vector", "PostingList", b"\xff\xff\xff\xff")


def test_the_secret_never_shows() -> None:
    framed = merge_frame.frame(b"base", [b"op"])
    assert merge_frame.TOKEN not in merge_frame.shown(framed)
    assert merge_frame.shown(framed) == MARKER + b"\x01\x00\x00\x00\x04base\x00\x00\x00\x02op"
    assert merge_frame.shown(MARKER + b"x") == MARKER + b"x"  # stored bytes: as they are
    with pytest.raises(ValueDecodeError) as malformed:
        merge_frame.split(merge_frame.MERGE_FRAME + merge_frame.TOKEN + b"\x07")
    assert "malformed merge frame" in str(malformed.value)
    assert merge_frame.TOKEN.hex() not in str(malformed.value)


def test_the_extractor_never_raises() -> None:
    """slatedb calls prefix_len from Rust: anything odd is "no OpenData prefix", not a raise."""
    extractor = OpendataExtractor(EXTRACTORS["opendata-vector/v1"])
    assert extractor.prefix_len(object()) is None
    assert extractor.prefix_len(type("T", (), {"key": 7})()) is None  # bytes(7): 7 zeros
    vector_key = opendata.VECTOR.get("CentroidStats").encode(7)
    assert extractor.prefix_len(type("T", (), {"key": vector_key})()) == 3
    assert extractor.prefix_len(type("T", (), {"key": "not bytes"})()) is None
