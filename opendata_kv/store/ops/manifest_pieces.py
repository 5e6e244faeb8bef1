"""What a database holds, as pieces of data with a key span and a size (split_points.Piece),
for splits (RFC 0014): each SST of a manifest (its first and last key, narrowed to the view's
visible range, and slatedb's estimate of its bytes; cut by its index block's data blocks where
that is read, sst_blocks.py), and the rows of the WAL files after the manifest's replay point,
which no SST holds yet (a reader replays them into its memtable, and cannot flush them): the
first WAL_READ_BYTES of them read, the rest counted by their file sizes (where the store
cannot be listed: the first WAL_SAMPLE_ROWS rows read, the rest counted by files). Reads the
manifest, the SSTs' index blocks, a listing and those WAL files only; writes nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opendata_kv.native.errors import call
from opendata_kv.objstore import sidecar
from opendata_kv.objstore.location import Location
from opendata_kv.objstore.sidecar import Sidecar
from opendata_kv.store.ops.feed import admin as admin_of
from opendata_kv.store.ops.feed import wal_reader
from opendata_kv.store.ops.sst_blocks import block_pieces
from opendata_kv.store.split_points import Piece

#: WAL rows are summed into at most this many pieces (runs of consecutive keys)
WAL_PIECES = 256
#: WAL files are read while they hold at most this many bytes: the rest are estimated
WAL_READ_BYTES = 256 << 10
#: where WAL file sizes are unknown, files are read until this many rows are
WAL_SAMPLE_ROWS = 4096


def manifest_views(manifest: Any) -> Iterator[Any]:
    """Every SST view a manifest (or one of its segments) references: L0 and sorted runs."""
    yield from manifest.l0
    for run in manifest.compacted:
        yield from run.sst_views
    for segment in getattr(manifest, "segments", None) or ():
        yield from manifest_views(segment)


def view_piece(view: Any) -> Piece | None:
    """An SST view as a piece: the SST's first and last key narrowed to what the view shows,
    its estimated bytes; None for an SST with no keys."""
    info = view.sst.info
    first, last = info.first_entry, info.last_entry
    if first is None or last is None:
        return None
    first, last = bytes(first), bytes(last)
    shown = view.visible_range
    if shown is not None:
        if shown.start is not None:
            first = max(first, bytes(shown.start))
        if shown.end is not None and bytes(shown.end) < last:
            last = bytes(shown.end)
    if last < first:
        return None
    return Piece(first, last, int(view.estimated_size_bytes))


def wal_pieces(rows: list[tuple[bytes, int]], factor: float = 1.0) -> list[Piece]:
    """(key, bytes) rows summed into at most WAL_PIECES pieces of consecutive keys, their
    bytes times `factor` (the WAL files they stand for, read or not)."""
    rows.sort()
    step = max(1, -(-len(rows) // WAL_PIECES))
    out = []
    for at in range(0, len(rows), step):
        run = rows[at : at + step]
        size = round(sum(size for _, size in run) * factor)
        out.append(Piece(run[0][0], run[-1][0], size))
    return out


def wal_sizes(
    location: Location, side: Sidecar | None, db_path: str, first: int, last: int
) -> dict[int, int] | None:
    """The size of each WAL file first..last of the database at `db_path` (one stat each on a
    local directory, one listing on s3:// with static credentials); None where the store
    cannot be listed. Blocking: run it in a thread."""
    if location.scheme == "file":
        root = os.path.join(location.path, db_path, "wal")
        sizes = {}
        for wal_id in range(first, last + 1):
            try:
                sizes[wal_id] = os.stat(os.path.join(root, f"{wal_id:020d}.sst")).st_size
            except FileNotFoundError:
                continue  # collected since: its rows are in an SST now
        return sizes
    client = None if side is None else side._s3
    if location.scheme != "s3" or client is None:
        return None
    prefix = f"{db_path}/wal/"
    found = {}
    for name, size in client.list_sizes(prefix).items():
        stem, _, ext = name[len(prefix) :].partition(".")
        if ext == "sst" and stem.isdigit() and first <= int(stem) <= last:
            found[int(stem)] = size
    return found


@dataclass
class WalRead:
    """What was read of the WAL files after a manifest's replay point: `rows` (key, bytes)
    of the files read, and the bytes every file there holds, in the unit the rows are to be
    scaled to (`total`; None: scale by `files_factor`, the files there / the files read)."""

    rows: list[tuple[bytes, int]] = field(default_factory=list)
    total: int | None = None
    files_factor: float = 1.0


async def read_wal(
    db_path: str,
    object_store: Any,
    after: int,
    where: str,
    sizes_of: Callable[[int, int], Awaitable[dict[int, int] | None]] | None = None,
    first_file: bool = False,
) -> WalRead:
    """The rows of the WAL files after `after` (the manifest's replay point), up to the last
    one there now, read whole, in order, while they hold at most WAL_READ_BYTES (by the file
    sizes `sizes_of` gives; `first_file`: the first one whatever its size, where nothing else
    tells where keys lie) or, where sizes are unknown, until WAL_SAMPLE_ROWS rows are read.
    The files left are counted, not read: a WAL row costs ~10-80 us through the binding, and
    one 50,000-row batch file took 4-5 s at load 25."""
    reader = wal_reader(db_path, object_store)
    tail = await call(reader.last_wal_file_id(after), f"read the WAL of {where}", others=True)
    if tail is None or tail <= after:
        return WalRead()
    sizes = None if sizes_of is None else await sizes_of(after + 1, tail)
    found = WalRead(total=None if sizes is None else sum(sizes.values()))
    if sizes is not None and sizes.get(after + 1, 0) > WAL_READ_BYTES and not first_file:
        return found  # the first file alone is over the budget: sizes only
    iterator = await call(reader.iterator(after + 1), f"read the WAL of {where}", others=True)
    consumed, read_bytes = after, 0
    while True:
        if sizes is None and len(found.rows) >= WAL_SAMPLE_ROWS:
            break
        if sizes is not None:
            upcoming = sizes.get(consumed + 1, 0)
            if read_bytes + upcoming > WAL_READ_BYTES and not (first_file and not found.rows):
                break
            read_bytes += upcoming
        batch = await call(iterator.next(), f"read the WAL of {where}", others=True)
        if batch is None:
            break
        for row in batch.rows:
            key = bytes(row.key)
            value = row.value
            found.rows.append((key, len(key) + (0 if value is None else len(value))))
        consumed = batch.last_consumed_wal_file_id
        if consumed >= tail:
            break
    found.files_factor = (tail - after) / max(1, min(consumed, tail) - after)
    return found


def wal_share(pieces: list[Piece], read: WalRead) -> list[Piece]:
    """`pieces` (the SSTs) with the WAL's share: its rows read, scaled to every file's bytes,
    as pieces of their own; with no row read but bytes there, each SST piece grown by the
    WAL's bytes as it holds theirs (the same picture as a copy of each, at half the pieces:
    the cut's cost is by piece)."""
    if read.rows:
        held = sum(size for _, size in read.rows)
        factor = read.files_factor if read.total is None else read.total / max(1, held)
        return pieces + wal_pieces(read.rows, factor)
    if not read.total or not pieces:
        return pieces
    flushed = sum(piece.size for piece in pieces) or 1
    return [Piece(p.first, p.last, p.size + round(read.total * p.size / flushed)) for p in pieces]


async def data_pieces(
    location: Location,
    object_store: Any,
    where: str,
    manifest_id: int | None,
    with_wal: bool,
    db_path: str | None = None,
) -> list[Piece]:
    """The pieces of the database at `db_path` (default: `location`'s): the SSTs of manifest
    `manifest_id` (None: the latest) and, with `with_wal`, the WAL after its replay point."""
    path = location.db_path if db_path is None else db_path
    admin = admin_of(path, object_store, where)
    manifest = await call(admin.read_manifest(manifest_id), f"read the manifest of {where}")
    if manifest is None:
        return []
    views = list(manifest_views(manifest))
    by_blocks = await block_pieces(location, object_store, path, views)
    pieces = []
    for i, view in enumerate(views):
        if i in by_blocks:
            pieces += by_blocks[i]
        elif (piece := view_piece(view)) is not None:
            pieces.append(piece)
    if with_wal:
        side, _ = sidecar.of(object_store)

        async def sizes_of(first: int, last: int) -> dict[int, int] | None:
            return await asyncio.to_thread(wal_sizes, location, side, path, first, last)

        after = manifest.replay_after_wal_id
        read = await read_wal(path, object_store, after, where, sizes_of, not pieces)
        pieces = wal_share(pieces, read)
    return pieces
