"""Decoders for the values of OpenData's records (their own binary layouts, not msgpack).

Each takes the stored bytes and returns a JSON-friendly dict; bytes that do not fit the layout
raise ValueDecodeError naming the record, the offset and what was expected. Roaring bitmaps
and Gorilla blocks are shown as their size and hex under their name: no well-kept pure-Python
package decodes them, and they are never a runtime dependency.

Little-endian throughout (strings: u16 LE length + UTF-8; arrays: u16 LE count + items), as
OpenData writes them; SegmentMeta, SeqBlock and vector ids are big-endian.

Decoding is capped as msgpack values are (values/limits.DecodeLimits): a value longer than
max_value_bytes, a list longer than max_array_len or more than max_objects objects in one value
raise ValueLimitError before they take the memory (each empty 5-byte TermPostings block becomes
a dict: uncapped, a 10 MB value of them took `dump --values` to 934 MB peak RSS).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from opendata_kv.errors import ValueDecodeError, ValueLimitError, show_bytes
from opendata_kv.layouts import merge_frame
from opendata_kv.values.limits import DEFAULT_LIMITS, DecodeLimits


class _Budget:
    """The objects one value's decoding may still build (DecodeLimits.max_objects)."""

    def __init__(self, limits: DecodeLimits) -> None:
        self.limits = limits
        self.left = limits.max_objects


class _Reader:
    """A cursor over one value; every read checks that the bytes are there, and every list
    or object built is charged to the value's budget."""

    def __init__(self, record: str, data: bytes, budget: _Budget) -> None:
        self.record = record
        self.data = data
        self.pos = 0
        self.budget = budget

    def refuse(self, cap: str, what: str) -> ValueLimitError:
        limit = getattr(self.budget.limits, cap)
        return ValueLimitError(
            f"{self.record} value of {len(self.data)} bytes refused: {what}, over the decode "
            f"cap {cap}={limit} (raise it with DecodeLimits({cap}=...) if such values are "
            "legitimate)",
            cap=cap,
            limit=limit,
            record=self.record,
            value=self.data,
        )

    def charge(self, objects: int) -> None:
        """Count `objects` about to be built; ValueLimitError past max_objects."""
        self.budget.left -= objects
        if self.budget.left < 0:
            cap = self.budget.limits.max_objects
            raise self.refuse("max_objects", f"more than {cap} objects")

    def items(self, count: int, what: str, each: int = 1) -> int:
        """`count`, once a list of that many `what` (each `each` objects) is allowed."""
        if count > self.budget.limits.max_array_len:
            raise self.refuse("max_array_len", f"{count} {what}")
        self.charge(count * each + 1)
        return count

    def fail(self, what: str) -> ValueDecodeError:
        return ValueDecodeError(
            f"{self.record} value {show_bytes(self.data)}: {what} at offset {self.pos}",
            record=self.record,
            value=self.data,
            offset=self.pos,
        )

    def take(self, size: int, what: str) -> bytes:
        if len(self.data) - self.pos < size:
            raise self.fail(f"{what} needs {size} bytes, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> Any:
        layout = struct.Struct(fmt)
        return layout.unpack(self.take(layout.size, what))[0]

    def string(self, what: str) -> str:
        size = self.unpack("<H", f"{what} length")
        raw = self.take(size, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.pos -= size
            raise self.fail(f"{what} is not UTF-8") from None

    def count(self, what: str, each: int = 1) -> int:
        value: int = self.unpack("<H", f"{what} count")
        return self.items(value, what, each)

    def rest(self) -> bytes:
        chunk = self.data[self.pos :]
        self.pos = len(self.data)
        return chunk

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected bytes after the value")


def _opaque(kind: str, data: bytes) -> dict[str, Any]:
    return {kind: {"size": len(data), "hex": data.hex()}}


def _raw(r: _Reader) -> dict[str, Any]:
    return {"bytes": r.rest()}


def _empty(r: _Reader) -> dict[str, Any]:
    return {}


def _segment_meta(r: _Reader) -> dict[str, Any]:
    return {"start_seq": r.unpack(">Q", "start_seq"), "start_time_ms": r.unpack(">q", "time")}


def _seq_block(r: _Reader) -> dict[str, Any]:
    return {"base": r.unpack(">Q", "base"), "size": r.unpack(">Q", "size")}


def _series_dictionary(r: _Reader) -> dict[str, Any]:
    return {"series_id": r.unpack("<I", "series_id")}


def _forward_index(r: _Reader) -> dict[str, Any]:
    unit = r.string("unit")
    out: dict[str, Any] = {
        "unit": unit or None,  # length 0 stands for "no unit"
        "metric_type": r.unpack("<B", "metric_type"),
        "flags": r.unpack("<B", "flags"),
    }
    labels = r.count("label", 2)
    out["labels"] = {r.string("label name"): r.string("label value") for _ in range(labels)}
    return out


def _roaring(r: _Reader) -> dict[str, Any]:
    return _opaque("roaring_bitmap", r.rest())


def _gorilla(r: _Reader) -> dict[str, Any]:
    return _opaque("gorilla_samples", r.rest())


def _collection_meta(r: _Reader) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema_version": r.unpack("<I", "schema version"),
        "dimensions": r.unpack("<H", "dimensions"),
        "distance_metric": r.unpack("<B", "distance metric"),
        "chunk_target": r.unpack("<H", "chunk target"),
    }
    out["fields"] = [
        {
            "name": r.string("field name"),
            "type": r.unpack("<B", "field type"),
            "indexed": r.unpack("<B", "indexed flag"),
        }
        for _ in range(r.count("field", 4))
    ]
    return out


def _centroids(r: _Reader) -> dict[str, Any]:
    return {"depth": r.unpack("<B", "depth")}


def _centroid_info(r: _Reader) -> dict[str, Any]:
    level = r.unpack("<B", "level")
    vector = [r.unpack("<f", "centroid value") for _ in range(r.count("centroid value"))]
    return {"level": level, "centroid": vector, "parent_id": r.unpack(">Q", "parent id")}


def _centroid_stats(r: _Reader) -> dict[str, Any]:
    return {"num_vectors_delta": r.unpack("<i", "count")}


def _floats(r: _Reader, what: str) -> list[float]:
    size = len(r.data) - r.pos
    if size % 4:
        raise r.fail(f"{what}: {size} bytes are not a whole number of f32 values")
    r.items(size // 4, f"{what} f32 values")  # before a float is built
    return [v for (v,) in struct.iter_unpack("<f", r.rest())]


def _posting_list(r: _Reader) -> dict[str, Any]:
    count = r.unpack("<I", "posting count")
    if count * 12 > len(r.data) - r.pos:  # each posting is 12 bytes: fail before building
        raise r.fail(f"{count} postings need {count * 12} bytes, {len(r.data) - r.pos} left")
    r.items(count, "postings", 3)
    postings = []
    for _ in range(count):
        vector_id = r.unpack(">Q", "vector id")
        offset = r.unpack("<I", "offset")
        postings.append({"id": vector_id, "offset": None if offset == 0xFFFFFFFF else offset})
    return {"postings": postings, "vectors": _floats(r, "vector blob")}


def _id_dictionary(r: _Reader) -> dict[str, Any]:
    return {"internal_id": r.unpack("<Q", "internal id")}


_ATTRIBUTE_VALUES: dict[int, Callable[[_Reader], Any]] = {
    0: lambda r: r.string("string value"),
    1: lambda r: r.unpack("<q", "i64 value"),
    2: lambda r: r.unpack("<d", "f64 value"),
    3: lambda r: bool(r.unpack("<B", "bool value")),
}


def _vector_data(r: _Reader) -> dict[str, Any]:
    out: dict[str, Any] = {"external_id": r.string("external id"), "attributes": {}}
    while r.pos < len(r.data):
        r.charge(2)
        name = r.string("attribute name")
        kind = r.unpack("<B", "attribute type")
        if kind == 0xFF:  # the vector itself: f32 values to the end
            out["vector"] = _floats(r, f"vector {name!r}")
            break
        read = _ATTRIBUTE_VALUES.get(kind)
        if read is None:
            r.pos -= 1
            raise r.fail(f"attribute {name!r} has unknown type byte 0x{kind:02x}")
        out["attributes"][name] = read(r)
    return out


def _index_data(r: _Reader) -> dict[str, Any]:
    return _opaque("index_data", r.rest())


def _two_treemaps(r: _Reader) -> dict[str, Any]:
    out = {}
    for name in ("included", "excluded"):
        size = r.unpack("<I", f"{name} length")
        out[name] = {"size": size, "hex": r.take(size, name).hex()}
    return {"roaring_treemaps": out}


def _treemap(r: _Reader) -> dict[str, Any]:
    return _opaque("roaring_treemap", r.rest())


def _sentinel(r: _Reader) -> dict[str, Any]:
    byte = r.unpack("<B", "sentinel byte")
    if byte:
        r.pos -= 1
        raise r.fail(f"sentinel byte 0x{byte:02x} is not 0x00")
    return {"sentinel": 0}


def _term_postings(r: _Reader) -> dict[str, Any]:
    blocks = []
    while r.pos < len(r.data):
        r.charge(5)  # the block's dict, its three entries and its place in the list
        kind = r.unpack("<B", "block type")
        size = r.unpack("<I", "block length")
        blocks.append({"type": kind, "size": size, "hex": r.take(size, "block").hex()})
    return {"blocks": blocks}


def _term_stats(r: _Reader) -> dict[str, Any]:
    return {"doc_freq": r.unpack("<q", "document frequency")}


def _field_stats(r: _Reader) -> dict[str, Any]:
    names = ("doc_count", "sum_doc_len", "sum_term_freq")
    return {name: r.unpack("<q", name) for name in names}


def _vector_field_stats(r: _Reader) -> dict[str, Any]:
    return {
        "fields": {
            r.string("field name"): r.unpack("<I", "field length")
            for _ in range(r.count("field", 2))
        }
    }


#: (subsystem, record kind) -> decoder
DECODERS: dict[tuple[str, str], Callable[[_Reader], dict[str, Any]]] = {
    ("keyvalue", "KeyValue"): _raw,
    ("log", "LogEntry"): _raw,
    ("log", "ListingEntry"): _empty,
    ("log", "SegmentMeta"): _segment_meta,
    ("log", "SeqBlock"): _seq_block,
    ("timeseries", "SeriesDictionary"): _series_dictionary,
    ("timeseries", "ForwardIndex"): _forward_index,
    ("timeseries", "InvertedIndex"): _roaring,
    ("timeseries", "TimeSeries"): _gorilla,
    ("vector", "CollectionMeta"): _collection_meta,
    ("vector", "CentroidSeqBlock"): _seq_block,
    ("vector", "SeqBlock"): _seq_block,
    ("vector", "VectorIndexData"): _index_data,
    ("vector", "PostingList"): _posting_list,
    ("vector", "IdDictionary"): _id_dictionary,
    ("vector", "VectorData"): _vector_data,
    ("vector", "MetadataIndex"): _two_treemaps,
    ("vector", "CentroidStats"): _centroid_stats,
    ("vector", "Centroids"): _centroids,
    ("vector", "CentroidInfo"): _centroid_info,
    ("vector", "Deletions"): _treemap,
    ("vector", "DeletionsSentinel"): _sentinel,
    ("vector", "TermPostings"): _term_postings,
    ("vector", "TermStats"): _term_stats,
    ("vector", "FieldStats"): _field_stats,
    ("vector", "VectorFieldStats"): _vector_field_stats,
}


def decode_value(
    subsystem: str, record: str, data: bytes, limits: DecodeLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """The value of one record, decoded under `limits` (ValueLimitError past a cap); merge
    operands (in a frame of opendata_kv's read-side merge operator, layouts.merge_frame) come
    back as {"base": ..., "operands": [...]}, each decoded."""
    budget = _Budget(limits)
    if len(data) > limits.max_value_bytes:
        raise _Reader(record, data, budget).refuse("max_value_bytes", f"{len(data)} bytes")
    if merge_frame.is_frame(data):
        try:
            base, operands = merge_frame.split(data)
        except ValueDecodeError as exc:
            raise ValueDecodeError(f"{record} {exc}", record=record, value=data) from None
        _Reader(record, data, budget).items(len(operands), "merge operands")
        return {
            "base": None if base is None else _decode(subsystem, record, base, budget),
            "operands": [_decode(subsystem, record, part, budget) for part in operands],
        }
    return _decode(subsystem, record, data, budget)


def _decode(subsystem: str, record: str, data: bytes, budget: _Budget) -> dict[str, Any]:
    decoder = DECODERS.get((subsystem, record))
    if decoder is None:
        raise ValueDecodeError(f"no value layout for {subsystem} {record}", record=record)
    reader = _Reader(record, data, budget)
    value = decoder(reader)
    reader.end()
    return value
