"""The objects of a SlateDB database as opendata_kv sees them: names, listing, manifest facts.

SlateDB keeps `manifest/<id>.manifest`, `compactions/<id>.compactions`, `wal/<id>.sst` (ids
as 20 decimal digits) and `compacted/<ulid>.sst` (L0 and sorted-run SSTs) under the database
path. The binding can decode manifests (Admin) but cannot list objects, so listing works on
local directories only; elsewhere the checks that need it are skipped (docs/reliability.md).
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


def wal_name(wal_id: int) -> str:
    return f"{WAL_DIR}/{wal_id:020d}.sst"


def manifest_name(manifest_id: int) -> str:
    return f"{MANIFEST_DIR}/{manifest_id:020d}.manifest"


def compactions_name(compactions_id: int) -> str:
    return f"{COMPACTIONS_DIR}/{compactions_id:020d}.compactions"


def sst_name(ulid: str) -> str:
    return f"{SST_DIR}/{ulid}.sst"


@dataclass
class Listing:
    """Sizes of the objects present, by id (ulid for SSTs); `others` are unexpected names."""

    manifests: dict[int, int] = field(default_factory=dict)
    compactions: dict[int, int] = field(default_factory=dict)
    wals: dict[int, int] = field(default_factory=dict)
    ssts: dict[str, int] = field(default_factory=dict)


def _numbered(directory: str, suffix: str) -> dict[int, int]:
    found: dict[int, int] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return found
    for entry in entries:
        stem, dot, ext = entry.name.partition(".")
        if dot and ext == suffix and stem.isdigit() and entry.is_file():
            found[int(stem)] = entry.stat().st_size
    return found


def list_local(root: str) -> Listing:
    """One listing of a local database directory (PermissionError propagates)."""
    ssts: dict[str, int] = {}
    try:
        entries = list(os.scandir(os.path.join(root, SST_DIR)))
    except FileNotFoundError:
        entries = []
    for entry in entries:
        stem, dot, ext = entry.name.partition(".")
        if dot and ext == "sst" and entry.is_file():
            ssts[stem] = entry.stat().st_size
    return Listing(
        manifests=_numbered(os.path.join(root, MANIFEST_DIR), "manifest"),
        compactions=_numbered(os.path.join(root, COMPACTIONS_DIR), "compactions"),
        wals=_numbered(os.path.join(root, WAL_DIR), "sst"),
        ssts=ssts,
    )


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
