"""The native driver checks itself once, before its first use, against the generated code.

Byte strings of awkward sizes and contents are lowered by wire.lower_bytes and by the
generated converter and compared; buffers written by the generated converters are read back
by wire's readers; then a memory:// database is written and read through the hot calls and
through the generated methods, and every answer compared. Any difference or error keeps the
driver off (calls.status says why). The calls it drives are handed in (`Driven`) by
calls.status, so this module does not import calls, which runs it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opendata_kv.native import driver, wire
from opendata_kv.native.binding import generated

_B = generated()

SAMPLES: tuple[bytes, ...] = (
    b"",
    b"\x00",
    b"\xff",
    b"k",
    b"\x00" * 17 + b"\xff" * 17,
    bytes(range(256)),
    os.urandom(70_000),  # past the one-copy size
)
#: the samples rows, point rows and optional bytes are made of: all but the 70 kB one, whose
#: reading the round trip checks through the hot calls (got, read as a row, scanned); a
#: slatedb key is under 64 KiB anyway. WAL rows, read by no hot call here, carry it as a value
SMALL: tuple[bytes, ...] = SAMPLES[:-1]
#: the optional byte strings lowered: each small sample, then None
OPTIONAL: tuple[bytes | None, ...] = (*SMALL, None)


@dataclass(frozen=True)
class Driven:
    """The calls.py functions the round trip compares with the generated methods."""

    replica: Callable[[Any, str], Callable[..., Any]]
    put: Callable[[Any, bytes, bytes], Awaitable[None]]
    batch_put: Callable[[Any, bytes, bytes], None]
    write: Callable[[Any, Any], Awaitable[None]]
    delete: Callable[[Any, bytes], Awaitable[None]]
    get: Callable[[Any, bytes], Awaitable[bytes | None]]
    get_row: Callable[[Any, bytes], Awaitable[Any]]
    next_columns: Callable[[Any, int], Awaitable[Any]]
    columns: Callable[[list[Any]], Any]
    many: Callable[[list[Awaitable[Any]]], Awaitable[list[Any]]]


def _buffer_bytes(buffer: Any) -> bytes:
    return ctypes.string_at(buffer.data, buffer.len) if buffer.len else b""


@dataclass(frozen=True)
class Lowered:
    """What the generated converters write for the samples, as bytes: the oracle the wire
    readers here and the C parsers (accel.py) are checked against."""

    samples: tuple[bytes, ...]  # each sample as the Bytes converter lowers it
    rows: tuple[Any, ...]  # KeyValue rows, every small sample as a key and as a value
    row_list: bytes  # the rows as one sequence (next_batch's result)
    point_rows: tuple[bytes, ...]  # each row, then None, as an optional KeyValue
    entries: tuple[Any, ...]  # RowEntry rows of every kind, every sample as a value
    wal_rows: bytes  # the entries as an optional WalRows
    no_wal_rows: bytes  # an absent WalRows
    optional_bytes: tuple[bytes, ...]  # each of OPTIONAL as optional bytes


@functools.cache
def lowered() -> Lowered:
    """The generated lowerings, made once for both checks (the ctypes driver's and the C
    accelerator's; calls.status drops them after): the generated writer copies a byte at a
    time, about 40 ms for the 70 kB sample, so it is lowered twice only (SMALL)."""
    rows = tuple(
        _B.KeyValue(
            key=k or b"k", value=v, seq=i, create_ts=i * 3, expire_ts=None if i % 2 else 1 - i
        )
        for i, (k, v) in enumerate(zip(SMALL, reversed(SMALL), strict=True))
    )
    entries = tuple(
        _B.RowEntry(
            kind=kind,
            key=k or b"k",
            value=None if kind == _B.RowEntryKind.TOMBSTONE else v,
            seq=i,
            create_ts=None if i % 3 else i,
            expire_ts=None if i % 2 else -i,
        )
        for i, (k, v, kind) in enumerate(
            zip(
                (*SMALL, b"k"), SAMPLES[::-1], [*list(_B.RowEntryKind)] * len(SAMPLES), strict=False
            )
        )
    )

    def generated(converter: Any, value: Any) -> bytes:
        buffer = converter.lower(value)
        try:
            return _buffer_bytes(buffer)
        finally:
            wire.free(buffer)

    wal = _B._UniffiFfiConverterOptionalTypeWalRows
    return Lowered(
        samples=tuple(generated(_B._UniffiFfiConverterBytes, sample) for sample in SAMPLES),
        rows=rows,
        row_list=generated(_B._UniffiFfiConverterSequenceTypeKeyValue, list(rows)),
        point_rows=tuple(
            generated(_B._UniffiFfiConverterOptionalTypeKeyValue, row) for row in (*rows, None)
        ),
        entries=entries,
        wal_rows=generated(wal, _B.WalRows(rows=list(entries), last_consumed_wal_file_id=7)),
        no_wal_rows=generated(wal, None),
        optional_bytes=tuple(
            generated(_B._UniffiFfiConverterOptionalBytes, value) for value in OPTIONAL
        ),
    )


def _check_wire() -> None:
    made = lowered()
    for sample, theirs in zip(SAMPLES, made.samples, strict=True):
        ours = wire.lower_bytes(sample)
        try:
            if _buffer_bytes(ours) != theirs:
                raise AssertionError(f"lowering {len(sample)} bytes differs")
        finally:
            wire.free(ours)
    rows = made.rows
    columns = wire.parse_columns(made.row_list)
    if columns != ([r.key for r in rows], [r.value for r in rows], [r.expire_ts for r in rows]):
        raise AssertionError("row columns differ from the generated rows")
    for row, data in zip((*rows, None), made.point_rows, strict=True):
        expected = None if row is None else (row.value, row.expire_ts)
        if wire.parse_point_row(data) != expected:
            raise AssertionError("a point row differs")
    if wire.parse_wal_rows(made.no_wal_rows) is not None:
        raise AssertionError("an absent WAL file differs")
    got = wire.parse_wal_rows(made.wal_rows)
    if got != _B.WalRows(rows=list(made.entries), last_consumed_wal_file_id=7):
        raise AssertionError("WAL rows differ from the generated rows")
    for value, data in zip(OPTIONAL, made.optional_bytes, strict=True):
        if wire.parse_optional_bytes(data) != value:
            raise AssertionError("optional bytes differ")


async def _round_trip(calls: Driven) -> None:
    method = calls.replica
    store = _B.ObjectStore.resolve("memory:///")
    builder = _B.DbBuilder(f"opendata-kv-selfcheck-{os.getpid()}-{time.time_ns()}", store)
    db = await method(_B.DbBuilder, "build")(builder)
    try:
        keys = [b"k%03d" % i for i in range(len(SAMPLES))]
        for key, value in zip(keys, SAMPLES, strict=False):
            await calls.put(db, key, value)
        batch = _B.WriteBatch()
        calls.batch_put(batch, b"z1", b"batched")
        await calls.write(db, batch)
        await calls.delete(db, keys[0])
        for key in (*keys, b"z1", b"absent"):
            expected = await method(_B.Db, "get")(db, key)
            if await calls.get(db, key) != expected:
                raise AssertionError(f"get {key!r} differs")
            row = await method(_B.Db, "get_key_value")(db, key)
            want = None if row is None else (row.value, row.expire_ts)
            if await calls.get_row(db, key) != want:
                raise AssertionError(f"get_key_value {key!r} differs")
        scan = method(_B.Db, "scan")
        full = _B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        generated_rows = await method(_B.DbIterator, "next_batch")(await scan(db, full), 100)
        columns = await calls.next_columns(await scan(db, full), 100)
        if columns != calls.columns(generated_rows):
            raise AssertionError("next_batch columns differ")
        got = await calls.many([calls.get(db, key) for key in keys])
        if got != [None, *SAMPLES[1:]]:
            raise AssertionError("many() differs")
    finally:
        await method(_B.Db, "shutdown")(db)


def self_check(calls: Driven) -> str | None:
    """None when the driver's `calls` agree with the generated code, else what went wrong."""
    try:
        _check_wire()
        driver.drive(_round_trip(calls))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
