"""Muids: packing, sentinels, string forms, order, immutability and the generator."""

from __future__ import annotations

import copy
import itertools
import pickle
import threading
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import MuidError
from opendata_kv.ids import muid as muid_mod
from opendata_kv.ids.muid import Muid, MuidGenerator

timestamps = st.integers(min_value=-1, max_value=(1 << 52) - 2)
medallions = st.integers(min_value=-1, max_value=(1 << 44) - 2)
offsets = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
muids = st.builds(Muid, timestamps, medallions, offsets)


def packed(ts: int, med: int, off: int) -> bytes:
    """The spec's packing formula, written independently of the module."""
    n = (ts % 2**52) * 2**76 + (med % 2**44) * 2**32 + (off % 2**32)
    return n.to_bytes(16, "big")


# --- construction and packing ------------------------------------------------------------------


def test_packing_matches_formula() -> None:
    m = Muid(1700000000000000, 0x1ABCDEF0123, 5)
    assert bytes(m) == packed(1700000000000000, 0x1ABCDEF0123, 5)
    assert bytes(m).hex() == "60a24181e40001abcdef012300000005"
    assert int(m) == int.from_bytes(bytes(m), "big")
    assert m.fields() == (1700000000000000, 0x1ABCDEF0123, 5)


def test_sentinels() -> None:
    m = Muid(-1, -1, -1)
    assert bytes(m) == b"\xff" * 16
    assert (m.timestamp, m.medallion, m.offset) == (-1, -1, -1)
    assert str(m) == "FFFFFFFFFFFFF-FFFFFFFFFFF-FFFFFFFF"
    # All-ones bits are -1 however they are written.
    assert Muid((1 << 52) - 1, (1 << 44) - 1, 0) == Muid(-1, -1, 0)
    assert Muid((1 << 52) - 1, 0, 0).timestamp == -1


@pytest.mark.parametrize(
    ("ts", "med", "off", "field"),
    [
        (-2, 0, 0, "timestamp"),
        (1 << 52, 0, 0, "timestamp"),
        (0, -2, 0, "medallion"),
        (0, 1 << 44, 0, "medallion"),
        (0, 0, 1 << 31, "offset"),
        (0, 0, -(1 << 31) - 1, "offset"),
        (True, 0, 0, "timestamp"),
        (0, 1.5, 0, "medallion"),
        (0, 0, "1", "offset"),
    ],
)
def test_out_of_range_components(ts: object, med: object, off: object, field: str) -> None:
    with pytest.raises(MuidError, match=field):
        Muid(ts, med, off)  # type: ignore[arg-type]


def test_offset_extremes_round_trip() -> None:
    for off in (-(1 << 31), -1, 0, 1, (1 << 31) - 1):
        assert Muid.from_bytes(bytes(Muid(5, 6, off))).offset == off


# --- strings -----------------------------------------------------------------------------------


def test_canonical_string_and_forms() -> None:
    m = Muid(0x5D5EAC793E61F, 0x1F8CB77AE1E, 11)
    assert str(m) == "5D5EAC793E61F-1F8CB77AE1E-0000000B"
    assert Muid.parse("5d5eac793e61f-1f8cb77ae1e-0000000b") == m
    assert Muid.parse("5D5EAC793E61F1F8CB77AE1E0000000B") == m
    assert m.hex == "5d5eac793e61f1f8cb77ae1e0000000b"
    assert Muid.parse("5D5EAC793E61F-1F8CB77AE1E") == Muid(0x5D5EAC793E61F, 0x1F8CB77AE1E, 0)
    assert Muid.parse("5D5EAC793E61F") == Muid(0x5D5EAC793E61F, 0, 0)
    assert f"{m:>40}" == " " * 6 + str(m)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "does not have the form"),
        ("5D5EAC793E61F-1F8CB77AE1E-0000000", "does not have the form"),
        ("5D5EAC793E61F-1F8CB77AE1E-000000000", "does not have the form"),
        ("5D5EAC793E61F--1F8CB77AE1E", "does not have the form"),
        ("5D5EAC793E61F-1F8CB77AE1G-0000000B", "'G' at position 24"),
        ("5D5EAC793E61F-1F8CB77AE1E-0000000B\n", "position 34"),
        (" 5D5EAC793E61", "' ' at position 0"),
        ("5D5EAC793E61 ", "' ' at position 12"),
        ("0x5EAC793E61F", "'x' at position 1"),
        ("5D5EAC793E61F_1F8CB77AE1E", "'_' at position 13"),
        ("\u0665" * 13, "position 0"),
    ],
)
def test_bad_strings(text: str, reason: str) -> None:
    with pytest.raises(MuidError, match=reason):
        Muid.parse(text)


def test_parse_rejects_non_str() -> None:
    with pytest.raises(MuidError, match="must be a str"):
        Muid.parse(b"5D5EAC793E61F")  # type: ignore[arg-type]


# --- bytes and ints ----------------------------------------------------------------------------


def test_from_bytes_accepts_buffers() -> None:
    m = Muid(1, 2, 3)
    assert Muid.from_bytes(bytearray(bytes(m))) == m
    assert Muid.from_bytes(memoryview(bytes(m))) == m


@pytest.mark.parametrize("data", [b"", b"\x00" * 15, b"\x00" * 17])
def test_from_bytes_wrong_length(data: bytes) -> None:
    with pytest.raises(MuidError, match=f"got {len(data)}"):
        Muid.from_bytes(data)


def test_from_bytes_wrong_type() -> None:
    with pytest.raises(MuidError, match="bytes-like"):
        Muid.from_bytes("0" * 16)  # type: ignore[arg-type]


def test_from_int_range() -> None:
    assert Muid.from_int(0) == Muid(0, 0, 0)
    assert Muid.from_int((1 << 128) - 1) == Muid(-1, -1, -1)
    for bad in (-1, 1 << 128):
        with pytest.raises(MuidError, match="out of range"):
            Muid.from_int(bad)
    with pytest.raises(MuidError, match="must be an int"):
        Muid.from_int(True)


@given(timestamps, medallions, offsets)
def test_field_round_trips(ts: int, med: int, off: int) -> None:
    m = Muid(ts, med, off)
    assert bytes(m) == packed(ts, med, off)
    for again in (Muid.from_bytes(bytes(m)), Muid.from_int(int(m)), Muid.parse(str(m))):
        assert again == m
        assert hash(again) == hash(m)
        assert (again.timestamp, again.medallion, again.offset) == (ts, med, off)
    assert Muid.parse(str(m).lower()) == m
    assert Muid.parse(m.hex) == m


@given(st.binary(min_size=16, max_size=16))
def test_every_16_bytes_round_trip(data: bytes) -> None:
    m = Muid.from_bytes(data)
    assert bytes(m) == data
    assert bytes(Muid(m.timestamp, m.medallion, m.offset)) == data
    assert Muid.parse(str(m)) == m


@given(st.lists(muids, min_size=2, max_size=40))
def test_order_equals_byte_order(items: list[Muid]) -> None:
    assert [bytes(m) for m in sorted(items)] == sorted(bytes(m) for m in items)
    assert sorted(items, key=str) == sorted(items)
    assert sorted(items, key=int) == sorted(items)


@given(
    st.lists(
        st.tuples(
            st.integers(0, (1 << 52) - 2),
            st.integers(0, (1 << 44) - 2),
            st.integers(0, (1 << 31) - 1),
        ),
        min_size=2,
        max_size=30,
    )
)
def test_order_follows_fields_when_non_negative(fields: list[tuple[int, int, int]]) -> None:
    assert [m.fields() for m in sorted(Muid(*f) for f in fields)] == sorted(fields)


@given(st.binary(max_size=40))
def test_malformed_bytes_raise_only_muid_error(data: bytes) -> None:
    try:
        m = Muid.from_bytes(data)
    except MuidError:
        assert len(data) != 16
    else:
        assert len(data) == 16 and bytes(m) == data


@given(st.text(max_size=40))
def test_malformed_strings_raise_only_muid_error(text: str) -> None:
    try:
        m = Muid.parse(text)
    except MuidError:
        return
    assert len(text) in (13, 25, 32, 34)
    assert str(m).replace("-", "").startswith(text.replace("-", "").upper())


# --- value-object behaviour --------------------------------------------------------------------


def test_immutable_hashable_picklable() -> None:
    m = Muid(1, 2, 3)
    with pytest.raises(AttributeError):
        m.timestamp = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m._b = b"x"
    with pytest.raises(AttributeError):
        del m._b
    assert {m: "a"}[Muid(1, 2, 3)] == "a"
    assert len({m, Muid(1, 2, 3), Muid(1, 2, 4)}) == 2
    assert pickle.loads(pickle.dumps(m)) == m
    assert copy.copy(m) is m and copy.deepcopy(m) is m
    assert eval(repr(m), {"Muid": Muid}) == m


def test_comparisons_with_other_types() -> None:
    m = Muid(1, 2, 3)
    assert m != bytes(m)
    assert m != int(m)
    assert not (m == str(m))  # noqa: SIM201
    with pytest.raises(TypeError):
        _ = m < 5  # type: ignore[operator]
    assert Muid(1, 2, 3) <= Muid(1, 2, 3) < Muid(1, 2, 4)
    assert Muid(2, 0, 0) > Muid(1, 9, 9) >= Muid(1, 9, 9)
    assert Muid(1, 0, -1) > Muid(1, 0, 5)  # negative offsets sort after, as their bytes do


def test_to_datetime() -> None:
    moment = datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=timezone.utc)
    micros = 1709251199999999
    assert Muid(micros, 1, 0).to_datetime() == moment
    with pytest.raises(MuidError, match="sentinel"):
        Muid(-1, 1, 0).to_datetime()


# --- generator ---------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, us: int) -> None:
        self.us = us

    def __call__(self) -> int:
        return self.us * 1000


def test_generator_medallion() -> None:
    for _ in range(50):
        med = MuidGenerator().medallion
        assert muid_mod.MEDALLION_RANDOM_MIN <= med <= muid_mod.MEDALLION_RANDOM_MAX
    assert len({MuidGenerator().medallion for _ in range(20)}) > 1
    assert MuidGenerator(0x12345).medallion == 0x12345
    for bad in (0, -1, (1 << 44) - 1, 1 << 44):
        with pytest.raises(MuidError, match="medallion"):
            MuidGenerator(bad)


def test_transaction_offsets() -> None:
    gen = MuidGenerator(0x1ABCDEF0123, time_ns=FakeClock(1_000_000))
    tx = gen.transaction()
    assert tx.muid == Muid(1_000_000, 0x1ABCDEF0123, 0)
    changes = [tx.next() for _ in range(5)]
    assert [c.offset for c in changes] == [1, 2, 3, 4, 5]
    assert all(c.timestamp == tx.timestamp == 1_000_000 for c in changes)
    assert all(c.medallion == tx.medallion for c in changes)
    assert [tx.muid, *changes] == sorted([tx.muid, *changes])
    later = gen.transaction()
    assert later.muid > changes[-1]


def test_transaction_full() -> None:
    tx = muid_mod.Transaction(1, 1)
    tx._counter = iter([muid_mod.MAX_OFFSET, muid_mod.MAX_OFFSET + 1])  # type: ignore[assignment]
    assert tx.next().offset == muid_mod.MAX_OFFSET
    with pytest.raises(MuidError, match="full"):
        tx.next()


def test_timestamps_survive_clock_going_backwards() -> None:
    clock = FakeClock(5_000_000)
    gen = MuidGenerator(7, time_ns=clock)
    first = [gen.next_timestamp() for _ in range(3)]
    clock.us = 1_000_000
    second = [gen.next_timestamp() for _ in range(3)]
    assert first + second == list(range(5_000_000, 5_000_006))
    clock.us = 9_000_000
    assert gen.next_timestamp() == 9_000_000


def test_generator_resume_and_overflow() -> None:
    clock = FakeClock(10)
    gen = MuidGenerator(7, after=Muid(500, 7, 3), time_ns=clock)
    assert gen.next_timestamp() == 501
    assert MuidGenerator(7, after=900, time_ns=clock).next_timestamp() == 901
    top = MuidGenerator(7, after=muid_mod.MAX_TIMESTAMP - 1, time_ns=clock)
    assert top.next_timestamp() == muid_mod.MAX_TIMESTAMP
    with pytest.raises(MuidError, match="52 bits"):
        top.next_timestamp()


def test_generator_threads() -> None:
    gen = MuidGenerator()
    results: list[list[int]] = [[] for _ in range(4)]

    def work(out: list[int]) -> None:
        out.extend(gen.next_timestamp() for _ in range(20_000))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for out in results:
        assert all(a < b for a, b in itertools.pairwise(out))
    assert len({t for out in results for t in out}) == 80_000
