"""`opendata-kv import`: write the rows of an `export` file back into a database in atomic
batches, each row checked against --schema first; resumable after an interrupt through a
marker beside the database (`opendata-kv/import.json`) naming the rows committed. A writer
like any other: every stored index kept through the writer's upkeep, or the import refused
before it writes (store/ops/bulk_load.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from opendata_kv.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    SchemaSpec,
    add_json_flag,
    emit_json,
    jsonable,
    load_schema,
)
from opendata_kv.cli.db_args import cache_dir_args, database_arg, read_limit_args, timeout_arg
from opendata_kv.cli.db_read import ReadLimits, endpoint_text
from opendata_kv.cli.export_format import (
    EXPIRE_AT,
    FORMATS,
    format_of,
    parquet_files,
    read_rows,
)
from opendata_kv.cli.index_args import load_indexes
from opendata_kv.cli.index_cmds import StepProgress
from opendata_kv.cli.text import json_text
from opendata_kv.errors import (
    IndexStateError,
    KeyFormatError,
    OpendataKvError,
    ValueCodecError,
    show_text,
)
from opendata_kv.keys import Schema
from opendata_kv.store import OpenOptions, Store
from opendata_kv.store.expiry import is_expired
from opendata_kv.store.ops.bulk_load import Checked, check_loadable, check_pair, write_checked
from opendata_kv.values import Values

MARKER = "import.json"
#: Default seconds between marker updates (each flushes first): a resume after SIGKILL writes
#: again at most this long of rows, the same bytes under the same keys.
MARK_EVERY = 1.0
#: One row to write: its line (or row) number, the row object, its key and value bytes, and
#: its expiry (Unix ms; None: no TTL).
Item = tuple[int, dict[str, Any], bytes, bytes, int | None]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `import`."""
    parser = subparsers.add_parser(
        "import",
        help="write the rows of an export file into a database, in atomic batches",
        description=(
            "Write the rows of FILE (made by `export`) into the database (created if missing), "
            "--batch-size rows per atomic batch, indexed as typed puts are. With --schema every "
            "key must belong to one of its records and every value decode with its codec; the "
            "row's record, fields and value, when given, must match its bytes. A refused row "
            "stops the import before anything of its batch is written, as does a row under "
            "the index key space (00f1...: index rows come from upkeep) or a line that is not "
            "UTF-8. Stored indexes are kept (or the import refused up front, naming them): "
            "without --schema, a database whose indexes keep entries is refused. A row's "
            "expire_at (Unix ms) is written as its expiry; a row already expired is counted, "
            "not written. "
            "Interrupted, the same command resumes after the last batch committed."
        ),
    )
    parser.add_argument("db", metavar="URL", type=database_arg, help="database directory or URL")
    parser.add_argument(
        "file",
        metavar="FILE",
        help="the export file (- for stdin: jsonl, csv), or a directory of Parquet files "
        "(export --parallel)",
    )
    parser.add_argument("--format", choices=FORMATS, help="default: from the extension, else jsonl")
    parser.add_argument(
        "--schema", metavar="MODULE:ATTR", help="check keys and values with this Schema (or Values)"
    )
    parser.add_argument(
        "--indexes",
        metavar="MODULE:ATTR",
        help="keep these secondary indexes (a list of opendata_kv.Index) up to date",
    )
    parser.add_argument(
        "--batch-size", type=_batch_size, default=1000, metavar="N", help="rows per atomic batch"
    )
    parser.add_argument(
        "--mark-every",
        type=timeout_arg,
        default=MARK_EVERY,
        metavar="SECONDS",
        help=f"how often the resume marker is updated, each time after a flush (default "
        f"{MARK_EVERY:g}; 0: after every batch)",
    )
    read_limit_args(parser)
    cache_dir_args(parser)
    add_json_flag(parser)
    parser.set_defaults(handler=run_import)


def _batch_size(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch size must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"batch size must be >= 1, got {value}")
    return value


def run_import(args: argparse.Namespace) -> int:
    fmt = format_of(args.file, args.format)
    if args.format is None and args.file != "-" and os.path.isdir(args.file):
        fmt = "parquet"  # a dataset directory of export --parallel
    if args.file == "-" and fmt == "parquet":
        raise CliError("a Parquet file cannot be read from stdin: give its path")
    spec = load_schema(args.schema) if args.schema else None
    args.declared = load_indexes(args.indexes) if args.indexes else ()
    try:
        total, skipped, expired = asyncio.run(_import(args, fmt, spec))
    except KeyboardInterrupt:
        again = " (stdin cannot be resumed)" if args.file == "-" else ": run it again to resume"
        sys.stderr.write(
            f"opendata-kv: import interrupted; the batches committed so far are kept{again}\n"
        )
        return EXIT_INTERRUPTED
    resumed = f" (resumed: the first {skipped:,} were committed before)" if skipped else ""
    if args.json:
        emit_json(
            {
                "db": args.db,
                "file": args.file,
                "imported": total,
                "expired": expired,
                "resumed_after": skipped,
            }
        )
        return EXIT_OK
    plural = "record" if total == 1 else "records"
    gone = f"; {expired:,} already expired, not written" if expired else ""
    sys.stderr.write(f"imported {total:,} {plural}{resumed}{gone}\n")
    return EXIT_OK


def file_identity(path: str, fmt: str) -> dict[str, Any] | None:
    """What the marker records of FILE (or of a directory of Parquet files: their total
    size) to know it again (None for stdin: not resumable)."""
    if path == "-":
        return None
    files = parquet_files(path) if fmt == "parquet" else [path]
    try:
        size = sum(os.stat(file).st_size for file in files)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    return {"file": os.path.abspath(path), "size": size, "format": fmt}


async def _import(
    args: argparse.Namespace, fmt: str, spec: SchemaSpec | None
) -> tuple[int, int, int]:
    """(rows written, rows a marker said were committed before, expired rows skipped)."""
    from opendata_kv.objstore import sidecar
    from opendata_kv.objstore.location import parse_location

    identity = file_identity(args.file, fmt)
    shown = "stdin" if args.file == "-" else args.file  # what error messages call the file
    rows = read_rows(shown, fmt, sys.stdin if args.file == "-" else None)
    schema = spec.schema if spec is not None else Schema()
    values = (spec.values or Values(spec.schema)) if spec is not None else None
    location = parse_location(args.db)
    limits = ReadLimits.from_args(args)
    try:
        store = await Store.open(
            args.db,
            schema,
            values=values,
            options=OpenOptions(
                indexes=args.declared,
                timeout=limits.timeout,
                object_store_max_retries=limits.retries,
                object_store_options=limits.object_store_options(location),
                cache_dir=args.cache_dir,
            ),
        )
    except IndexStateError as exc:  # a stored index this import cannot keep: nothing written
        hint = "" if args.declared else "; give their declarations with --indexes MODULE:ATTR"
        raise CliError(f"cannot open {args.db}{endpoint_text(location)}: {exc}{hint}") from None
    except OpendataKvError as exc:
        raise CliError(f"cannot open {args.db}{endpoint_text(location)}: {exc}") from None
    try:
        check_loadable(store, strict=spec is not None)
    except IndexStateError as exc:
        await store.close()
        raise CliError(
            f"{args.db} stores indexes that keep entries ({exc.index}): an import without "
            "--schema cannot tell which rows are their records, so it would leave them stale. "
            "Pass --schema MODULE:ATTR (with --indexes MODULE:ATTR for an index declared with "
            "a function) to keep them current, or drop them (opendata-kv index drop) and build "
            "them again after; nothing was written"
        ) from None
    side = sidecar.Sidecar(location, limits.object_store_options(location), limits.timeout)
    keep = identity is not None and side.available
    marker = await side.get_json(MARKER) if keep else None
    skip = 0
    if marker and identity and all(marker.get(k) == v for k, v in identity.items()):
        skip = int(marker.get("rows") or 0)
    loader = Loader(store, spec is not None)
    progress = StepProgress(sys.stderr, "import", quiet=args.json)
    done = marked = skip
    next_mark = time.monotonic() + args.mark_every

    async def mark() -> None:
        nonlocal marked, next_mark
        if keep and done > marked:  # durable first: the marker never names rows that could be lost
            await store.flush()
            await side.put_json(MARKER, {**(identity or {}), "rows": done})
            marked = done
        next_mark = time.monotonic() + args.mark_every

    try:
        try:
            for batch, read in loader.batches(rows, skip, args.batch_size, shown):
                await loader.write(batch, shown)
                done += read
                if time.monotonic() >= next_mark:
                    await mark()
                progress.step(done, "rows written")
        finally:  # a refused row or an interrupt: note what is committed, to resume after it
            progress.done()
            await mark()
        await store.flush()
    finally:
        await store.close()
    if keep:
        await side.delete(MARKER)
    return done - skip - loader.expired, skip, loader.expired


class Loader:
    """Turns rows into checked (key, value) bytes, batch by batch."""

    def __init__(self, store: Store, strict: bool) -> None:
        self.store = store
        self.strict = strict
        self.expired = 0  # rows whose expiry had passed: counted, not written

    def batches(
        self, rows: Iterator[tuple[int, Any]], skip: int, size: int, path: str
    ) -> Iterator[tuple[list[Item], int]]:
        """(rows to write, rows of the file they stand for: expired ones are left out)."""
        batch: list[Item] = []
        seen = read = 0
        for number, obj in rows:
            seen += 1
            if seen <= skip:
                continue
            read += 1
            key, data, expire_at = self.pair(number, obj, path)
            if is_expired(expire_at):
                self.expired += 1
            else:
                batch.append((number, obj, key, data, expire_at))
            if read >= size:
                yield batch, read
                batch, read = [], 0
        if read:
            yield batch, read

    def pair(self, number: int, obj: Any, path: str) -> tuple[bytes, bytes, int | None]:
        """The exact bytes of one row and its expiry: CliError naming the line/row and the
        column."""
        if not isinstance(obj, dict):
            raise CliError(f"{path} {_where(number, path)}: not a JSON object")
        if "_key" in obj:  # the typed Parquet form: the bytes as they are (export_parquet.py)
            key, data = obj["_key"], obj["_raw_value"]
            for name, cell in (("_key", key), ("_raw_value", data)):
                if not isinstance(cell, bytes):
                    raise CliError(f"{path} {_where(number, path)}: {name} is null")
            return key, data, _expire_cell(obj, number, path)
        return (
            _hex_cell(obj, "key_hex", number, path),
            _hex_cell(obj, "value_hex", number, path),
            _expire_cell(obj, number, path),
        )

    async def write(self, batch: list[Item], path: str) -> None:
        """Check every row of `batch`, then write it in one atomic batch."""
        if batch:
            await write_checked(self.store, [self.check(*item, path) for item in batch])

    def check(
        self,
        number: int,
        obj: dict[str, Any],
        key: bytes,
        data: bytes,
        expire_at: int | None,
        path: str,
    ) -> Checked:
        """The row read by the schema, its record, fields and value (where given) matching
        its bytes; else a CliError naming the line or row and the field."""
        try:
            checked = check_pair(self.store, key, data, strict=self.strict, expire_at=expire_at)
        except (KeyFormatError, ValueCodecError) as exc:
            field = f" field {exc.field}" if exc.field else ""
            where = f"{path} {_where(number, path)}"
            raise CliError(f"{where}:{field} refused by the schema: {exc}") from None
        except OpendataKvError as exc:  # a key under the index key space the library owns
            raise CliError(f"{path} {_where(number, path)}: refused: {exc}") from None
        given_fields, given_value = obj.get("fields"), obj.get("value")
        if checked.owner is None:  # no --schema, or a key none of its records owns: raw bytes
            return checked
        record = checked.owner.name
        fields = checked.fields.asdict()
        value = _NONE if isinstance(checked.value, bytes) else checked.value
        # the common case first: the row's JSON equals what the bytes decode to as it is
        if (
            obj.get("record") in (None, record)
            and (given_fields is None or given_fields == fields)
            and (given_value is None or value is _NONE or given_value == value)
        ):
            return checked
        where = f"{path} {_where(number, path)} ({record} v{checked.owner.version})"
        if obj.get("record") is not None and obj["record"] != record:
            raise CliError(
                f"{where}: record {show_text(str(obj['record']))} but key_hex is a {record}"
            )
        if given_fields is not None:
            _same(where, "fields", given_fields, {n: jsonable(v) for n, v in fields.items()})
        if given_value is not None and value is not _NONE:
            _same(where, "value", given_value, jsonable(value))
        return checked


_NONE: Any = object()  # no decoded value to compare (dump shows value_hex for it)


def _same(where: str, column: str, given: Any, stored: Any) -> None:
    if given == stored:
        return
    held = "key_hex" if column == "fields" else "value_hex"
    if isinstance(given, dict) and isinstance(stored, dict):
        for name in sorted(set(given) | set(stored), key=str):
            if given.get(name) != stored.get(name) or (name in given) != (name in stored):
                mine = show_text(json_text(given.get(name)), quote=False)
                have = show_text(json_text(stored.get(name)), quote=False)
                raise CliError(
                    f"{where}: {column} field {name}: {mine} does not match {held}, which "
                    f"holds {have}"
                )
    mine = show_text(json_text(given), quote=False)
    raise CliError(f"{where}: {column} {mine} does not match {held}")


def _where(number: int, path: str) -> str:
    parquet = path.lower().endswith((".parquet", ".pq")) or os.path.isdir(path)
    return f"row {number}" if parquet else f"line {number}"


_EXPIRE_MAX = (1 << 63) - 1  # slatedb keeps expiry as an i64 of ms


def _expire_cell(obj: dict[str, Any], number: int, path: str) -> int | None:
    """The row's expire_at (Unix ms; a CSV cell holds its digits), None when absent or empty."""
    cell = obj.get(EXPIRE_AT)
    if cell is None:
        return None
    value = cell if type(cell) is int else None
    if isinstance(cell, str) and cell.isascii() and cell.isdigit():
        value = int(cell)
    if value is None or not 0 <= value <= _EXPIRE_MAX:
        raise CliError(
            f"{path} {_where(number, path)}: {EXPIRE_AT} must be a Unix time in ms (an integer "
            f"from 0 to {_EXPIRE_MAX}), got {show_text(json_text(cell), quote=False)}"
        )
    return value


def _hex_cell(obj: dict[str, Any], name: str, number: int, path: str) -> bytes:
    text = obj.get(name)
    if not isinstance(text, str):
        raise CliError(
            f"{path} {_where(number, path)}: {name} must be a hex string, got "
            f"{show_text(json_text(text), quote=False)}"
        )
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise CliError(
            f"{path} {_where(number, path)}: {name} is not hex: {show_text(text)}"
        ) from None
