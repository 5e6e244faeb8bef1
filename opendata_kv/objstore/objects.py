"""The objects of a SlateDB database as opendata_kv sees them: names, listing, manifest facts.

SlateDB keeps `manifest/<id>.manifest`, `compactions/<id>.compactions`, `wal/<id>.sst` (ids
as 20 decimal digits) and `compacted/<ulid>.sst` (L0 and sorted-run SSTs) under the database
path. The binding can decode manifests (Admin) but cannot list objects, so listing works on
local directories only; on s3:// the WAL files are found by reading them in order
(checks/integrity.py). A name that is not what slatedb writes (an id of other than 20 digits or
above 2^64 - 1, another suffix, a directory) is a stray: kept out of the ids, reported by
name, so that one stray file cannot make a check build a range of 10^20 ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MANIFEST_DIR = "manifest"
COMPACTIONS_DIR = "compactions"
WAL_DIR = "wal"
SST_DIR = "compacted"

#: slatedb's ids are unsigned 64-bit numbers, written as 20 decimal digits
MAX_ID = 2**64 - 1
ID_DIGITS = 20


def wal_name(wal_id: int) -> str:
    return f"{WAL_DIR}/{wal_id:020d}.sst"


def manifest_name(manifest_id: int) -> str:
    return f"{MANIFEST_DIR}/{manifest_id:020d}.manifest"


def compactions_name(compactions_id: int) -> str:
    return f"{COMPACTIONS_DIR}/{compactions_id:020d}.compactions"


def sst_name(ulid: str) -> str:
    return f"{SST_DIR}/{ulid}.sst"


def parse_id(stem: str) -> int | None:
    """The id of a numbered object's name stem: exactly 20 ASCII digits, at most 2^64 - 1
    (None: not a name slatedb writes)."""
    if len(stem) != ID_DIGITS or not (stem.isascii() and stem.isdigit()):
        return None
    value = int(stem)
    return value if value <= MAX_ID else None


@dataclass
class Listing:
    """Sizes of the objects present, by id (ulid for SSTs); `strays` are the names (relative
    to the database root) of objects slatedb does not write there; `unreadable` those the
    process may not read (local directories: permission bits)."""

    manifests: dict[int, int] = field(default_factory=dict)
    compactions: dict[int, int] = field(default_factory=dict)
    wals: dict[int, int] = field(default_factory=dict)
    ssts: dict[str, int] = field(default_factory=dict)
    strays: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def _entries(root: str, directory: str) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(os.path.join(root, directory)))
    except FileNotFoundError:
        return []


def _numbered(root: str, directory: str, suffix: str, listing: Listing) -> dict[int, int]:
    found: dict[int, int] = {}
    for entry in _entries(root, directory):
        stem, dot, ext = entry.name.partition(".")
        number = parse_id(stem) if dot and ext == suffix else None
        if number is None or not entry.is_file():
            listing.strays.append(f"{directory}/{entry.name}")
            continue
        try:
            found[number] = entry.stat().st_size
        except FileNotFoundError:
            continue  # collected between the directory read and the stat: not listed
        if not os.access(entry.path, os.R_OK):
            listing.unreadable.append(f"{directory}/{entry.name}")
    return found


def list_local(root: str) -> Listing:
    """One listing of a local database directory (PermissionError propagates): memory and
    time linear in the number of entries, whatever their names."""
    listing = Listing()
    for entry in _entries(root, SST_DIR):
        stem, dot, ext = entry.name.partition(".")
        if dot and ext == "sst" and entry.is_file():
            try:
                listing.ssts[stem] = entry.stat().st_size
            except FileNotFoundError:
                continue  # compacted away between the directory read and the stat
            if not os.access(entry.path, os.R_OK):
                listing.unreadable.append(f"{SST_DIR}/{entry.name}")
        else:
            listing.strays.append(f"{SST_DIR}/{entry.name}")
    listing.manifests = _numbered(root, MANIFEST_DIR, "manifest", listing)
    listing.compactions = _numbered(root, COMPACTIONS_DIR, "compactions", listing)
    listing.wals = _numbered(root, WAL_DIR, "sst", listing)
    listing.strays.sort()
    listing.unreadable.sort()
    return listing


def listing_of(sizes: dict[str, int]) -> Listing:
    """A Listing from object names relative to the database root and their sizes (an
    s3:// listing): the same ids, sizes and strays list_local finds in a directory. Objects
    outside the four directories (opendata_kv's own, slatedb's gc/ markers) are not looked at."""
    listing = Listing()
    suffixes = {MANIFEST_DIR: "manifest", COMPACTIONS_DIR: "compactions", WAL_DIR: "sst"}
    targets = {MANIFEST_DIR: listing.manifests, COMPACTIONS_DIR: listing.compactions}
    targets[WAL_DIR] = listing.wals
    for name, size in sizes.items():
        directory, slash, rest = name.partition("/")
        if not slash or (directory not in suffixes and directory != SST_DIR):
            continue
        stem, dot, ext = rest.partition(".")
        if directory == SST_DIR:
            if dot and ext == "sst" and "/" not in rest:
                listing.ssts[stem] = size
            else:
                listing.strays.append(name)
            continue
        number = parse_id(stem) if dot and ext == suffixes[directory] else None
        if number is None:
            listing.strays.append(name)
        else:
            targets[directory][number] = size
    listing.strays.sort()
    return listing


#: the directories a listing of a database covers (each listed with one request per 1,000)
LISTED_DIRS = (MANIFEST_DIR, WAL_DIR, SST_DIR, COMPACTIONS_DIR)


def id_gaps(present: list[int], low: int, high: int) -> list[tuple[int, int]]:
    """The runs (first, last) of ids from `low` to `high` absent from `present` (sorted), in
    time linear in len(present), whatever the span."""
    gaps: list[tuple[int, int]] = []
    expected = low
    for number in present:
        if number < low or number > high:
            continue
        if number > expected:
            gaps.append((expected, number - 1))
        expected = max(expected, number + 1)
    if expected <= high:
        gaps.append((expected, high))
    return gaps


def sst_extent(info: Any) -> int:
    """The smallest size an SST can have given its manifest info: the end of its index,
    filter and stats blocks (the footer follows them)."""
    return int(
        max(
            info.index_offset + info.index_len,
            info.filter_offset + info.filter_len,
            info.stats_offset + info.stats_len,
        )
    )


def manifest_ssts(manifest: Any) -> Iterator[tuple[str, Any]]:
    """(ulid, SsTableHandle) of every SST a manifest references (L0 and sorted runs), once."""
    seen: set[str] = set()
    views = list(manifest.l0)
    for run in manifest.compacted:
        views.extend(run.sst_views)
    for segment in getattr(manifest, "segments", None) or ():
        for run in getattr(segment, "compacted", None) or ():
            views.extend(run.sst_views)
        views.extend(getattr(segment, "l0", None) or ())
    for view in views:
        handle = view.sst
        ulid = handle.id.value
        if ulid not in seen:
            seen.add(ulid)
            yield ulid, handle
