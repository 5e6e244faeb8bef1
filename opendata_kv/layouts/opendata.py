"""OpenData's keys as they are today (OpenData commit 5f5c288, RFC 0009): one Schema per
subsystem, one RecordType per record kind, and key-level detection.

    from opendata_kv.layouts import opendata
    opendata.LOG.get("LogEntry").encode(1, b"k", 100)   # 03 01 00000001 10 6b00 1064
    opendata.decode_key(bytes.fromhex("03010000000020"))  # SeqBlockKey(segment_id=0)

Names of record kinds and fields are those of shared/vectors/opendata/layouts.jsonl. The
subsystems are separate databases in OpenData, so each has its own Schema (log and vector
both have a "SeqBlock").
"""

from __future__ import annotations

from dataclasses import dataclass

from opendata_kv.errors import KeyDecodeError, show_bytes
from opendata_kv.keys import Key, RecordType, Schema, fields
from opendata_kv.keys.prefix import as_key_bytes

TIMESERIES_ID, VECTOR_ID, LOG_ID, KEYVALUE_ID = 1, 2, 3, 4
#: subsystem byte -> name
SUBSYSTEMS: dict[int, str] = {
    TIMESERIES_ID: "timeseries",
    VECTOR_ID: "vector",
    LOG_ID: "log",
    KEYVALUE_ID: "keyvalue",
}
#: vector's segment byte (before its version byte) -> name
VECTOR_SEGMENTS: dict[int, str] = {0: "default", 1: "ann", 2: "fts"}

# --- keyvalue v1: 04 01 10 + user key ---------------------------------------------------------

KEYVALUE = Schema(
    RecordType("KeyValue", 1, [("user_key", fields.trailing_bytes)], subsystem=KEYVALUE_ID)
)

# --- log v1: 03 01 + segment_id u32 + 4+4 tag ------------------------------------------------

_LOG_HEADER = (("segment_id", fields.u32),)


def _log(name: str, record_type: int, body: list[tuple[str, fields.Field]]) -> RecordType:
    return RecordType(name, record_type, body, subsystem=LOG_ID, header=_LOG_HEADER)


LOG = Schema(
    _log("LogEntry", 1, [("key", fields.bytes_), ("relative_seq", fields.var_u64)]),
    _log("SeqBlock", 2, []),
    _log("SegmentMeta", 3, [("described_segment_id", fields.u32)]),
    _log("ListingEntry", 4, [("key", fields.trailing_bytes)]),
)

# --- timeseries v2: 01 02 + bucket_start u32 + bucket_size u8 + plain type byte ----------------

_TS_HEADER = (("bucket_start", fields.u32), ("bucket_size", fields.u8))


def _ts(name: str, record_type: int, body: list[tuple[str, fields.Field]]) -> RecordType:
    return RecordType(
        name, record_type, body, version=2, subsystem=TIMESERIES_ID, header=_TS_HEADER, tag="byte"
    )


TIMESERIES = Schema(
    _ts("SeriesDictionary", 2, [("series_fingerprint", fields.u128)]),
    _ts("ForwardIndex", 3, [("series_id", fields.u32)]),
    _ts("InvertedIndex", 4, [("attribute", fields.string), ("value", fields.trailing_string)]),
    _ts("TimeSeries", 5, [("metric_name", fields.string), ("series_id", fields.u32)]),
)

# --- vector v1: 02 + segment + 01 + 4+4 tag ---------------------------------------------------

#: MetadataIndex's field type byte -> the codec of the value after it
METADATA_VALUE_TYPES: dict[int, fields.Field] = {
    0: fields.string,
    1: fields.i64,
    2: fields.f64,
    3: fields.boolean,
}


def _vec(
    name: str,
    segment: int,
    record_type: int,
    body: list[tuple[str, fields.Field]],
    suffix: bytes = b"",
) -> RecordType:
    return RecordType(
        name, record_type, body, subsystem=VECTOR_ID, keyspace=bytes((segment,)), suffix=suffix
    )


_ID = [("vector_id", fields.u64)]
_CENTROID = [("centroid_id", fields.u64)]
_FTS_TERM = [("field", fields.lp_string), ("term", fields.lp_string)]

VECTOR = Schema(
    _vec("CollectionMeta", 0, 0x1, []),
    _vec("CentroidSeqBlock", 1, 0x2, []),
    _vec("VectorIndexData", 0, 0x3, _ID),
    _vec("PostingList", 1, 0x4, _CENTROID),
    _vec("IdDictionary", 0, 0x5, [("external_id", fields.string)]),
    _vec("VectorData", 0, 0x6, _ID),
    _vec(
        "MetadataIndex",
        0,
        0x7,
        [
            ("field", fields.string),
            ("value_type", fields.u8),
            ("value", fields.typed("value_type", METADATA_VALUE_TYPES)),
        ],
    ),
    _vec("SeqBlock", 0, 0x8, []),
    _vec("CentroidStats", 1, 0x9, _CENTROID),
    _vec("Centroids", 1, 0xA, []),
    _vec("CentroidInfo", 1, 0xB, _CENTROID),
    _vec("Deletions", 2, 0xC, [], suffix=b"\xff"),
    _vec("DeletionsSentinel", 2, 0xC, [], suffix=b"\x00"),
    _vec("TermPostings", 2, 0xD, _FTS_TERM, suffix=b"\x00"),
    _vec("TermStats", 2, 0xD, _FTS_TERM, suffix=b"\x01"),
    _vec("VectorFieldStats", 2, 0xE, _ID),
    _vec("FieldStats", 2, 0xF, [("field", fields.lp_string)]),
)

#: subsystem name -> its Schema
SCHEMAS: dict[str, Schema] = {
    "timeseries": TIMESERIES,
    "vector": VECTOR,
    "log": LOG,
    "keyvalue": KEYVALUE,
}


@dataclass(frozen=True)
class Extractor:
    """An OpenData segment extractor: its persisted name and the routing prefix it takes."""

    name: str
    subsystem: int
    #: offset and value of the version byte the extractor checks
    version_at: int
    version: int
    prefix_len: int

    def routing_prefix_len(self, key: bytes) -> int | None:
        """The routing prefix length for `key`, None when `key` is not of this subsystem."""
        if (
            len(key) >= self.prefix_len
            and key[0] == self.subsystem
            and key[self.version_at] == self.version
        ):
            return self.prefix_len
        return None


#: extractor name -> how it routes (log: 03 01 + segment id; timeseries: 01 02 + bucket;
#: vector: 02 + segment byte + 01)
EXTRACTORS: dict[str, Extractor] = {
    e.name: e
    for e in (
        Extractor("opendata-log/v1", LOG_ID, 1, 1, 6),
        Extractor("opendata-timeseries/v2", TIMESERIES_ID, 1, 2, 7),
        Extractor("opendata-vector/v1", VECTOR_ID, 2, 1, 3),
    )
}


#: the constant bytes OpenData keys start with (subsystem, vector's segment, version)
LEADS: tuple[bytes, ...] = tuple(sorted({t.lead for schema in SCHEMAS.values() for t in schema}))


def is_opendata_key(key: bytes) -> bool:
    """True when `key` is read as an OpenData key rather than a seed key (RFC 0009): it
    starts with the subsystem and version bytes of one of OpenData's layouts (01 02, 02 00 01,
    02 01 01, 02 02 01, 03 01, 04 01). A valid seed key never does (its second byte, the
    record tag, is 0x10 or more); every OpenData key does."""
    return key.startswith(LEADS)


def subsystem_of(key: bytes) -> str:
    """The subsystem name of `key`'s first byte; KeyDecodeError naming offset 0 otherwise."""
    key = as_key_bytes(key)
    if not key:
        raise KeyDecodeError("an empty key has no subsystem byte (offset 0)", value=key, offset=0)
    name = SUBSYSTEMS.get(key[0])
    if name is None:
        raise KeyDecodeError(
            f"key {show_bytes(key)}: byte 0x{key[0]:02x} at offset 0 is not an OpenData "
            f"subsystem ({', '.join(f'{b:02x} {n}' for b, n in SUBSYSTEMS.items())})",
            value=key,
            offset=0,
        )
    return name


def decode_key(key: bytes) -> Key:
    """Decode any OpenData key with its subsystem's Schema; KeyDecodeError (its `offset` set)
    naming where decoding stopped."""
    key = as_key_bytes(key)
    return SCHEMAS[subsystem_of(key)].decode(key)


def segment_name(key: Key) -> str | None:
    """vector's segment name for a decoded vector key, else None."""
    record_type = key.record_type
    if record_type.subsystem != VECTOR_ID:
        return None
    return VECTOR_SEGMENTS.get(record_type.keyspace[0], str(record_type.keyspace[0]))
