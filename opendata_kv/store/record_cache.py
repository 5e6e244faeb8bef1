"""The writer's record cache (issue 40 point 3, after RocksDB's row cache): the stored bytes and
expiry of recently read or written records, by key, bounded in bytes, least recently used out.

Only the writer has one (OpenOptions.record_cache_bytes): it is the only process that writes
its store, so every change passes through it; a reader's would go stale with the writer's
writes. Every write path updates it after slatedb acknowledged the write: a single put or
delete writes its bytes through (or drops the key when another write went through the cache
while it was in flight: slatedb may have applied either last), a batch drops its keys (a
dictionary look-up per record, where writing through cost a batched write ~20% more CPU); an
uncertain write (an error, a cancel) empties it. On the C accelerator a KeyFilter (one bit per
slot of a cheap hash of each key it keeps, native/_accel/cachekeys.c) picks the keys of a batch
worth looking up, so a batch's drop costs a few instructions a record rather than Python's hash
and a dictionary look-up each (docs/performance.md, "What metrics and the record cache cost a
batched put"). A get that misses fills it only when no write touched the cache between its
lookup and its fill
(`generation`), so a read that raced a write never puts back the value the write replaced.
Expiry is kept with the bytes and checked on every hit, as a read of the store checks it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final

from opendata_kv.native import accel, calls
from opendata_kv.native.wire import PointRow

#: bytes counted per entry beyond its key and value (the dict slot, the tuple, the objects)
ENTRY_OVERHEAD: Final = 160


class RecordCache:
    """Stored rows (value bytes, expire_at ms or None) by key, at most `limit` bytes counted
    (ENTRY_OVERHEAD each beside their key and value); `hits` and `misses` count lookups."""

    __slots__ = ("_filter", "_lock", "_rows", "generation", "hits", "limit", "misses", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.hits = 0
        self.misses = 0
        #: changed by every write through the cache: a fill from an older read is refused
        self.generation = 0
        self._rows: OrderedDict[bytes, tuple[bytes, int | None]] = OrderedDict()
        self._lock = threading.Lock()
        #: on the accelerator, the KeyFilter marking every key kept (None: the pure path)
        self._filter = _key_filter()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: bytes) -> PointRow:
        """The cached row of `key` (counted as a hit), or None (a miss)."""
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                self.misses += 1
                return None
            self._rows.move_to_end(key)
            self.hits += 1
            return row

    def fill(self, key: bytes, row: tuple[bytes, int | None], generation: int) -> None:
        """Keep `row`, read from the store after a miss when the cache was at `generation`,
        unless a write went through the cache since."""
        with self._lock:
            if generation == self.generation:
                self._keep(key, row)

    def wrote(self, key: bytes, data: bytes | None, expire_at: int | None, since: int) -> None:
        """A write of `key` that slatedb acknowledged, sent when the cache was at generation
        `since`: its bytes (None: a delete) replace the entry, or, when another write went
        through the cache meanwhile (two writers, either of which slatedb may have applied
        last), the entry is dropped."""
        with self._lock:
            fresh = since == self.generation
            self.generation += 1
            if data is None or not fresh:
                self._drop(key)
            else:
                self._keep(key, (data, expire_at))

    def dropped(self, keys: Iterable[bytes]) -> None:
        """A write of `keys` that slatedb acknowledged, dropped rather than written through:
        a batch's (its keys' next get reads them back), so that keeping the cache costs a
        batched write a look-up per record at most (on the accelerator, only of the keys its
        KeyFilter marks, popped in its C loop)."""
        with self._lock:
            self.generation += 1
            rows = self._rows
            if not rows:
                return
            if self._filter is not None:  # only the keys whose bit is set looked up, in C
                listed = keys if keys.__class__ is list else list(keys)
                self.size -= self._filter.drop(rows, listed, rows.pop, ENTRY_OVERHEAD)
                return
            pop, size = rows.pop, self.size
            for key in rows.keys() & keys:  # the cached ones, found in C (a batch's are few)
                size -= len(key) + len(pop(key)[0]) + ENTRY_OVERHEAD
            self.size = size

    def clear(self) -> None:
        """Drop everything: a write whose outcome or keys are not known."""
        with self._lock:
            self.generation += 1
            self._rows.clear()
            self.size = 0
            if self._filter is not None:
                self._filter.clear()

    def _keep(self, key: bytes, row: tuple[bytes, int | None]) -> None:
        self._drop(key)
        cost = len(key) + len(row[0]) + ENTRY_OVERHEAD
        if cost > self.limit:
            return
        rows = self._rows
        rows[key] = row
        self.size += cost
        marks = self._filter
        if marks is not None and marks.add(key):  # its bits of dropped keys renewed
            marks.rebuild(rows)
        while self.size > self.limit:
            old_key, old = rows.popitem(last=False)
            self.size -= len(old_key) + len(old[0]) + ENTRY_OVERHEAD

    def _drop(self, key: bytes) -> None:
        old = self._rows.pop(key, None)
        if old is not None:
            self.size -= len(key) + len(old[0]) + ENTRY_OVERHEAD


def _key_filter() -> Any:
    """The accelerator's KeyFilter, or None on the pure path. It is sized for the keys the
    cache holds rather than for `limit`: small, its bits stay in the CPU's caches."""
    if not calls.active():
        return None
    module = accel.active_module()
    if module is None or not hasattr(module, "KeyFilter"):
        return None
    return module.KeyFilter()  # sized for the keys held, resized by its rebuilds
