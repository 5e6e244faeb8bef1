"""An SST view as many pieces, one per run of its data blocks, from its index block (sst_index.py):
splits then follow where the SST's keys lie, not an even spread between its first and last key
(RFC 0014). One range read per SST (a local file's pread, or an S3 ranged GET with the
sidecar's client), largest SSTs first while the index bytes read stay within INDEX_READ_BYTES
(LZ4 ones within PURE_LZ4_READ_BYTES where Python decodes them); INDEX_ENTRIES block entries
taken over them all, shared by size (the cut's cost is by piece). An SST not read (over the
budget, an S3 store without static credentials, a codec not decoded here, an object gone)
keeps the manifest's picture. Reads only; writes nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from opendata_kv.objstore import sidecar
from opendata_kv.objstore.location import Location
from opendata_kv.objstore.objects import sst_name
from opendata_kv.store.ops.sst_index import MAX_ENTRIES, arrow_lz4, block_entries, unwrap
from opendata_kv.store.split_points import Piece, clip

#: index bytes read per splits call at most: the 10M-record bench store's SSTs (241 MB) hold
#: 8.7 MB of index, so ~3.5x that store; an SST left unread keeps the manifest's picture,
#: which put 0 to 1M of its rows in one split there (docs/performance.md)
INDEX_READ_BYTES = 32 << 20
#: of them, LZ4 index bytes read at most where pyarrow is not installed: Python's LZ4 decodes
#: ~3.6 MB/s on the shared machine (a 10M-record store's 8.2 MB took 2.3 s of CPU a call)
PURE_LZ4_READ_BYTES = 1 << 20
#: index reads in flight at once
PARALLEL_READS = 8
#: block entries taken over all the SSTs of one splits call, shared by their sizes (each SST's
#: evenly spaced, at least its first and last): the cut costs ~20-25 us of CPU a piece, so a
#: 10M-record store's 266,000 blocks would take seconds, and a split of n <= 256 still has 16
#: or more pieces to place its cuts among (RFC 0014)
INDEX_ENTRIES = 4096


def read_region(
    location: Location, object_store: Any, db_path: str, ulid: str, offset: int, length: int
) -> bytes | None:
    """`length` bytes at `offset` of SST `ulid`, None where they cannot be read here. Blocking."""
    name = f"{db_path}/{sst_name(ulid)}" if db_path else sst_name(ulid)
    if location.scheme == "file":
        try:
            with open(os.path.join(location.path, name), "rb") as file:
                data = os.pread(file.fileno(), length, offset)
        except FileNotFoundError:
            return None
        return data if len(data) == length else None
    side, _ = sidecar.of(object_store)
    client = None if side is None else side._s3
    if location.scheme != "s3" or client is None:
        return None
    return client.get_range(name, offset, length)


def codec_name(info: Any) -> str | None:
    codec = info.compression_codec
    return None if codec is None else str(getattr(codec, "name", codec)).upper()


def data_end(info: Any) -> int:
    """Where an SST's data blocks end: the first of its filter, index and stats blocks."""
    ends = [int(info.index_offset)]
    if info.filter_len:
        ends.append(int(info.filter_offset))
    if info.stats_len:
        ends.append(int(info.stats_offset))
    return min(ends)


def pieces_from_index(view: Any, entries: Sequence[tuple[int, bytes]]) -> list[Piece]:
    """The view's pieces: one per run of blocks between two index entries, each keyed from
    its first block's first key to the next run's, sized by its share of the data bytes and
    scaled to the view's estimate, narrowed to the view's visible range."""
    info = view.sst.info
    if not entries or info.last_entry is None:
        return []
    end = data_end(info)
    first = b"" if info.first_entry is None else bytes(info.first_entry)
    raw: list[Piece] = []
    for i, (offset, key) in enumerate(entries):
        # a block's index key may be shorter than its first key (the first block's is empty)
        key = max(key, first)
        if i + 1 < len(entries):
            upto, last = entries[i + 1][0], max(entries[i + 1][1], key)
        else:
            upto, last = end, max(bytes(info.last_entry), key)
        raw.append(Piece(key, last, max(1, upto - offset)))
    shown = view.visible_range
    if shown is not None:
        lo = b"" if shown.start is None else bytes(shown.start)
        hi = (
            None
            if shown.end is None
            else bytes(shown.end) + (b"\0" if shown.end_inclusive else b"")
        )
        raw = clip(raw, lo, hi)
    total = sum(p.size for p in raw)
    if not total:
        return []
    scale = int(view.estimated_size_bytes) / total
    return [Piece(p.first, p.last, max(1, round(p.size * scale))) for p in raw]


def chosen_views(views: Sequence[Any]) -> list[int]:
    """The views (by place) whose index is read: largest first while the index bytes stay
    within INDEX_READ_BYTES (LZ4 ones within PURE_LZ4_READ_BYTES where Python decodes them),
    keys there and a codec decoded here."""
    order = sorted(range(len(views)), key=lambda i: -int(views[i].estimated_size_bytes))
    chosen, spent, slow = [], 0, 0
    slow_budget = None if arrow_lz4() else PURE_LZ4_READ_BYTES
    for i in order:
        info = views[i].sst.info
        length = int(info.index_len)
        if info.first_entry is None or length <= 0 or spent + length > INDEX_READ_BYTES:
            continue
        codec = codec_name(info)
        if codec not in (None, "LZ4", "ZLIB"):
            continue
        if codec == "LZ4" and slow_budget is not None:
            if slow + length > slow_budget:
                continue
            slow += length
        chosen.append(i)
        spent += length
    return chosen


async def read_indexes(
    location: Location, object_store: Any, db_path: str, views: Sequence[Any], chosen: list[int]
) -> dict[str, bytes | None]:
    """The stored index region of each chosen view's SST, by SST id (None: not read here),
    one range read each, PARALLEL_READS in flight."""
    gate = asyncio.Semaphore(PARALLEL_READS)
    regions: dict[str, bytes | None] = {}

    async def fetch(i: int) -> None:
        handle = views[i].sst
        ulid = handle.id.value
        if ulid in regions:
            return
        regions[ulid] = None
        info = handle.info
        async with gate:
            regions[ulid] = await asyncio.to_thread(
                read_region,
                location,
                object_store,
                db_path,
                ulid,
                int(info.index_offset),
                int(info.index_len),
            )

    await asyncio.gather(*(fetch(i) for i in chosen))
    return regions


def entry_limits(views: Sequence[Any], chosen: list[int], budget: int) -> dict[str, int]:
    """How many block entries to take from each chosen view's SST: `budget` shared by their
    estimated sizes, 2 at least (an SST's first and last entry), MAX_ENTRIES at most."""
    sizes: dict[str, int] = {}
    for i in chosen:
        ulid = views[i].sst.id.value
        sizes[ulid] = sizes.get(ulid, 0) + max(1, int(views[i].estimated_size_bytes))
    total = sum(sizes.values()) or 1
    return {u: min(MAX_ENTRIES, max(2, budget * size // total)) for u, size in sizes.items()}


def parsed_pieces(
    views: Sequence[Any], chosen: list[int], regions: dict[str, bytes | None]
) -> dict[int, list[Piece]]:
    """For each chosen view whose region was read: its pieces by blocks (each SST's index
    decoded once, however many views show it; INDEX_ENTRIES entries in all)."""
    out: dict[int, list[Piece]] = {}
    decoded: dict[str, list[tuple[int, bytes]]] = {}
    limits = entry_limits(views, chosen, INDEX_ENTRIES)
    for i in chosen:
        handle = views[i].sst
        ulid = handle.id.value
        if ulid not in decoded:
            region = regions.get(ulid)
            if region is None:
                continue
            body = unwrap(region, codec_name(handle.info), ulid)
            if body is None:
                continue
            decoded[ulid] = block_entries(body, ulid, limits[ulid])
        pieces = pieces_from_index(views[i], decoded[ulid])
        if pieces:
            out[i] = pieces
    return out


async def block_pieces(
    location: Location, object_store: Any, db_path: str, views: Sequence[Any]
) -> dict[int, list[Piece]]:
    """For each view (by its place in `views`) whose index was read: its pieces by blocks."""
    chosen = chosen_views(views)
    regions = await read_indexes(location, object_store, db_path, views, chosen)
    return parsed_pieces(views, chosen, regions)
