"""What a value codec may be given as (`Values.register(t, Post)`): a codec, or a type whose
codec is known (dataclass, TypedDict, msgspec.Struct, bytes, dict)."""

from __future__ import annotations

import dataclasses
from typing import Any

from opendata_kv.errors import ArgumentTypeError
from opendata_kv.values.codecs import DataclassCodec, ValueCodec, msgpack_codec, raw
from opendata_kv.values.typed import StructCodec, TypedDictCodec, is_struct, is_typeddict


def as_codec(spec: Any) -> ValueCodec[Any]:
    """Accept a codec, a dataclass, TypedDict or msgspec.Struct type, `bytes` (raw) or `dict`
    (msgpack) as a codec spec."""
    if spec is None or spec is dict:
        return msgpack_codec
    if spec is bytes:
        return raw
    if isinstance(spec, type) and dataclasses.is_dataclass(spec):
        return DataclassCodec(spec)
    if isinstance(spec, ValueCodec):
        return spec
    if is_typeddict(spec):
        return TypedDictCodec(spec)
    if is_struct(spec):
        return StructCodec(spec)
    raise ArgumentTypeError(
        f"not a value codec: {spec!r} (give a codec, a dataclass, a TypedDict, a "
        "msgspec.Struct, bytes or dict)",
        field="codec",
        value=spec,
    )
