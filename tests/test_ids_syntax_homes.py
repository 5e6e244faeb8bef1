"""The small syntax and time homes in ids/ and store/: DID syntax (ids/did.py), microseconds
since the epoch (ids/micros.py) and TTL durations (store/ttl.py), each checked on its own and
through the modules that use it."""

from __future__ import annotations

import datetime
import math
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.collections.records import check_did
from opendata_kv.errors import IdError, InvalidInputError
from opendata_kv.ids import did, micros, tid
from opendata_kv.ids.muid import MAX_TIMESTAMP, Muid
from opendata_kv.store.ttl import ttl_seconds

_ID_CHARS = string.ascii_letters + string.digits + "._:%-"
_LAST_CHARS = string.ascii_letters + string.digits + "._-"

dids = st.builds(
    lambda method, body, last: f"did:{method}:{body}{last}",
    st.text(string.ascii_lowercase, min_size=1, max_size=8),
    st.text(_ID_CHARS, max_size=40),
    st.sampled_from(_LAST_CHARS),
)


@given(dids)
def test_well_formed_dids_are_valid_and_pass_the_collection_check(value: str) -> None:
    assert did.explain(value) is None and did.is_valid(value)
    assert check_did(value) == value


@given(dids, st.integers(0, 60), st.characters(blacklist_characters=_ID_CHARS))
def test_a_character_outside_the_did_alphabet_makes_it_invalid(
    value: str, where: int, bad: str
) -> None:
    head = value.index(":", 4) + 1  # "did:<method>:"
    where = head + where % (len(value) - head + 1)
    broken = value[:where] + bad + value[where:]
    assert not did.is_valid(broken)
    with pytest.raises(IdError, match="is not a DID"):
        check_did(broken)


@pytest.mark.parametrize(
    "value",
    [
        "alice",
        "did:PLC:x",
        "did:plc:",
        "did:plc:x:",
        "did:plc:x%",
        "did::x",
        "did:plc:x\n",
        "did:plc:" + "x" * (did.MAX_LENGTH - 7),
    ],
)
def test_malformed_dids_are_refused_naming_the_rule(value: str) -> None:
    reason = did.explain(value)
    assert reason is not None and "did:<method>:<identifier>" in reason
    with pytest.raises(IdError, match=r"^repo "):
        check_did(value)


def test_the_longest_did_is_valid() -> None:
    assert did.is_valid("did:plc:" + "x" * (did.MAX_LENGTH - 8))


@pytest.mark.parametrize("value", [None, 7, b"did:plc:x"])
def test_a_did_must_be_a_string(value: object) -> None:
    assert did.explain(value) == f"must be a DID string, got {type(value).__name__}"
    with pytest.raises(IdError):
        check_did(value)


@given(st.integers(-(10**15), 10**17))
def test_micros_round_trip_through_datetimes(us: int) -> None:
    dt = micros.to_datetime(us)
    assert dt.tzinfo is datetime.timezone.utc
    assert micros.from_datetime(dt) == us
    assert not micros.is_naive(dt) and micros.is_naive(dt.replace(tzinfo=None))


@given(st.integers(0, MAX_TIMESTAMP), st.integers(0, 1023))
def test_tid_and_muid_times_share_the_epoch(us: int, clock: int) -> None:
    expected = micros.to_datetime(us)
    assert Muid(us, 1, 0).to_datetime() == expected
    if us < 1 << tid.TIMESTAMP_BITS:
        assert tid.to_datetime(tid.from_parts(us, clock)) == expected
        assert tid.from_datetime(expected, clock) == tid.from_parts(us, clock)


@given(st.floats(min_value=1e-6, max_value=1e12) | st.integers(1, 10**12))
def test_ttl_takes_positive_seconds_and_the_same_timedelta(seconds: float) -> None:
    assert ttl_seconds(seconds) == float(seconds)
    delta = datetime.timedelta(seconds=seconds)
    assert ttl_seconds(delta) == delta.total_seconds()


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        0.0,
        -0.5,
        math.nan,
        math.inf,
        -math.inf,
        True,
        "5",
        None,
        datetime.timedelta(0),
        datetime.timedelta(seconds=-3),
    ],
)
def test_ttl_refuses_what_is_not_a_positive_finite_duration(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"^evict_after must be") as info:
        ttl_seconds(value, "evict_after")  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
