"""A schema using every field codec, for the fuzz tests (and `--schema fuzz_schema:SCHEMA`).

No hypothesis here: the CLI imports this module in a child process.
"""

from __future__ import annotations

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F

INTS = RecordType(
    "ints",
    1,
    [
        ("a", F.u8),
        ("b", F.u16),
        ("c", F.u32),
        ("d", F.u64),
        ("e", F.u128),
        ("f", F.i32),
        ("g", F.i64),
    ],
)
MISC = RecordType(
    "misc",
    2,
    [("x", F.f64), ("flag", F.boolean), ("fx", F.fixed(3)), ("v32", F.var_u32), ("v64", F.var_u64)],
)
TEXT = RecordType(
    "text",
    3,
    [
        ("s", F.string),
        ("b", F.bytes_),
        ("ds", F.desc(F.string)),
        ("dv", F.desc(F.var_u64)),
        ("rest", F.trailing_bytes),
    ],
)
IDS = RecordType(
    "ids",
    4,
    [
        ("tid", F.tid),
        ("muid", F.muid),
        ("url", F.url_key),
        ("rkey", F.rkey("any")),
        ("rest", F.trailing_string),
    ],
)
#: version 2, a reserved nibble and a keyspace in front
KEYED = RecordType(
    "keyed",
    6,
    [("rkey", F.rkey("tid")), ("dm", F.desc(F.muid)), ("di", F.desc(F.i64))],
    version=2,
    reserved=5,
    keyspace=b"\xaa",
)
NSID = RecordType("nsid", 5, [("collection", F.rkey("nsid")), ("n", F.desc(F.u32))])
#: a second version of NSID (same record type, new layout)
NSID_V3 = RecordType("nsid", 5, [("n", F.u32), ("collection", F.rkey("nsid"))], version=3)

SCHEMA = Schema(INTS, MISC, TEXT, IDS, KEYED, NSID, NSID_V3)

#: every field codec in the schema, once
CODECS = sorted({f for rt in SCHEMA for _, f in rt.fields}, key=lambda f: f.kind)
