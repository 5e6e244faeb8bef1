"""What a value codec may be given as (`Values.register(t, Post)`): a codec, or a type whose
codec is known (dataclass, TypedDict, msgspec.Struct, pydantic model, bytes, dict)."""

from __future__ import annotations

import dataclasses
from typing import Any

from opendata_kv.errors import ArgumentTypeError
from opendata_kv.values.codecs import DataclassCodec, ValueCodec, msgpack_codec, raw
from opendata_kv.values.pydantic_models import ModelCodec, is_model
from opendata_kv.values.typed import StructCodec, TypedDictCodec, is_struct, is_typeddict
from opendata_kv.values.unknown import UnknownFields, check_unknown


def as_codec(spec: Any, *, unknown: UnknownFields = "keep") -> ValueCodec[Any]:
    """Accept a codec, a dataclass, TypedDict, msgspec.Struct or pydantic model type, `bytes`
    (raw) or `dict` (msgpack) as a codec spec. `unknown` ("keep" or "forbid", values/unknown.py)
    is given to the codec made for a type; a codec says its own."""
    check_unknown(unknown)
    if spec is None or spec is dict:
        return msgpack_codec
    if spec is bytes:
        return raw
    if isinstance(spec, type) and dataclasses.is_dataclass(spec):
        return DataclassCodec(spec, unknown=unknown)
    if isinstance(spec, ValueCodec):
        return spec
    if is_typeddict(spec):
        return TypedDictCodec(spec, unknown=unknown)
    if is_struct(spec):
        return StructCodec(spec, unknown=unknown)
    if is_model(spec):
        return ModelCodec(spec, unknown=unknown)
    raise ArgumentTypeError(
        f"not a value codec: {spec!r} (give a codec, a dataclass, a TypedDict, a "
        "msgspec.Struct, a pydantic model, bytes or dict)",
        field="codec",
        value=spec,
    )
