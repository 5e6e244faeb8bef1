"""Durations given as time-to-live: seconds (int or float) or a timedelta, always positive.
One check for every `ttl=` of the store and the durations of the collections."""

from __future__ import annotations

import datetime
import math

from opendata_kv.errors import InvalidInputError

Duration = float | datetime.timedelta


def ttl_seconds(value: Duration, what: str = "ttl") -> float:
    """`value` in seconds; InvalidInputError (a ValueError) unless it is a positive, finite
    number of seconds or a positive timedelta."""
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidInputError(f"{what} must be a number of seconds, got {value!r}")
    if not 0 < seconds < math.inf:
        raise InvalidInputError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(seconds)
