"""The files of `export` and `import`: one row per stored record in JSONL, CSV or Parquet.

A row is what `dump --json --values` prints for the record (key_hex, version, record_type,
reserved, record, fields, value or value_hex, value_size, error) with `value_hex` always
present, so the exact stored bytes come back, and `expire_at` (absolute expiry, Unix ms) for a
record with a TTL; CSV holds the same names as columns (`expire_at` empty without a TTL),
`fields` and `value` as JSON text.

Parquet holds typed columns instead (cli/export_parquet.py), and import reads the bytes back
from its `_key`, `_raw_value` and `_expires`; a directory of Parquet files (export --parallel)
is read file by file in name order. Parquet files of the older form (the columns above, as
strings) are still read.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Generator, Iterator
from typing import IO, Any

from opendata_kv.cli.common import CliError
from opendata_kv.cli.text import json_text
from opendata_kv.errors import show_bytes, show_text

FORMATS = ("jsonl", "csv", "parquet")
#: Columns of CSV and Parquet, in order (`keyspace_hex` empty outside a keyspace).
COLUMNS = (
    "key_hex",
    "keyspace_hex",
    "version",
    "record_type",
    "reserved",
    "record",
    "fields",
    "value",
    "value_hex",
    "value_size",
    "error",
    "expire_at",
)
#: The absolute expiry of a record with a TTL (Unix ms, the value slatedb stores)
EXPIRE_AT = "expire_at"
#: Columns every imported row needs: the exact bytes.
REQUIRED = ("key_hex", "value_hex")
_JSON_COLUMNS = ("fields", "value")


def format_of(path: str, given: str | None) -> str:
    """--format, else the file's extension (.jsonl/.json, .csv, .parquet), else jsonl."""
    if given is not None:
        return given
    lower = path.lower()
    for ext, fmt in ((".csv", "csv"), (".parquet", "parquet"), (".pq", "parquet")):
        if lower.endswith(ext):
            return fmt
    return "jsonl"


def need_pyarrow() -> Any:
    """pyarrow.parquet, or a CliError naming the extra that installs it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CliError("--format parquet needs pyarrow: pip install 'opendata-kv[arrow]'") from None
    return pq


def flat(obj: dict[str, Any]) -> dict[str, Any]:
    """A row object as CSV/Parquet cells: every column, `fields` and `value` as JSON text."""
    cells = {name: obj.get(name) for name in COLUMNS}
    for name in _JSON_COLUMNS:
        if name in obj and obj[name] is not None:
            cells[name] = json.dumps(obj[name], ensure_ascii=False)
    return cells


class RowWriter:
    """Writes row objects to one output as JSONL or CSV (Parquet: export_parquet.py)."""

    def __init__(self, fmt: str, out: IO[Any]) -> None:
        self.fmt = fmt
        self.out = out
        self._csv: Any = None
        if fmt == "csv":
            self._csv = csv.DictWriter(out, COLUMNS, lineterminator="\n")
            self._csv.writeheader()

    def rows(self, objs: list[dict[str, Any]]) -> None:
        if self.fmt == "jsonl":
            self.out.write("".join(json_text(obj) + "\n" for obj in objs))
        else:
            self._csv.writerows(flat(obj) for obj in objs)

    def close(self) -> None:
        """Nothing left to write (JSONL and CSV rows are written as they come)."""


def read_rows(path: str, fmt: str, stream: IO[str] | None = None) -> Iterator[tuple[int, Any]]:
    """(line or row number, row object) of every row of `path` (or `stream`, for jsonl and
    csv): JSONL line numbers, CSV line numbers (the header is line 1), Parquet row numbers
    from 1. A file that cannot be read as `fmt` is a CliError naming it and where."""
    if fmt == "jsonl":
        return _jsonl_rows(path, stream)
    if fmt == "csv":
        return _csv_rows(path, stream)
    return _parquet_rows(path)


def _text_lines(path: str, stream: IO[str] | None) -> Generator[str, None, None]:
    """The lines of `path` (or `stream`), each decoded as UTF-8 by itself, so bytes that are
    not UTF-8 are a CliError naming their line, and every line before it is read (and its
    batches imported) first. A stream with no bytes under it (a StringIO) is read as text."""
    binary: IO[bytes] | None = None
    if stream is not None:
        binary = getattr(stream, "buffer", None)
        if binary is None:
            yield from stream
            return
    else:
        try:
            binary = open(path, "rb")  # noqa: SIM115  # closed below, when the rows end
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from None
    try:
        for number, raw in enumerate(binary, 1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.end]
                raise CliError(
                    f"{path} line {number}: not UTF-8 text: byte {exc.start + 1} of the line, "
                    f"{show_bytes(bad)} ({exc.reason})"
                ) from None
    finally:
        if stream is None:
            binary.close()


def _jsonl_rows(path: str, stream: IO[str] | None) -> Iterator[tuple[int, Any]]:
    lines = _text_lines(path, stream)
    try:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except ValueError as exc:
                raise CliError(f"{path} line {number}: not a JSON object: {exc}") from None
    finally:
        lines.close()  # closes the file


def _csv_rows(path: str, stream: IO[str] | None) -> Iterator[tuple[int, Any]]:
    lines = _text_lines(path, stream)
    try:
        reader = csv.DictReader(lines)
        header = reader.fieldnames or []
        missing = [name for name in REQUIRED if name not in header]
        if missing:
            raise CliError(
                f"{path}: the CSV header has no {' or '.join(missing)} column (it has "
                f"{show_text(','.join(header), 200)})"
            )
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise CliError(
                    f"{path} line {reader.line_num}: {len(header)} columns in the header, "
                    "a different number on this line"
                )
            obj: dict[str, Any] = {k: (v if v != "" else None) for k, v in row.items()}
            for name in _JSON_COLUMNS:
                if obj.get(name) is not None:
                    try:
                        obj[name] = json.loads(obj[name])
                    except ValueError:
                        raise CliError(
                            f"{path} line {reader.line_num}: column {name}: not JSON: "
                            f"{show_text(obj[name])}"
                        ) from None
            yield reader.line_num, obj
    except csv.Error as exc:
        raise CliError(f"{path}: not readable as CSV: {exc}") from None
    finally:
        lines.close()  # closes the file


def parquet_files(path: str) -> list[str]:
    """The Parquet files of `path`: itself, or a directory's *.parquet in name order (an
    export --parallel dataset); CliError for a directory with none."""
    if not os.path.isdir(path):
        return [path]
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith((".parquet", ".pq")))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    if not names:
        raise CliError(f"{path} is a directory without Parquet files (*.parquet)")
    return [os.path.join(path, name) for name in names]


def _parquet_rows(path: str) -> Iterator[tuple[int, Any]]:
    """Rows of a Parquet file or dataset directory, numbered from 1 across its files."""
    number = 0
    for file in parquet_files(path):
        for _, obj in _parquet_file_rows(file, number):
            number += 1
            yield number, obj


def _parquet_file_rows(path: str, before: int) -> Iterator[tuple[int, Any]]:
    pq = need_pyarrow()
    import pyarrow as pa

    try:
        parquet = pq.ParquetFile(path)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    except pa.ArrowException as exc:
        raise CliError(f"{path} is not a readable Parquet file: {exc}") from None
    names = parquet.schema_arrow.names
    if all(name in names for name in TYPED_REQUIRED):
        yield from _typed_rows(path, parquet, before)
        return
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise CliError(
            f"{path}: the Parquet file has neither {' and '.join(TYPED_REQUIRED)} (the typed "
            f"form) nor {' and '.join(REQUIRED)} columns"
        )
    number = before
    try:
        for batch in parquet.iter_batches(batch_size=4096):
            for obj in batch.to_pylist():
                number += 1
                for name in _JSON_COLUMNS:
                    if isinstance(obj.get(name), str):
                        try:
                            obj[name] = json.loads(obj[name])
                        except ValueError:
                            raise CliError(
                                f"{path} row {number}: column {name}: not JSON"
                            ) from None
                yield number, obj
    except pa.ArrowException as exc:
        raise CliError(f"{path} after row {number}: not readable as Parquet: {exc}") from None


#: the typed form's columns import reads (cli/export_parquet.py)
TYPED_REQUIRED = ("_key", "_raw_value")
TYPED_EXPIRES = "_expires"


def _typed_rows(path: str, parquet: Any, before: int) -> Iterator[tuple[int, Any]]:
    """Rows of the typed form: {"_key": bytes, "_raw_value": bytes, "expire_at": ms}."""
    import pyarrow as pa

    schema = parquet.schema_arrow
    for name in TYPED_REQUIRED:
        kind = schema.field(name).type
        if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
            raise CliError(f"{path}: column {name} holds {kind}, not binary")
    columns = list(TYPED_REQUIRED)
    expires = TYPED_EXPIRES in schema.names
    if expires:
        kind = schema.field(TYPED_EXPIRES).type
        if not (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)):
            raise CliError(f"{path}: column {TYPED_EXPIRES} holds {kind}, not a timestamp")
        columns.append(TYPED_EXPIRES)
    number = before
    try:
        for batch in parquet.iter_batches(batch_size=4096, columns=columns):
            keys = batch.column(0).to_pylist()
            values = batch.column(1).to_pylist()
            if expires:
                column = batch.column(2)
                if pa.types.is_timestamp(column.type):
                    column = column.cast(pa.timestamp("ms", tz=column.type.tz)).cast(pa.int64())
                stamps = column.to_pylist()
            else:
                stamps = [None] * len(keys)
            for key, value, stamp in zip(keys, values, stamps, strict=True):
                number += 1
                yield number, {"_key": key, "_raw_value": value, EXPIRE_AT: stamp}
    except pa.ArrowException as exc:
        raise CliError(f"{path} after row {number}: not readable as Parquet: {exc}") from None
