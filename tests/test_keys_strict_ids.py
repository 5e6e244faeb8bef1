"""Identifier values are not integers in disguise: a tid field takes exactly a TID string (as
strictly as u64 takes exactly an int), and a Muid is not accepted where Python wants an int."""

from __future__ import annotations

import operator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import KeyEncodeError
from opendata_kv.ids import tid as tid_ids
from opendata_kv.ids.muid import Muid
from opendata_kv.keys import RecordType, fields

TOP = (1 << 63) - 1
EVENT = RecordType("event", 3, [("author", fields.string), ("at", fields.tid), ("n", fields.u8)])
muids = st.integers(0, (1 << 128) - 1).map(Muid.from_int)
not_strings = st.one_of(
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=13),
    st.none(),
    muids,
    st.lists(st.integers(0, 9), max_size=3),
)


@given(st.integers(0, TOP))
def test_a_tid_field_takes_the_tid_string_of_any_tid(n: int) -> None:
    text = tid_ids.encode(n)
    key = EVENT.key("a", text, 1)
    assert key.at == text
    assert fields.tid.encode(text) == n.to_bytes(8, "big")


@given(not_strings)
def test_a_tid_field_refuses_anything_but_a_string_saying_what_it_got(value: Any) -> None:
    with pytest.raises(KeyEncodeError) as direct:
        fields.tid.encode(value)
    assert f"tid needs a TID string of 13 characters, got {type(value).__name__}" in str(
        direct.value
    )
    # the compiled fast path of a RecordType falls back to the same error, naming the field
    with pytest.raises(
        KeyEncodeError, match=r"^event: field 'at' at offset 4: tid needs a TID string"
    ):
        EVENT.encode("a", value, 1)


@given(st.integers(0, TOP))
def test_an_int_in_a_tid_field_points_at_tid_encode(n: int) -> None:
    with pytest.raises(KeyEncodeError, match=r"give ids\.tid\.encode\(n\)"):
        EVENT.encode("a", n, 1)


def test_u64_is_just_as_strict_the_other_way_round() -> None:
    with pytest.raises(KeyEncodeError, match="u64 needs an int, got str"):
        fields.u64.encode(tid_ids.encode(5))


@given(muids)
def test_a_muid_is_not_an_index(m: Muid) -> None:
    with pytest.raises(TypeError):
        operator.index(m)
    with pytest.raises(TypeError):
        range(m)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        [0][m]  # type: ignore[call-overload]
    assert int(m) == int.from_bytes(bytes(m), "big")  # the explicit conversion stays


@pytest.mark.parametrize(
    "codec",
    [
        fields.u8,
        fields.u16,
        fields.u32,
        fields.u64,
        fields.u128,
        fields.i32,
        fields.i64,
        fields.var_u32,
        fields.var_u64,
        fields.url_key,
        fields.tid,
    ],
    ids=lambda c: repr(c),
)
@given(m=muids)
def test_integer_fields_refuse_a_muid(codec: fields.Field, m: Muid) -> None:
    with pytest.raises(KeyEncodeError, match="got Muid"):
        codec.encode(m)


def test_the_errors_carry_what_they_name() -> None:
    from opendata_kv.errors import SchemaError

    with pytest.raises(KeyEncodeError) as bad_tid:
        fields.tid.encode(7)
    assert bad_tid.value.value == 7
    with pytest.raises(SchemaError) as reserved:
        RecordType("profile", 2, [("record_type", fields.u8)])
    assert (reserved.value.record, reserved.value.field) == ("profile", "record_type")
