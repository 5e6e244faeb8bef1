"""`opendata-kv dump`: print the records of a database, read-only.

The database is read through a DbReader (cli/db_read.py), which never fences the writer.
Every record is decoded as far as it goes (cli/rows.py): a key the schema does not know, or a
value that does not decode, is shown raw with the reason instead of ending the dump.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from opendata_kv.cli.common import EXIT_BAD_INPUT, EXIT_OK, add_json_flag, emit_json
from opendata_kv.cli.db_args import (
    count_arg,
    database_arg,
    read_limit_args,
    schema_args,
    type_arg,
    version_arg,
)
from opendata_kv.cli.db_read import Walk, checkpoint_arg, open_reader, walk_from_args
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.progress import Progress
from opendata_kv.cli.rows import Decoder, Row
from opendata_kv.cli.text import cut, json_text, printable, shorten
from opendata_kv.keys import record_type_text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dump`."""
    dump = subparsers.add_parser(
        "dump",
        help="print the records of a database (read-only)",
        description=(
            "Print records of a SlateDB database, read-only (never fences the writer). "
            "DB is a directory, file:///abs/path or s3://bucket/prefix (AWS_* variables). "
            "Filters combine: --type/--version select by the key prefix, --prefix/--start/"
            "--end bound the raw key bytes. Keys the schema cannot decode are shown raw with "
            "the reason; if any record had an error the exit status is 1."
        ),
    )
    dump.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    schema_args(dump)
    dump.add_argument(
        "--type",
        type=type_arg,
        metavar="N|NAME",
        help="only record type N (1..15, e.g. 3 or 0x3), or the record NAME of --schema",
    )
    dump.add_argument(
        "--version", type=version_arg, metavar="V", help="only key version V (1..255)"
    )
    dump.add_argument("--prefix", metavar="HEX", help="only keys starting with these bytes")
    dump.add_argument("--start", metavar="HEX", help="first key (inclusive)")
    dump.add_argument("--end", metavar="HEX", help="end key (exclusive)")
    dump.add_argument("--reverse", action="store_true", help="descending key order")
    dump.add_argument("--limit", type=count_arg, metavar="N", help="at most N records")
    dump.add_argument(
        "--values",
        action="store_true",
        help="decode values (msgpack, or the codecs of a --schema Values) instead of hex",
    )
    dump.add_argument(
        "--indexes",
        action="store_true",
        help="also the index rows (keys 00f1..., RFC 0010) after the records, decoded by the "
        "stored index definitions (their values with --values)",
    )
    checkpoint_arg(dump)
    layout_arg(dump)
    read_limit_args(dump)
    add_json_flag(dump)
    dump.set_defaults(handler=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    """Print every selected record: a table, or one JSON object per line with --json:
    key_hex, version, record_type, reserved, record, fields, value | value_hex, value_size,
    error (and keyspace_hex under a keyspace)."""
    decoder = Decoder.from_args(args)
    walk = walk_from_args(args, decoder.keyspace, decoder.schema)
    walk.index_rows = "last" if args.indexes else "skip"
    return asyncio.run(_dump(args, decoder, walk))


async def _dump(args: argparse.Namespace, decoder: Decoder, walk: Walk) -> int:
    with_fields = True if decoder.schema is not None or decoder.layout == "opendata" else None
    table = None if args.json else DumpTable(sys.stdout, with_fields=with_fields)
    printer: Callable[[list[Row]], None] = table.rows if table is not None else _json_rows
    total = failed = 0
    store = await open_reader(args.db, walk.limits, args.checkpoint)
    if args.indexes:
        try:
            decoder.index_keys = await walk.limits.bound(
                index_keys(store, decoder), f"read {store.where}"
            )
        except BaseException:
            await store.close()
            raise
    # a count on stderr while the rows go to a file or pipe (a terminal shows the rows)
    progress = Progress(sys.stderr)
    progress.enabled = progress.enabled and not sys.stdout.isatty()
    size = 0
    try:
        async for chunk in walk.chunks(store):
            rows = [decoder.row(k, v, with_values=args.values) for k, v in chunk]
            total += len(rows)
            failed += sum(1 for r in rows if r.obj["error"])
            printer(rows)
            size += sum(len(k) + len(v) for k, v in chunk)
            progress.update(total, size)
    finally:
        progress.done()
        await store.close()
    if table is not None:
        table.footer(total, failed)
    if failed:
        sys.stdout.flush()
        sys.stderr.write(
            f"opendata-kv: error: {failed} of {total} records did not decode "
            "(shown raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


async def index_keys(store: Any, decoder: Decoder) -> Any:
    """How to show the index keys of this database (None when it stores no index)."""
    from opendata_kv.cli.index_rows import IndexKeys

    found = await IndexKeys.load(store, decoder.schema)
    return found if found.kinds else None


def _json_rows(rows: list[Row]) -> None:
    for row in rows:
        emit_json(row.obj)


def key_cell(row: Row) -> str:
    """Key hex with the prefix set apart: `0110 6469643a…0000`."""
    obj = row.obj
    key = str(obj["key_hex"])
    if obj.get("layout") in ("opendata", "none", "index"):
        return key
    head = len(obj.get("keyspace_hex", "")) + 4 if obj["version"] is not None else 0
    if not head:
        return key
    rest = key[head:]
    return f"{key[:head]} {rest}" if rest else key[:head]


def fit_key(cell: str, width: int) -> str:
    """A key cell cut to `width`, the prefix kept whole and the rest shortened."""
    if len(cell) <= width:
        return cell
    head, _, rest = cell.rpartition(" ")
    if not head:
        return shorten(cell, width)
    return f"{head} {shorten(rest, max(8, width - len(head) - 1))}"


def record_cell(row: Row) -> str:
    obj = row.obj
    if obj.get("layout") == "index":
        if obj["entry"] == "catalog":
            return "index catalog"
        name = "?" if obj["index"] is None else obj["index"]
        return f"index {name} metadata" if obj["entry"] == "metadata" else f"index {name}"
    if obj.get("layout") == "opendata" and obj["record"]:
        segment = f"/{obj['segment']}" if "segment" in obj else ""
        return f"{obj['subsystem']}{segment} {obj['record']}"
    if obj["version"] is None:
        return f"! {row.prefix_note}"
    where = f"v{obj['version']} {record_type_text(obj['record_type'])}"
    if obj["reserved"]:
        where += f" r{obj['reserved']}"
    return f"{obj['record']} {where}" if obj["record"] else where


def fields_cell(row: Row) -> str:
    if row.key_error is not None:
        return f"! {row.short_key_error or row.reason(row.key_error)}"
    fields = row.obj["fields"]
    if fields is None:
        return ""
    text = " ".join(f"{name}={field_text(value)}" for name, value in fields.items())
    primary = row.obj.get("primary")
    if primary is not None:  # an index entry: the record it points to
        if primary["record"] is None:
            return f"{text} -> {primary['key_hex']}"
        shown = " ".join(f"{n}={field_text(v)}" for n, v in primary["fields"].items())
        return f"{text} -> {primary['record']} {shown}"
    return text


def field_text(value: Any) -> str:
    if (
        isinstance(value, str)
        and value
        and value.isprintable()
        and not any(c in value for c in ' "=')
    ):
        return value
    return json_text(value, compact=False)


def value_cell(row: Row) -> str:
    obj = row.obj
    if "value" in obj:
        return json_text(obj["value"])
    text = "(no value)" if obj["value_hex"] is None else obj["value_hex"] or "(empty)"
    if row.value_error is not None:
        reason = row.reason(row.value_error).removeprefix("value: ").replace(": )", ")")
        reason = reason.replace("not a msgpack value", "not msgpack")
        return f"{text}  ! {reason}"
    return text


VALUE_WIDTH = 80


@dataclass
class DumpTable:
    """The plain-text dump: aligned columns sized on the first batch, streamed after it.

    Columns: KEY (prefix set apart, long keys shortened in the middle), RECORD (name, version,
    type), FIELDS (only with a schema), VALUE. Long cells are cut with an ellipsis; --json
    shows everything.
    """

    out: TextIO
    #: None: decided by the first batch (a FIELDS column when it holds an OpenData key)
    with_fields: bool | None
    widths: list[int] | None = None

    def rows(self, rows: list[Row]) -> None:
        if self.with_fields is None:
            self.with_fields = any(r.obj.get("layout") in ("opendata", "index") for r in rows)
        cells = [self._cells(r) for r in rows]
        headers = self._cells(None)
        if self.widths is None:
            caps = (34, 30, 60, VALUE_WIDTH) if self.with_fields else (34, 30, VALUE_WIDTH)
            self.widths = [
                min(cap, max([len(h)] + [len(c[i]) for c in cells]))
                for i, (h, cap) in enumerate(zip(headers, caps, strict=True))
            ]
            self._line(headers)
        for c in cells:
            self._line(c)

    def _cells(self, row: Row | None) -> tuple[str, ...]:
        if row is None:
            return (
                ("KEY", "RECORD", "FIELDS", "VALUE")
                if self.with_fields
                else ("KEY", "RECORD", "VALUE")
            )
        cells = [key_cell(row), record_cell(row), value_cell(row)]
        if self.with_fields:
            cells.insert(2, fields_cell(row))
        return tuple(printable(cell) for cell in cells)  # stored text cannot drive the terminal

    def _line(self, cells: tuple[str, ...]) -> None:
        assert self.widths is not None
        w = self.widths
        parts = [f"{fit_key(cells[0], w[0]):<{w[0]}}"]
        middle = zip(cells[1:-1], w[1:-1], strict=True)
        parts += [f"{cut(c, width):<{width}}" for c, width in middle]
        parts.append(cut(cells[-1], VALUE_WIDTH))  # the last column is not padded
        self.out.write("  ".join(parts).rstrip() + "\n")

    def footer(self, total: int, failed: int) -> None:
        if self.widths is None:
            self.out.write("(no records)\n")
            return
        plural = "record" if total == 1 else "records"
        extra = f", {failed} with errors" if failed else ""
        self.out.write(f"({total} {plural}{extra})\n")
