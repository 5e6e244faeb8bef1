"""`opendata-kv export`: write the records of a database to a JSONL, CSV or Parquet file,
read-only: keys decoded by the schema (or a layout), values by their codec, and the exact
bytes beside them so `import` rebuilds them (cli/export_format.py; Parquet holds typed
columns: cli/export_parquet.py). `--parallel N` writes a Parquet dataset, one file per split,
N at once (cli/export_parallel.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import IO, Any

from opendata_kv.cli.common import EXIT_BAD_INPUT, EXIT_OK, CliError
from opendata_kv.cli.db_args import database_arg, read_limit_args, schema_args
from opendata_kv.cli.db_read import Walk, checkpoint_arg, open_reader, walk_from_args
from opendata_kv.cli.export_format import EXPIRE_AT, FORMATS, RowWriter, format_of
from opendata_kv.cli.export_parquet import SAMPLE_ROWS, ParquetFile, ParquetRows, record_types_of
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.progress import Progress, manifest_bytes
from opendata_kv.cli.rows import Decoder


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `export`."""
    export = subparsers.add_parser(
        "export",
        help="write the records of a database to a JSONL, CSV or Parquet file (read-only)",
        description=(
            "Write every record (index rows are left out: import rebuilds them) as one row: "
            "what `dump --json --values` prints for it, with value_hex always there so "
            "`import` gives back the exact bytes, and expire_at (Unix ms) for a record with a "
            "TTL. Read-only; exit status 1 if a record did "
            "not decode (it is still written, raw, with the reason)."
        ),
    )
    export.add_argument("db", metavar="URL", type=database_arg, help="database directory or URL")
    schema_args(export)
    export.add_argument("--record", metavar="NAME", help="only the records NAME of --schema")
    export.add_argument("--prefix", metavar="HEX", help="only keys starting with these bytes")
    export.add_argument(
        "--format", choices=FORMATS, help="jsonl (default), csv or parquet (needs pyarrow)"
    )
    export.add_argument(
        "--output",
        metavar="FILE",
        help="write here instead of stdout (with --parallel: a directory for the Parquet files)",
    )
    export.add_argument(
        "--parallel",
        type=_parallel,
        metavar="N",
        help="write a Parquet dataset into the --output directory, one file per split of the "
        "range, N worker processes at once, all reading one pinned checkpoint",
    )
    checkpoint_arg(export)
    layout_arg(export)
    read_limit_args(export)
    export.set_defaults(handler=run_export)


def _parallel(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--parallel takes a count, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--parallel must be 1 or more, got {value}")
    return value


def run_export(args: argparse.Namespace) -> int:
    if args.record is not None and not args.schema:
        raise CliError("--record NAME needs --schema to know the record")
    parallel = getattr(args, "parallel", None)
    fmt = "parquet" if parallel is not None and args.format is None else None
    fmt = fmt or format_of(args.output or "", args.format)
    if fmt == "parquet" and args.output is None:
        what = "DIR" if parallel is not None else "FILE"
        raise CliError(f"--format parquet writes binary files: give --output {what}")
    if parallel is not None and fmt != "parquet":
        raise CliError(f"--parallel writes a Parquet dataset; --format {fmt} is one stream")
    decoder = Decoder.from_args(args)
    for name in ("start", "end", "limit", "version"):
        setattr(args, name, None)
    args.reverse = False
    args.type = args.record
    walk = walk_from_args(args, decoder.keyspace, decoder.schema)
    walk.index_rows = "skip"
    walk.expiries = {}
    if parallel is not None:
        from opendata_kv.cli.export_parallel import run_parallel

        return run_parallel(args, decoder, walk)
    return asyncio.run(_export(args, fmt, decoder, walk))


async def _export(args: argparse.Namespace, fmt: str, decoder: Decoder, walk: Walk) -> int:
    with contextlib.ExitStack() as stack:
        out: IO[Any] = sys.stdout
        if args.output is not None:
            binary = fmt == "parquet"
            try:
                out = stack.enter_context(
                    open(
                        args.output,
                        "wb" if binary else "w",
                        encoding=None if binary else "utf-8",
                        newline=None if binary else "",
                    )
                )
            except OSError as exc:
                raise CliError(f"cannot write {args.output}: {exc.strerror}") from None
        return await _write(args, fmt, decoder, walk, out)


async def _write(
    args: argparse.Namespace, fmt: str, decoder: Decoder, walk: Walk, out: IO[Any]
) -> int:
    total = failed = 0
    # a count on a terminal's stderr, unless rows go there too
    progress = Progress(sys.stderr, "exported")
    progress.enabled = progress.enabled and (args.output is not None or not sys.stdout.isatty())
    store = await open_reader(args.db, walk.limits, args.checkpoint)
    try:
        if progress.enabled:  # how far it has got, from the manifest's SST sizes
            progress.total_bytes = await manifest_bytes(store, walk.limits.bound)
        if fmt == "parquet":
            total, failed = await _write_parquet(args, decoder, walk, store, out, progress)
        else:
            writer = RowWriter(fmt, out)
            size = 0
            async for chunk in walk.chunks(store):
                expiries = walk.expiries or {}
                objs = [
                    export_row(decoder, key, data, expiries.pop(key, None)) for key, data in chunk
                ]
                failed += sum(1 for obj in objs if obj["error"])
                writer.rows(objs)
                total += len(objs)
                size += sum(len(k) + len(v) for k, v in chunk)
                progress.update(total, size)
            writer.close()
    finally:
        progress.done()
        await store.close()
    if failed:
        sys.stdout.flush()
        sys.stderr.write(
            f"opendata-kv: error: {failed} of {total} records did not decode "
            "(written raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


async def _write_parquet(
    args: argparse.Namespace,
    decoder: Decoder,
    walk: Walk,
    store: Any,
    out: IO[bytes],
    progress: Progress,
) -> tuple[int, int]:
    """One Parquet file of typed columns (cli/export_parquet.py): (rows, rows that did not
    decode). Its value columns come from the first SAMPLE_ROWS rows, as to_arrow's do."""
    held: list[tuple[bytes, bytes]] = []
    file: ParquetFile | None = None
    size = 0
    expiries = walk.expiries if walk.expiries is not None else {}

    def start() -> ParquetFile:
        kinds = record_types_of(decoder, args.record)
        return ParquetFile(ParquetRows(decoder, kinds, held[:SAMPLE_ROWS]), out)

    async for chunk in walk.chunks(store):
        size += sum(len(k) + len(v) for k, v in chunk)
        if file is None:
            held += chunk
            if len(held) < SAMPLE_ROWS:
                continue
            file = start()
            file.write(held, expiries)
        else:
            file.write(chunk, expiries)
        progress.update(file.count, size)
    if file is None:
        file = start()
        file.write(held, expiries)
    file.close()
    return file.count, file.failed


def export_row(
    decoder: Decoder, key: bytes, data: bytes, expire_at: int | None = None
) -> dict[str, Any]:
    """The dump --json --values object of one record, with `value_hex` (its stored bytes)
    and, when it has a TTL, `expire_at` (its absolute expiry, Unix ms, as slatedb stores it)."""
    obj = decoder.row(key, data, with_values=True).obj
    if "value" in obj:
        obj["value_hex"] = data.hex()
    if expire_at is not None:
        obj[EXPIRE_AT] = expire_at
    return obj
