"""Registering, building, rebuilding and dropping indexes (RFC 0010).

Opening a writer registers each declared index not yet stored: readable at once when none of
its records exist, else write_only until built. A build walks the index's records in key
order, `batch_size` at a time; each step runs under the index lock and writes the entries of
its records together with the new build position in one atomic batch, so a build killed at
any point resumes after the last step written and never counts a record twice. Writes during
a build maintain the entries of records at or before the position; the build does the rest.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opendata_kv.errors import IndexStateError
from opendata_kv.native import calls
from opendata_kv.store.batch import Batch
from opendata_kv.store.expiry import is_expired, now_ms
from opendata_kv.store.indexes.access import RowReads
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.layout import (
    CATALOG,
    META,
    decode_meta,
    encode_meta,
    entry_prefix,
    meta_key,
)
from opendata_kv.store.indexes.maintain import IndexedOp, index_ops_for
from opendata_kv.store.indexes.registry import READABLE, WRITE_ONLY, IndexSet
from opendata_kv.store.indexes.stored import (
    index_from_definition,
    readable_undeclared,
    unknown_functions,
)
from opendata_kv.store.scan import KeySpan, Record
from opendata_kv.store.views import in_windows, options_at
from opendata_kv.store.writes import FetchReads, Put

if TYPE_CHECKING:
    from opendata_kv.store.reader import StoreReader
    from opendata_kv.store.views import ReadView
    from opendata_kv.store.writer import Store

Progress = Callable[[int, str], None]
_new = tuple.__new__  # a Put without NamedTuple.__new__'s argument handling (per record)
#: set while a tool that writes index rows only, never a record, opens its writer
#: (tools.index_rows_only: `opendata-kv index build|rebuild|drop`): nothing it writes can
#: make a stored index stale, so the stored indexes it was not given are left alone
INDEX_ROWS_ONLY: ContextVar[bool] = ContextVar("index_rows_only", default=False)


async def stored_metas(view: ReadView) -> dict[str, dict[str, Any]]:
    """Every index's metadata stored in the database, by name (one point read when none)."""
    found: dict[str, dict[str, Any]] = {}
    if await view._fetch(CATALOG) is None:
        return found
    async for row in view.scan_all(prefix=META, on_unknown="raw"):
        meta = decode_meta(row.raw_key, row.value)
        found[str(meta["definition"]["name"])] = meta
    return found


async def load(
    store: StoreReader,
    declared: Iterable[Index],
    *,
    rebuild_later: Iterable[str] = (),
    undeclared: bool = True,
) -> IndexSet | None:
    """The store's IndexSet (None when it neither declares nor stores any index); a writer
    registers declared indexes that are not stored yet, and (unless `undeclared` is False:
    a tool that writes no record) takes up the stored ones it was not given (_undeclared)."""
    declared = list(declared)
    indexes = IndexSet(store.schema, declared)
    indexes.stored = await stored_metas(store)
    later = _rebuild_later(store, indexes, rebuild_later)
    if not declared and not indexes.stored:
        return None
    if undeclared and not store.readonly and not INDEX_ROWS_ONLY.get():
        await _undeclared(store, indexes, later)  # type: ignore[arg-type]  # before any write
    elif store.readonly and undeclared:
        names = store.schema.names()
        for index in readable_undeclared(indexes.stored, indexes.declared, names):
            indexes.take_up(index)  # a reader reads the stored indexes it was not given
    for index in declared:
        meta = indexes.stored.get(index.name)
        if meta is not None:
            if meta["definition"] != index.describe():
                raise IndexStateError(
                    f"index {index.name!r} is stored as {meta['definition']!r} but declared as "
                    f"{index.describe()!r}; drop it (opendata-kv index drop) and build it again, "
                    "or bump its version",
                    index=index.name,
                    state=str(meta["state"]),
                )
            continue
        if store.readonly:
            continue
        empty = True
        for record in index.records:
            async for _ in store.scan(record, limit=1).keys():
                empty = False
        meta = {
            "definition": index.describe(),
            "state": READABLE if empty else WRITE_ONLY,
            "position": None,
            "built": 0,
        }
        await _save(store, index.name, meta)  # type: ignore[arg-type]
        indexes.stored[index.name] = meta
        await _save_catalog(store, indexes.stored)  # type: ignore[arg-type]
    indexes.refresh()
    return indexes


def _rebuild_later(store: StoreReader, indexes: IndexSet, names: Iterable[str]) -> set[str]:
    """The names of `rebuild_later=`: stored indexes this writer does not declare."""
    later = {names} if isinstance(names, str) else set(names)
    for name in sorted(later):
        if name in indexes.declared:
            raise IndexStateError(
                f"{store.where}: index {name!r} is both declared (indexes=) and marked "
                "rebuild_later=: a declared index is maintained, so there is nothing to rebuild",
                index=name,
            )
        if name not in indexes.stored:
            raise IndexStateError(
                f"{store.where}: rebuild_later= names index {name!r}, which is not stored "
                f"(stored: {sorted(indexes.stored)})",
                index=name,
            )
    return later


async def _undeclared(store: Store, indexes: IndexSet, later: set[str]) -> None:
    """A writer never leaves a stored index stale silently (RFC 0010, "Writers that do not
    declare an index"). Each stored index the caller did not declare is, in this order:
    marked for rebuild when named in `later` (write_only, no position: no entry is kept and
    reads are refused until a build); left alone when this writer's schema defines none of
    its records (it cannot write them) or it keeps no entry yet (write_only, no position);
    maintained as if declared when its definition names no function, or only the library's
    own; else the open is refused naming it and how to declare it. Nothing is written or
    taken up before every index has been judged, so a refused open changes nothing."""
    names = set(store.schema.names())
    if not names and not later:  # raw rows only (clone): no write of it is indexed
        return
    refused: dict[str, list[str]] = {}
    marks: list[str] = []
    taken: list[Index] = []
    for name, meta in sorted(indexes.stored.items()):
        if name in indexes.declared:
            continue
        if name in later:
            if meta["state"] != WRITE_ONLY or meta.get("position") is not None:
                marks.append(name)
            continue
        definition = meta["definition"]
        records = definition.get("records")
        if isinstance(records, list) and not names.intersection(map(str, records)):
            continue
        if meta["state"] != READABLE and meta.get("position") is None:
            continue
        unknown = unknown_functions(definition)
        if unknown:
            refused[name] = unknown
        else:
            taken.append(index_from_definition(definition))
    if not refused:
        for name in marks:
            meta = dict(indexes.stored[name], state=WRITE_ONLY, position=None, built=0)
            await _save(store, name, meta)
            indexes.stored[name] = meta
        for index in taken:
            indexes.take_up(index)
        return
    listed = "; ".join(f"{n} ({', '.join(f)})" for n, f in refused.items())
    raise IndexStateError(
        f"{store.where} stores indexes that this writer was not given and cannot compute: "
        f"{listed}. Writing their records without them would leave them stale. Declare "
        "them with Store.open(..., indexes=[...]) (the same Index objects, e.g. "
        "BACKLINKS.indexes for a RecordCollection store), or pass "
        f"rebuild_later={tuple(refused)!r} to mark them for rebuild (their reads are "
        "refused until Store.build_index or `opendata-kv index build`)",
        index=", ".join(refused),
    )


async def _save(store: Store, name: str, meta: dict[str, Any]) -> None:
    await store.put_raw(meta_key(name), encode_meta(meta))


async def _save_catalog(store: Store, names: Iterable[str]) -> None:
    """Rewrite the catalog (deleted when no index is left)."""
    batch = Batch(store)
    names = sorted(names)
    if names:
        batch.put_raw(CATALOG, encode_meta({"indexes": names}))
    else:
        batch.delete_raw(CATALOG)
    await store.write(batch)


def _spans(store: StoreReader, index: Index) -> list[KeySpan]:
    spans = []
    for record in index.records:
        for record_type in store.schema.versions(record):
            lo, hi = record_type.range()
            spans.append(KeySpan(record_type, lo, hi))
    return sorted(spans, key=lambda span: span.start or b"")


def _need(store: RowReads, name: str) -> tuple[IndexSet, Index]:
    indexes = store._indexes
    if indexes is None or name not in indexes.declared:
        raise IndexStateError(
            f"{store.where}: index {name!r} was not declared (Store.open(..., indexes=[...]))",
            index=name,
        )
    if name not in indexes.stored:
        raise IndexStateError(f"{store.where}: index {name!r} is not stored", index=name)
    return indexes, indexes.declared[name]


async def _clear(store: Store, name: str, batch_size: int) -> int:
    """Delete every entry of index `name`, `batch_size` per batch; returns how many."""
    total = 0
    prefix = entry_prefix(name)
    while True:
        keys = [
            row.raw_key
            async for row in store.scan_all(prefix=prefix, on_unknown="raw", limit=batch_size)
        ]
        if not keys:
            return total
        batch = Batch(store)
        for key in keys:
            batch.delete_raw(key)
        await store.write(batch)
        total += len(keys)


async def build(
    store: Store, name: str, *, batch_size: int = 1000, progress: Progress | None = None
) -> int:
    """Build (or finish building) a write_only index; returns how many records this call
    indexed. A readable index is left alone (0)."""
    indexes, index = _need(store, name)
    meta = indexes.stored[name]
    if meta["state"] == READABLE:
        return 0
    where = f"build of index {name!r} on {store.where}"
    if meta.get("position") is None:
        cleared = await _clear(store, name, batch_size)  # leftovers of a dropped namesake
        if cleared and progress is not None:
            progress(0, f"cleared {cleared} stale entries")
    spans = _spans(store, index)
    done = 0
    while True:
        async with indexes.lock.held(store.where):
            meta = dict(indexes.stored[name])
            position = meta.get("position")
            rows, expiries = await _rows_after(store, spans, position, batch_size, where)
            build_puts = await _build_puts(store, index, rows, expiries)
            reads = FetchReads(store._fetch_many, store._fetch_many)  # a build replaces nothing
            writes = await index_ops_for(indexes, store.values, build_puts, reads, only=index)
            batch = Batch(store)
            batch.queue(writes)
            finished = len(rows) < batch_size
            if rows:
                meta["position"] = rows[-1].raw_key
                meta["built"] = int(meta.get("built", 0)) + len(rows)
            if finished:
                meta["state"] = READABLE
                meta["position"] = None
            batch.put_raw(meta_key(name), encode_meta(meta))
            await store.write(batch)
            indexes.stored[name] = meta
            indexes.refresh()
        done += len(rows)
        if progress is not None:
            progress(done, "readable" if finished else "building")
        if finished:
            return done


async def _rows_after(
    store: RowReads, spans: list[KeySpan], position: Any, batch_size: int, where: str
) -> tuple[list[Record], dict[bytes, int]]:
    """The next `batch_size` records of `spans` after the build position, with the expiry
    (Unix ms) of each that has one, read with them."""
    scan = store._scan(spans, None, None, position, "raise", None, None, {"limit": batch_size})
    scan._where = where
    expiries: dict[bytes, int] = {}
    scan.expiries = expiries
    return await scan.to_list(), expiries


async def _build_puts(
    store: RowReads, index: Index, rows: list[Record], expiries: dict[bytes, int]
) -> list[IndexedOp]:
    """The build's live records as puts for index upkeep, with their expiry (read by the
    scan, under the index lock), so every entry expires with its record; a covering index's
    with their stored bytes too, read with the expiry again, skipping a record that expired
    since the scan."""
    if not index.covering:
        build_puts: list[IndexedOp] = []
        for row in rows:
            expire_at = expiries.get(row.raw_key)
            put = _new(Put, (row.raw_key, None, expire_at, row.value, options_at(expire_at)))
            build_puts.append((row.raw_key, row.key.record_type, put))
        return build_puts
    keys = [row.raw_key for row in rows]
    stored = await in_windows(
        functools.partial(calls.get_rows, store._source), keys, store.read_window
    )
    now = now_ms() if store.check_expiry else -1  # check_expiry=False: expired rows show
    build_puts = []
    for row, point in zip(rows, stored, strict=True):
        if point is not None and not is_expired(point[1], now):
            data, expire_at = point
            put = _new(Put, (row.raw_key, data, expire_at, row.value, options_at(expire_at)))
            build_puts.append((row.raw_key, row.key.record_type, put))
    return build_puts


async def rebuild(
    store: Store, name: str, *, batch_size: int = 1000, progress: Progress | None = None
) -> int:
    """Rebuild an index from its records (the repair of a damaged one): write_only from the
    start, every entry cleared, then built; returns how many records were indexed."""
    indexes, _ = _need(store, name)
    async with indexes.lock.held(store.where):
        meta = dict(indexes.stored[name], state=WRITE_ONLY, position=None, built=0)
        await _save(store, name, meta)
        indexes.stored[name] = meta
        indexes.refresh()
    return await build(store, name, batch_size=batch_size, progress=progress)


async def drop(
    store: Store, name: str, *, batch_size: int = 1000, progress: Progress | None = None
) -> int:
    """Remove an index: its reads refused at once, its entries deleted, then its metadata;
    returns how many entries were deleted. Works for stored indexes not declared too."""
    indexes = store._indexes
    if indexes is None or name not in indexes.stored:
        raise IndexStateError(f"{store.where}: no index named {name!r} is stored", index=name)
    async with indexes.lock.held(store.where):
        meta = dict(indexes.stored[name], state=WRITE_ONLY, position=None, built=0)
        await _save(store, name, meta)
        indexes.stored[name] = meta
        indexes.refresh()
    deleted = await _clear(store, name, batch_size)
    if progress is not None:
        progress(deleted, "entries deleted")
    batch = Batch(store)
    batch.delete_raw(meta_key(name))
    await store.write(batch)
    del indexes.stored[name]
    indexes.refresh()
    await _save_catalog(store, indexes.stored)
    return deleted
