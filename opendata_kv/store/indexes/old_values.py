"""The values an indexed batch replaces, read by walking its keys in key order (RFC 0010).

Planning a batch's index changes needs the stored value under each key it writes. A point
read per key costs about 13 µs here (4.2 µs of it the engine's own, on the C floor), more
than the put itself. Writes usually come in runs of neighbouring keys (the new records of
one author, TIDs in time order), so the batch's keys are sorted and walked with one
iterator: a seek to the first key of a run and one small read tell about every key of the
run up to the next stored row. When the walk pays more than one native call per two keys
(the keys are scattered among stored rows), or a seek per fewer than KEYS_PER_SEEK keys
(short runs, such as new records of many authors), the rest are read with point reads, so
the walk never costs much more than the point reads would have.

A live value with a TTL comes back as maintain.Expiring (so the entries a write keeps take
the write's expiry). A value whose TTL has passed comes back as maintain.Expired: its
entries carried its expiry and expired with it, so it counts in no aggregate and holds no
unique value, but the write that replaces it still deletes them (a reader with
check_expiry=False would show them). A store opened with check_expiry=False shows expired
records, so there every stored value is live: the one a write replaces.
"""

from __future__ import annotations

import functools
from typing import Any

from opendata_kv.native import calls
from opendata_kv.native.errors import translating
from opendata_kv.native.slatedb import KeyRange
from opendata_kv.store.expiry import is_expired, now_ms
from opendata_kv.store.indexes.maintain import Expired, Expiring
from opendata_kv.store.scan import scan_options
from opendata_kv.store.views import GET_MANY_WINDOW, in_windows

#: below this many keys a batch is read with point reads (they are all in flight at once)
WALK_MIN_KEYS = 16
#: rows read after each seek: enough to pass a run's neighbours, few enough to be cheap
WALK_ROWS = 8
#: the most rows one read takes while the keys keep matching consecutive stored rows (a
#: dense run, such as a batch's aggregate groups: reads double up to this, with no seek)
WALK_ROWS_MAX = 1024
#: keys a seek must serve to pay: a seek (a fresh position in every memtable and SST) cost
#: 150-300 µs against 4-5 µs a point read of a key (issue 32, 20,000-50,000 likes in 50
#: runs: the walk took 7-14 µs a key, point reads 4-5), so each seek past the first needs
#: this many keys walked before it
KEYS_PER_SEEK = 64
#: batches a caller's reads go straight to point reads after its walk gave up on scattered
#: keys (WalkHistory): a walk that gives up cost its iterator's set-up and a few native calls
#: for nothing, so a stream of scattered batches (Jetstream ingest) tries one walk in 8
WALK_BACKOFF = 7
_OPTIONS = scan_options(False)


class WalkHistory:
    """Whether one caller's recent walks paid (its batches' keys came in runs): after a walk
    that gave up, the next WALK_BACKOFF reads are point reads, then one walks again."""

    __slots__ = ("skip",)

    def __init__(self) -> None:
        self.skip = 0  # reads left to make by point reads only

    def skipping(self) -> bool:
        """Whether this read goes straight to point reads (counting it)."""
        if self.skip:
            self.skip -= 1
            return True
        return False

    def walked(self, gave_up: bool) -> None:
        """Note a walk's outcome: it gave up (keys left to point reads) or read them all."""
        self.skip = WALK_BACKOFF if gave_up else 0


async def old_values(
    source: Any,
    where: str,
    keys: list[bytes],
    check_expiry: bool = True,
    history: WalkHistory | None = None,
    window: int = GET_MANY_WINDOW,
) -> list[bytes | None]:
    """The stored values under `keys`, in their order (None where nothing is stored; Expired
    where its TTL has passed, unless `check_expiry` is False as for the store's reads).
    `history`: the caller's walks so far, to skip a walk likely to give up (WalkHistory);
    `window`: point reads in flight at once (the store's read_window)."""
    if len(keys) < WALK_MIN_KEYS or (history is not None and history.skipping()):
        return await point_reads(source, where, keys, check_expiry, window)
    ordered = sorted(set(keys))
    with translating(f"read of replaced values on {where}"):
        found, rest = await _walk(source, ordered, check_expiry)
    if history is not None:
        history.walked(bool(rest))
    if rest:
        later = await point_reads(source, where, rest, check_expiry, window)
        for key, value in zip(rest, later, strict=True):
            if value is not None:
                found[key] = value
    return [found.get(key) for key in keys]


async def current_values(
    source: Any,
    where: str,
    keys: list[bytes],
    check_expiry: bool = True,
    history: WalkHistory | None = None,
    window: int = GET_MANY_WINDOW,
) -> list[bytes | None]:
    """The live values under `keys`, in order (None where nothing live is stored), read as
    old_values reads: what index upkeep reads of unique holders and aggregate groups, whose
    rows sit side by side in their index (one walk instead of a point read per group)."""
    return [
        None if value is None or value.__class__ is Expired else bytes(value)
        for value in await old_values(source, where, keys, check_expiry, history, window)
    ]


async def point_reads(
    source: Any,
    where: str,
    keys: list[bytes],
    check_expiry: bool = True,
    window: int = GET_MANY_WINDOW,
) -> list[bytes | None]:
    """The stored values under `keys` (Expired where the TTL has passed, unless not
    `check_expiry`) by point reads, a window at a time (views.in_windows)."""
    with translating(f"read of replaced values on {where}"):
        rows = await in_windows(functools.partial(calls.get_rows, source), keys, window)
    now = now_ms() if check_expiry else -1  # every expiry is later than -1
    return [None if row is None else _marked(row[0], row[1], now) for row in rows]


def _marked(data: bytes, expire: int | None, now: int) -> bytes:
    """`data` as plain bytes when it has no TTL, else Expired or Expiring (maintain.py)."""
    if expire is None:
        return data
    return Expired(data) if is_expired(expire, now) else Expiring(data)


async def _walk(
    source: Any, ordered: list[bytes], check_expiry: bool
) -> tuple[dict[bytes, bytes], list[bytes]]:
    """(stored values found, keys left to point reads) for sorted, distinct `ordered`."""
    key_range = KeyRange(
        start=ordered[0], start_inclusive=True, end=ordered[-1], end_inclusive=True
    )
    iterator = await calls.method(source, "scan_with_options", key_range, _OPTIONS)
    found: dict[bytes, bytes] = {}
    rows: list[bytes] = []
    data: list[bytes] = []
    expires: list[int | None] = []
    now = now_ms() if check_expiry else -1  # every expiry is later than -1
    at = 0  # rows[at] is the first row read that no key has passed yet
    read_any = exhausted = False
    native_calls = seeks = 1  # the scan's first position is a seek too
    limit = WALK_ROWS
    hits = 0  # keys found among the rows of the last read
    for done, key in enumerate(ordered):
        while True:  # until a row at or after `key` is read, or none is left
            while at < len(rows) and rows[at] < key:
                at += 1
            if at < len(rows) or exhausted:
                break
            if native_calls > 4 + done // 2:  # scattered keys: point reads are cheaper
                return found, ordered[done:]
            if read_any and 2 * hits >= len(rows):
                # a dense run (most rows read were keys): read on from where the iterator
                # stands, twice as many rows, with no seek (rows before `key` are skipped
                # above, and a read of no key at all seeks next time)
                limit = min(2 * limit, WALK_ROWS_MAX)
            elif read_any:  # every row read lies before `key`: jump to it
                if seeks > done // KEYS_PER_SEEK:  # runs too short to pay their seeks
                    return found, ordered[done:]
                await calls.seek(iterator, key)
                native_calls += 1
                seeks += 1
                limit = WALK_ROWS
            rows, data, expires = await calls.next_columns(iterator, limit)
            native_calls += 1
            read_any, at, hits = True, 0, 0
            exhausted = not rows
        if at < len(rows) and rows[at] == key:
            found[key] = _marked(data[at], expires[at], now)
            hits += 1
    return found, []
