"""Key errors name the record, the field and the offset within the whole key, with the same
facts as attributes, for every field codec (desc() included) and any truncation or damage."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv import RecordType, fields
from opendata_kv.errors import KeyDecodeError, KeyEncodeError, show_text
from opendata_kv.ids.muid import Muid

EVENT = RecordType(
    "event",
    5,
    [
        ("stream", fields.string),
        ("at", fields.desc(fields.tid)),
        ("seq", fields.desc(fields.u64)),
        ("tag", fields.desc(fields.string)),
        ("id", fields.muid),
        ("score", fields.desc(fields.f64)),
    ],
)
VALUES = ("clicks", "3kabc2defgh22", 7, "blue", Muid(1, 2, 3), 0.5)
KEY = EVENT.encode(*VALUES)


def field_starts() -> list[tuple[str, int]]:
    """(field name, offset where it starts in KEY)."""
    starts, pos = [], len(EVENT.head)
    for (name, field), value in zip(EVENT.fields, VALUES, strict=True):
        starts.append((name, pos))
        pos += len(field.encode(value))
    return starts


def test_a_truncated_desc_tid_names_the_record_field_and_key_offset() -> None:
    at = dict(field_starts())["at"]
    with pytest.raises(KeyDecodeError) as info:
        EVENT.decode(KEY[:at])
    message = str(info.value)
    assert f"event key 0x{KEY[:at].hex()}: field 'at' at offset {at}: desc(tid): " in message
    assert f"needs 8 bytes at offset {at}, only 0 left in 0x{KEY[:at].hex()}" in message
    assert "b''" not in message
    assert (info.value.record, info.value.field, info.value.offset) == ("event", "at", at)


@given(cut=st.integers(len(EVENT.head), len(KEY) - 1))
def test_any_truncation_names_the_field_it_falls_in(cut: int) -> None:
    with pytest.raises(KeyDecodeError) as info:
        EVENT.decode(KEY[:cut])
    error = info.value
    starts = field_starts()
    expected = [name for name, start in starts if start <= cut][-1]
    assert error.record == "event"
    assert error.field == expected
    assert error.offset is not None and error.offset <= cut
    assert f"field {expected!r} at offset {error.offset}" in str(error)


@given(data=st.binary(max_size=40))
def test_garbage_after_the_prefix_names_record_field_and_offset(data: bytes) -> None:
    try:
        EVENT.decode(EVENT.head + data)
    except KeyDecodeError as error:
        assert error.record == "event"
        assert error.field in EVENT.field_names
        assert error.offset is not None and len(EVENT.head) <= error.offset <= len(data) + 2
        assert f"at offset {error.offset}" in str(error)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        (("clicks", 5, 7, "blue", Muid(1, 2, 3), 0.5), "at"),
        (("clicks", "3kabc2defgh22", -1, "blue", Muid(1, 2, 3), 0.5), "seq"),
        (("clicks", "3kabc2defgh22", 7, b"blue", Muid(1, 2, 3), 0.5), "tag"),
    ],
)
def test_encode_errors_name_record_field_and_offset(values: tuple[Any, ...], field: str) -> None:
    with pytest.raises(KeyEncodeError) as info:
        EVENT.encode(*values)
    offset = dict(field_starts())[field]
    assert (info.value.record, info.value.field, info.value.offset) == ("event", field, offset)
    assert str(info.value).startswith(f"event: field {field!r} at offset {offset}: ")


def test_show_text_cuts_long_input_and_keeps_its_length() -> None:
    assert show_text("abc") == "'abc'"
    assert show_text("abc", quote=False) == "abc"
    long = "z" * 200
    assert show_text(long) == f"{'z' * 48!r}... (200 characters)"
    assert show_text(long, 10, quote=False) == "zzzzzzzzzz... (200 characters)"
