"""A small schema for the CLI tests: `--schema cli_schema:SCHEMA` (tests/ on PYTHONPATH)."""

from __future__ import annotations

import dataclasses

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.values import Values

#: 0x01 0x10 | repo (string) | rkey (string)
POST = RecordType("post", 1, [("repo", F.string), ("rkey", F.string)])
#: 0x02 0x10 | repo (string) | rkey (string): a second key version of the same record
POST_V2 = RecordType("post", 1, [("repo", F.string), ("rkey", F.string)], version=2)
#: 0x01 0x20 | n (u64)
LIKE = RecordType("like", 2, [("n", F.u64)])
#: 0x03 0x20 | n (u64): like under a later key version, so --type 2 spans versions 1 and 3
LIKE_V3 = RecordType("like", 2, [("n", F.u64)], version=3)
#: 0x01 0x30 | id (muid) | blob (bytes) | score (f64)
EVENT = RecordType("event", 3, [("id", F.muid), ("blob", F.bytes_), ("score", F.f64)])
#: 0x01 0x40 | name (string); values are raw bytes
BLOB = RecordType("blob", 4, [("name", F.string)])

SCHEMA = Schema(POST, POST_V2, LIKE, LIKE_V3, EVENT, BLOB)


@dataclasses.dataclass
class Post:
    text: str
    lang: str = "en"


#: Values with a dataclass codec for post v2 and raw bytes for blobs.
VALUES = Values(SCHEMA).register(POST_V2, Post).register(BLOB, bytes)


def make_schema() -> Schema:
    """A callable form of --schema."""
    return SCHEMA


class Holder:
    """An object with a .schema attribute."""

    schema = SCHEMA


HOLDER = Holder()
NOT_A_SCHEMA = 42
