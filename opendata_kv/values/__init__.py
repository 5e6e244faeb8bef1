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
from opendata_kv.values.pydantic_models import ModelCodec
from opendata_kv.values.registry import (
    UNKNOWN_POLICIES,
    UnknownPolicy,
    Values,
    VersionCodec,
    check_policy,
)
from opendata_kv.values.specs import as_codec
from opendata_kv.values.typed import StructCodec, TypedDictCodec
from opendata_kv.values.unknown import UNKNOWN_FIELDS, UnknownFields, unknown_fields

__all__ = [
    "DEFAULT_LIMITS",
    "UNKNOWN_FIELDS",
    "UNKNOWN_POLICIES",
    "BatchDecoding",
    "DataclassCodec",
    "DecodeLimits",
    "LimitsAware",
    "ModelCodec",
    "MsgpackCodec",
    "RawCodec",
    "StructCodec",
    "TypedDictCodec",
    "UnknownFields",
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
    "unknown_fields",
    "unpack",
]
