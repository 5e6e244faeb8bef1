"""AT Protocol TIDs: 64-bit timestamp identifiers written as 13 base32-sortable characters.

Layout of the integer: top bit 0, 53 bits of microseconds since the Unix epoch, 10 bits of
clock id. The string is the integer in base 32 over `234567abcdefghijklmnopqrstuvwxyz`, so
string order equals integer order. See rfcs/0003-record-keys-and-tids.md.
"""

from __future__ import annotations

import functools
import re
import secrets
import struct
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeGuard

from opendata_kv.errors import TidError, show_text
from opendata_kv.ids import micros as micros_ids

ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
LENGTH = 13
TIMESTAMP_BITS = 53
CLOCK_ID_BITS = 10
MAX_TIMESTAMP_US = (1 << TIMESTAMP_BITS) - 1
MAX_CLOCK_ID = (1 << CLOCK_ID_BITS) - 1
#: Exclusive upper bound of a TID integer (the top bit of the 64 is always 0).
LIMIT = 1 << 63
#: Exclusive upper bound of any syntactically valid TID string's value (first char up to 'j').
SYNTAX_LIMIT = 1 << 64

_FIRST_CHARS = ALPHABET[:16]
_PATTERN = re.compile(f"[{_FIRST_CHARS}][{ALPHABET}]{{12}}")

# int(s, 32) speaks 0-9a-v; translating our alphabet onto it makes decode one C call.
_TO_INT32 = str.maketrans(ALPHABET, "0123456789abcdefghijklmnopqrstuv")
# 10 bits -> 2 characters: encode needs 7 lookups instead of 13.
_PAIRS: tuple[str, ...] = tuple(a + b for a in ALPHABET for b in ALPHABET)


def is_valid(s: object) -> TypeGuard[str]:
    """True when `s` is a str that fully matches the TID syntax (a trailing newline is invalid)."""
    return isinstance(s, str) and _PATTERN.fullmatch(s) is not None


def validate(s: object) -> str:
    """Return `s` unchanged if it is a syntactically valid TID, else raise TidError saying why."""
    if isinstance(s, str) and _PATTERN.fullmatch(s) is not None:
        return s
    raise TidError(explain(s) or f"TID {s!r} is not valid")


def explain(s: object) -> str | None:
    """None when `s` is a valid TID string, else one sentence naming what is wrong."""
    if isinstance(s, str) and _PATTERN.fullmatch(s) is not None:
        return None
    if not isinstance(s, str):
        return f"TID must be a str, got {type(s).__name__}"
    for position, char in enumerate(s):
        if char not in ALPHABET:
            hint = " (TIDs are lower case)" if char.lower() in ALPHABET else ""
            return (
                f"TID {show_text(s)}: character {char!r} at position {position} is not in the "
                f"base32-sortable alphabet {ALPHABET!r}{hint}"
            )
    if len(s) != LENGTH:
        return f"TID {show_text(s)}: length {len(s)}, expected exactly {LENGTH} characters"
    return (
        f"TID {show_text(s)}: first character {s[0]!r} is above 'j' "
        "(the value would need more than 64 bits)"
    )


def encode(n: int, *, allow_top_bit: bool = False) -> str:
    """The 13-character TID for integer `n` (0 <= n < 2**63; up to 2**64 with allow_top_bit)."""
    if type(n) is not int:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TidError(f"TID integer must be an int, got {type(n).__name__}")
        n = int(n)
    limit = SYNTAX_LIMIT if allow_top_bit else LIMIT
    if not 0 <= n < limit:
        raise TidError(
            f"TID integer {n} out of range: must be 0 <= n < 2**{limit.bit_length() - 1}"
        )
    p = _PAIRS
    return (
        ALPHABET[n >> 60]
        + p[(n >> 50) & 1023]
        + p[(n >> 40) & 1023]
        + p[(n >> 30) & 1023]
        + p[(n >> 20) & 1023]
        + p[(n >> 10) & 1023]
        + p[n & 1023]
    )


# encode_many: the base-32 digits of a whole list of TIDs in a few C-level passes. Each TID
# gets a 128-bit lane of one big int (struct-packed); four mask-and-shift steps spread its 16
# 5-bit groups (the value's 65 bits, zero-extended to 80) one per byte; the lanes' 3 leading
# bytes, always 0, are marked so that one bytes.translate maps the digits to the alphabet,
# deletes two marker bytes and turns the third into a space: the text then splits into TIDs.
_LANES = 256  # TIDs per big int (masks are built once for this many lanes)
_SPACE, _DROP = 0xFE, 0xFF


def _lanes(pattern: int) -> int:
    """`pattern` (one 128-bit lane) repeated over _LANES lanes."""
    return int.from_bytes(pattern.to_bytes(16, "big") * _LANES, "big")


def _bits(lo: int, hi: int, period: int) -> int:
    """The lane pattern with bits [lo, hi) set in every `period`-bit sub-lane."""
    return sum(((1 << hi) - (1 << lo)) << at for at in range(0, 128, period))


# (high mask, low mask, shift): split each sub-lane's value into halves one sub-lane apart.
_SPREAD = tuple(
    (_lanes(_bits(half, 2 * half, period)), _lanes(_bits(0, half, period)), period // 2 - half)
    for half, period in ((40, 128), (20, 64), (10, 32), (5, 16))
)
_MARK = _lanes((_DROP << 120) | (_DROP << 112) | (_SPACE << 104))
_DIGITS = bytes.maketrans(bytes(range(32)) + bytes([_SPACE]), ALPHABET.encode("ascii") + b" ")


@functools.lru_cache(maxsize=64)
def _packer(count: int) -> tuple[Callable[..., bytes], int]:
    """struct packing `count` u64s into 16-byte lanes, and the marker mask for that many."""
    return struct.Struct(">" + "8xQ" * count).pack, _MARK >> (128 * (_LANES - count))


def _encode_lanes(ns: Sequence[int]) -> list[str]:
    """The TID strings of up to _LANES ints already known to be in 0 <= n < 2**64."""
    pack, mark = _packer(len(ns))
    x = int.from_bytes(pack(*ns), "big")
    for high, low, shift in _SPREAD:
        x = ((x & high) << shift) | (x & low)
    text = (x | mark).to_bytes(16 * len(ns), "big").translate(_DIGITS, bytes([_DROP]))
    return text.decode("ascii")[1:].split(" ")


def encode_many(ns: Sequence[int], *, allow_top_bit: bool = False) -> list[str]:
    """[encode(n) for n in ns], computed for the whole list at once (scans decode TID keys a
    batch at a time); raises the error encode raises for the first bad item."""
    if not ns:
        return []
    if (
        set(map(type, ns)) != {int}
        or min(ns) < 0
        or max(ns) >= (SYNTAX_LIMIT if allow_top_bit else LIMIT)
    ):
        return [encode(n, allow_top_bit=allow_top_bit) for n in ns]
    if len(ns) <= _LANES:
        return _encode_lanes(ns)
    out: list[str] = []
    for at in range(0, len(ns), _LANES):
        out += _encode_lanes(ns[at : at + _LANES])
    return out


def decode(s: str, *, allow_top_bit: bool = False) -> int:
    """The integer of TID string `s`, validating its syntax.

    The TID syntax admits first characters up to 'j', whose value has bit 63 set; TIDs are
    defined with that bit 0, so such strings raise TidError unless allow_top_bit is given.
    """
    validate(s)
    n = int(s.translate(_TO_INT32), 32)
    if n >= LIMIT and not allow_top_bit:
        raise TidError(
            f"TID {show_text(s)}: first character {s[0]!r} sets the top bit of the 64-bit value; "
            "TIDs keep it 0 (the syntax allows it; decoding it needs allow_top_bit=True)"
        )
    return n


def _as_int(tid: str | int) -> int:
    if isinstance(tid, str):
        return decode(tid)
    return _check_int(tid)


def _check_int(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TidError(f"TID must be a str or int, got {type(n).__name__}")
    if not 0 <= n < LIMIT:
        raise TidError(f"TID integer {n} out of range: must be 0 <= n < 2**63")
    return int(n)


def from_parts(timestamp_us: int, clock_id: int) -> str:
    """The TID for a microsecond timestamp and a 10-bit clock id."""
    return encode(_pack(timestamp_us, clock_id))


def _pack(timestamp_us: int, clock_id: int) -> int:
    if isinstance(timestamp_us, bool) or not isinstance(timestamp_us, int):
        raise TidError(f"TID timestamp_us must be an int, got {type(timestamp_us).__name__}")
    if not 0 <= timestamp_us <= MAX_TIMESTAMP_US:
        raise TidError(
            f"TID timestamp_us {timestamp_us} out of range: must be 0 <= t < 2**{TIMESTAMP_BITS}"
        )
    return (timestamp_us << CLOCK_ID_BITS) | _check_clock_id(clock_id)


def _check_clock_id(clock_id: int) -> int:
    if isinstance(clock_id, bool) or not isinstance(clock_id, int):
        raise TidError(f"TID clock_id must be an int, got {type(clock_id).__name__}")
    if not 0 <= clock_id <= MAX_CLOCK_ID:
        raise TidError(f"TID clock_id {clock_id} out of range: must be 0..{MAX_CLOCK_ID}")
    return int(clock_id)


def timestamp_us(tid: str | int) -> int:
    """Microseconds since the Unix epoch stored in a TID (string or integer)."""
    return _as_int(tid) >> CLOCK_ID_BITS


def clock_id(tid: str | int) -> int:
    """The 10-bit clock id stored in a TID (string or integer)."""
    return _as_int(tid) & MAX_CLOCK_ID


def to_datetime(tid: str | int) -> datetime:
    """The TID's timestamp as an aware UTC datetime (microsecond precision)."""
    return micros_ids.to_datetime(timestamp_us(tid))


def from_datetime(dt: datetime, clock_id: int = 0) -> str:
    """The TID for an aware datetime (exact to the microsecond) and a clock id.

    Naive datetimes are refused: their instant depends on the machine's time zone.
    """
    if not isinstance(dt, datetime):
        raise TidError(f"TID datetime must be a datetime, got {type(dt).__name__}")
    if micros_ids.is_naive(dt):
        raise TidError(f"TID datetime {dt.isoformat()!r} is naive: give it a time zone")
    micros = micros_ids.from_datetime(dt)
    if micros < 0:
        raise TidError(f"TID datetime {dt.isoformat()!r} is before the Unix epoch")
    return from_parts(micros, clock_id)


class TidGenerator:
    """Makes strictly increasing, never repeating TIDs for one process (thread-safe).

    Each TID's timestamp is max(now, previous + 1) microseconds, so a burst within one
    microsecond or a wall clock stepping backwards still yields increasing values. The clock
    id is random per generator (from `secrets`) unless given. `after` resumes a sequence: every
    TID made is greater than it. `time_ns` replaces the clock (for tests).
    """

    __slots__ = ("_clock_id", "_last_ts", "_lock", "_prefix", "_prefix_key", "_tails", "_time_ns")

    def __init__(
        self,
        clock_id: int | None = None,
        *,
        after: str | int | None = None,
        time_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if clock_id is None:
            clock_id = secrets.randbelow(MAX_CLOCK_ID + 1)
        self._clock_id = _check_clock_id(clock_id)
        self._last_ts = -1 if after is None else _as_int(after) >> CLOCK_ID_BITS
        self._lock = threading.Lock()
        self._time_ns = time_ns
        # The low 20 bits (timestamp's low 10 + clock id) are the last 4 characters; the clock
        # id part never changes, so keep all 1024 endings ready and cache the 9-char prefix.
        tail = _PAIRS[self._clock_id]
        self._tails = tuple(pair + tail for pair in _PAIRS)
        self._prefix_key = -1
        self._prefix = ""

    @property
    def clock_id(self) -> int:
        """The 10-bit clock id in every TID this generator makes."""
        return self._clock_id

    @property
    def last_timestamp_us(self) -> int:
        """Timestamp of the last TID made (or resumed after); -1 before the first."""
        return self._last_ts

    def _advance(self) -> int:
        # Called with the lock held.
        ts = self._time_ns() // 1000
        if ts <= self._last_ts:
            ts = self._last_ts + 1
        if ts > MAX_TIMESTAMP_US:
            raise TidError(
                f"TID timestamp would exceed {TIMESTAMP_BITS} bits (last {self._last_ts}); "
                "no larger TID exists"
            )
        self._last_ts = ts
        return ts

    def next(self) -> str:
        """The next TID string, greater than every one made before by this generator."""
        with self._lock:
            ts = self._advance()
            key = ts >> 10
            if key != self._prefix_key:
                full = encode(key << 20)
                self._prefix = full[:9]
                self._prefix_key = key
            return self._prefix + self._tails[ts & 1023]

    def next_int(self) -> int:
        """The next TID as an integer (same sequence as next())."""
        with self._lock:
            return (self._advance() << CLOCK_ID_BITS) | self._clock_id

    def __iter__(self) -> TidGenerator:
        return self

    def __next__(self) -> str:
        return self.next()

    def __repr__(self) -> str:
        return f"TidGenerator(clock_id={self._clock_id}, last_timestamp_us={self._last_ts})"
