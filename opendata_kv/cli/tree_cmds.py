"""`opendata-kv tree DB`: the LSM tree as it stands, from the manifest and the object listing.

It reads the latest manifest (slatedb's Admin), the manifests the checkpoints pin, one listing
of the objects (local directories; s3:// with static credentials) and the WAL files not yet in
L0 (for their sequence range): never opens a Db or a reader, writes nothing. Every step is
bounded by --timeout. What it shows (the --json report, docs/cli.md):

- manifest: id, epochs, the WAL replay point, last L0 sequence number;
- wal: files, bytes, id range, and the sequence range of those after the replay point;
- l0 / sorted_runs (and the segments of an OpenData database): each SST's size and its first
  and last key, decoded by --schema as dump decodes keys;
- checkpoints: the manifest each pins, and what that manifest holds;
- gc: what the garbage collector may delete (objects no pinned manifest needs).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable
from typing import Any

from opendata_kv.cli.common import EXIT_OK, CliError, add_json_flag, emit_json
from opendata_kv.cli.db_args import database_arg, read_limit_args, schema_args
from opendata_kv.cli.db_read import ReadLimits, endpoint_text
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.rows import Decoder
from opendata_kv.cli.text import human_bytes, printable, shorten
from opendata_kv.objstore.location import Location, parse_location, s3_config
from opendata_kv.objstore.objects import Listing, list_local, listing_of, manifest_ssts
from opendata_kv.objstore.s3http import client_for
from opendata_kv.store.ops.feed import admin as admin_of
from opendata_kv.store.ops.feed import wal_reader


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `tree`."""
    tree = subparsers.add_parser(
        "tree",
        help="show the LSM tree: WAL, L0, sorted runs, checkpoints, GC (read-only)",
        description=(
            "Show the LSM tree of a SlateDB database as it stands: WAL files (count, bytes, "
            "sequence range), L0 SSTs and sorted runs with their sizes and key ranges (decoded "
            "with --schema), checkpoints with the manifests they pin, and what the garbage "
            "collector may delete. Reads the manifest and the object listing only; writes "
            "nothing and never fences the writer."
        ),
    )
    tree.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    schema_args(tree)
    layout_arg(tree)
    read_limit_args(tree, retries=False)
    add_json_flag(tree)
    tree.set_defaults(handler=run_tree)


def run_tree(args: argparse.Namespace) -> int:
    """Print the tree: sections of text, or with --json one report object."""
    decoder = Decoder.from_args(args)
    report = asyncio.run(build_report(args.db, ReadLimits.from_args(args), decoder))
    if args.json:
        emit_json(report)
    else:
        sys.stdout.write(render(report))
    return EXIT_OK


# --- reading -------------------------------------------------------------------------------------


def list_objects(location: Location, limits: ReadLimits) -> Listing | None:
    """One listing of the database's objects, or None where it cannot be listed (memory://,
    s3:// without static credentials). Blocking."""
    if location.scheme == "file":
        return list_local(location.path)
    if location.scheme != "s3":
        return None
    options = limits.object_store_options(location)
    client = client_for(
        location.bucket or "", s3_config(location.bucket or "", options=options), limits.timeout
    )
    if client is None:
        return None
    prefix = f"{location.path}/" if location.path else ""
    return listing_of({key[len(prefix) :]: size for key, size in client.list_sizes(prefix).items()})


async def wal_sequences(
    location: Location, object_store: Any, first: int, last: int, limits: ReadLimits, where: str
) -> tuple[int | None, int | None]:
    """(lowest, highest) sequence number in the WAL files `first`..`last` (None, None when
    they hold no writes)."""
    reader = wal_reader(location.db_path, object_store)
    iterator = await limits.bound(reader.iterator(first), f"read the WAL of {where}")
    low = high = None
    while True:
        rows = await limits.bound(iterator.next(), f"read the WAL of {where}")
        if rows is None:
            break
        for row in rows.rows:
            seq = int(row.seq)
            low = seq if low is None else min(low, seq)
            high = seq if high is None else max(high, seq)
        if rows.last_consumed_wal_file_id >= last:
            break
    return low, high


async def build_report(db: str, limits: ReadLimits, decoder: Decoder) -> dict[str, Any]:
    """The --json report of the database at `db`."""
    location = parse_location(db)
    where = db + endpoint_text(location)
    if location.scheme == "memory":
        raise CliError(f"{db}: a memory:// database lives in one process; nothing to show")
    object_store = location.object_store(limits.object_store_options(location))
    admin = admin_of(location.db_path, object_store, where)
    manifest = await limits.bound(admin.read_manifest(None), f"read the manifest of {where}")
    if manifest is None:
        raise CliError(f"no SlateDB database at {where} (no manifest found)")
    pinned = {}
    for checkpoint in manifest.checkpoints:
        if checkpoint.manifest_id not in pinned and checkpoint.manifest_id != manifest.id:
            pinned[checkpoint.manifest_id] = await limits.bound(
                admin.read_manifest(checkpoint.manifest_id), f"read the manifests of {where}"
            )
    listing = await limits.bound(
        asyncio.to_thread(list_objects, location, limits), f"list the objects of {where}"
    )
    sizes = None if listing is None else listing.ssts
    wal = await wal_report(location, object_store, manifest, listing, limits, where)
    return {
        "db": db,
        "listed": listing is not None,
        "manifest": {
            "id": manifest.id,
            "writer_epoch": manifest.writer_epoch,
            "compactor_epoch": manifest.compactor_epoch,
            "replay_after_wal_id": manifest.replay_after_wal_id,
            "next_wal_id": manifest.next_wal_sst_id,
            "last_l0_seq": manifest.last_l0_seq,
            "recent_snapshot_min_seq": manifest.recent_snapshot_min_seq,
            "manifests": None if listing is None else len(listing.manifests),
        },
        "wal": wal,
        **tree_part(manifest, decoder, sizes),
        "segments": [
            {"prefix_hex": bytes(segment.prefix).hex(), **tree_part(segment, decoder, sizes)}
            for segment in manifest.segments
        ],
        "checkpoints": [
            checkpoint_report(c, pinned.get(c.manifest_id, manifest)) for c in manifest.checkpoints
        ],
        "gc": gc_report(manifest, list(pinned.values()), listing),
    }


async def wal_report(
    location: Location,
    object_store: Any,
    manifest: Any,
    listing: Listing | None,
    limits: ReadLimits,
    where: str,
) -> dict[str, Any]:
    """The WAL files present (from the listing) and the sequence range of the ones after
    the replay point (read from them: the writes not yet in an L0 SST)."""
    replay = manifest.replay_after_wal_id
    wals = {} if listing is None else listing.wals
    after = sorted(i for i in wals if i > replay)
    if listing is None:  # not listable: the ids the manifest names
        after = list(range(replay + 1, manifest.next_wal_sst_id))
    first_seq = last_seq = None
    if after:
        first_seq, last_seq = await wal_sequences(
            location, object_store, after[0], after[-1], limits, where
        )
    return {
        "files": None if listing is None else len(wals),
        "bytes": None if listing is None else sum(wals.values()),
        "first_id": min(wals) if wals else None,
        "last_id": max(wals) if wals else None,
        "unreplayed_files": len(after),
        "unreplayed_bytes": None if listing is None else sum(wals[i] for i in after),
        "first_seq": first_seq,
        "last_seq": last_seq,
    }


def key_report(key: bytes | None, decoder: Decoder) -> dict[str, Any] | None:
    """A key as dump shows it (record, fields; the reason when it does not decode)."""
    if key is None:
        return None
    obj = decoder.row(bytes(key), b"", with_values=False).obj
    shown = ("key_hex", "version", "record_type", "record", "fields", "error")
    return {name: obj[name] for name in shown if name in obj}


def sst_report(view: Any, decoder: Decoder, sizes: dict[str, int] | None) -> dict[str, Any]:
    handle = view.sst
    ulid = handle.id.value
    info = handle.info
    return {
        "id": view.id,
        "sst": ulid,
        "bytes": None if sizes is None else sizes.get(ulid),
        "estimated_bytes": view.estimated_size_bytes,
        "first_key": key_report(info.first_entry, decoder),
        "last_key": key_report(info.last_entry, decoder),
    }


def tree_part(part: Any, decoder: Decoder, sizes: dict[str, int] | None) -> dict[str, Any]:
    """L0 and the sorted runs of a manifest (or of one of its segments)."""
    runs = []
    for run in part.compacted:
        ssts = [sst_report(view, decoder, sizes) for view in run.sst_views]
        runs.append(
            {
                "id": run.id,
                "ssts": ssts,
                "bytes": _total(s["bytes"] for s in ssts),
                "estimated_bytes": run.estimated_size_bytes,
                "first_key": ssts[0]["first_key"] if ssts else None,
                "last_key": ssts[-1]["last_key"] if ssts else None,
            }
        )
    l0 = [sst_report(view, decoder, sizes) for view in part.l0]
    return {
        "l0": l0,
        "l0_bytes": _total(s["bytes"] for s in l0),
        "last_compacted_l0": part.last_compacted_l0_sst_view_id,
        "sorted_runs": runs,
    }


def _total(sizes: Iterable[int | None]) -> int | None:
    values = list(sizes)
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def checkpoint_report(checkpoint: Any, manifest: Any) -> dict[str, Any]:
    """A checkpoint and what the manifest it pins holds."""
    return {
        "id": checkpoint.id,
        "name": checkpoint.name,
        "manifest_id": checkpoint.manifest_id,
        "created_secs": checkpoint.create_time_secs,
        "expires_secs": checkpoint.expire_time_secs,
        "pins": {
            "l0": len(manifest.l0),
            "sorted_runs": len(manifest.compacted),
            "ssts": sum(1 for _ in manifest_ssts(manifest)),
            "replay_after_wal_id": manifest.replay_after_wal_id,
        },
    }


def gc_report(manifest: Any, pinned: list[Any], listing: Listing | None) -> dict[str, Any]:
    """What the garbage collector may delete: objects neither the latest manifest nor one a
    checkpoint pins still needs (null counts where the store could not be listed)."""
    manifests = [manifest, *pinned]
    wal_boundary = min(m.replay_after_wal_id for m in manifests)
    oldest = min(m.id for m in manifests)
    needed = {ulid for m in manifests for ulid, _ in manifest_ssts(m)}
    report: dict[str, Any] = {
        "wal_needed_after_id": wal_boundary,
        "oldest_pinned_manifest": oldest,
    }
    if listing is None:
        return {**report, "wal_files": None, "manifests": None, "ssts": None}
    wal = {i: s for i, s in listing.wals.items() if i <= wal_boundary}
    keep = {m.id for m in manifests}
    old = {i: s for i, s in listing.manifests.items() if i < manifest.id and i not in keep}
    ssts = {u: s for u, s in listing.ssts.items() if u not in needed}
    return {
        **report,
        "wal_files": {"count": len(wal), "bytes": sum(wal.values())},
        "manifests": {"count": len(old), "bytes": sum(old.values())},
        "ssts": {"count": len(ssts), "bytes": sum(ssts.values())},
        "strays": listing.strays,
    }


# --- text ----------------------------------------------------------------------------------------

KEY_WIDTH = 60


def _size(value: int | None, estimated: int | None = None) -> str:
    if value is None:
        return "?" if estimated is None else f"~{human_bytes(estimated)}"
    return human_bytes(value)


def key_text(key: dict[str, Any] | None) -> str:
    if key is None:
        return "-"
    if key.get("record") and key.get("fields") is not None:
        fields = " ".join(f"{n}={v}" for n, v in key["fields"].items())
        return shorten(printable(f"{key['record']} {fields}"), KEY_WIDTH)
    return shorten(key["key_hex"], KEY_WIDTH)


def _ssts(lines: list[str], ssts: list[dict[str, Any]], indent: str) -> None:
    for sst in ssts:
        lines.append(
            f"{indent}{sst['sst']}  {_size(sst['bytes'], sst['estimated_bytes']):>10}  "
            f"{key_text(sst['first_key'])} .. {key_text(sst['last_key'])}"
        )


def _part(lines: list[str], part: dict[str, Any], indent: str = "") -> None:
    lines.append(f"{indent}L0: {len(part['l0'])} SSTs, {_size(part['l0_bytes'])}")
    _ssts(lines, part["l0"], indent + "  ")
    lines.append(f"{indent}sorted runs: {len(part['sorted_runs'])}")
    for run in part["sorted_runs"]:
        lines.append(
            f"{indent}  run {run['id']}: {len(run['ssts'])} SSTs, "
            f"{_size(run['bytes'], run['estimated_bytes'])}, "
            f"{key_text(run['first_key'])} .. {key_text(run['last_key'])}"
        )
        _ssts(lines, run["ssts"], indent + "    ")


def render(report: dict[str, Any]) -> str:
    """The report as text sections."""
    m, wal, gc = report["manifest"], report["wal"], report["gc"]
    lines = [
        f"manifest {m['id']}: writer epoch {m['writer_epoch']}, compactor epoch "
        f"{m['compactor_epoch']}, last L0 seq {m['last_l0_seq']}",
    ]
    seq = "" if wal["first_seq"] is None else f", seq {wal['first_seq']}..{wal['last_seq']}"
    if wal["files"] is None:
        lines.append(
            f"WAL: not listed; {wal['unreplayed_files']} files after the replay point "
            f"{m['replay_after_wal_id']}{seq}"
        )
    else:
        ids = "" if wal["first_id"] is None else f", ids {wal['first_id']}..{wal['last_id']}"
        lines.append(
            f"WAL: {wal['files']} files, {_size(wal['bytes'])}{ids}; "
            f"{wal['unreplayed_files']} after the replay point {m['replay_after_wal_id']}{seq}"
        )
    _part(lines, report)
    for segment in report["segments"]:
        lines.append(f"segment {segment['prefix_hex'] or '(empty prefix)'}:")
        _part(lines, segment, "  ")
    lines.append(f"checkpoints: {len(report['checkpoints'])}")
    for c in report["checkpoints"]:
        pins = c["pins"]
        name = "" if c["name"] is None else f" {printable(c['name'])!s}"
        lines.append(
            f"  {c['id']}{name}: manifest {c['manifest_id']}, pins {pins['l0']} L0 SSTs and "
            f"{pins['sorted_runs']} sorted runs ({pins['ssts']} SSTs)"
        )
    gc_line = (
        f"GC: WAL needed after id {gc['wal_needed_after_id']}, oldest pinned manifest "
        f"{gc['oldest_pinned_manifest']}"
    )
    if gc["ssts"] is not None:
        gc_line += (
            f"; collectable: {gc['wal_files']['count']} WAL files "
            f"({_size(gc['wal_files']['bytes'])}), {gc['manifests']['count']} manifests, "
            f"{gc['ssts']['count']} SSTs ({_size(gc['ssts']['bytes'])})"
        )
    lines.append(gc_line)
    return "\n".join(lines) + "\n"
