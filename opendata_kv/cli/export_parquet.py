"""The Parquet form of `export` (one file, or one file per split with --parallel): the typed
columns `scan(...).to_arrow()` gives (docs/arrow.md: key fields, value fields, `_extra`,
`_record`/`_version` across record types) and `_expires` and `_key` (as with
`to_arrow(expiry=True, raw_key=True)`), plus `_raw_value`, the stored value bytes, and
`_error`, why a row did not decode (its typed columns are then null).

`import` rebuilds each record from `_key`, `_raw_value` and `_expires` alone: a value's typed
columns do not give its bytes back (a msgpack map may be packed more than one way, `_extra`
and JSON text columns hold what the columns cannot), so the stored bytes travel beside them.
Without --schema there are no typed columns: `_key`, `_raw_value`, `_expires`, `_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

from opendata_kv.cli.common import CliError
from opendata_kv.cli.export_format import need_pyarrow
from opendata_kv.cli.rows import Decoder
from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import RecordType
from opendata_kv.store.arrow import EXPIRES_COLUMN, KEY_COLUMN, ROLE, RowLayout
from opendata_kv.store.scan import Record

#: the stored value bytes of each row (what import writes back)
RAW_VALUE_COLUMN = "_raw_value"
#: why a row did not decode (null when it did)
ERROR_COLUMN = "_error"
#: rows sampled for the value columns of plain msgpack maps (to_arrow's first batch)
SAMPLE_ROWS = 1024
#: the columns import reads
IMPORT_COLUMNS = (KEY_COLUMN, RAW_VALUE_COLUMN, EXPIRES_COLUMN)


def record_types_of(decoder: Decoder, record: str | None) -> list[RecordType]:
    """The record types whose columns the file has: --record's versions, else the schema's."""
    if decoder.schema is None:
        return []
    if record is not None:
        return decoder.schema.versions(record)
    return list(decoder.schema)


class ParquetRows:
    """The schema of an export's Parquet files and its rows as record batches. Every file of
    one export is given the same `sample` (the first rows of the whole range), so every file
    has the same columns."""

    def __init__(
        self,
        decoder: Decoder,
        record_types: Sequence[RecordType],
        sample: Sequence[tuple[bytes, bytes]],
    ) -> None:
        need_pyarrow()
        import pyarrow as pa

        self._pa = pa
        self.decoder = decoder
        self.layout: RowLayout | None = None
        fields: list[Any] = []
        if decoder.schema is not None and record_types:
            self._owned = {id(t) for t in record_types}
            decoded = [self._decode(key, data) for key, data in sample]
            values = [r.value for r in decoded if isinstance(r, Record)]
            assert decoder.values is not None
            self.layout = RowLayout(record_types, decoder.values, values)
            fields = list(self.layout.schema)
        taken = {f.name for f in fields}
        extra = (
            (EXPIRES_COLUMN, pa.timestamp("ms", tz="UTC"), b"expires"),
            (KEY_COLUMN, pa.binary(), b"raw_key"),
            (RAW_VALUE_COLUMN, pa.binary(), b"raw_value"),
            (ERROR_COLUMN, pa.string(), b"error"),
        )
        for name, kind, role in extra:
            if name in taken:
                raise CliError(
                    f"export: a value field is named {name!r}, a column the Parquet form "
                    "keeps for itself; export as jsonl or csv"
                )
            fields.append(pa.field(name, kind, metadata={ROLE: role}))
        self.schema = pa.schema(fields)

    def _decode(self, key: bytes, data: bytes) -> Record[Any, Any] | str:
        """The row as a Record, or why it does not decode."""
        schema, values = self.decoder.schema, self.decoder.values
        assert schema is not None and values is not None
        try:
            record_type = schema.record_type_of(key)
            if id(record_type) not in self._owned:
                return f"a {record_type.name} v{record_type.version} key, not a record exported"
            return Record(record_type.decode(key), values.decode(record_type, key, data), key)
        except OpendataKvError as exc:
            return str(exc)

    def batch(
        self, chunk: Sequence[tuple[bytes, bytes]], expiries: dict[bytes, int]
    ) -> tuple[Any, int]:
        """(a RecordBatch of `chunk`'s rows, how many did not decode); each row's expiry is
        popped from `expiries`."""
        pa = self._pa
        expires = [expiries.pop(key, None) for key, _ in chunk]
        errors: list[str | None] = []
        arrays: list[Any] = []
        if self.layout is not None:
            good: list[Any] = []
            where: list[int | None] = []
            for key, data in chunk:
                found = self._decode(key, data)
                if isinstance(found, str):
                    errors.append(found)
                    where.append(None)
                else:
                    errors.append(None)
                    where.append(len(good))
                    good.append(found)
            typed = self.layout.batch(good)
            if len(good) == len(chunk):
                arrays = list(typed.columns)
            else:
                take = pa.array(where, pa.int64())
                arrays = [column.take(take) for column in typed.columns]
        else:
            for key, data in chunk:
                errors.append(self.decoder.row(key, data, with_values=True).obj.get("error"))
        arrays += [
            pa.array(expires, pa.timestamp("ms", tz="UTC")),
            pa.array([key for key, _ in chunk], pa.binary()),
            pa.array([data for _, data in chunk], pa.binary()),
            pa.array(errors, pa.string()),
        ]
        failed = sum(1 for e in errors if e is not None)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema), failed


class ParquetFile:
    """One Parquet file of an export being written (a footer even with no rows)."""

    def __init__(self, rows: ParquetRows, out: IO[bytes] | str) -> None:
        import pyarrow.parquet as pq

        self.rows = rows
        self.writer = pq.ParquetWriter(out, rows.schema)
        self.count = self.failed = 0

    def write(self, chunk: Sequence[tuple[bytes, bytes]], expiries: dict[bytes, int]) -> None:
        batch, failed = self.rows.batch(chunk, expiries)
        self.writer.write_batch(batch)
        self.count += len(chunk)
        self.failed += failed

    def close(self) -> None:
        self.writer.close()
