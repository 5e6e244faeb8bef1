"""Index reads (RFC 0010): index_scan (records or entries, with scan's cursor and has-more
semantics), lookup on a unique index, index_count / index_sum from an aggregate index, and
check_indexes. IndexReads is mixed into StoreReader, so a Store and a reader both have them."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, overload

from opendata_kv.checks.integrity import Problem
from opendata_kv.errors import (
    ArgumentTypeError,
    IndexArgumentError,
    IndexStateError,
    InvalidArgumentError,
)
from opendata_kv.keys import Key, prefix_successor
from opendata_kv.native import calls, driver
from opendata_kv.native.errors import translating
from opendata_kv.store.arrow import record_batches, require_pyarrow
from opendata_kv.store.cursor import encode_cursor
from opendata_kv.store.expiry import live_value
from opendata_kv.store.indexes.access import RowReads
from opendata_kv.store.indexes.check import check_index
from opendata_kv.store.indexes.declare import IR, Index
from opendata_kv.store.indexes.layout import (
    decode_entry,
    encode_fields,
    encode_leading,
)
from opendata_kv.store.options import ScanOptions, scan_settings
from opendata_kv.store.ranges import ScanArgs, ScanRange, scan_range
from opendata_kv.store.scan import KeySpan, RawRecord, Record, Scan
from opendata_kv.store.views import ReadView

if TYPE_CHECKING:
    from typing_extensions import Unpack
from opendata_kv.values import batch_decoder

#: what index_count and index_sum take (beside a name): a count or sum index
AggregateIndex = Index[Any, Literal["count", "sum"]]

#: point reads of a unique entry and its record before lookup reads them through a snapshot
LOOKUP_TRIES = 3


class IndexEntry(NamedTuple):
    """One index entry: its field `values`, the primary `key` it points to (a Key; None for an
    aggregate), its own key bytes `raw_key` (the cursor), and an aggregate's count of
    `records` and `sum` of their amounts, as index_count and index_sum give them."""

    values: tuple[Any, ...]
    key: Key | None
    raw_key: bytes
    records: int | None = None  # not `count`: a tuple has a count method
    sum: int | float | None = None

    @property
    def total(self) -> int | None:
        """Deprecated: `records` (the name said a sum, the field holds the record count)."""
        warnings.warn(
            "IndexEntry.total is deprecated: it is the count of records, IndexEntry.records",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.records

    @property
    def amount(self) -> int | float | None:
        """Deprecated: `sum` (an Index's `amount` is what one record adds, this the total)."""
        warnings.warn(
            "IndexEntry.amount is deprecated: it is the group's sum, IndexEntry.sum",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.sum


#: what an IndexScan yields
IT = TypeVar("IT")


class IndexScan(Generic[IT]):
    """`async for item in store.index_scan(...)`: Records (or IndexEntry with records=False)
    in index order. `cursor` names the entry of the last item yielded: pass it as `after=`.
    Entries whose record no longer holds them (moved by a concurrent write) are skipped;
    `limit` counts only what is yielded (RFC 0010)."""

    def __init__(
        self, view: RowReads, index: Index, scan: Scan[Any], records: bool, limit: int | None
    ) -> None:
        self._view = view
        self._index = index
        self._scan = scan
        self._records = records
        self._buffer: list[tuple[Any, bytes]] = []
        self._pos = 0
        self._cursor: bytes | None = scan.position
        self._remaining = limit
        self._scan_rows = scan._max_batch  # to_arrow's batch size
        self._ahead: list[tuple[Any, bytes]] = []  # items read past `limit` (has_more)
        #: to_arrow(expiry=True): the expiry (Unix ms) of each record read that has one, by
        #: the entry key it was read through (one record may come under several entries)
        self._expiries: dict[bytes, int] | None = None
        self.failed = 0
        self.last_error = None

    @property
    def cursor(self) -> str | None:
        """Page cursor (see store/cursor.py) of the last item yielded: pass it as `after=`."""
        position = self.position
        return None if position is None else encode_cursor(position)

    @property
    def position(self) -> bytes | None:
        """The entry key `cursor` names."""
        if self._pos:
            return self._buffer[self._pos - 1][1]
        return self._cursor

    def __aiter__(self) -> AsyncIterator[IT]:
        return self._items()  # an async generator: cheaper per item than __anext__

    async def _items(self) -> AsyncIterator[IT]:
        while self._pos < len(self._buffer) or await self._fill():
            buffer = self._buffer
            while self._pos < len(buffer) and self._buffer is buffer:
                self._pos += 1
                yield buffer[self._pos - 1][0]

    async def __anext__(self) -> IT:
        if self._pos >= len(self._buffer) and not await self._fill():
            raise StopAsyncIteration
        self._pos += 1
        item: IT = self._buffer[self._pos - 1][0]
        return item

    async def next_chunk(self, size: int | None = None) -> list[IT]:
        """Up to `size` items (the rest of the current batch by default); [] at the end."""
        if self._pos >= len(self._buffer) and not await self._fill():
            return []
        end = len(self._buffer) if size is None else min(len(self._buffer), self._pos + size)
        chunk = [item for item, _ in self._buffer[self._pos : end]]
        self._pos = end
        return chunk

    async def has_more(self) -> bool:
        """True when another item would be yielded (past `limit` once reached): entries that
        would be skipped do not count."""
        if self._pos < len(self._buffer) or self._ahead:
            return True
        while rows := await self._scan.next_chunk():
            self._ahead = await self._convert(rows)
            if self._ahead:
                return True
        return False

    async def to_list(self) -> list[IT]:
        out: list[IT] = []
        while chunk := await self.next_chunk():
            out += chunk
        return out

    def to_arrow(self, *, expiry: bool = False, raw_key: bool = False) -> Any:
        """The remaining records, in index order, as a pyarrow.RecordBatchReader read a batch
        at a time as it is consumed (docs/arrow.md); `expiry` adds an `_expires` column (read
        with the records), `raw_key` the record key bytes as `_key`. Needs the `arrow` extra;
        not for records=False scans (entries)."""
        require_pyarrow()
        if not self._records:
            raise InvalidArgumentError(
                f"to_arrow: index {self._index.name!r} is scanned for entries (records=False "
                "or an aggregate); to_arrow takes a scan of records",
                field="records",
                value=False,
            )
        run = calls.sync if self._scan.on_gone is None else driver.run
        expiries: dict[bytes, int] | None = None
        if expiry:
            if self._index.covering:  # an entry carries its record's expiry: the scan has it
                expiries = self._scan.expiries = self._scan.expiries or {}
            expiries = self._expiries = expiries if expiries is not None else {}

        def chunks() -> Iterator[list[Any]]:
            while pairs := run(self._next_pairs()):
                if expiries is None:
                    yield [item for item, _ in pairs]
                else:  # popped as the records go: the dict holds only those read, not yet given
                    yield [(item, expiries.pop(entry, None)) for item, entry in pairs]

        schema = self._view.schema
        types = [t for name in self._index.records for t in schema.versions(name)]
        return record_batches(
            chunks(),
            types,
            self._view.values,
            rows=self._scan_rows,
            expiry=expiry,
            raw_key=raw_key,
        )

    async def _next_pairs(self) -> list[tuple[Any, bytes]]:
        """next_chunk's items with the entry key each was read through."""
        if self._pos >= len(self._buffer) and not await self._fill():
            return []
        pairs = self._buffer[self._pos :]
        self._pos = len(self._buffer)
        return pairs

    async def _fill(self) -> bool:
        while True:
            if self._buffer:
                self._cursor = self._buffer[-1][1]
            self._buffer, self._pos = [], 0
            if self._remaining == 0:
                return False
            if self._ahead:
                items, self._ahead, last = self._ahead, [], None
            else:
                rows: list[RawRecord] = await self._scan.next_chunk()
                if not rows:
                    return False
                items, last = await self._convert(rows), rows[-1].raw_key
            if self._remaining is not None:
                if len(items) > self._remaining:
                    items, self._ahead = items[: self._remaining], items[self._remaining :]
                self._remaining -= len(items)
            self._buffer = items
            if items:
                return True
            if last is not None:
                self._cursor = last

    async def _convert(self, rows: list[RawRecord]) -> list[tuple[Any, bytes]]:
        index, schema = self._index, self._view.schema
        kind = index.index_kind
        entries: list[tuple[tuple[Any, ...], bytes | None, RawRecord]] = []
        for row in rows:
            values, rest = decode_entry(index.name, index.fields, row.raw_key)
            entries.append((values, kind.primary(rest, row.value), row))
        if not self._records:
            out = []
            for values, primary, row in entries:
                counts = kind.counts(index.name, row.raw_key, row.value)
                if counts is not None:
                    entry = IndexEntry(values, None, row.raw_key, *counts)
                    out.append((entry, row.raw_key))
                elif primary is not None:
                    entry = IndexEntry(values, schema.decode(primary), row.raw_key)
                    out.append((entry, row.raw_key))
            return out
        if index.covering:  # the entries hold the records' values: nothing to read
            found: list[bytes | None] = [row.value for _, _, row in entries]
        else:
            primaries = [p for _, p, _ in entries if p is not None]
            expiries: dict[bytes, int] | None = None
            if self._expiries is None:
                found = await self._view._fetch_many(primaries)
            else:  # the expiries come with the same reads
                expiries = {}
                found = await self._view._fetch_many(primaries, expiries)
        pairs = [
            (primary, data, row.raw_key)
            for (_, primary, row), data in zip(entries, found, strict=True)
            if data is not None and primary is not None
        ]
        read = _records(self._view, pairs)
        if index.covering:  # the copy was written with its entry: they always agree
            return read
        # the entry and the record are two reads: keep a record only if it still holds it
        decoded = {row.raw_key: values for values, _, row in entries}
        kept = [pair for pair in read if holds(index, pair[0], pair[1], decoded[pair[1]])]
        if expiries and self._expiries is not None:  # by entry: a record may have several
            for held, at in kept:
                if held.raw_key in expiries:
                    self._expiries[at] = expiries[held.raw_key]
        return kept


#: field value types whose == is exactly "encodes to the same bytes" (not float: -0.0, NaN)
_EXACT = frozenset((str, int, bytes))


#: index_scan's reading defaults: scan's, with smaller batches (an entry may cost a record read)
INDEX_SCAN = ScanOptions(batch_size=256)


def _partial(partial: Any, prefix: Any) -> Any:
    """index_scan's partial value: `partial`, or `prefix` (its older name, deprecated: in
    every other scan form prefix= is raw key bytes); not both."""
    if prefix is None:
        return partial
    if partial is not None:
        raise ArgumentTypeError(
            f"index_scan: partial={partial!r} and prefix={prefix!r}: prefix is an older name "
            "for partial; pass one of them",
            field="prefix",
            value=prefix,
        )
    warnings.warn(
        "index_scan(prefix=...) is deprecated: pass partial= (prefix= means raw key bytes in "
        "every other scan form)",
        DeprecationWarning,
        stacklevel=3,
    )
    return prefix


def holds(
    index: Index, record: Record, entry: bytes, decoded: tuple[Any, ...] | None = None
) -> bool:
    """True when `record` (as read) produces the index entry key `entry`: compared as bytes,
    or as the entry's `decoded` field values when every value is of an _EXACT type."""
    produced = index.entries(record.key, record.value)
    if decoded is not None and all(type(value) in _EXACT for value in decoded):
        for values in produced:
            if values == decoded and all(type(value) in _EXACT for value in values):
                return True
    entry = index.index_kind.entry_part(entry, record.raw_key)
    return any(encode_fields(index.name, index.fields, v) == entry for v in produced)


def _records(view: RowReads, rows: list[tuple[bytes, bytes, bytes]]) -> list[tuple[Any, bytes]]:
    """(Record, entry key) for (primary key, stored value, entry key) rows: a batch of one
    record type decoded in a few C-level passes as a scan does, else (or when any row fails)
    row by row, where a failure raises its precise error."""
    schema, values = view.schema, view.values
    if rows:
        record_type = schema.try_record_type_of(rows[0][0])
        if record_type is not None:
            head = record_type.head
            primaries = [primary for primary, _, _ in rows]
            if all(primary.startswith(head) for primary in primaries):
                plan = values.plan(record_type)
                try:
                    keys = record_type.decode_many(primaries, prefixed=True)
                    decoded = batch_decoder(plan.codec)([data for _, data, _ in rows])
                    if plan.upgrade is not None:
                        decoded = list(map(plan.upgrade, decoded))
                except Exception:
                    pass
                else:
                    return [
                        (Record(key, value, primary), entry)
                        for key, value, (primary, _, entry) in zip(keys, decoded, rows, strict=True)
                    ]
    out = []
    for primary, data, entry in rows:
        key = schema.decode(primary)
        out.append((Record(key, values.decode(key.record_type, primary, data), primary), entry))
    return out


def _record(view: RowReads, primary: bytes, data: bytes | None) -> Record | None:
    if data is None:
        return None
    key = view.schema.decode(primary)
    return Record(key, view.values.decode(key.record_type, primary, data), primary)


def _arity(index: Index, values: tuple[Any, ...], what: str) -> IndexArgumentError:
    names = list(index.field_names)
    return IndexArgumentError(
        f"{what}: index {index.name!r} has {len(names)} field(s) {names}, got "
        f"{len(values)} value(s) {values!r}",
        index=index.name,
        fields=index.field_names,
        value=values,
    )


def _bound(index: Index, bound: Any, what: str) -> bytes | None:
    if bound is None or isinstance(bound, bytes):
        return bound
    if isinstance(bound, tuple):
        return encode_leading(index.name, index.fields, bound)
    raise ArgumentTypeError(
        f"index_scan {what}= takes a tuple of leading field values or entry key bytes, got "
        f"{type(bound).__name__} {bound!r}",
        field=what,
        value=bound,
    )


class IndexReads(ReadView):
    """The index reads of a store (see the module docstring): a ReadView, so that its own
    reads (_scan, _fetch) are typed, and a RowReads (access.py) for IndexScan."""

    def _index(self, index: Index | str, what: str) -> Index:
        opener = "Store.open_reader" if getattr(self, "readonly", False) else "Store.open"
        if self._indexes is None:
            name = index if isinstance(index, str) else index.name
            raise IndexStateError(
                f"{what} on {self.where}: no index named {name!r} (this store was opened "
                f"without indexes=[...], and stores none: {opener}(..., indexes=[...]))",
                index=name,
            )
        return self._indexes.readable(index, f"{what} on {self.where}", opener)

    @overload
    def index_scan(
        self,
        index: Index[IR] | str,
        *leading: Any,
        range: ScanRange | None = None,
        records: Literal[True] = True,
        options: ScanOptions | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> IndexScan[IR]: ...

    @overload
    def index_scan(
        self,
        index: Index | str,
        *leading: Any,
        range: ScanRange | None = None,
        records: Literal[False],
        options: ScanOptions | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> IndexScan[IndexEntry]: ...

    @overload
    def index_scan(
        self,
        index: Index | str,
        *leading: Any,
        range: ScanRange | None = None,
        records: bool,
        options: ScanOptions | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> IndexScan[Any]: ...

    def index_scan(
        self,
        index: Index | str,
        *leading: Any,
        range: ScanRange | None = None,
        records: bool = True,
        options: ScanOptions | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> IndexScan[Any]:
        """The records of a value or unique index in index order (entries only, no record
        read, with records=False; aggregates always come as entries), in a range as for scan:
        leading field values, a `partial` value the next field starts with (`prefix=` is an
        older name for it here), [start, end) (tuples of leading field values or entry key
        bytes) and `after` (a cursor), given as `range=ScanRange(...)` and/or keywords. How
        it reads: `options=ScanOptions(...)` and/or its settings as keywords, as for scan
        (batch_size defaults to 256 here; on_error does not apply)."""
        found = self._index(index, "index_scan")
        bounds, rest = scan_range(range, leading, keywords, "index_scan")
        if bounds.version is not None:
            raise ArgumentTypeError(
                f"index_scan: version={bounds.version!r} does not apply to an index (its "
                "entries point at records of every version)",
                field="version",
                value=bounds.version,
            )
        leading, partial = bounds.leading, _partial(bounds.partial, bounds.prefix)
        settings, _ = scan_settings(options or INDEX_SCAN, None, rest)
        if settings.on_error != "raise":
            raise InvalidArgumentError(
                f"index_scan: on_error={settings.on_error!r} does not apply; an index scan "
                "raises on a record that does not decode (use ScanOptions(on_error='raise'))",
                field="on_error",
                value=settings.on_error,
            )
        limit, batch_size = settings.limit, settings.batch_size
        if found.aggregate:
            records = False
        if len(leading) + (partial is not None) > len(found.fields):
            raise _arity(found, leading if partial is None else (*leading, partial), "index_scan")
        lo = encode_leading(found.name, found.fields, leading, partial)
        span = KeySpan(None, lo, prefix_successor(lo))
        if limit is not None:  # the limit is applied on what is yielded; read a little past it
            batch_size = min(batch_size, limit + 1)
        scan = self._scan(
            [span],
            _bound(found, bounds.start, "start"),
            _bound(found, bounds.end, "end"),
            bounds.after,
            "raw",
            settings.but(limit=None, batch_size=batch_size),
            None,
            {},
        )
        return IndexScan(self, found, scan.undecoded(), records, limit)

    @overload
    async def lookup(self, index: Index[IR, Literal["unique"]], *values: Any) -> IR | None: ...

    @overload
    async def lookup(self, index: str, *values: Any) -> Record | None: ...

    async def lookup(self, index: Index | str, *values: Any) -> Any:
        """The record holding `values` in a unique index, or None. The entry and the record
        are two reads: a record that no longer holds the value is read again (LOOKUP_TRIES
        times, then through a snapshot when the store has one), never returned."""
        found = self._index(index, "lookup")
        if not found.index_kind.unique:
            raise IndexStateError(
                f"lookup on {self.where}: index {found.name!r} is a {found.kind} index; lookup "
                "reads unique indexes (index_scan reads the others)",
                index=found.name,
            )
        if len(values) != len(found.fields):
            raise _arity(found, values, "lookup")
        entry = encode_fields(found.name, found.fields, values)
        for _ in range(LOOKUP_TRIES):
            primary = await self._fetch(entry)
            if primary is None:
                return None
            record = _record(self, primary, await self._fetch(primary))
            if record is not None and holds(found, record, entry):
                return record
        source = self._source
        if not hasattr(source, "snapshot"):
            return None
        with translating(f"lookup on {self.where}"):
            snap = await calls.method(source, "snapshot")
            primary = live_value(await calls.get_row(snap, entry))
            if primary is None:
                return None
            record = _record(self, primary, live_value(await calls.get_row(snap, primary)))
        return record if record is not None and holds(found, record, entry) else None

    async def _aggregate(self, index: Index | str, group: tuple[Any, ...], what: str) -> Any:
        found = self._index(index, what)
        if not found.aggregate:
            raise IndexStateError(
                f"{what} on {self.where}: index {found.name!r} is a {found.kind} index, not a "
                "count or sum index",
                index=found.name,
            )
        if len(group) != len(found.fields):
            raise _arity(found, group, what)
        entry = encode_fields(found.name, found.fields, group)
        data = await self._fetch(entry)
        return (0, 0) if data is None else found.index_kind.counts(found.name, entry, data)

    async def index_count(self, index: AggregateIndex | str, *group: Any) -> int:
        """How many records a count or sum index holds in `group` (one read, no scan)."""
        count: int = (await self._aggregate(index, group, "index_count"))[0]
        return count

    async def index_sum(self, index: AggregateIndex | str, *group: Any) -> int | float:
        """The sum a sum index holds for `group` (one read, no scan)."""
        total: int | float = (await self._aggregate(index, group, "index_sum"))[1]
        return total

    async def index_info(self) -> dict[str, dict[str, Any]]:
        """Every index stored in the database by name: its definition, state ("readable" or
        "write_only"), build position and records built so far (declared or not)."""
        if self._indexes is not None:
            return {name: dict(meta) for name, meta in self._indexes.stored.items()}
        from opendata_kv.store.indexes.admin import stored_metas

        return await stored_metas(self)

    async def check_indexes(self, *names: str) -> list[Problem]:
        """Every declared index (or those named) checked against a recount from the records:
        entries without a record, records without an entry, aggregates that differ. Reads
        only."""
        indexes = self._indexes
        if indexes is None:
            return []
        problems: list[Problem] = []
        for name, index in indexes.declared.items():
            if (names and name not in names) or name not in indexes.stored:
                continue
            if indexes.state(name) != "readable":
                continue
            problems += await check_index(self, index)
        return problems
