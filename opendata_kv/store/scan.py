"""Scans: async iterators over decoded records, built on the binding's next_batch.

A scan walks one or more key ranges (one per record-type version) in order, decodes each key
with the RecordType that owns the range and each value with that version's codec, and keeps
a cursor (the last raw key yielded) from which a later scan can resume.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from slatedb.uniffi import (
    DurabilityLevel,
    IterationOrder,
    KeyRange,
    ScanOptions,
)

from opendata_kv.errors import CursorError, InvalidArgumentError, show_bytes
from opendata_kv.keys import Key, RecordType, Schema, intersect, is_empty
from opendata_kv.store.failures import FOREIGN, translate
from opendata_kv.values import RawCodec, UnknownPolicy, Values


class Record(NamedTuple):
    """One stored record: the decoded key, the decoded value, and the raw key bytes."""

    key: Key
    value: Any
    raw_key: bytes


def object_gone(exc: BaseException) -> bool:
    """True for slatedb's error when an object it was reading no longer exists."""
    message = str(getattr(exc, "message", None) or exc).lower()
    return "not found" in message and ".sst" in message


class RawRecord(NamedTuple):
    """A row whose key no RecordType of the schema owns, read with `scan_all(on_unknown="raw")`:
    `key` and `raw_key` are the key bytes, `value` the stored bytes (nothing is decoded)."""

    key: bytes
    value: bytes
    raw_key: bytes


R = TypeVar("R", bound=Record | RawRecord)


@dataclass(frozen=True)
class KeySpan:
    """One contiguous key range to walk; `record_type` None means dispatch per key by schema."""

    record_type: RecordType | None
    start: bytes | None
    end: bytes | None


def scan_options(reverse: bool) -> Any:
    """ScanOptions that see the writer's own unflushed writes, in the asked order."""
    return ScanOptions(
        durability_filter=DurabilityLevel.MEMORY,
        dirty=False,
        read_ahead_bytes=1,
        cache_blocks=True,
        max_fetch_tasks=1,
        order=IterationOrder.DESCENDING if reverse else IterationOrder.ASCENDING,
    )


_OPTIONS = {False: scan_options(False), True: scan_options(True)}


def live_rows(rows: list[Any]) -> list[Any]:
    """`rows` without those whose TTL has passed (slatedb 0.17 returns them until a flush or
    compaction drops them; see ReadView)."""
    now = time.time_ns() // 1_000_000
    for kv in rows:
        expire = kv.expire_ts
        if expire is not None and expire <= now:
            break
    else:
        return rows
    return [kv for kv in rows if kv.expire_ts is None or kv.expire_ts > now]


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
    RecordType owns. `cursor` is the raw key of the last record yielded; pass it as `after=`
    to resume.
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
        batch_size: int = 1024,
        upgrade: bool = True,
        check_expiry: bool = True,
        where: str = "scan",
    ) -> None:
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidArgumentError(
                f"limit must be an int >= 0 (0 yields nothing) or None, got {limit!r}",
                field="limit",
                value=limit,
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(
                f"batch_size must be an int >= 1, got {batch_size!r}",
                field="batch_size",
                value=batch_size,
            )
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
        self._max_batch = batch_size
        self._batch = min(64, batch_size)
        self._upgrade = upgrade
        self._check_expiry = check_expiry
        self._where = where
        self._span_index = 0
        self._iterator: Any = None
        self._decode_rows: Callable[[list[Any]], list[Any]] | None = None
        self._buffer: list[R] = []
        self._pos = 0
        self._cursor: bytes | None = after
        self._more: bool | None = None  # has_more's answer once the limit is reached
        # Set for readers that pin nothing (FOLLOW_LATEST): called when an SST the iterator
        # reads was deleted by the writer's garbage collector, with the attempt number; it
        # waits for the reader to see a newer manifest (the scan then re-seeks after its
        # cursor) or raises SnapshotGoneError.
        self.on_gone: Callable[[int], Awaitable[None]] | None = None
        self._gone = 0

    @property
    def cursor(self) -> bytes | None:
        """Raw key of the last record yielded (`after` before the first): pass it as `after=`
        to a new scan to resume exactly there."""
        pos = self._pos
        if pos:
            raw_key: bytes = self._buffer[pos - 1].raw_key
            return raw_key
        return self._cursor

    def __aiter__(self) -> Scan[R]:
        return self

    async def __anext__(self) -> R:
        # the per-row hot path: no attribute writes besides the position
        pos = self._pos
        buffer = self._buffer
        if pos >= len(buffer):
            if not await self._fill():
                raise StopAsyncIteration
            buffer, pos = self._buffer, 0
        self._pos = pos + 1
        return buffer[pos]

    async def next_chunk(self, size: int | None = None) -> list[R]:
        """Up to `size` records (the rest of the current batch by default); [] at the end."""
        if self._pos >= len(self._buffer) and not await self._fill():
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
            buffer, pos, cursor = self._buffer, self._pos, self.cursor
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

    async def _open_next_span(self) -> bool:
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
            key_range = KeyRange(
                start=lo, start_inclusive=lo_inclusive, end=hi, end_inclusive=False
            )
            try:
                self._iterator = await self._source.scan_with_options(
                    key_range, _OPTIONS[self._reverse]
                )
            except FOREIGN as exc:
                raise translate(exc, self._where) from exc
            self._decode_rows = self._row_decoder(span.record_type)
            return True
        return False

    def _reseek(self) -> None:
        """Reopen the current span just after the last row read (the buffer is consumed)."""
        if self._buffer:
            self._after = self._cursor = self._buffer[-1].raw_key
            self._buffer, self._pos = [], 0
        self._span_index -= 1
        self._iterator = None

    async def _fill(self) -> bool:
        """Load the next non-empty batch into the buffer; False at the end."""
        while True:
            if self._remaining is not None and self._remaining <= 0:
                return False
            if self._iterator is None and not await self._open_next_span():
                return False
            want = self._batch
            if self._remaining is not None:
                want = min(want, self._remaining)
            try:
                rows = await self._iterator.next_batch(want)
            except FOREIGN as exc:
                if self.on_gone is None or not object_gone(exc):
                    raise translate(exc, self._where) from exc
                self._gone += 1
                await self.on_gone(self._gone)
                self._reseek()
                continue
            self._batch = min(self._batch * 2, self._max_batch)
            if not rows:
                self._iterator = None
                continue
            if self._check_expiry:
                rows = live_rows(rows)
            assert self._decode_rows is not None
            records = self._decode_rows(rows)
            if self._remaining is not None:
                self._remaining -= len(records)
            if records:
                if self._pos:
                    self._cursor = self._buffer[self._pos - 1].raw_key
                self._buffer, self._pos = records, 0
                return True

    def _row_decoder(self, record_type: RecordType | None) -> Callable[[list[Any]], list[Any]]:
        """A function decoding a batch of KeyValue rows, compiled once per span.

        The fast path decodes the whole batch in one comprehension, using the codec's
        `fast_decode` when it has one (it may raise anything on bad bytes). On any failure the
        batch is decoded again row by row through Values.decode, whose error names the key and
        the failing codec or upgrade; nothing comes back half-decoded.
        """
        if record_type is None:
            return self._decode_dispatch
        decode_key = record_type.decode
        plan = self._values.plan(record_type)
        codec = plan.codec
        upgrade = plan.upgrade if self._upgrade else None
        values = self._values
        new = tuple.__new__
        want_upgrade = self._upgrade
        decode_value: Callable[[bytes], Any] = getattr(codec, "fast_decode", None) or codec.decode
        raw_values = isinstance(codec, RawCodec)

        def fast(rows: list[Any]) -> list[Record]:
            if upgrade is not None:
                return [
                    new(Record, (decode_key(kv.key), upgrade(decode_value(kv.value)), kv.key))
                    for kv in rows
                ]
            if raw_values:
                return [new(Record, (decode_key(kv.key), kv.value, kv.key)) for kv in rows]
            return [
                new(Record, (decode_key(kv.key), decode_value(kv.value), kv.key)) for kv in rows
            ]

        def decode(rows: list[Any]) -> list[Record]:
            try:
                return fast(rows)
            except Exception:
                pass
            # Re-decode one by one so the error names the key (and the failing upgrade).
            return [
                new(
                    Record,
                    (
                        decode_key(kv.key),
                        values.decode(record_type, kv.key, kv.value, upgrade=want_upgrade),
                        kv.key,
                    ),
                )
                for kv in rows
            ]

        return decode

    def _decode_dispatch(self, rows: list[Any]) -> list[Any]:
        """Decode rows of a mixed range: each key's prefix picks its RecordType."""
        out: list[Any] = []
        schema, values = self._schema, self._values
        for kv in rows:
            key = kv.key
            record_type = schema.try_record_type_of(key)
            if record_type is None:
                if self._on_unknown == "skip":
                    continue
                if self._on_unknown == "raw":
                    out.append(RawRecord(key, kv.value, key))
                    continue
                raise values.unknown(key)
            out.append(
                Record(
                    record_type.decode(key),
                    values.decode(record_type, key, kv.value, upgrade=self._upgrade),
                    key,
                )
            )
        return out
