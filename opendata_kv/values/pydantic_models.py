"""pydantic v2 models as value types (the `pydantic` extra): what the `atproto` SDK's records
are (`models.AppBskyFeedPost.Record`).

A model is stored as the msgpack map of its fields by alias (a lexicon's JSON names:
`createdAt`, `$type`), without the optional fields it does not set (None), so a record
written through the model is the same bytes as the same record written as the plain dict
`model.model_dump(by_alias=True, exclude_none=True)`. The only module that imports pydantic.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Generic, TypeVar

from opendata_kv.errors import ArgumentTypeError, ValueDecodeError, ValueEncodeError, show_bytes
from opendata_kv.values.codecs import _Limited, pack, unpack
from opendata_kv.values.limits import DecodeLimits
from opendata_kv.values.unknown import KEPT, UnknownFields, check_unknown, in_order, keep, merged

T = TypeVar("T")


def _pydantic() -> ModuleType | None:
    """pydantic, imported at the first ModelCodec (at import time it cost every process that
    imports opendata_kv ~0.1 s of its start); None when the extra is not installed."""
    try:
        import pydantic
    except ImportError:
        return None
    return pydantic


def is_model(spec: object) -> bool:
    """Whether `spec` is a pydantic v2 model class (False when pydantic is not installed).
    A class can only be one once pydantic is imported, so nothing is imported to tell."""
    loaded = sys.modules.get("pydantic")
    return loaded is not None and isinstance(spec, type) and issubclass(spec, loaded.BaseModel)


class ModelCodec(_Limited, Generic[T]):
    """A pydantic v2 model stored as the msgpack map of its fields by alias (module docstring).

    Decoding validates the stored map with `model_validate` (the model's own rules: an SDK
    record is strict). Stored fields the model does not declare: `unknown="keep"` (default)
    keeps them beside the object (values/unknown.py; a model with extra="allow" also holds
    them in `model_extra`) and `encode` writes them back unchanged in their stored order;
    `unknown="forbid"` refuses them (ValueDecodeError naming the field).
    """

    def __init__(
        self, cls: type[T], *, limits: DecodeLimits | None = None, unknown: UnknownFields = "keep"
    ) -> None:
        pydantic = _pydantic()
        if pydantic is None:
            raise ArgumentTypeError(
                "ModelCodec needs pydantic (pip install 'opendata-kv[pydantic]')",
                field="cls",
                value=cls,
            )
        if not is_model(cls):
            raise ArgumentTypeError(
                f"ModelCodec needs a pydantic model type, got {cls!r}", field="cls", value=cls
            )
        self._set_limits(limits)
        self.cls = cls
        self._invalid: Any = pydantic.ValidationError
        self.name = f"model:{cls.__qualname__}"
        self.unknown = check_unknown(unknown)
        fields = cls.model_fields  # type: ignore[attr-defined]
        self._order = tuple(info.alias or name for name, info in fields.items())
        self._declared = frozenset(self._order)

    def encode(self, value: T) -> bytes:
        if not isinstance(value, self.cls):
            raise ValueEncodeError(
                f"{self.name} value must be a {self.cls.__qualname__}, got {type(value).__name__}",
                value=value,
            )
        model: Any = value
        try:
            fresh = model.model_dump(mode="python", by_alias=True, exclude_none=True)
        except Exception as exc:  # pydantic_core.PydanticSerializationError, ValueError, ...
            raise ValueEncodeError(f"{self.name}: {exc}", value=value) from None
        stored = KEPT.recall(value)
        if stored is not None:
            fresh = in_order(_as_stored(fresh, stored), stored)
        return pack(merged(fresh, stored, self._declared), self.name)

    def decode(self, data: bytes) -> T:
        stored = unpack(data, self.limits)
        if not isinstance(stored, dict):
            raise ValueDecodeError(
                f"{self.name}: expected a msgpack map, got {type(stored).__name__}: "
                f"{show_bytes(data)}",
                value=data,
            )
        unknown = [k for k in stored if k not in self._declared]
        if unknown and self.unknown == "forbid":
            raise ValueDecodeError(
                f"{self.name}: unknown fields {unknown!r} (unknown='forbid'): {show_bytes(data)}",
                field=str(unknown[0]),
                value=data,
            )
        try:
            made: T = self.cls.model_validate(stored)  # type: ignore[attr-defined]
        except self._invalid as exc:
            errors = exc.errors()
            where = ".".join(str(part) for part in errors[0]["loc"]) if errors else None
            raise ValueDecodeError(
                f"{self.name}: {exc}: {show_bytes(data)}", field=where, value=data
            ) from None
        keep(self.name, made, stored, unknown, self._order, data)
        return made

    def __repr__(self) -> str:
        extra = f", unknown={self.unknown!r}" if self.unknown != "keep" else ""
        if self.explicit_limits:
            extra += f", limits={self.limits!r}"
        return f"ModelCodec({self.cls.__qualname__}{extra})"


def _as_stored(fresh: Any, stored: Any) -> Any:
    """`fresh` (a dump without None) as the map it was read from held it, in nested maps
    too: a stored `"x": null` written back as it was, and a `$type` the stored map did not
    carry left out (an SDK model fills in its own `$type` default, `py_type`)."""
    if isinstance(fresh, dict) and isinstance(stored, dict):
        out = {
            key: _as_stored(item, stored.get(key))
            for key, item in fresh.items()
            if key != "$type" or key in stored
        }
        for key, old in stored.items():
            if old is None and key not in out:
                out[key] = None
        return out
    if isinstance(fresh, list) and isinstance(stored, list) and len(fresh) == len(stored):
        return [_as_stored(a, b) for a, b in zip(fresh, stored, strict=True)]
    return fresh
