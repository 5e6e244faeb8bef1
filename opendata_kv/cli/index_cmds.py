"""`opendata-kv index list|build|rebuild|drop DB ...`: the secondary indexes (RFC 0010) of a
database. `list` reads (never fences the writer); build, rebuild and drop open the database
as its writer (a running writer is fenced: stop it, or call Store.build_index from it).
A build steps through the records in atomic batches with a saved position, so one that is
interrupted (Ctrl-C, kill) resumes where it stopped when run again."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opendata_kv.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    add_json_flag,
    emit_json,
    load_schema,
)
from opendata_kv.cli.db_args import database_arg, read_limit_args, schema_args
from opendata_kv.cli.db_read import ReadLimits, endpoint_text, open_reader
from opendata_kv.cli.index_args import check_records, declaration_of, indexes_arg, load_indexes
from opendata_kv.cli.progress import Progress
from opendata_kv.cli.text import printable, shorten
from opendata_kv.keys import Schema

if TYPE_CHECKING:
    from opendata_kv.store import StoreReader
    from opendata_kv.store.writer import Store

#: called with the number of build steps written so far, after each (tests stop a build here)
_after_step: Callable[[int], None] | None = None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `index` with its subcommands."""
    index = subparsers.add_parser(
        "index",
        help="list, build, rebuild or drop the secondary indexes of a database",
        description=(
            "The secondary indexes of a database (docs/indexes.md). `list` is read-only; "
            "build, rebuild and drop open the database as its writer (a running writer is "
            "fenced). Progress shows on stderr when it is a terminal."
        ),
    )
    commands = index.add_subparsers(dest="index_command", metavar="COMMAND", required=True)

    listing = commands.add_parser(
        "list",
        help="every index stored in the database: kind, fields, state, entries (read-only)",
        description=(
            "Every index stored in the database, declared by the caller or not: its kind, "
            "records, fields (name and codec), state, build position, records built and entry "
            "count. Read-only, never fences the writer."
        ),
    )
    _common(listing)
    listing.set_defaults(handler=run_list)

    for name, what in (
        ("build", "build (or finish building) an index from the records already stored"),
        ("rebuild", "clear an index and build it again from the records (the repair)"),
    ):
        command = commands.add_parser(
            name,
            help=what,
            description=(
                f"{what[0].upper()}{what[1:]}, BATCH records per atomic step with its position "
                "saved: an interrupted build resumes when run again. The declaration comes "
                "from --indexes, else from the stored definition (enough unless the index "
                "was declared with a function); the records are decoded with --schema. An "
                "index --indexes declares that is not stored yet is registered first."
            ),
        )
        _common(command)
        command.add_argument("name", metavar="NAME", help="the index")
        schema_args(command)
        indexes_arg(command)
        command.add_argument(
            "--batch-size",
            type=_batch_size,
            default=1000,
            metavar="N",
            help="records per atomic step (default 1000)",
        )
        command.set_defaults(handler=run_build, rebuild=name == "rebuild")

    drop = commands.add_parser(
        "drop",
        help="remove an index and every entry of it",
        description=(
            "Remove an index: its reads are refused at once, its entries deleted, then its "
            "metadata. Works from the stored metadata alone. An interrupted drop finishes "
            "when run again."
        ),
    )
    _common(drop)
    drop.add_argument("name", metavar="NAME", help="the index")
    drop.set_defaults(handler=run_drop)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    read_limit_args(parser)
    add_json_flag(parser)


def _batch_size(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch size must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"batch size must be >= 1, got {value}")
    return value


# --- list --------------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    """One line (or, with --json, one JSON object: JSON Lines) per stored index."""
    rows = asyncio.run(_list(args.db, ReadLimits.from_args(args)))
    if args.json:
        for row in rows:
            emit_json(row)
    else:
        sys.stdout.write(list_table(rows))
    return EXIT_OK


async def _list(db: str, limits: ReadLimits) -> list[dict[str, Any]]:
    from opendata_kv.store.indexes.admin import stored_metas

    store = await open_reader(db, limits)
    try:
        metas = await limits.bound(stored_metas(store), f"read {store.where}")
        return [
            {**describe_meta(meta), "entries": await count_entries(store, name, limits)}
            for name, meta in sorted(metas.items())
        ]
    finally:
        await store.close()


async def count_entries(store: StoreReader, name: str, limits: ReadLimits) -> int:
    """How many entries index `name` holds (each batch read within the time bound)."""
    from opendata_kv.store.indexes.layout import entry_prefix

    scan = store.scan_all(prefix=entry_prefix(name), on_unknown="raw")
    total = 0
    while chunk := await limits.bound(scan.next_chunk(), f"read {store.where}"):
        total += len(chunk)
    return total


def describe_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON of one index's stored metadata."""
    definition = meta["definition"]
    position = meta.get("position")
    return {
        "name": definition.get("name"),
        "kind": definition.get("kind"),
        "records": list(definition.get("records") or []),
        "fields": [{"name": n, "codec": c} for n, c in definition.get("fields") or []],
        "using": definition.get("using"),
        "amount": definition.get("amount"),
        "version": definition.get("version"),
        "state": meta.get("state"),
        "position_hex": position.hex() if isinstance(position, bytes) else None,
        "built": built_of(meta),
    }


def built_of(meta: dict[str, Any]) -> int | None:
    """How many records builds indexed; None for an index readable from its registration
    (its records, if any, were indexed by the writes that stored them, not by a build)."""
    built = int(meta.get("built", 0))
    return None if built == 0 and meta.get("state") == "readable" else built


def list_table(rows: list[dict[str, Any]]) -> str:
    """The plain-text index list: one aligned line per index."""
    if not rows:
        return "(no indexes)\n"
    headers = ["NAME", "KIND", "RECORDS", "FIELDS", "STATE", "BUILT", "ENTRIES"]
    table = [headers]
    for row in rows:
        fields = " ".join(f"{f['name']}:{f['codec']}" for f in row["fields"])
        if row["using"]:
            fields += f" using={row['using']}"
        if row["amount"]:
            fields += f" amount={row['amount']}"
        state = str(row["state"])
        if row["position_hex"]:
            state += f" at {shorten(row['position_hex'], 24)}"
        table.append(
            [
                printable(str(row["name"])),
                str(row["kind"]),
                printable(", ".join(row["records"])),
                printable(fields.strip()),
                state,
                "-" if row["built"] is None else f"{row['built']:,}",
                f"{row['entries']:,}",
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(headers))]
    numeric = {"BUILT", "ENTRIES"}
    out = []
    for line in table:
        cells = [
            f"{c:>{w}}" if h in numeric else f"{c:<{w}}"
            for c, w, h in zip(line, widths, headers, strict=True)
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"


# --- build, rebuild, drop -------------------------------------------------------------------------


#: the progress line of index build/rebuild/drop and import: `LABEL: N records, R records/s`
StepProgress = Progress


async def open_writer(args: argparse.Namespace, schema: Schema, values: Any) -> Store:
    """The database as its writer (never created); CliError naming it when missing or
    unreachable within --timeout."""
    from opendata_kv.errors import StoreNotFoundError, StoreUnavailableError
    from opendata_kv.objstore.location import parse_location
    from opendata_kv.store import Store
    from opendata_kv.store.indexes.tools import index_rows_only

    limits = ReadLimits.from_args(args)
    location = parse_location(args.db)
    where = endpoint_text(location)
    if location.scheme == "file" and not os.path.isdir(location.path):
        raise CliError(f"no database at {args.db}: {location.path} is not a directory")
    try:
        with index_rows_only():  # it writes index rows only: other indexes cannot go stale
            store: Store = await Store.open(
                args.db,
                schema,
                values=values,
                create_if_missing=False,
                timeout=limits.timeout,
                object_store_max_retries=limits.retries,
                object_store_options=limits.object_store_options(location),
            )
    except StoreNotFoundError:
        raise CliError(f"no SlateDB database at {args.db}{where} (no manifest found)") from None
    except StoreUnavailableError as exc:
        raise CliError(f"cannot open {args.db}{where} as its writer: {exc}") from None
    store.where = str(location) + where
    return store


def run_build(args: argparse.Namespace) -> int:
    """Build or rebuild one index; a summary on stdout, progress on a terminal's stderr."""
    action = "rebuild" if args.rebuild else "build"
    spec = load_schema(args.schema) if args.schema else None
    declared = load_indexes(args.indexes) if args.indexes else []
    try:
        result = asyncio.run(_build(args, action, spec, declared))
    except KeyboardInterrupt:
        sys.stderr.write(
            f"opendata-kv: index {action} {printable(args.name)} interrupted; the records built "
            f"so far are saved: run `opendata-kv index build` again to resume\n"
        )
        return EXIT_INTERRUPTED
    if args.json:
        emit_json(result)
    else:
        done = (
            "was readable already, nothing to build"
            if result["skipped"]
            else (f"{result['indexed']:,} records indexed by this run, {result['built']:,} in all")
        )
        sys.stdout.write(f"index {args.name}: {done}; {result['state']}\n")
    return EXIT_OK


async def _build(
    args: argparse.Namespace, action: str, spec: Any, declared: list[Any]
) -> dict[str, Any]:
    from opendata_kv.store.indexes.tools import declare

    where = f"index {action} {printable(args.name)}"
    schema = spec.schema if spec is not None else None
    bar = StepProgress(sys.stderr, where, quiet=args.json)
    steps = [0]

    def progress(done: int, state: str) -> None:
        bar.step(done, "records" if state in ("building", "readable") else state)
        steps[0] += 1
        if _after_step is not None:
            _after_step(steps[0])

    store = await open_writer(args, schema or Schema(), spec.values if spec else None)
    try:
        stored = await store.index_info()
        index = declaration_of(args.name, stored, declared, where)
        check_records(index, schema, where)
        await declare(store, [index])
        before = (await store.index_info())[args.name]
        skipped = before["state"] == "readable" and action == "build"
        if action == "rebuild":
            indexed = await store.rebuild_index(
                args.name, batch_size=args.batch_size, progress=progress
            )
        else:
            indexed = await store.build_index(
                args.name, batch_size=args.batch_size, progress=progress
            )
        after = (await store.index_info())[args.name]
    finally:
        bar.done()
        await store.close()
    return {
        "database": args.db,
        "index": args.name,
        "action": action,
        "skipped": skipped,
        "indexed": indexed,
        "built": after.get("built", 0),
        "state": after["state"],
    }


def run_drop(args: argparse.Namespace) -> int:
    """Drop one index; a summary on stdout."""
    try:
        deleted = asyncio.run(_drop(args))
    except KeyboardInterrupt:
        sys.stderr.write(
            f"opendata-kv: index drop {printable(args.name)} interrupted; it is unreadable now: "
            "run `opendata-kv index drop` again to finish\n"
        )
        return EXIT_INTERRUPTED
    if args.json:
        emit_json({"database": args.db, "index": args.name, "action": "drop", "deleted": deleted})
    else:
        sys.stdout.write(f"index {args.name}: dropped, {deleted:,} entries deleted\n")
    return EXIT_OK


async def _drop(args: argparse.Namespace) -> int:
    from opendata_kv.errors import IndexStateError

    bar = StepProgress(sys.stderr, f"index drop {printable(args.name)}", quiet=args.json)
    store = await open_writer(args, Schema(), None)
    try:
        stored = await store.index_info()
        if args.name not in stored:
            raise IndexStateError(
                f"index drop {args.name}: no index named {args.name!r} is stored in {args.db} "
                f"(stored: {sorted(stored)})",
                index=args.name,
            )
        return await store.drop_index(args.name, progress=bar.step)
    finally:
        bar.done()
        await store.close()
