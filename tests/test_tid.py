"""TIDs: atproto conformance vectors, codec properties, helpers and the generator."""

from __future__ import annotations

import itertools
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import OpendataKvError, TidError
from opendata_kv.ids import tid

ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"


def reference_encode(n: int) -> str:
    """Independent (slow) base32-sortable encoder: 13 digits, most significant first."""
    digits = []
    for _ in range(13):
        n, digit = divmod(n, 32)
        digits.append(ALPHABET[digit])
    assert n == 0
    return "".join(reversed(digits))


def vector_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    return [line for line in lines if line and not line.startswith("#")]


def vector_files(vectors: Path, kind: str) -> list[Path]:
    root = vectors / "atproto"
    files = [root / f"tid_syntax_{kind}.txt", root / "atproto-monorepo" / f"tid_syntax_{kind}.txt"]
    for file in files:
        assert file.is_file(), f"missing vector file {file}"
    return files


# --- conformance vectors -----------------------------------------------------------------------


def test_valid_vectors(vectors: Path) -> None:
    seen = 0
    for file in vector_files(vectors, "valid"):
        for line in vector_lines(file):
            assert tid.is_valid(line), f"{file.name}: {line!r} should be valid"
            assert tid.validate(line) == line
            n = tid.decode(line, allow_top_bit=True)
            assert tid.encode(n, allow_top_bit=True) == line
            seen += 1
    assert seen >= 10


def test_invalid_vectors(vectors: Path) -> None:
    seen = 0
    for file in vector_files(vectors, "invalid"):
        for line in vector_lines(file):
            assert not tid.is_valid(line), f"{file.name}: {line!r} should be invalid"
            with pytest.raises(TidError):
                tid.validate(line)
            with pytest.raises(TidError):
                tid.decode(line, allow_top_bit=True)
            seen += 1
    assert seen >= 15


# --- syntax details ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["3jzfcijpj2z2a\n", "\n3jzfcijpj2z2a", " 3jzfcijpj2z2a", "3jzfcijpj2z2a ", "", "3jzfcijpj2z2"],
)
def test_whitespace_and_length_are_invalid(text: str) -> None:
    assert not tid.is_valid(text)
    with pytest.raises(TidError):
        tid.decode(text)


def test_non_strings_are_invalid() -> None:
    assert not tid.is_valid(b"3jzfcijpj2z2a")
    assert not tid.is_valid(None)
    with pytest.raises(TidError, match="must be a str"):
        tid.validate(12345)


def test_error_names_character_and_position() -> None:
    with pytest.raises(TidError) as info:
        tid.validate("3jzfcijpj2z21")
    message = str(info.value)
    assert "'1'" in message and "position 12" in message
    with pytest.raises(TidError, match="lower case"):
        tid.validate("3JZFCIJPJ2Z2A")
    with pytest.raises(TidError, match="length 14"):
        tid.validate("3jzfcijpj2z2aa")
    with pytest.raises(TidError, match="above 'j'"):
        tid.validate("kjzfcijpj2z2a")


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        tid.decode("nope")
    assert issubclass(TidError, OpendataKvError)


# --- codec -------------------------------------------------------------------------------------


def test_known_values() -> None:
    assert tid.encode(0) == "2222222222222"
    assert tid.decode("2222222222222") == 0
    assert tid.decode("3zzzzzzzzzzzz") == (1 << 61) - 1
    assert tid.encode((1 << 63) - 1) == "bzzzzzzzzzzzz"
    assert tid.decode("3jzfcijpj2z2a") == int(
        "3jzfcijpj2z2a".translate(str.maketrans(ALPHABET, "0123456789abcdefghijklmnopqrstuv")),
        32,
    )


def test_top_bit_policy() -> None:
    assert tid.is_valid("j222222222222")
    with pytest.raises(TidError, match="top bit"):
        tid.decode("j222222222222")
    assert tid.decode("j222222222222", allow_top_bit=True) == 15 << 60
    with pytest.raises(TidError, match="out of range"):
        tid.encode(1 << 63)
    assert tid.encode(1 << 63, allow_top_bit=True) == "c222222222222"
    with pytest.raises(TidError):
        tid.encode(1 << 64, allow_top_bit=True)


@pytest.mark.parametrize("bad", [-1, 1 << 63, True, 1.0, "5", None])
def test_encode_rejects(bad: object) -> None:
    with pytest.raises(TidError):
        tid.encode(bad)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=(1 << 63) - 1))
def test_int_round_trip(n: int) -> None:
    s = tid.encode(n)
    assert s == reference_encode(n)
    assert tid.is_valid(s)
    assert tid.decode(s) == n


@given(st.lists(st.integers(min_value=0, max_value=(1 << 63) - 1), min_size=2, max_size=50))
def test_order_is_preserved(ints: list[int]) -> None:
    assert sorted(tid.encode(n) for n in ints) == [tid.encode(n) for n in sorted(ints)]


@given(st.text(alphabet=ALPHABET, min_size=13, max_size=13))
def test_string_round_trip(s: str) -> None:
    if s[0] in ALPHABET[:8]:
        assert tid.encode(tid.decode(s)) == s
    elif s[0] in ALPHABET[:16]:
        assert tid.encode(tid.decode(s, allow_top_bit=True), allow_top_bit=True) == s
    else:
        assert not tid.is_valid(s)


@given(st.text(max_size=20))
def test_garbage_raises_only_tid_error(s: str) -> None:
    try:
        n = tid.decode(s)
    except TidError:
        assert not tid.is_valid(s) or s[0] in "cdefghij"
    else:
        assert tid.is_valid(s) and 0 <= n < 1 << 63


def _outcomes(fn: Any, ns: list[Any], allow_top_bit: bool) -> Any:
    try:
        return ("ok", fn(ns, allow_top_bit=allow_top_bit))
    except TidError as exc:
        return ("error", str(exc))


def _encode_each(ns: list[Any], allow_top_bit: bool) -> list[str]:
    return [tid.encode(n, allow_top_bit=allow_top_bit) for n in ns]


@given(
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), max_size=12),
    st.integers(min_value=1, max_value=60),  # repeats: lists past encode_many's 256 lanes
)
def test_encode_many_is_encode_over_a_list(top_bit: bool, ns: list[int], repeat: int) -> None:
    limit = 1 << (64 if top_bit else 63)
    ns = [n % limit for n in ns] * repeat
    got = tid.encode_many(ns, allow_top_bit=top_bit)
    assert got == _encode_each(ns, top_bit)
    assert all(type(s) is str for s in got)
    assert [reference_encode(n) for n in ns[:12]] == got[:12]


@given(
    st.booleans(),
    st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=(1 << 63) - 1),
            st.sampled_from([-1, 1 << 63, (1 << 64) - 1, 1 << 64, True, False, 1.0, "5", None]),
        ),
        max_size=8,
    ),
)
def test_encode_many_errors_are_encodes(top_bit: bool, items: list[Any]) -> None:
    """A bad item (out of range, not an int) raises what encode raises for the first one."""
    assert _outcomes(tid.encode_many, items, top_bit) == _outcomes(_encode_each, items, top_bit)


# --- helpers -----------------------------------------------------------------------------------


def test_parts_and_datetime() -> None:
    moment = datetime(2023, 1, 1, 12, 30, 15, 123456, tzinfo=timezone.utc)
    micros = 1672576215123456
    t = tid.from_datetime(moment, clock_id=42)
    assert t == tid.from_parts(micros, 42)
    assert tid.timestamp_us(t) == micros
    assert tid.clock_id(t) == 42
    assert tid.clock_id(tid.decode(t)) == 42
    assert tid.to_datetime(t) == moment
    assert tid.to_datetime(t).tzinfo is not None
    other_zone = moment.astimezone(timezone(timedelta(hours=-5)))
    assert tid.from_datetime(other_zone, 42) == t


def test_helper_errors() -> None:
    with pytest.raises(TidError, match="naive"):
        tid.from_datetime(datetime(2023, 1, 1))
    with pytest.raises(TidError, match="before the Unix epoch"):
        tid.from_datetime(datetime(1969, 12, 31, tzinfo=timezone.utc))
    with pytest.raises(TidError, match="clock_id"):
        tid.from_parts(0, 1024)
    with pytest.raises(TidError, match="timestamp_us"):
        tid.from_parts(1 << 53, 0)
    with pytest.raises(TidError, match="timestamp_us"):
        tid.from_parts(-1, 0)
    with pytest.raises(TidError):
        tid.timestamp_us(1 << 63)


# --- generator ---------------------------------------------------------------------------------


class FakeClock:
    """A settable time source in nanoseconds."""

    def __init__(self, us: int) -> None:
        self.us = us

    def __call__(self) -> int:
        return self.us * 1000


def test_generator_basics() -> None:
    gen = tid.TidGenerator(clock_id=7)
    first = gen.next()
    assert tid.is_valid(first) and tid.clock_id(first) == 7
    second = gen.next_int()
    assert second > tid.decode(first)
    assert second & 1023 == 7
    assert 0 <= tid.TidGenerator().clock_id <= 1023
    assert next(gen) < next(iter(gen))
    assert "clock_id=7" in repr(gen)


@pytest.mark.parametrize("bad", [-1, 1024, True, "3"])
def test_generator_rejects_bad_clock_id(bad: object) -> None:
    with pytest.raises(TidError):
        tid.TidGenerator(bad)  # type: ignore[arg-type]


def test_random_clock_ids_vary() -> None:
    assert len({tid.TidGenerator().clock_id for _ in range(64)}) > 1


def test_same_microsecond_burst() -> None:
    clock = FakeClock(1_700_000_000_000_000)
    gen = tid.TidGenerator(3, time_ns=clock)
    made = [gen.next() for _ in range(5000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert tid.timestamp_us(made[0]) == clock.us
    assert tid.timestamp_us(made[-1]) == clock.us + 4999


def test_clock_going_backwards() -> None:
    clock = FakeClock(1_700_000_000_000_000)
    gen = tid.TidGenerator(3, time_ns=clock)
    before = [gen.next() for _ in range(3)]
    clock.us -= 10_000_000  # NTP step back by 10 s
    after = [gen.next() for _ in range(3)]
    sequence = before + after
    assert sequence == sorted(sequence) and len(set(sequence)) == 6
    clock.us += 20_000_000
    assert tid.timestamp_us(gen.next()) == clock.us


def test_prefix_cache_crosses_boundaries() -> None:
    # Every TID must equal a direct encode, including across the 1024 µs prefix boundaries.
    clock = FakeClock((1 << 40) - 3)
    gen = tid.TidGenerator(1000, time_ns=clock)
    for step in range(3000):
        clock.us += step % 3
        made = gen.next()
        assert made == tid.from_parts(gen.last_timestamp_us, 1000)


def test_resume_after() -> None:
    clock = FakeClock(1_000)
    previous = tid.from_parts(5_000_000, 1023)
    gen = tid.TidGenerator(0, after=previous, time_ns=clock)
    made = gen.next()
    assert made > previous
    assert tid.timestamp_us(made) == 5_000_001
    gen_int = tid.TidGenerator(0, after=tid.decode(previous), time_ns=clock)
    assert gen_int.next_int() > tid.decode(previous)
    with pytest.raises(TidError):
        tid.TidGenerator(after="not-a-tid")


def test_timestamp_overflow_raises() -> None:
    clock = FakeClock(tid.MAX_TIMESTAMP_US)
    gen = tid.TidGenerator(0, time_ns=clock)
    assert gen.next() == "bzzzzzzzzzz22"
    with pytest.raises(TidError, match="53 bits"):
        gen.next()
    with pytest.raises(TidError, match="53 bits"):
        gen.next_int()


def test_threads_never_repeat() -> None:
    """8 threads share one generator. The interpreter is told to switch threads as often as
    it can (every microsecond instead of every 5 ms), so 20,000 calls per thread interleave
    more densely than the 100,000 of the default switch interval did."""
    gen = tid.TidGenerator()
    threads_count, per_thread = 8, 20_000
    results: list[list[str]] = [[] for _ in range(threads_count)]
    barrier = threading.Barrier(threads_count)

    def work(out: list[str]) -> None:
        barrier.wait()
        next_tid = gen.next
        out.extend(next_tid() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    everything: set[str] = set()
    for out in results:
        assert len(out) == per_thread
        assert all(a < b for a, b in itertools.pairwise(out)), "not strictly increasing in a thread"
        everything.update(out)
    assert len(everything) == threads_count * per_thread
