"""The one expiry rule: a row whose expire_ts (ms) is at or before now is gone.

slatedb 0.17 returns expired rows until a flush or compaction drops them, so every read that
honours TTLs filters with these: `is_expired` for one row, `live_value` for a point read's
row, `live_positions` for the columns a scan batch comes in.
"""

from __future__ import annotations

import time

from opendata_kv.native.wire import PointRow


def now_ms() -> int:
    """Wall-clock ms: slatedb stamps create/expire times with its default system clock."""
    return time.time_ns() // 1_000_000


def is_expired(expire: int | None, now: int | None = None) -> bool:
    """True when a row stamped to expire at `expire` (None: no TTL) is gone at `now` ms
    (default: the clock now)."""
    return expire is not None and expire <= (now_ms() if now is None else now)


def live_value(row: PointRow) -> bytes | None:
    """The value of a point read's row, None when there is none or its TTL has passed."""
    if row is None or is_expired(row[1]):
        return None
    return row[0]


def live_positions(expires: list[int | None], now: int | None = None) -> list[int] | None:
    """Column-wise `is_expired`: the positions of the rows still live at `now`, None when all
    are (no TTL at all is one C pass)."""
    if expires.count(None) == len(expires):
        return None
    at = now_ms() if now is None else now
    # is_expired inlined (not called per row): scans filter every row of a batch
    live = [i for i, expire in enumerate(expires) if expire is None or expire > at]
    return None if len(live) == len(expires) else live
