"""Gink-style muids: (timestamp µs, medallion, offset) packed into 16 order-preserving bytes.

Packed integer: (timestamp mod 2**52) << 76 | (medallion mod 2**44) << 32 | (offset mod 2**32),
written big-endian. -1 (all ones) is allowed for timestamp and medallion; offset is signed
32-bit. Muid objects order exactly like their bytes. See rfcs/0004-muids.md.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn

from opendata_kv.errors import MuidError, show_bytes, show_text
from opendata_kv.ids import micros as micros_ids

TIMESTAMP_BITS = 52
MEDALLION_BITS = 44
OFFSET_BITS = 32
SIZE = 16

_TS_SHIFT = MEDALLION_BITS + OFFSET_BITS
_TS_MASK = (1 << TIMESTAMP_BITS) - 1
_MED_MASK = (1 << MEDALLION_BITS) - 1
_OFF_MASK = (1 << OFFSET_BITS) - 1
_OFF_SIGN = 1 << (OFFSET_BITS - 1)
_LIMIT = 1 << (8 * SIZE)

MIN_OFFSET = -(1 << (OFFSET_BITS - 1))
MAX_OFFSET = (1 << (OFFSET_BITS - 1)) - 1
#: Largest timestamp that is not the all-ones sentinel (-1).
MAX_TIMESTAMP = _TS_MASK - 1
MAX_MEDALLION = _MED_MASK - 1
#: Range the generator draws random medallions from (inclusive bounds), as the Gink spec asks.
MEDALLION_RANDOM_MIN = 0x10000000000
MEDALLION_RANDOM_MAX = 0x1FFFFFFFFFF

_HEX_OR_DASH = frozenset("0123456789abcdefABCDEF-")


def medallion_residue(medallion: int) -> int:
    """The medallion as the packed bytes hold it: its 44-bit residue (-1 -> 2**44 - 1)."""
    return _check_component("medallion", medallion, -1, _MED_MASK) & _MED_MASK


def medallion_from_residue(residue: int) -> int:
    """Inverse of medallion_residue: the all-ones residue is the -1 sentinel."""
    return -1 if residue == _MED_MASK else residue


def _check_component(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MuidError(f"muid {name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise MuidError(f"muid {name} {value} out of range: must be {low}..{high}")
    return int(value)


class Muid:
    """One muid: immutable, hashable, and ordered exactly as its 16 packed bytes.

    Construct from fields (validated), or with from_bytes / from_int / parse.
    """

    # The packed bytes are the state: bytes() and from_bytes() (the storage path) then cost
    # no conversion, and bytes compare and hash exactly like the packed integer.
    __slots__ = ("_b",)
    _b: bytes

    def __init__(self, timestamp: int, medallion: int, offset: int) -> None:
        ts = _check_component("timestamp", timestamp, -1, _TS_MASK)
        med = _check_component("medallion", medallion, -1, _MED_MASK)
        off = _check_component("offset", offset, MIN_OFFSET, MAX_OFFSET)
        n = ((ts & _TS_MASK) << _TS_SHIFT) | ((med & _MED_MASK) << 32) | (off & _OFF_MASK)
        _set_b(self, n.to_bytes(SIZE, "big"))

    # --- alternative constructors -------------------------------------------------------------

    @classmethod
    def _from_int_unchecked(cls, n: int) -> Muid:
        muid: Muid = _new(cls)
        _set_b(muid, n.to_bytes(SIZE, "big"))
        return muid

    @classmethod
    def from_int(cls, n: int) -> Muid:
        """The muid whose packed 128-bit value is `n` (0 <= n < 2**128)."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise MuidError(f"muid integer must be an int, got {type(n).__name__}")
        if not 0 <= n < _LIMIT:
            raise MuidError(f"muid integer {n} out of range: must be 0 <= n < 2**128")
        return cls._from_int_unchecked(int(n))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Muid:
        """The muid packed in exactly 16 big-endian bytes."""
        if type(data) is bytes and len(data) == SIZE:
            muid: Muid = _new(cls)
            _set_b(muid, data)
            return muid
        if type(data) is not bytes:
            if isinstance(data, memoryview):
                data = data.tobytes()
            elif not isinstance(data, (bytes, bytearray)):
                raise MuidError(f"muid bytes must be bytes-like, got {type(data).__name__}")
        if len(data) != SIZE:
            raise MuidError(
                f"muid bytes must be exactly {SIZE} long, got {len(data)}: {show_bytes(data)}"
            )
        muid = _new(cls)
        _set_b(muid, bytes(data))
        return muid

    @classmethod
    def parse(cls, s: str) -> Muid:
        """Parse `TTTTTTTTTTTTT-MMMMMMMMMMM-OOOOOOOO` (hex, either case) or a short form.

        Short forms: `T-M` (offset 0) and `T` (medallion and offset 0), with the same digit
        counts; also the 32 hex digits of the bytes without dashes.
        """
        if not isinstance(s, str):
            raise MuidError(f"muid string must be a str, got {type(s).__name__}")
        # Every accepted form is the 32 hex digits of the bytes, dashed or cut short, so it is
        # rejoined and handed to bytes.fromhex; fromhex skips whitespace, which the length
        # check then catches.
        length = len(s)
        if length == 34 and s[13] == "-" and s[25] == "-":
            digits = s[:13] + s[14:25] + s[26:]
        elif length == 25 and s[13] == "-":
            digits = s[:13] + s[14:] + "00000000"
        elif length == 13 or length == 32:
            digits = s.ljust(32, "0")
        else:
            _bad_string(s)
        try:
            data = bytes.fromhex(digits)
        except ValueError:
            _bad_string(s)
        if len(data) != SIZE:
            _bad_string(s)
        muid: Muid = _new(cls)
        _set_b(muid, data)
        return muid

    # --- fields -------------------------------------------------------------------------------

    @property
    def timestamp(self) -> int:
        """Microseconds since the Unix epoch, or -1 for the all-ones sentinel."""
        ts = int.from_bytes(self._b, "big") >> _TS_SHIFT
        return -1 if ts == _TS_MASK else ts

    @property
    def medallion(self) -> int:
        """The writer's medallion, or -1 for the all-ones sentinel."""
        return medallion_from_residue((int.from_bytes(self._b, "big") >> 32) & _MED_MASK)

    @property
    def offset(self) -> int:
        """Signed 32-bit position inside the transaction (0 is the transaction itself)."""
        off = int.from_bytes(self._b[12:], "big")
        return off - (1 << OFFSET_BITS) if off & _OFF_SIGN else off

    def to_datetime(self) -> datetime:
        """The timestamp as an aware UTC datetime (MuidError for the -1 sentinel)."""
        ts = self.timestamp
        if ts < 0:
            raise MuidError(f"muid {self} has the sentinel timestamp -1: it is not a time")
        return micros_ids.to_datetime(ts)

    def fields(self) -> tuple[int, int, int]:
        """(timestamp, medallion, offset)."""
        return (self.timestamp, self.medallion, self.offset)

    # --- conversions --------------------------------------------------------------------------

    def __bytes__(self) -> bytes:
        return self._b

    def __int__(self) -> int:
        return int.from_bytes(self._b, "big")

    def __str__(self) -> str:
        h = self._b.hex().upper()
        return f"{h[:13]}-{h[13:24]}-{h[24:]}"

    @property
    def hex(self) -> str:
        """The 32 lower-case hex digits of the packed bytes."""
        return self._b.hex()

    def __repr__(self) -> str:
        return f"Muid({self.timestamp}, {self.medallion}, {self.offset})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    # --- identity and order -------------------------------------------------------------------

    def __hash__(self) -> int:
        return hash(self._b)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Muid):
            return self._b == other._b
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, Muid):
            return self._b != other._b
        return NotImplemented

    def __lt__(self, other: Muid) -> bool:
        if isinstance(other, Muid):
            return self._b < other._b
        return NotImplemented

    def __le__(self, other: Muid) -> bool:
        if isinstance(other, Muid):
            return self._b <= other._b
        return NotImplemented

    def __gt__(self, other: Muid) -> bool:
        if isinstance(other, Muid):
            return self._b > other._b
        return NotImplemented

    def __ge__(self, other: Muid) -> bool:
        if isinstance(other, Muid):
            return self._b >= other._b
        return NotImplemented

    # --- immutability -------------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Muid is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Muid is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Callable[[int], Muid], tuple[int]]:
        return (Muid.from_int, (int.from_bytes(self._b, "big"),))

    def __copy__(self) -> Muid:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Muid:
        return self


_new = object.__new__
_set_b = Muid.__dict__["_b"].__set__


def _bad_string(s: str) -> NoReturn:
    shown = show_text(s, 64)
    for position, char in enumerate(s):
        if char not in _HEX_OR_DASH:
            raise MuidError(
                f"muid string {shown}: character {char!r} at position {position} is not a hex "
                "digit or '-'"
            )
    raise MuidError(
        f"muid string {shown} does not have the form TTTTTTTTTTTTT[-MMMMMMMMMMM[-OOOOOOOO]] "
        "(13, 11 and 8 hex digits) or 32 hex digits"
    )


class Transaction:
    """One (timestamp, medallion) pair: `.muid` is the transaction, `.next()` its changes 1..n."""

    __slots__ = ("_base", "_counter", "medallion", "muid", "timestamp")

    def __init__(self, timestamp: int, medallion: int) -> None:
        self.muid = Muid(timestamp, medallion, 0)
        self._base = int(self.muid)
        self.timestamp = timestamp
        self.medallion = medallion
        self._counter = itertools.count(1)

    def next(self) -> Muid:
        """The muid of the next change in this transaction (offsets 1, 2, ...)."""
        offset = next(self._counter)
        if offset > MAX_OFFSET:
            raise MuidError(f"transaction {self.muid} is full: offsets stop at {MAX_OFFSET}")
        return Muid._from_int_unchecked(self._base | offset)

    def __repr__(self) -> str:
        return f"Transaction({self.muid})"


class MuidGenerator:
    """Hands out transactions for one medallion with strictly increasing timestamps.

    Thread-safe; a timestamp is max(now, previous + 1) µs, so a backwards clock or a burst
    within one microsecond never repeats one. The medallion is random in
    0x10000000000..0x1FFFFFFFFFF (from `secrets`) unless given. `after` (a Muid or a timestamp)
    resumes: every timestamp handed out is greater. `time_ns` replaces the clock (for tests).
    """

    __slots__ = ("_last_ts", "_lock", "_time_ns", "medallion")

    def __init__(
        self,
        medallion: int | None = None,
        *,
        after: Muid | int | None = None,
        time_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if medallion is None:
            span = MEDALLION_RANDOM_MAX - MEDALLION_RANDOM_MIN + 1
            medallion = MEDALLION_RANDOM_MIN + secrets.randbelow(span)
        self.medallion = _check_component("medallion", medallion, 1, MAX_MEDALLION)
        if after is None:
            self._last_ts = -1
        elif isinstance(after, Muid):
            self._last_ts = after.timestamp
        else:
            self._last_ts = _check_component("after timestamp", after, -1, MAX_TIMESTAMP)
        self._lock = threading.Lock()
        self._time_ns = time_ns

    def next_timestamp(self) -> int:
        """A microsecond timestamp greater than every one this generator gave before."""
        with self._lock:
            ts = self._time_ns() // 1000
            if ts <= self._last_ts:
                ts = self._last_ts + 1
            if ts > MAX_TIMESTAMP:
                raise MuidError(f"muid timestamp would exceed {TIMESTAMP_BITS} bits")
            self._last_ts = ts
            return ts

    def transaction(self) -> Transaction:
        """A new transaction with a fresh timestamp and this generator's medallion."""
        return Transaction(self.next_timestamp(), self.medallion)

    def __repr__(self) -> str:
        return f"MuidGenerator(medallion=0x{self.medallion:X})"
