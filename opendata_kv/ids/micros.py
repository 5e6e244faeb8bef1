"""Microseconds since the Unix epoch, the time base of TIDs, muids and the collections:
the epoch itself and the conversions to and from aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def is_naive(dt: datetime) -> bool:
    """True when `dt` has no time zone: its instant would depend on the machine's zone."""
    return dt.tzinfo is None or dt.utcoffset() is None


def from_datetime(dt: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (floored; negative before 1970)."""
    return (dt - EPOCH) // _ONE_US


def to_datetime(micros: int) -> datetime:
    """The aware UTC datetime `micros` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=micros)


def now() -> int:
    """The current time in microseconds since the epoch."""
    return from_datetime(datetime.now(timezone.utc))
