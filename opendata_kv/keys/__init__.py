"""The key layer: the 2-byte record prefix, order-preserving field codecs, RecordType, Schema.

    from opendata_kv.keys import RecordType, Schema, fields
    post = RecordType("post", 1, [("repo", fields.string), ("rkey", fields.string)])
    post.encode("did:plc:x", "3k2a")            # b"\\x01\\x10did:plc:x\\x003k2a\\x00"
    post.range("did:plc:x", partial="3k")       # bounds of every rkey starting with "3k"

Never imports slatedb.
"""

from opendata_kv.keys import fields
from opendata_kv.keys.fields import Field
from opendata_kv.keys.prefix import (
    RecordPrefix,
    build_prefix,
    check_prefix,
    parse_prefix,
    prefix_successor,
    record_type_text,
)
from opendata_kv.keys.ranges import (
    UNBOUNDED,
    Bounds,
    intersect,
    is_empty,
    prefix_range,
    record_type_range,
    version_range,
)
from opendata_kv.keys.record import Key, RecordType
from opendata_kv.keys.schema import Schema

__all__ = [
    "UNBOUNDED",
    "Bounds",
    "Field",
    "Key",
    "RecordPrefix",
    "RecordType",
    "Schema",
    "build_prefix",
    "check_prefix",
    "fields",
    "intersect",
    "is_empty",
    "parse_prefix",
    "prefix_range",
    "prefix_successor",
    "record_type_range",
    "record_type_text",
    "version_range",
]
