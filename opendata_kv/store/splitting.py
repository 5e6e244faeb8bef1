"""Store.splits / StoreReader.splits (RFC 0014): the key range of a record type, a raw prefix,
a ScanRange or a KeyRange cut into contiguous KeyRanges of about equal bytes, from the manifest
the store reads (a pinned reader: its checkpoint's) and the WAL rows no SST holds yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opendata_kv.errors import ArgumentTypeError, CheckpointError, StoreUnavailableError
from opendata_kv.keys import RecordType
from opendata_kv.native.errors import call
from opendata_kv.native.slatedb import FlushOptions, FlushType
from opendata_kv.store.ops.checkpoints import Checkpoints, wal_dir
from opendata_kv.store.ops.manifest_pieces import data_pieces
from opendata_kv.store.ranges import KeyRange, ScanRange, scan_range
from opendata_kv.store.split_points import clip, cut, how_many

if TYPE_CHECKING:
    from opendata_kv.store.reader import StoreReader

#: what splits cuts: a RecordType or record name (plus leading fields and bounds), raw prefix
#: bytes, a ScanRange (raw keys, as scan_all reads them) or a KeyRange
SplitTarget = RecordType | str | bytes | ScanRange | KeyRange

#: how long splits waits for the manifest and WAL reads by default, seconds
SPLITS_TIMEOUT = 60.0


def target_bounds(
    reader: StoreReader, target: Any, leading: tuple[Any, ...], bounds: Mapping[str, Any]
) -> tuple[bytes, bytes | None]:
    """[lo, hi) of what `target` names, in raw key bytes (hi None: no upper bound)."""
    if isinstance(target, KeyRange):
        if leading or bounds:
            raise ArgumentTypeError(
                f"splits({target!r}): a KeyRange is its own bounds; leading fields and "
                f"bounds ({', '.join(bounds) or 'leading'}) do not apply",
                field="target",
                value=target,
            )
        return target.start, target.end
    if isinstance(target, (bytes, ScanRange)):
        base = ScanRange(prefix=target) if isinstance(target, bytes) else target
        if leading:
            raise ArgumentTypeError(
                f"splits({target!r}): leading field values need a RecordType or record name",
                field="leading",
                value=leading,
            )
        found, rest = scan_range(base, (), bounds, "splits")
        record: RecordType | str | None = None
    elif isinstance(target, (RecordType, str)):
        found, rest = scan_range(None, leading, bounds, "splits")
        record = target
    else:
        raise ArgumentTypeError(
            "splits: the target is a RecordType, a record name, raw prefix bytes, a ScanRange "
            f"or a KeyRange, got {type(target).__name__} {target!r}",
            field="target",
            value=target,
        )
    if rest:
        raise ArgumentTypeError(
            f"splits: {', '.join(sorted(rest))} are not range bounds (splits takes "
            "partial, version, prefix, start, end, after)",
            field=sorted(rest)[0],
            value=rest[sorted(rest)[0]],
        )
    spans = reader._bounded_spans(reader._spans(record, found), found.start, found.end)
    cursor = reader._cursor(spans, found.after, "splits")
    lows: list[bytes] = []
    highs: list[bytes | None] = []
    for span in spans:
        lo = span.start or b""
        if cursor is not None:
            lo = max(lo, cursor + b"\0")
        if span.end is not None and span.end <= lo:
            continue  # empty
        lows.append(lo)
        highs.append(span.end)
    if not lows:  # an empty range: the first span's start, as a range of its own
        first = spans[0].start or b"" if spans else b""
        return first, first + b"\0"
    return min(lows), None if None in highs else max(h for h in highs if h is not None)


async def pieces_of(reader: StoreReader) -> list[Any]:
    """The data pieces of what `reader` reads: the latest manifest plus the WAL after it, or
    a checkpoint's manifest (and, for one made away from the writer, its copy's WAL). The
    writer flushes its memtable to L0 first, so its manifest names all it holds."""
    store, where = reader._object_store, reader.where
    db_path = reader.location.db_path
    if not reader.readonly:
        await call(
            reader._writable().flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)),
            f"flush before splits on {where}",
        )
    location = reader.location
    if reader.checkpoint_id is None:
        return await data_pieces(location, store, where, None, with_wal=True)
    checkpoints = Checkpoints(db_path, store, where)
    facts = await checkpoints.facts(reader.checkpoint_id)
    side = checkpoints._side
    if facts is not None and side is not None:  # read through its copy, WAL files and all
        copy = side.path_of(f"{wal_dir(reader.checkpoint_id)}/db")
        return await data_pieces(location, store, where, None, with_wal=True, db_path=copy)
    listed = {cp.id: cp for cp in await checkpoints.list()}
    found = listed.get(reader.checkpoint_id)
    if found is None:
        raise CheckpointError(
            f"splits on {where}: checkpoint {reader.checkpoint_id} this reader reads is gone "
            "(deleted, or expired past its lifetime)",
            value=reader.checkpoint_id,
        )
    return await data_pieces(location, store, where, found.manifest_id, with_wal=False)


async def splits(
    reader: StoreReader,
    target: Any,
    leading: tuple[Any, ...],
    n: int | None,
    target_bytes: int | None,
    timeout: float | None,
    bounds: Mapping[str, Any],
) -> list[KeyRange]:
    """See StoreReader.splits."""
    reader.check_open()
    lo, hi = target_bounds(reader, target, leading, bounds)
    try:
        pieces = await asyncio.wait_for(pieces_of(reader), timeout)
    except asyncio.TimeoutError:
        raise StoreUnavailableError(
            f"splits on {reader.where}: reading the manifest and WAL took over {timeout} s "
            "(give splits(timeout=...) more, or None to wait as long as slatedb retries)",
            value=reader.where,
        ) from None
    inside = clip(pieces, lo, hi)
    return cut(inside, lo, hi, how_many(sum(p.size for p in inside), n, target_bytes))
