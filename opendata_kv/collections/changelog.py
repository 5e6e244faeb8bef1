"""A Gink-style change log: changes keyed by muid, plus a by-medallion index.

Key layouts (version 1; see rfcs/0007-collections.md):

    change              0xB   [keyspace][0x01][0xB0] muid:16 bytes
    change_by_medallion 0xC   [keyspace][0x01][0xC0] medallion:u64  muid:16 bytes

A transaction takes one (timestamp, medallion) from a MuidGenerator; its changes get offsets
1..n. Every change and its index entry are written in one atomic batch when the
`async with log.transaction()` block exits, or not at all when it raises, so the index never
disagrees with the log.

Order. Scans return changes in key byte order, which is Muid order (Muid compares its packed
bytes). The packed fields are unsigned two's-complement residues, so the -1 sentinels sort
*last*: timestamp -1 (all ones) after every real timestamp, medallion -1 after every other
medallion of the same timestamp, and negative offsets after the positive ones. The index
stores the medallion as its 44-bit residue (`medallion mod 2**44`) in a u64, so medallion -1
also sorts last there.

    async with log.transaction() as tx:
        m1 = tx.add({"op": "set", "key": "a", "value": 1})
        m2 = tx.add({"op": "delete", "key": "b"})
    await log.get(m1)
    async for change in log.scan(since=datetime(2025, 1, 1, tzinfo=UTC)): ...
    async for change in log.by_medallion(log.medallion): ...
    await log.put(Muid(-1, -1, 4), {"container": "root"})       # a global (sentinel) container
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic

from opendata_kv.collections._common import (
    Instant,
    Layout,
    Results,
    StoreT,
    check_limit,
    is_reader_only,
    key_of,
    to_micros,
    writer_of,
)
from opendata_kv.errors import InvalidInputError, StoreClosedError, StoreDataError
from opendata_kv.ids.muid import (
    MAX_TIMESTAMP,
    Muid,
    MuidGenerator,
    medallion_from_residue,
    medallion_residue,
)
from opendata_kv.ids.muid import Transaction as MuidTransaction
from opendata_kv.keys import RecordType, fields, prefix_successor
from opendata_kv.store import Batch, Store
from opendata_kv.store.views import ReadView

#: Default record type nibbles: the log, and its by-medallion index.
CHANGE_TYPE = 0xB
INDEX_TYPE = 0xC

#: The first muid with the sentinel timestamp -1: after every muid with a real timestamp.
_SENTINEL_START = Muid(-1, 0, 0)


class ChangeLogLayout(Layout):
    """The change log's two RecordTypes: `change` (muid) and `by_medallion` (medallion, muid)."""

    kind = "ChangeLog"

    def __init__(
        self,
        record_type: int = CHANGE_TYPE,
        index_record_type: int = INDEX_TYPE,
        *,
        version: int = 1,
        keyspace: bytes = b"",
        name: str = "change",
    ) -> None:
        self.change = RecordType(
            name, record_type, [("muid", fields.muid)], version=version, keyspace=keyspace
        )
        self.by_medallion = RecordType(
            f"{name}_by_medallion",
            index_record_type,
            [("medallion", fields.u64), ("muid", fields.muid)],
            version=version,
            keyspace=keyspace,
        )
        self._owned_values = (self.by_medallion,)

    @property
    def record_types(self) -> tuple[RecordType, ...]:
        return (self.change, self.by_medallion)


#: The default layout (record types 0xB and 0xC, version 1, no keyspace).
CHANGELOG = ChangeLogLayout()


def as_muid(value: Muid | str) -> Muid:
    """A Muid, or the Muid its string spells."""
    if isinstance(value, Muid):
        return value
    if isinstance(value, str):
        return Muid.parse(value)
    raise InvalidInputError(f"expected a Muid or its string, got {type(value).__name__}")


def medallion_field(medallion: int) -> int:
    """The index key's medallion: its 44-bit residue as the muid packs it (-1 -> 2**44 - 1,
    the sentinel, so it sorts last); MuidError (an InvalidInputError) when out of range."""
    return medallion_residue(medallion)


def _time_bound(value: Instant, what: str) -> Muid:
    """The first muid at or after the instant `value`: times before the epoch clamp to 0, and
    times past the last real timestamp to the first sentinel muid."""
    micros = to_micros(value, what)
    return _SENTINEL_START if micros > MAX_TIMESTAMP else Muid(max(micros, 0), 0, 0)


@dataclass(frozen=True)
class LogEntry:
    """One stored change of the log: its muid and value (named apart from the change feed's
    `Change`, a write as the WAL yields it)."""

    muid: Muid
    value: Any

    @property
    def timestamp(self) -> int:
        return self.muid.timestamp

    @property
    def medallion(self) -> int:
        return self.muid.medallion

    @property
    def offset(self) -> int:
        return self.muid.offset


class ChangeTransaction:
    """The changes of one `ChangeLog.transaction()` block, all sharing one timestamp and
    medallion. `add` encodes the value at once (a bad value raises at the add) and queues it;
    nothing reaches the store until the block exits without an exception."""

    def __init__(self, log: ChangeLog, muids: MuidTransaction, batch: Batch) -> None:
        self._log = log
        self._muids = muids
        self._batch = batch
        self._open = True
        #: muids of the changes added so far, in order (offsets 1..n)
        self.changes: list[Muid] = []

    @property
    def muid(self) -> Muid:
        """The transaction's own muid (offset 0)."""
        return self._muids.muid

    @property
    def timestamp(self) -> int:
        return self._muids.timestamp

    @property
    def medallion(self) -> int:
        return self._muids.medallion

    def add(self, value: Any) -> Muid:
        """Queue one change; returns its muid (offset = how many were added, from 1)."""
        if not self._open:
            raise StoreClosedError(f"change transaction {self.muid} has already ended")
        muid = self._muids.next()
        self._log._queue(self._batch, muid, value)
        self.changes.append(muid)
        return muid

    def __len__(self) -> int:
        return len(self.changes)

    def __repr__(self) -> str:
        return f"<ChangeTransaction {self.muid} changes={len(self.changes)}>"


class ChangeLog(Generic[StoreT]):
    """Changes keyed by muid in a Store (see the module docstring).

    generator: the MuidGenerator of this writer (one medallion); a new one with a random
        medallion unless given. Muids are unique as long as one medallion has one writer.
    """

    def __init__(
        self,
        store: StoreT,
        *,
        generator: MuidGenerator | None = None,
        layout: ChangeLogLayout = CHANGELOG,
    ) -> None:
        layout.check(store)
        self.store: StoreT = store
        self.layout = layout
        self.change = layout.change
        self.index = layout.by_medallion
        self.generator = generator if generator is not None else MuidGenerator()

    def _writer(self) -> Store:
        """The store, for a write (ReadOnlyError when this log was given a reader)."""
        return writer_of(self.store, "ChangeLog")

    @property
    def medallion(self) -> int:
        """This writer's medallion."""
        return self.generator.medallion

    def __repr__(self) -> str:
        return f"<ChangeLog on {self.store.where} medallion=0x{self.medallion:X}>"

    # --- writes ---------------------------------------------------------------------------------

    def _queue(self, batch: Batch, muid: Muid, value: Any) -> None:
        batch.put(self.change, (muid,), value)
        # a key-only entry: msgpack nil, written raw (put() refuses None as a value)
        batch.put_raw(self.index.encode(medallion_field(muid.medallion), muid), b"\xc0")

    @asynccontextmanager
    async def transaction(
        self: ChangeLog[Store], *, durable: bool = False
    ) -> AsyncIterator[ChangeTransaction]:
        """`async with log.transaction() as tx: tx.add(value)`: one timestamp and medallion,
        offsets 1..n, written atomically (with their index entries) when the block exits;
        nothing is written if it raises. `durable=True` flushes after the write."""
        muids = self.generator.transaction()
        async with self._writer().batch(durable=durable) as batch:
            tx = ChangeTransaction(self, muids, batch)
            try:
                yield tx
            finally:
                tx._open = False

    async def put(self: ChangeLog[Store], muid: Muid | str, value: Any) -> Muid:
        """Store one change under an explicit muid (a -1 sentinel container, or a change
        received from another writer), with its index entry, atomically. Replaces any change
        already stored under that muid."""
        muid = as_muid(muid)
        await self.write([(muid, value)])
        return muid

    async def write(
        self: ChangeLog[Store], changes: Iterable[tuple[Muid | str, Any]], *, durable: bool = False
    ) -> int:
        """Store many (muid, value) changes in one atomic batch; returns how many."""
        writer = self._writer()
        batch = Batch(writer)
        count = 0
        for muid, value in changes:
            self._queue(batch, as_muid(muid), value)
            count += 1
        await writer.write(batch, durable=durable)
        return count

    # --- reads ----------------------------------------------------------------------------------

    async def get(self, muid: Muid | str, default: Any = None) -> Any:
        """The value of the change stored under `muid`, or `default`."""
        return await self.store.get(self.change, (as_muid(muid),), default=default)

    def _bounds(
        self, since: Instant | None, until: Instant | None
    ) -> tuple[Muid | None, Muid | None]:
        """Muid bounds [lo, hi) of a time range; None when there is no time bound. With
        either given, sentinel timestamps are out: hi is at most the first sentinel muid."""
        if since is None and until is None:
            return None, None
        lo = Muid(0, 0, 0) if since is None else _time_bound(since, "since")
        hi = _SENTINEL_START if until is None else _time_bound(until, "until")
        return lo, hi

    def scan(
        self,
        since: Instant | None = None,
        until: Instant | None = None,
        *,
        reverse: bool = False,
        limit: int | None = None,
        after: Muid | str | None = None,
    ) -> Results[LogEntry]:
        """Changes in muid order (reverse: descending).

        since / until (µs since the epoch, or aware datetimes) bound the timestamp to
        [since, until); with either given, sentinel (-1) timestamps are left out. With neither,
        every change is returned, sentinels last. `after` resumes after a muid (before it when
        reverse).
        """
        limit = check_limit(limit)
        lo, hi = self._bounds(since, until)
        rows = self.store.scan(
            self.change,
            reverse=reverse,
            limit=limit,
            after=None if after is None else self.change.encode(as_muid(after)),
            start=None if lo is None else self.change.encode(lo),
            end=None if hi is None else self.change.encode(hi),
        )
        return Results(self._changes(rows))

    def sentinels(self, *, reverse: bool = False, limit: int | None = None) -> Results[LogEntry]:
        """The changes whose timestamp is the -1 sentinel (Gink's global containers)."""
        limit = check_limit(limit)
        rows = self.store.scan(
            self.change,
            reverse=reverse,
            limit=limit,
            start=self.change.encode(_SENTINEL_START),
        )
        return Results(self._changes(rows))

    async def _changes(self, rows: AsyncIterator[Any]) -> AsyncIterator[LogEntry]:
        async for row in rows:
            yield LogEntry(key_of(row).muid, row.value)

    def by_medallion(
        self,
        medallion: int,
        since: Instant | None = None,
        until: Instant | None = None,
        *,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Results[LogEntry]:
        """Changes written under one medallion (may be -1), in muid order, optionally within
        [since, until). Reads the index and the changes from one snapshot."""
        limit = check_limit(limit)
        residue = medallion_field(medallion)
        lo, hi = self._bounds(since, until)
        return Results(
            self._indexed(
                residue,
                reverse=reverse,
                limit=limit,
                start=None if lo is None else self.index.encode(residue, lo),
                end=None if hi is None else self.index.encode(residue, hi),
            )
        )

    async def _indexed(
        self,
        residue: int,
        *,
        reverse: bool,
        limit: int | None,
        start: bytes | None,
        end: bytes | None,
    ) -> AsyncIterator[LogEntry]:
        async with self._view() as view:
            rows = view.scan(
                self.index, residue, reverse=reverse, limit=limit, start=start, end=end
            )
            async for row in rows:
                muid: Muid = key_of(row).muid
                value = await view.get(self.change, (muid,), default=_MISSING)
                if value is _MISSING:
                    raise StoreDataError(
                        f"{self.index.name} lists {muid} but {self.change.name} has no such "
                        "change (was it deleted behind the log's back?)"
                    )
                yield LogEntry(muid, value)

    @asynccontextmanager
    async def _view(self) -> AsyncIterator[ReadView]:
        """A snapshot on a writer; the reader itself on a read-only store."""
        if self.store.readonly or is_reader_only(self.store):
            yield self.store
            return
        async with self._writer().snapshot() as snap:
            yield snap

    async def medallions(self) -> list[int]:
        """The distinct medallions with changes, in index order (-1 last); one seek each."""
        start: bytes | None = self.index.prefix()
        found: list[int] = []
        while start is not None:
            rows = await self.store.scan(self.index, start=start, limit=1).to_list()
            if not rows:
                break
            residue: int = key_of(rows[0]).medallion
            found.append(medallion_from_residue(residue))
            start = prefix_successor(self.index.prefix(residue))
        return found

    async def count(self, medallion: int | None = None) -> int:
        """How many changes the log holds (or one medallion holds)."""
        if medallion is None:
            scan = self.store.scan(self.change, batch_size=4096)
        else:
            scan = self.store.scan(self.index, medallion_field(medallion), batch_size=4096)
        total = 0
        while chunk := await scan.next_chunk():
            total += len(chunk)
        return total


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def __getattr__(name: str) -> Any:
    """`Change`, the old name of LogEntry, still resolves, with a DeprecationWarning."""
    if name == "Change":
        warnings.warn(
            "opendata_kv.collections Change is deprecated: it is LogEntry (the change feed's "
            "Change is a different thing)",
            DeprecationWarning,
            stacklevel=2,
        )
        return LogEntry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
