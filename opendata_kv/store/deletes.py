"""Range deletes: slatedb 0.17 has no range tombstone (its WriteBatch offers put, delete and
merge only), so deleting a range reads the keys in it and writes one tombstone per key, all in
one WriteBatch (atomic), refusing ranges of more than `max_keys` keys before writing anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from opendata_kv.errors import InvalidArgumentError, check_count
from opendata_kv.native import calls
from opendata_kv.native.errors import call, translating
from opendata_kv.native.slatedb import KeyRange
from opendata_kv.store.expiry import live_positions
from opendata_kv.store.scan import KeySpan, scan_options

#: how many keys a delete_range may remove unless told otherwise (one WriteBatch holds them all)
MAX_KEYS = 100_000


def check_max_keys(max_keys: int) -> int:
    """An int >= 1, else InvalidArgumentError."""
    check_count(max_keys, "max_keys", 1)
    return max_keys


async def _span_scans(source: Any, spans: list[KeySpan], where: str) -> AsyncIterator[Any]:
    """A native scan iterator of each non-empty span in turn, opened as the caller reaches it."""
    for span in spans:
        if span.start is not None and span.end is not None and span.start >= span.end:
            continue
        key_range = KeyRange(
            start=span.start, start_inclusive=True, end=span.end, end_inclusive=False
        )
        yield await call(
            calls.method(source, "scan_with_options", key_range, scan_options(False)), where
        )


async def keys_in(
    source: Any, spans: list[KeySpan], max_keys: int, where: str
) -> tuple[list[bytes], int]:
    """(every key stored in `spans`, how many of them are live): expired keys are listed too
    (their tombstones are harmless) but not counted. At most `max_keys` keys: one more is an
    InvalidArgumentError, and nothing is deleted."""
    keys: list[bytes] = []
    live = 0
    async for iterator in _span_scans(source, spans, where):
        while True:
            with translating(where):
                found, _, expires = await calls.next_columns(
                    iterator, min(1024, max_keys + 1 - len(keys))
                )
            if not found:
                break
            keys.extend(found)
            live_at = live_positions(expires)
            live += len(found) if live_at is None else len(live_at)
            if len(keys) > max_keys:
                raise InvalidArgumentError(
                    f"{where}: the range holds more than max_keys={max_keys} keys; nothing was "
                    "deleted (raise max_keys, or delete it in pieces with start/end)",
                    field="max_keys",
                    value=max_keys,
                )
    return keys, live


async def expired_in(source: Any, spans: list[KeySpan], limit: int, where: str) -> list[bytes]:
    """Up to `limit` keys in `spans` whose rows are stored but expired (reads hide them until
    a flush or compaction drops them): what Store.purge_expired tombstones."""
    found_keys: list[bytes] = []
    async for iterator in _span_scans(source, spans, where):
        while len(found_keys) < limit:
            with translating(where):
                found, _, expires = await calls.next_columns(iterator, 1024)
            if not found:
                break
            live_at = live_positions(expires)
            if live_at is None:
                continue
            live = set(live_at)
            found_keys += [key for at, key in enumerate(found) if at not in live]
    return found_keys[:limit]
