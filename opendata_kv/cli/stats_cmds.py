"""`opendata-kv stats`: count records, key bytes and value bytes per (version, record type),
with the first and last key of each; read-only, never fences the writer (cli/db_read.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from opendata_kv.cli.common import EXIT_OK, add_json_flag, emit_json
from opendata_kv.cli.db_args import database_arg, read_limit_args, schema_args
from opendata_kv.cli.db_read import ReadLimits, Walk, checkpoint_arg, open_reader
from opendata_kv.cli.index_stats import IndexStats
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.opendata_stats import OpendataStats
from opendata_kv.cli.progress import Progress
from opendata_kv.cli.rows import Decoder
from opendata_kv.cli.text import printable, shorten
from opendata_kv.keys import prefix_range, record_type_text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `stats`."""
    stats = subparsers.add_parser(
        "stats",
        help="count records and bytes per version and record type (read-only)",
        description=(
            "Count records, key bytes and value bytes per (version, record type), with the "
            "first and last key of each, and entries and bytes per secondary index; read-only, "
            "never fences the writer. Shows progress on "
            "stderr during long scans when stderr is a terminal."
        ),
    )
    stats.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    schema_args(stats)
    checkpoint_arg(stats)
    layout_arg(stats)
    read_limit_args(stats)
    add_json_flag(stats)
    stats.set_defaults(handler=run_stats)


@dataclass
class Group:
    """Counters of one (keyspace, version, record type)."""

    keyspace: bytes
    version: int | None
    record_type: int | None
    records: set[str] = field(default_factory=set)
    count: int = 0
    key_bytes: int = 0
    value_bytes: int = 0
    first_key: bytes = b""
    last_key: bytes = b""

    def add(self, key: bytes, value: bytes) -> None:
        if not self.count:
            self.first_key = key
        self.last_key = key
        self.count += 1
        self.key_bytes += len(key)
        self.value_bytes += len(value)

    def as_json(self) -> dict[str, Any]:
        return {
            "keyspace_hex": self.keyspace.hex(),
            "version": self.version,
            "record_type": self.record_type,
            "record": ", ".join(sorted(self.records)) or None,
            "count": self.count,
            "key_bytes": self.key_bytes,
            "value_bytes": self.value_bytes,
            "first_key_hex": self.first_key.hex(),
            "last_key_hex": self.last_key.hex(),
        }


def run_stats(args: argparse.Namespace) -> int:
    """Per (version, record type): count, key bytes, value bytes, first and last key."""
    decoder = Decoder.from_args(args)
    walk = Walk(
        prefix_range(decoder.keyspace or b""),
        decoder.keyspace or b"",
        None,
        None,
        False,
        None,
        ReadLimits.from_args(args),
        lean=True,  # bounded memory at any size (issue 43: 364 MiB at 10M with the bulk window)
    )
    extra = OpendataStats()
    indexes = IndexStats()
    groups = asyncio.run(_stats(args.db, decoder, walk, args.checkpoint, extra, indexes))
    ordered = sorted(
        groups.values(),
        key=lambda g: (g.keyspace, g.version is None, g.version or 0, g.record_type or 0),
    )
    totals = {
        "count": sum(g.count for g in ordered),
        "key_bytes": sum(g.key_bytes for g in ordered),
        "value_bytes": sum(g.value_bytes for g in ordered),
    }
    totals = {k: v + extra.totals()[k] for k, v in totals.items()}  # records; indexes apart
    if args.json:
        obj = {"database": args.db, **totals, "groups": [g.as_json() for g in ordered]}
        if extra:
            obj["opendata"] = extra.as_json()
        if indexes:
            obj["indexes"] = indexes.as_json()
        emit_json(obj)
    else:
        if ordered or not (extra or indexes):
            sys.stdout.write(stats_table(ordered, totals, show_keyspace=decoder.keyspace is None))
        if extra:
            sys.stdout.write(extra.table())
        if indexes:
            sys.stdout.write(indexes.table())
    return EXIT_OK


async def _stats(
    db: str,
    decoder: Decoder,
    walk: Walk,
    checkpoint: str | None = None,
    extra: OpendataStats | None = None,
    indexes: IndexStats | None = None,
) -> dict[Any, Group]:
    groups: dict[Any, Group] = {}
    progress = Progress(sys.stderr)
    seen = size = 0
    store = await open_reader(db, walk.limits, checkpoint)
    try:
        async for chunk in walk.chunks(store):
            for key, value in chunk:
                if indexes is not None and indexes.owns(key):
                    indexes.add(key, value)
                    size += len(key) + len(value)
                    continue
                if extra is not None and decoder.is_opendata(key):
                    obj, _error = decoder.opendata_key(key)
                    extra.add(obj, key, value)
                    size += len(key) + len(value)
                    continue
                keyspace, owner, prefix, _error = decoder.classify(key)
                if prefix is None:
                    group_key: Any = (keyspace, None, None)
                else:
                    group_key = (keyspace, prefix.version, prefix.record_type)
                group = groups.get(group_key)
                if group is None:
                    group = groups[group_key] = Group(*group_key)
                group.add(key, value)
                if owner is not None:
                    group.records.add(owner.name)
                size += len(key) + len(value)
            seen += len(chunk)
            progress.update(seen, size)
    finally:
        progress.done()
        await store.close()
    return groups


def stats_table(groups: list[Group], totals: dict[str, int], *, show_keyspace: bool) -> str:
    """The plain-text stats: one line per group, numbers right-aligned, then the totals."""
    if not groups:
        return "(no records)\n"
    keyspaces = show_keyspace and any(g.keyspace for g in groups)
    headers = ["KEYSPACE"] if keyspaces else []
    headers += ["VERSION", "TYPE", "RECORD", "COUNT", "KEY BYTES", "VALUE BYTES"]
    headers += ["FIRST KEY", "LAST KEY"]
    table = [headers]
    for g in groups:
        line = [g.keyspace.hex() or "-"] if keyspaces else []
        line += [
            "?" if g.version is None else str(g.version),
            "?" if g.record_type is None else record_type_text(g.record_type),
            printable(", ".join(sorted(g.records))) or "-",
            f"{g.count:,}",
            f"{g.key_bytes:,}",
            f"{g.value_bytes:,}",
            shorten(g.first_key.hex(), 24),
            shorten(g.last_key.hex(), 24),
        ]
        table.append(line)
    total = ["total"] + [""] * (len(headers) - 6)
    total += [f"{totals['count']:,}", f"{totals['key_bytes']:,}", f"{totals['value_bytes']:,}"]
    table.append([*total, "", ""])
    numeric = {"COUNT", "KEY BYTES", "VALUE BYTES", "VERSION", "TYPE"}
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    out = []
    for n, row in enumerate(table):
        cells = [
            f"{c:>{w}}" if h in numeric and not (n == len(table) - 1 and i == 0) else f"{c:<{w}}"
            for i, (c, w, h) in enumerate(zip(row, widths, headers, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"
