"""Scans: async iterators over decoded records, built on the binding's next_batch.

A scan walks one or more key ranges (one per record-type version) in order, decodes each key
with the RecordType that owns the range and each value with that version's codec, and keeps
a cursor (naming the last raw key yielded) from which a later scan can resume.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from itertools import repeat
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, overload

from opendata_kv.errors import (
    CursorError,
    InvalidArgumentError,
    KeyDecodeError,
    OpendataKvError,
    ValueDecodeError,
    check_choice,
    check_count,
    show_bytes,
)
from opendata_kv.keys import Key, RecordType, Schema, intersect, is_empty, prefix_successor
from opendata_kv.native import calls, driver, records
from opendata_kv.native.errors import FOREIGN, translating
from opendata_kv.native.slatedb import (
    DurabilityLevel,
    IterationOrder,
)
from opendata_kv.native.slatedb import ScanOptions as NativeScanOptions
from opendata_kv.store.arrow import record_batches, require_pyarrow
from opendata_kv.store.cursor import encode_cursor
from opendata_kv.store.expiry import live_positions
from opendata_kv.values import UnknownPolicy, Values, batch_decoder

if TYPE_CHECKING:  # defaults (PEP 696): a bare `Record` is Record[Key, Any]
    from typing_extensions import TypeVar as DefaultTypeVar

    K = DefaultTypeVar("K", bound=tuple[Any, ...], default=Key)
    V = DefaultTypeVar("V", default=Any)
else:
    K = TypeVar("K", bound=tuple)
    V = TypeVar("V")


if TYPE_CHECKING or sys.version_info >= (3, 11):

    class Record(NamedTuple, Generic[K, V]):
        """One stored record: the decoded key, the decoded value, and the raw key bytes.
        `Record[PostKey, Post]` for a RecordType[PostKey, Post] (bare: Record[Any, Any])."""

        key: K
        value: V
        raw_key: bytes

else:  # Python 3.10 has no generic NamedTuple: the same class, subscriptable

    class Record(NamedTuple):
        """One stored record: the decoded key, the decoded value, and the raw key bytes."""

        key: Key
        value: Any
        raw_key: bytes

        __class_getitem__ = classmethod(GenericAlias)


def object_gone(exc: BaseException) -> bool:
    """True for slatedb's error when an object it was reading no longer exists."""
    message = str(getattr(exc, "message", None) or exc).lower()
    return "not found" in message and ".sst" in message


class RawRecord(NamedTuple):
    """A row yielded undecoded: with `scan_all(on_unknown="raw")` one whose key no RecordType
    of the schema owns (`error` None), with `on_error="raw"` one whose key or value failed to
    decode (`error` says why). `key` and `raw_key` are the key bytes, `value` the stored bytes.
    """

    key: bytes
    value: bytes
    raw_key: bytes
    error: OpendataKvError | None = None


R = TypeVar("R", bound=Record[Any, Any] | RawRecord)

ErrorPolicy = Literal["raise", "skip", "raw"]
ERROR_POLICIES: tuple[ErrorPolicy, ...] = ("raise", "skip", "raw")


def check_error_policy(policy: object) -> ErrorPolicy:
    """Validate an on_error policy name."""
    return check_choice(policy, ERROR_POLICIES, "on_error")


_DECODE_ERRORS = (KeyDecodeError, ValueDecodeError)


def _NO_VALUES(batch: list[bytes]) -> list[Any]:
    """A keys-only scan's value decoder: every value skipped."""
    return [None] * len(batch)


def _raw_rows(keys: list[bytes], data: list[bytes]) -> list[RawRecord]:
    """An undecoded scan's rows."""
    return list(map(RawRecord, keys, data, keys))


#: rows decoded at a time for `async for` (see Scan._fill)
DECODE_CHUNK = 128


@dataclass(frozen=True)
class KeySpan:
    """One contiguous key range to walk; `record_type` None means dispatch per key by schema."""

    record_type: RecordType | None
    start: bytes | None
    end: bytes | None


#: Bytes slatedb reads ahead of a scan's position in an SST, per request (one request per
#: block when 1). Measured on 200,000 msgpack rows in SSTs (bench notes in README,
#: Performance): 1 B: 25-35 µs/row cold; 64 KiB: 8-10; 256 KiB: ~9, and the best first-row
#: and total times for prefix scans of 10, 1,000 and 100,000 rows.
READ_AHEAD_BYTES = 256 * 1024
#: Read-ahead of bulk scans (`fill_cache=False`), which read long ranges and care little for
#: the first row: on 500,000 rows in one compacted SST run, next_batch alone took 6.5-6.6
#: µs/row at 4 MiB against 8.5-8.6 at 256 KiB (the first row of a 100,000-row prefix scan: 30
#: against 7.5 ms, which is why point-ish scans keep READ_AHEAD_BYTES).
BULK_READ_AHEAD_BYTES = 4 * 1024 * 1024
#: Requests of that size slatedb keeps in flight per SST a scan reads (its `max_fetch_tasks`):
#: they start together, so a scan's window is this many times the read-ahead, fetched in one
#: round trip on object storage. Through a delaying proxy (docs/object-storage.md, issue 43)
#: a 10,000-row scan of ~1.5 MB took 7 waves with one request of 256 KiB in flight, 3 with
#: 4 and 2 with 8 (the SST index, then every block at once). A window is also what a streaming
#: read holds beside its batch: 2 MiB for scans, 16 MiB for bulk scans.
FETCH_TASKS = 8
BULK_FETCH_TASKS = 4
#: The lean window of a one-shot walk over a whole store whose memory must stay bounded
#: (`opendata-kv stats`, lean_read_ahead): 1 MiB requests, 2 in flight per SST, blocks kept out
#: of the cache. The bulk window is what held `stats` of 10M records at 364 MiB peak RSS:
#: at 1M records, 4 MiB x 4 peaked at 210 MiB, 4 MiB x 1 at 158, 1 MiB x 2 at 120 and 256 KiB
#: x 8 at 121, each at the same CPU (docs/performance.md, "The inspection tools at scale").
#: On object storage it still reads 2 MiB a round trip per SST, as a scan does.
LEAN_READ_AHEAD_BYTES = 1024 * 1024
LEAN_FETCH_TASKS = 2
#: A scan whose `limit` is at most this many rows keeps one request in flight: a page of a
#: listing needs one window, and the rest would be bytes fetched for nothing.
SHORT_SCAN = 256


def native_scan_options(reverse: bool, fill_cache: bool = True, short: bool = False) -> Any:
    """slatedb's ScanOptions (not the store's ScanOptions value) that see the writer's own
    unflushed writes, in the asked order. `fill_cache` False keeps the blocks read out of the
    block cache and reads further ahead (bulk scans); `short` keeps one request in flight (a
    scan of a few rows)."""
    return NativeScanOptions(
        durability_filter=DurabilityLevel.MEMORY,
        dirty=False,
        read_ahead_bytes=READ_AHEAD_BYTES if fill_cache else BULK_READ_AHEAD_BYTES,
        cache_blocks=fill_cache,
        max_fetch_tasks=1 if short else FETCH_TASKS if fill_cache else BULK_FETCH_TASKS,
        order=IterationOrder.DESCENDING if reverse else IterationOrder.ASCENDING,
    )


#: the older name, still imported by store/indexes/old_values.py
scan_options = native_scan_options


def lean_scan_options(reverse: bool) -> Any:
    """slatedb's ScanOptions for a lean one-shot walk: the LEAN_* window, no block caching."""
    options = native_scan_options(reverse, fill_cache=False)
    options.read_ahead_bytes = LEAN_READ_AHEAD_BYTES
    options.max_fetch_tasks = LEAN_FETCH_TASKS
    return options


_LEAN_OPTIONS = {reverse: lean_scan_options(reverse) for reverse in (False, True)}

_OPTIONS = {
    (reverse, fill, short): native_scan_options(reverse, fill, short)
    for reverse in (False, True)
    for fill in (False, True)
    for short in (False, True)
}


def _keep_expiries(into: dict[bytes, int], keys: list[bytes], expires: list[int | None]) -> None:
    """Remember the expiry of each row that has one (a build gives it to the row's entries)."""
    if expires.count(None) != len(expires):
        into.update((k, e) for k, e in zip(keys, expires, strict=True) if e is not None)


def check_cursor(spans: list[KeySpan], cursor: bytes, where: str) -> None:
    """CursorError unless `cursor` lies in one of the scan's spans: a cursor resumes the scan
    it came from, and one from another record type would silently walk the whole range."""
    for span in spans:
        if (span.start is None or cursor >= span.start) and (span.end is None or cursor < span.end):
            return
    names = sorted({span.record_type.name for span in spans if span.record_type is not None})
    raise CursorError(
        f"{where}: the cursor {show_bytes(cursor)} lies outside the scan's range"
        + (f" (record type {', '.join(names)})" if names else "")
        + "; pass the cursor of a scan with the same record, leading fields and prefix",
        record=names[0] if len(names) == 1 else None,
        field="after",
        value=cursor,
    )


class Scan(Generic[R]):
    """`async for record in scan`: records in key order (reverse: descending).

    Yields `Record`s; a `scan_all(on_unknown="raw")` also yields `RawRecord`s for keys no
    RecordType owns, and `on_error="raw"` for rows that fail to decode. `cursor` names the
    last record yielded (a printable str); pass it as `after=` to resume. `failed` counts the
    rows that failed to decode under on_error "skip" or "raw"; `last_error` is the last such error.
    """

    def __init__(
        self,
        source: Any,
        spans: list[KeySpan],
        *,
        schema: Schema,
        values: Values,
        reverse: bool = False,
        limit: int | None = None,
        after: bytes | None = None,
        start: bytes | None = None,
        end: bytes | None = None,
        on_unknown: UnknownPolicy = "raise",
        on_error: ErrorPolicy = "raise",
        batch_size: int = 1024,
        upgrade: bool = True,
        fill_cache: bool = True,
        check_expiry: bool = True,
        where: str = "scan",
    ) -> None:
        check_count(limit, "limit", 0, none_ok=True, hint=" (0 yields nothing) or None")
        check_count(batch_size, "batch_size", 1)
        self._source = source
        self._spans = list(reversed(spans)) if reverse else list(spans)
        self._schema = schema
        self._values = values
        self._reverse = reverse
        self._remaining = limit
        self._after = after
        self._start = start
        self._end = end
        self._on_unknown = on_unknown
        self._on_error = check_error_policy(on_error)
        #: rows that failed to decode (skipped with on_error="skip", yielded as RawRecord
        #: with on_error="raw"), and the last such error
        self.failed = 0
        self.last_error: OpendataKvError | None = None
        self._max_batch = batch_size
        # the first batch is small, so the first row comes soon, unless a limit within one
        # batch says how many rows are wanted: then one batch fetches them all (a page)
        paged = limit is not None and 0 < limit <= batch_size
        self._batch: int = limit if paged and limit is not None else min(64, batch_size)
        self._upgrade = upgrade
        self._shape = "records"  # "keys" / "values": the other half is not decoded
        #: shape "rows": what makes the rows (decode_rows_with)
        self._make_rows: Callable[[list[bytes], list[bytes]], list[Any]] | None = None
        short = limit is not None and limit <= SHORT_SCAN
        self._options = _OPTIONS[reverse, bool(fill_cache), short]
        self._check_expiry = check_expiry
        self._where = where
        self._span_index = 0
        self._iterator: Any = None
        self._decode_rows: Callable[[list[bytes], list[bytes]], list[Any]] | None = None
        # fetched keys and values of live rows, decoded from _row_pos on
        self._keys: list[bytes] = []
        self._data: list[bytes] = []
        self._row_pos = 0
        self._last_read: bytes | None = None  # key of the last row fetched (for _reseek)
        self._buffer: list[R] = []
        self._pos = 0
        self._cursor: bytes | None = after
        self._more: bool | None = None  # has_more's answer once the limit is reached
        #: set to a dict to collect the expiry (Unix ms) of every live row read that has one
        self.expiries: dict[bytes, int] | None = None
        # Set for readers that pin nothing (FOLLOW_LATEST): called when an SST the iterator
        # reads was deleted by the writer's garbage collector, with the attempt number; it
        # waits for the reader to see a newer manifest (the scan then re-seeks after its
        # cursor) or raises SnapshotGoneError.
        self.on_gone: Callable[[int], Awaitable[None]] | None = None
        self._gone = 0

    @property
    def cursor(self) -> str | None:
        """Page cursor (a printable str, see store/cursor.py) of the last record yielded
        (`after` before the first): pass it as `after=` to a new scan to resume exactly there."""
        position = self.position
        return None if position is None else encode_cursor(position)

    @property
    def position(self) -> bytes | None:
        """The raw key `cursor` names (the last record yielded, `after` before the first)."""
        pos = self._pos
        if pos:
            raw_key: bytes = self._buffer[pos - 1].raw_key
            return raw_key
        return self._cursor

    def __aiter__(self) -> AsyncIterator[R]:
        # The C accelerator's ScanRows hands over decoded rows with no coroutine per step;
        # else an async generator: each step costs about a third of an `async def __anext__`.
        rows: AsyncIterator[R] | None = records.scan_rows(self)
        return self._records() if rows is None else rows

    async def _records(self) -> AsyncIterator[R]:
        """The rows of `async for`; reads the position each step, so next_chunk() and
        __anext__() may be mixed with it."""
        while True:
            buffer = self._buffer
            pos = self._pos
            end = len(buffer)
            while pos < end:
                self._pos = pos + 1
                yield buffer[pos]
                if self._buffer is not buffer:  # next_chunk() or has_more() refilled it
                    break
                pos = self._pos
            else:
                if not await self._fill():
                    return

    async def __anext__(self) -> R:
        # no attribute writes besides the position
        pos = self._pos
        buffer = self._buffer
        if pos >= len(buffer):
            if not await self._fill():
                raise StopAsyncIteration
            buffer, pos = self._buffer, 0
        self._pos = pos + 1
        return buffer[pos]

    async def next_chunk(self, size: int | None = None) -> list[R]:
        """Up to `size` records (the rest of the current batch by default); [] at the end.
        A `size` of at most DECODE_CHUNK decodes no more rows than that ahead (see _fill)."""
        whole = size is None or size > DECODE_CHUNK
        if self._pos >= len(self._buffer) and not await self._fill(whole=whole):
            return []
        end = len(self._buffer) if size is None else min(len(self._buffer), self._pos + size)
        chunk = self._buffer[self._pos : end]
        self._pos = end
        return chunk

    async def has_more(self) -> bool:
        """True when another record follows: before `limit` is reached, whether the scan has
        one more to yield; once it is, whether one more lies in the range past the limit (one
        row is read from the open iterator, no new scan). A page of `limit` records thus
        tells whether a next page exists without an empty round trip to find out."""
        if self._pos < len(self._buffer):
            return True
        if self._remaining is None or self._remaining > 0:
            return await self._fill()
        if self._more is None:
            buffer, pos, cursor = self._buffer, self._pos, self.position
            self._remaining = 1
            try:
                self._more = await self._fill()
            finally:
                self._remaining = 0
                self._buffer, self._pos, self._cursor = buffer, pos, cursor
        return self._more

    async def to_list(self) -> list[R]:
        """Every remaining record."""
        out: list[R] = []
        while chunk := await self.next_chunk():
            out += chunk
        return out

    def to_arrow(self, *, expiry: bool = False, raw_key: bool = False) -> Any:
        """The remaining records as a pyarrow.RecordBatchReader (docs/arrow.md), read a batch
        at a time as it is consumed; `expiry` adds an `_expires` column, `raw_key` a `_key`
        column. Needs the `arrow` extra."""
        require_pyarrow()
        if self._shape != "records":
            raise InvalidArgumentError(
                f"to_arrow: this scan yields {self._shape}; call to_arrow on a scan of records",
                field="to_arrow",
            )
        if expiry and self.expiries is None:
            self.expiries = {}
        expiries = self.expiries if expiry else None
        run = calls.sync if self.on_gone is None else driver.run

        def chunks() -> Iterator[list[Any]]:
            while chunk := run(self.next_chunk()):
                if expiries is None:
                    yield chunk
                else:  # popped as the rows go: the dict holds only rows fetched, not yet given
                    yield [(r, expiries.pop(r.raw_key, None)) for r in chunk]

        spans = self._spans
        types = [s.record_type for s in spans if s.record_type is not None]
        if len(types) < len(spans):  # a scan_all: any record type of the schema
            types = list(self._schema)
        return record_batches(
            chunks(),
            list(dict.fromkeys(types)),
            self._values,
            rows=self._max_batch,
            upgrade=self._upgrade,
            expiry=expiry,
            raw_key=raw_key,
        )

    def undecoded(self) -> Scan[RawRecord]:
        """This scan yielding every row as a RawRecord, neither key nor value decoded (the
        rows of a key space no RecordType owns, such as index entries)."""
        self._shape = "raw"
        return self  # type: ignore[return-value]

    @overload
    def keys(self: Scan[Record[K, V]]) -> AsyncIterator[K]: ...

    @overload
    def keys(self) -> AsyncIterator[Key]: ...

    def keys(self) -> AsyncIterator[Any]:
        """`async for key in store.scan(...).keys()`: the keys only; rows fetched from now on
        have their values skipped, not decoded (the cursor still advances)."""
        self._shape = "keys"
        return self._field(0)

    @overload
    def values(self: Scan[Record[K, V]]) -> AsyncIterator[V]: ...

    @overload
    def values(self) -> AsyncIterator[Any]: ...

    def values(self) -> AsyncIterator[Any]:
        """`async for value in store.scan(...).values()`: the values only; rows fetched from
        now on have their keys skipped, not decoded."""
        self._shape = "values"
        return self._field(1)

    async def _field(self, index: int) -> AsyncIterator[Any]:
        async for record in self:
            yield record[index]

    async def count(self) -> int:
        """How many live rows remain (up to `limit`), read a batch at a time; nothing is
        decoded. Consumes the scan."""
        total = len(self._buffer) - self._pos + len(self._keys) - self._row_pos
        self._buffer, self._pos, self._keys, self._data, self._row_pos = [], 0, [], [], 0
        remaining = self._remaining
        if remaining is not None:
            total = min(total, remaining)
            remaining -= total
        while remaining is None or remaining > 0:
            want = self._max_batch if remaining is None else min(remaining, self._max_batch)
            with translating(self._where):
                if self._iterator is None and not await self._open_next_span():
                    break
                keys, _, expires = await calls.next_columns(self._iterator, want)
            if not keys:
                self._iterator = None
                continue
            live_at = live_positions(expires) if self._check_expiry else None
            live = len(keys) if live_at is None else len(live_at)
            total += live
            if remaining is not None:
                remaining -= live
        self._remaining = remaining
        return total

    async def seek(self, key: bytes) -> bool:
        """Go on from the first row at or after `key`, past the rows between: within the rows
        already fetched, or with a seek on the open iterator, which blocks slatedb already
        fetched serve (a skip within the read-ahead window costs no request). False when this
        scan cannot (reverse, a limit, no open iterator, `key` not past the last row handed
        out, or outside the span being read): start a new scan at `key` instead. (Should an
        SST vanish under a reader later, the scan resumes after the last row handed out, and
        the skipped rows come again.)"""
        if self._reverse or self._remaining is not None or self._iterator is None:
            return False
        span = self._spans[self._span_index - 1]
        lo, hi = intersect((span.start, span.end), (self._start, self._end))
        position = self.position
        if (
            (position is not None and key <= position)
            or (lo is not None and key < lo)
            or (hi is not None and key >= hi)
        ):
            return False
        buffer, pos = self._buffer, self._pos
        while pos < len(buffer) and buffer[pos].raw_key < key:
            pos += 1
        if pos:
            self._cursor = buffer[pos - 1].raw_key
        self._pos = pos
        if pos < len(buffer):  # a decoded row at or after `key`: the rest follow it
            return True
        self._buffer, self._pos = [], 0
        if self._last_read is not None and key <= self._last_read:  # fetched already
            self._row_pos = bisect_left(self._keys, key, self._row_pos)
            return True
        with translating(self._where):
            await calls.seek(self._iterator, key)
        self._keys, self._data, self._row_pos = [], [], 0
        self._last_read = self._cursor
        return True

    async def _open_next_span(self) -> bool:
        """Open an iterator on the next non-empty span; slatedb's errors go to the caller."""
        while self._span_index < len(self._spans):
            span = self._spans[self._span_index]
            self._span_index += 1
            lo, hi = intersect((span.start, span.end), (self._start, self._end))
            lo_inclusive = True
            after = self._after
            if after is not None:
                if not self._reverse and (lo is None or after >= lo):
                    lo, lo_inclusive = after, False
                if self._reverse and (hi is None or after < hi):
                    hi = after
            if is_empty((lo, hi)):
                continue
            self._iterator = await calls.scan(
                self._source, lo, lo_inclusive, hi, False, self._options
            )
            self._decode_rows = self._row_decoder(span.record_type, lo, hi)
            return True
        return False

    def _reseek(self) -> None:
        """Reopen the current span just after the last row read (every fetched row is
        decoded and the buffer consumed)."""
        if self._buffer:
            self._cursor = self._buffer[-1].raw_key
            self._buffer, self._pos = [], 0
        if self._last_read is not None:
            self._after = self._last_read
        self._keys, self._data, self._row_pos = [], [], 0
        self._span_index -= 1
        self._iterator = None

    async def _fill(self, whole: bool = False) -> bool:
        """Decode the next non-empty piece of fetched rows into the buffer, fetching a batch
        when none are pending; False at the end.

        Rows are fetched `batch_size` at a time but decoded DECODE_CHUNK at a time (`whole`:
        all pending ones, for next_chunk): a row-at-a-time consumer then keeps few decoded
        objects alive at once, which stays under the GC's young-generation threshold and in
        the CPU cache; decoding a whole batch ahead cost ~1 µs/row more on a 1M-row scan.
        """
        while True:
            keys = self._keys
            start = self._row_pos
            total = len(keys)
            if start < total:
                end = total if whole else min(total, start + DECODE_CHUNK)
                self._row_pos = end
                assert self._decode_rows is not None
                if start or end < total:
                    records = self._decode_rows(keys[start:end], self._data[start:end])
                else:
                    records = self._decode_rows(keys, self._data)
                if self._remaining is not None:
                    self._remaining -= len(records)
                if records:
                    if self._pos:
                        self._cursor = self._buffer[self._pos - 1].raw_key
                    self._buffer, self._pos = records, 0
                    return True
                continue
            if self._remaining is not None and self._remaining <= 0:
                return False
            want = self._batch
            if self._remaining is not None:
                want = min(want, self._remaining)
            # opening a span reads ahead too, so a vanished SST can show at either step
            gone = None if self.on_gone is None else object_gone
            try:
                with translating(self._where, unless=gone):
                    if self._iterator is None and not await self._open_next_span():
                        return False
                    keys, values, expires = await calls.next_columns(self._iterator, want)
            except FOREIGN:  # an SST that vanished, with on_gone to call
                assert self.on_gone is not None
                self._gone += 1
                await self.on_gone(self._gone)
                self._reseek()
                continue
            self._batch = min(self._batch * 2, self._max_batch)
            if not keys:
                self._iterator = None
                continue
            self._last_read = keys[-1]
            if self._check_expiry:
                live = live_positions(expires)
                if live is not None:  # expired rows leave no expiry behind in `expiries`
                    keys = [keys[i] for i in live]
                    values = [values[i] for i in live]
                    expires = [expires[i] for i in live]
            if self.expiries is not None:
                _keep_expiries(self.expiries, keys, expires)
            self._keys, self._data, self._row_pos = keys, values, 0

    def _row_decoder(
        self, record_type: RecordType | None, lo: bytes | None = None, hi: bytes | None = None
    ) -> Callable[[list[bytes], list[bytes]], list[Any]]:
        """A function decoding a batch of rows (their keys and values), compiled once per span.

        With the C accelerator, native/records.py's decoder builds the batch's Records in C
        when it takes every row. Otherwise the fast path decodes the whole batch with a few
        C-level passes: the keys through RecordType.decode_many, the values through the
        codec's `fast_decode` (which may raise anything on bad bytes), the Records built by
        map. When anything in the batch fails, the batch is decoded again row by row, where
        each failure gets the precise error and the scan's on_error policy; nothing comes
        back half-decoded.
        """
        if self._shape == "raw":
            return _raw_rows
        if self._shape == "rows" and self._make_rows is not None:
            return self._make_rows
        if record_type is None:
            return self._decode_dispatch
        decode_keys = record_type.decode_many
        head = record_type.head
        # every key of [lo, hi) starts with the record's prefix: decode_many need not check
        prefixed = (
            lo is not None
            and lo.startswith(head)
            and hi is not None
            and hi <= (prefix_successor(head) or hi)
        )
        plan = self._values.plan(record_type)
        shape = self._shape
        upgrade = plan.upgrade if self._upgrade and shape != "keys" else None
        new = tuple.__new__
        decode_values = _NO_VALUES if shape == "keys" else batch_decoder(plan.codec)
        slow = self._decode_one
        # the C accelerator's decoder of the same rows (native/records.py), when it takes them
        native = records.decoder(record_type, plan.codec, upgrade, shape, Record)

        def fast(raw_keys: list[bytes], data: list[bytes]) -> list[Record]:
            if shape == "values":
                keys: list[Any] = [None] * len(raw_keys)
            else:
                keys = decode_keys(raw_keys, prefixed=prefixed)
            data = decode_values(data)
            if upgrade is not None:
                data = list(map(upgrade, data))
            return list(map(new, repeat(Record), zip(keys, data, raw_keys, strict=True)))

        def decode(raw_keys: list[bytes], data: list[bytes]) -> list[Record]:
            nonlocal native
            if native is not None:
                try:
                    built = native(raw_keys, data, prefixed)
                except Exception:  # an upgrade or a codec raised: Python names the row
                    built = None
                if built is not None:
                    return built
            try:
                built = fast(raw_keys, data)
            except Exception:
                pass
            else:  # rows C leaves to Python that Python takes (e.g. timestamps): stay there
                native = None
                return built
            out: list[Record] = []
            for key, value in zip(raw_keys, data, strict=True):
                record = slow(record_type, key, value)
                if record is not None:
                    out.append(record)
            return out

        return decode

    def _decode_one(self, record_type: RecordType, key: bytes, value: bytes) -> Any:
        """One row decoded on the reference path; a failure goes to the on_error policy
        (raise, skip: None, raw: a RawRecord holding the error)."""
        shape = self._shape
        try:
            return Record(
                None if shape == "values" else record_type.decode(key),
                None
                if shape == "keys"
                else self._values.decode(record_type, key, value, upgrade=self._upgrade),
                key,
            )
        except _DECODE_ERRORS as exc:
            if self._on_error == "raise":
                raise
            self.failed += 1
            self.last_error = exc
            if self._on_error == "raw":
                return RawRecord(key, value, key, exc)
            return None

    def _decode_dispatch(self, keys: list[bytes], data: list[bytes]) -> list[Any]:
        """Decode rows of a mixed range: each key's prefix picks its RecordType."""
        out: list[Any] = []
        schema, values = self._schema, self._values
        slow = self._decode_one
        for key, value in zip(keys, data, strict=True):
            record_type = schema.try_record_type_of(key)
            if record_type is None:
                if self._on_unknown == "skip":
                    continue
                if self._on_unknown == "raw":
                    out.append(RawRecord(key, value, key))
                    continue
                raise values.unknown(key)
            record = slow(record_type, key, value)
            if record is not None:
                out.append(record)
        return out


def decode_rows_with(
    scan: Scan[Any], make_rows: Callable[[list[bytes], list[bytes]], list[Any]]
) -> Scan[Any]:
    """`scan`, its rows made by `make_rows(keys, values)` (one row per key, each with the
    `raw_key` it came from) from the next range it opens: rows of a key space no RecordType
    owns, decoded in one pass with no RawRecord between (covering backlink pages). A
    function, not a Scan method: a reader's plan, not an option of the public scan."""
    scan._shape = "rows"
    scan._make_rows = make_rows
    return scan


#: the smallest read-ahead sized_read_ahead asks for (a block or so)
MIN_PAGE_READ_AHEAD = 4 * 1024
_SIZED_OPTIONS: dict[tuple[bool, bool, int], Any] = {}


def sized_read_ahead(scan: Scan[R], nbytes: int) -> Scan[R]:
    """`scan`, reading ahead about `nbytes` (rounded up to a power of two, from
    MIN_PAGE_READ_AHEAD to READ_AHEAD_BYTES) with one request in flight, from the next
    range it opens: a page that knows its size. slatedb fetches the blocks of each
    read-ahead in a task of its runtime, even from the block cache; a page of ~40 KB opened
    with the 256 KiB window waited for 64 blocks before its first row (a ~3.5 ms open under
    load, against ~1 ms with 64 KiB: docs/performance.md, issue 39's pages). On object
    storage a window that holds the page is still one request."""
    size = MIN_PAGE_READ_AHEAD
    while size < nbytes and size < READ_AHEAD_BYTES:
        size *= 2
    fill = bool(scan._options.cache_blocks)
    key = (scan._reverse, fill, size)
    options = _SIZED_OPTIONS.get(key)
    if options is None:
        options = native_scan_options(scan._reverse, fill, short=True)
        options.read_ahead_bytes = size
        _SIZED_OPTIONS[key] = options
    scan._options = options
    return scan


def lean_read_ahead(scan: Scan[R]) -> Scan[R]:
    """`scan`, reading with the lean window (LEAN_READ_AHEAD_BYTES x LEAN_FETCH_TASKS per SST,
    blocks kept out of the cache) from the next range it opens: a one-shot walk over a whole
    store that must stay in bounded memory (`opendata-kv stats`). A function, not a Scan
    method: an option of the CLI's walk, not of the public scan (nor of its sync face)."""
    scan._options = _LEAN_OPTIONS[scan._reverse]
    return scan
