"""What a database holds, as pieces of data with a key span and a size (split_points.Piece),
for splits (RFC 0014): each SST of a manifest (its first and last key, narrowed to the view's
visible range, and slatedb's estimate of its bytes), and the rows of the WAL files after the
manifest's replay point, which no SST holds yet (a reader replays them into its memtable, and
cannot flush them): the first WAL_SAMPLE_ROWS rows of them read, the rest estimated from
those. Reads the manifest and those WAL files only; writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opendata_kv.native.errors import call
from opendata_kv.store.ops.feed import admin as admin_of
from opendata_kv.store.ops.feed import wal_reader
from opendata_kv.store.split_points import Piece

#: WAL rows are summed into at most this many pieces (runs of consecutive keys)
WAL_PIECES = 256
#: WAL files are read until this many rows are: the rest are estimated from them
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


async def read_wal_rows(
    db_path: str, object_store: Any, after: int, where: str, sample: int | None = None
) -> tuple[list[tuple[bytes, int]], float]:
    """((key, bytes) of the rows of the WAL files after `after`, the manifest's replay point,
    up to the last one there now; the factor their bytes stand for). Files are read whole,
    until `sample` rows (default WAL_SAMPLE_ROWS) are read: the files left are counted, not
    read, and the factor (files there / files read) scales the rows read up to them (a WAL
    row costs ~10-80 us through the binding: a full memtable's WAL would take seconds)."""
    reader = wal_reader(db_path, object_store)
    tail = await call(reader.last_wal_file_id(after), f"read the WAL of {where}", others=True)
    if tail is None or tail <= after:
        return [], 1.0
    iterator = await call(reader.iterator(after + 1), f"read the WAL of {where}", others=True)
    rows: list[tuple[bytes, int]] = []
    consumed = after
    sample = WAL_SAMPLE_ROWS if sample is None else sample
    while len(rows) < sample:
        batch = await call(iterator.next(), f"read the WAL of {where}", others=True)
        if batch is None:
            break
        for row in batch.rows:
            key = bytes(row.key)
            value = row.value
            rows.append((key, len(key) + (0 if value is None else len(value))))
        consumed = batch.last_consumed_wal_file_id
        if consumed >= tail:
            break
    read = max(1, min(consumed, tail) - after)
    return rows, (tail - after) / read


async def data_pieces(
    db_path: str, object_store: Any, where: str, manifest_id: int | None, with_wal: bool
) -> list[Piece]:
    """The pieces of the database at `db_path`: the SSTs of manifest `manifest_id` (None: the
    latest) and, with `with_wal`, the rows of the WAL files after its replay point."""
    admin = admin_of(db_path, object_store, where)
    manifest = await call(admin.read_manifest(manifest_id), f"read the manifest of {where}")
    if manifest is None:
        return []
    pieces = [piece for piece in map(view_piece, manifest_views(manifest)) if piece is not None]
    if with_wal:
        rows, factor = await read_wal_rows(
            db_path, object_store, manifest.replay_after_wal_id, where
        )
        pieces += wal_pieces(rows, factor)
    return pieces
