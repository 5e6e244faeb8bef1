"""Durations given as time-to-live: seconds (int or float) or a timedelta, always positive.
One check for every `ttl=` of the store and the durations of the collections."""

from __future__ import annotations

import datetime
import math

from opendata_kv.errors import InvalidArgumentError

Duration = float | datetime.timedelta


def ttl_seconds(value: Duration, what: str = "ttl") -> float:
    """`value` in seconds; InvalidArgumentError (a ValueError; `field` is `what`) unless it is
    a positive, finite number of seconds or a positive timedelta."""
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidArgumentError(
            f"{what} must be a number of seconds, got {value!r}", field=what, value=value
        )
    if not 0 < seconds < math.inf:
        raise InvalidArgumentError(
            f"{what} must be a positive number of seconds, got {value!r}", field=what, value=value
        )
    return float(seconds)
