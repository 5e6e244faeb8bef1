"""Value codecs: msgpack per (record type, key version), chosen by the stored key's version.

Never imports slatedb.
"""

from opendata_kv.values.codecs import (
    BatchDecoding,
    DataclassCodec,
    LimitsAware,
    MsgpackCodec,
    RawCodec,
    ValueCodec,
    batch_decoder,
    msgpack_codec,
    pack,
    raw,
    unpack,
)
from opendata_kv.values.limits import DEFAULT_LIMITS, DecodeLimits
from opendata_kv.values.registry import (
    UNKNOWN_POLICIES,
    UnknownPolicy,
    Values,
    VersionCodec,
    check_policy,
)
from opendata_kv.values.specs import as_codec
from opendata_kv.values.typed import StructCodec, TypedDictCodec

__all__ = [
    "DEFAULT_LIMITS",
    "UNKNOWN_POLICIES",
    "BatchDecoding",
    "DataclassCodec",
    "DecodeLimits",
    "LimitsAware",
    "MsgpackCodec",
    "RawCodec",
    "StructCodec",
    "TypedDictCodec",
    "UnknownPolicy",
    "ValueCodec",
    "Values",
    "VersionCodec",
    "as_codec",
    "batch_decoder",
    "check_policy",
    "msgpack_codec",
    "pack",
    "raw",
    "unpack",
]
