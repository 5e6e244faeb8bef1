"""Entry: a live record's value with its expiry, what get_with_expiry returns (issue 41).

The expiry is the absolute instant slatedb stamped on the row (Unix ms), given as an aware UTC
datetime as checkpoints give theirs; None when the record has no TTL.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Generic, TypeVar

from opendata_kv.store.expiry import now_ms

V = TypeVar("V")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def expiry_datetime(expire_ms: int | None) -> datetime.datetime | None:
    """A row's expire_ts (Unix ms) as an aware UTC datetime; None stays None."""
    if expire_ms is None:
        return None
    return _EPOCH + datetime.timedelta(milliseconds=expire_ms)


@dataclass(frozen=True)
class Entry(Generic[V]):
    """A live record read with its expiry: `value` decoded as get decodes it, `expires_at` the
    UTC instant its TTL ends (None: no TTL), `expire_ms` the same in Unix ms as stored."""

    value: V
    expires_at: datetime.datetime | None
    expire_ms: int | None = None

    def ttl(self, now_ms_: int | None = None) -> float | None:
        """Seconds left before the record expires (None: no TTL), from now or `now_ms_`."""
        if self.expire_ms is None:
            return None
        return (self.expire_ms - (now_ms() if now_ms_ is None else now_ms_)) / 1000.0
