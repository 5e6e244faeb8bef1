"""IndexSet: the indexes of one open store (declared and stored), their states, and the lock
that makes an indexed write's read-old-value-then-write atomic among this process's writers.

States (RFC 0010): "write_only" while being built (writes keep the entries of records at or
before the build position current; reads are refused), "readable" once built. `generation`
changes with every build step and state change: a transaction that planned index changes
under an older generation is refused at commit (TransactionConflictError), so it cannot
commit entries planned against a build position that has since moved.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from opendata_kv.errors import IndexStateError, StoreError
from opendata_kv.keys import RecordType, Schema
from opendata_kv.native import driver
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.groups import GroupCache
from opendata_kv.store.indexes.layout import ROOT, check_schema, is_index_key, meta_key
from opendata_kv.store.writes import Op

READABLE = "readable"
WRITE_ONLY = "write_only"
#: seconds an indexed write waits for another writer of this store to finish its own
LOCK_TIMEOUT = 60.0


class WriteLock:
    """One lock for both faces: a sync caller (no event loop) blocks on it with a bound; an
    async caller polls it without blocking its event loop. Held across the read of old values
    and the write of the record with its index changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: times it was taken: a read made while it was free stays what a later holder's
        #: write replaces only if no one took it in between (store/known.py)
        self.entered = 0

    def locked(self) -> bool:
        """Whether someone holds it now."""
        return self._lock.locked()

    @asynccontextmanager
    async def held(self, where: str) -> AsyncIterator[None]:
        lock = self._lock
        if not lock.acquire(blocking=False):
            if driver.syncing():
                acquired = lock.acquire(timeout=LOCK_TIMEOUT)
            else:
                acquired = False
                deadline = time.monotonic() + LOCK_TIMEOUT
                delay = 0.0002
                while time.monotonic() < deadline:
                    await asyncio.sleep(delay)
                    if lock.acquire(blocking=False):
                        acquired = True
                        break
                    delay = min(delay * 2, 0.005)
            if not acquired:
                raise StoreError(
                    f"indexed write on {where}: another writer held the index lock for "
                    f"{LOCK_TIMEOUT:.0f} s"
                )
        self.entered += 1
        try:
            yield
        finally:
            lock.release()


class IndexSet:
    """The indexes a store knows: `declared` (given to open), `stored` (metadata read from the
    database, every index by name, declared or not)."""

    def __init__(self, schema: Schema, declared: Iterable[Index]) -> None:
        check_schema(schema)
        self.schema = schema
        self.declared: dict[str, Index] = {}
        for index in declared:
            if not isinstance(index, Index):
                raise IndexStateError(
                    f"indexes= takes Index objects, got {type(index).__name__} {index!r}",
                    index=str(index),
                )
            if index.name in self.declared:
                raise IndexStateError(f"index {index.name!r} is declared twice", index=index.name)
            for name in index.records:
                schema.versions(name)  # SchemaError for a record name the schema lacks
            self.declared[index.name] = index
        self.stored: dict[str, dict[str, Any]] = {}
        #: stored indexes the caller did not declare, maintained from their definitions
        self.taken_up: set[str] = set()
        self.generation = 0
        self.lock = WriteLock()
        self._by_type: dict[RecordType, tuple[Index, ...]] = {}
        #: whether some maintained index reads a record's key (Index.reads_key): a batch
        #: keeps its puts' field tuples for upkeep only then (Batch.key_fields)
        self.keys_read = False
        #: (index, record type) -> whether its entries read the key (maintain._reads_key)
        self.reads_key: dict[tuple[Index, RecordType], bool] = {}
        #: (index name, field values, their types) -> entry key bytes, kept across writes
        #: (maintain._entry_cache; a pure function of its key, emptied when it grows large)
        self.entry_keys: dict[tuple[str, tuple[Any, ...], tuple[type, ...]], bytes] = {}
        #: index name -> string field value -> entry key (Maintainer.column; same rules)
        self.entry_strings: dict[str, dict[str, bytes]] = {}
        #: index -> its entry fields' compiled encoder, None when they are not all strings
        #: (Maintainer.using_entries; same rules)
        self.entry_plans: dict[Index, Callable[..., bytes] | None] = {}
        #: the aggregate groups this writer's upkeep knows (groups.py; used under `lock`)
        self.groups = GroupCache()

    def take_up(self, index: Index) -> None:
        """Maintain a stored index the caller did not declare, rebuilt from its definition
        (admin._undeclared), as if declared; records the schema lacks are never written."""
        self.declared[index.name] = index
        self.taken_up.add(index.name)
        self.entry_keys.clear()  # the name may now stand for other fields
        self.entry_strings.clear()
        self.entry_plans.clear()
        self.groups.drop()

    def refresh(self) -> None:
        """Recompute which declared, stored indexes each record type maintains."""
        self.generation += 1
        self.entry_keys.clear()
        self.entry_strings.clear()
        self.entry_plans.clear()
        by_type: dict[RecordType, list[Index]] = {}
        names = set(self.schema.names())
        for name, index in self.declared.items():
            if name not in self.stored:
                continue
            for record in index.records:
                if record not in names:  # only an index taken up: declared ones are checked
                    continue
                for record_type in self.schema.versions(record):
                    by_type.setdefault(record_type, []).append(index)
        self._by_type = {rt: tuple(found) for rt, found in by_type.items()}
        self.keys_read = any(i.reads_key(rt) for rt, found in by_type.items() for i in found)

    def of(self, record_type: RecordType) -> tuple[Index, ...]:
        """The indexes a write of `record_type` maintains (empty: none)."""
        return self._by_type.get(record_type, ())

    @property
    def active(self) -> bool:
        return bool(self._by_type)

    def indexed(self, key: bytes) -> RecordType | None:
        """The record type of `key` when writing it maintains an index now, else None: the one
        place that decides whether a write has index upkeep (never an index row's own key)."""
        if not self._by_type or is_index_key(key):
            return None
        record_type = self.schema.try_record_type_of(key)
        return record_type if record_type in self._by_type else None

    def indexed_at(self, keys: Sequence[bytes]) -> list[tuple[int, RecordType]]:
        """(position, record type) of the keys whose writes have index upkeep now (as
        `indexed` decides, inlined: a build's batch is thousands of index rows). An index row
        among them (a write of index rows outside upkeep) drops the group cache: the writer
        drops it again once that write is done (Store.write)."""
        by_type = self._by_type
        if not by_type:
            return []
        # an index row's key (ROOT) is owned by no record type: 0x00 starts no version
        types = self.schema.record_types_of(keys)
        found = [(at, rt) for at, rt in enumerate(types) if rt in by_type]
        if None in types and any(  # index rows written outside upkeep: groups.py
            key.startswith(ROOT) for key, rt in zip(keys, types, strict=True) if rt is None
        ):
            self.groups.drop()
        return found

    def indexed_ops(self, ops: Sequence[Op]) -> list[tuple[bytes, RecordType, Op]]:
        """The ops of `ops` that have index upkeep, with their record types."""
        at_types = self.indexed_at([op[0] for op in ops]) if self._by_type else []
        return [(ops[at][0], record_type, ops[at]) for at, record_type in at_types]

    def keeping_entries(self) -> list[str]:
        """The stored indexes that keep entries now (readable, or being built with a position):
        those a write of a record this writer cannot decode (a key its schema does not own)
        could leave stale. One write_only with no position keeps none (the next build clears
        it), so nothing can make it wrong."""
        return sorted(
            name
            for name, meta in self.stored.items()
            if meta["state"] == READABLE or meta.get("position") is not None
        )

    def state(self, name: str) -> str:
        meta = self.stored.get(name)
        if meta is None:
            raise IndexStateError(
                f"no index named {name!r} in this store (stored: {sorted(self.stored)})",
                index=name,
            )
        return str(meta["state"])

    def covers_all(self, record_type: RecordType) -> bool:
        """True when covers() holds for every index of `record_type` and any key: they are
        all readable (no build under way)."""
        return all(self.stored[i.name]["state"] == READABLE for i in self.of(record_type))

    def covers(self, index: Index, key: bytes) -> bool:
        """True when writes of the record under `key` maintain `index` now: it is readable,
        or being built and its build has passed `key` (the build indexes the rest)."""
        meta = self.stored[index.name]
        if meta["state"] == READABLE:
            return True
        position = meta.get("position")
        return position is not None and key <= position

    def readable(self, index: Index | str, where: str, opener: str = "Store.open") -> Index:
        """The declared index, IndexStateError unless it is readable; `opener`: the call
        that declares indexes for this store (Store.open_reader for a reader)."""
        name = index if isinstance(index, str) else index.name
        found = self.declared.get(name)
        if found is None:
            raise IndexStateError(
                f"{where}: no index named {name!r} was declared ({opener}(..., indexes=[...]); "
                f"declared: {sorted(self.declared)})",
                index=name,
            )
        if (
            not isinstance(index, str)
            and index is not found
            and not (name in self.taken_up and index.describe() == found.describe())
        ):
            raise IndexStateError(
                f"{where}: index {name!r} is not the Index object this store was opened with",
                index=name,
            )
        state = self.state(name)
        if state != READABLE:
            position = self.stored[name].get("position")
            raise IndexStateError(
                f"{where}: index {name!r} is {state} (being built, position "
                f"{position!r}): it cannot be read until `opendata-kv index build` or "
                "Store.build_index finishes",
                index=name,
                state=state,
            )
        return found

    def meta_key(self, name: str) -> bytes:
        return meta_key(name)
