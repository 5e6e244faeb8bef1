"""Builds small databases as OpenData writes them: its segment extractor names and routing,
a merge operator, OpenData key layouts and binary values, and merge operands."""

from __future__ import annotations

import asyncio
import os
import struct
from typing import Any

from slatedb.uniffi import DbBuilder, FlushOptions, FlushType, MergeOperator, ObjectStore

from opendata_kv.layouts import opendata
from opendata_kv.native.opendata_compat import OpendataExtractor


class SumI32(MergeOperator):  # type: ignore[misc]
    """CentroidStats' documented merge: the i32 LE deltas add up."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        base = struct.unpack("<i", existing_value)[0] if existing_value else 0
        return struct.pack("<i", base + struct.unpack("<i", operand)[0])


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<H", len(raw)) + raw


def log_records() -> list[tuple[bytes, bytes]]:
    log = opendata.LOG
    return [
        (log.get("SeqBlock").encode(0), struct.pack(">QQ", 0, 4096)),
        (log.get("SegmentMeta").encode(0, 1), struct.pack(">Qq", 0, 1_700_000_000_000)),
        (log.get("SegmentMeta").encode(0, 256), struct.pack(">Qq", 2, 1_700_000_060_000)),
        (log.get("LogEntry").encode(1, b"orders", 0), b"first"),
        (log.get("LogEntry").encode(1, b"orders", 1), b"second"),
        (log.get("ListingEntry").encode(1, b"orders"), b""),
        (log.get("LogEntry").encode(256, b"orders", 0), b"third"),
        (log.get("ListingEntry").encode(256, b"orders"), b""),
    ]


def timeseries_records() -> list[tuple[bytes, bytes]]:
    ts = opendata.TIMESERIES
    forward = _s("s") + bytes((1, 0)) + struct.pack("<H", 1) + _s("host") + _s("a")
    return [
        (ts.get("SeriesDictionary").encode(28_000_000, 1, 67890), struct.pack("<I", 7)),
        (ts.get("ForwardIndex").encode(28_000_000, 1, 7), forward),
        (ts.get("InvertedIndex").encode(28_000_000, 1, "host", "a"), bytes.fromhex("3a300000")),
        (ts.get("TimeSeries").encode(28_000_000, 1, "cpu", 7), b""),
    ]


def vector_records() -> list[tuple[bytes, bytes]]:
    v = opendata.VECTOR
    meta = struct.pack("<IHBH", 1, 2, 0, 64) + struct.pack("<H", 1) + _s("color") + b"\x00\x01"
    data = _s("doc-1") + _s("color") + b"\x00" + _s("red") + _s("vector") + b"\xff"
    data += struct.pack("<2f", 0.5, -1.0)
    return [
        (v.get("CollectionMeta").encode(), meta),
        (v.get("SeqBlock").encode(), struct.pack(">QQ", 0, 1024)),
        (v.get("IdDictionary").encode("doc-1"), struct.pack("<Q", 1)),
        (v.get("VectorData").encode(1), data),
        (v.get("MetadataIndex").encode("color", 0, "red"), struct.pack("<I", 0) * 2),
        (v.get("Centroids").encode(), b"\x01"),
        (v.get("CentroidInfo").encode(1 << 56), b"\x01" + struct.pack("<H2fQ", 2, 0.5, -1, 0)),
        (v.get("DeletionsSentinel").encode(), b"\x00"),
        (v.get("TermStats").encode("body", "fox"), struct.pack("<q", 3)),
        (v.get("FieldStats").encode("body"), struct.pack("<3q", 1, 2, 3)),
    ]


#: kind -> (extractor name or None, records, merge operands)
KINDS: dict[str, tuple[str | None, Any, list[tuple[bytes, bytes]]]] = {
    "log": ("opendata-log/v1", log_records, []),
    "timeseries": ("opendata-timeseries/v2", timeseries_records, []),
    "vector": (
        "opendata-vector/v1",
        vector_records,
        [
            (opendata.VECTOR.get("CentroidStats").encode(1 << 56), struct.pack("<i", 5)),
            (opendata.VECTOR.get("CentroidStats").encode(1 << 56), struct.pack("<i", -2)),
        ],
    ),
}


async def _build(path: str, kind: str) -> None:
    name, records, operands = KINDS[kind]
    os.makedirs(path, exist_ok=True)
    builder = DbBuilder(path, ObjectStore.resolve("file:///"))
    if name is not None:
        builder.with_segment_extractor(OpendataExtractor(opendata.EXTRACTORS[name]))
    builder.with_merge_operator(SumI32())
    db = await builder.build()
    try:
        for key, value in records():
            await db.put(key, value)
        for key, operand in operands:
            await db.merge(key, operand)
        await db.flush()
    finally:
        await db.shutdown()


def build(path: str, kind: str) -> str:
    """A database of `kind` (log, timeseries, vector) at `path`, closed; returns the path."""
    asyncio.run(_build(os.path.abspath(path), kind))
    return os.path.abspath(path)


#: one write of build_sst_runs: ("put" | "merge", key, value)
Write = tuple[str, bytes, bytes]


async def _build_runs(path: str, name: str | None, runs: list[list[Write]]) -> None:
    os.makedirs(path, exist_ok=True)
    builder = DbBuilder(path, ObjectStore.resolve("file:///"))
    if name is not None:
        builder.with_segment_extractor(OpendataExtractor(opendata.EXTRACTORS[name]))
    builder.with_merge_operator(SumI32())
    db = await builder.build()
    try:
        for run in runs:
            for op, key, value in run:
                await (db.put(key, value) if op == "put" else db.merge(key, value))
            await db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE))
    finally:
        await db.shutdown()


def build_sst_runs(path: str, name: str | None, runs: list[list[Write]]) -> str:
    """A database with extractor `name` (or none) whose every run of writes is flushed to an
    SST of its own (so a merge operand and its base can sit in different SSTs); the path."""
    asyncio.run(_build_runs(os.path.abspath(path), name, runs))
    return os.path.abspath(path)
