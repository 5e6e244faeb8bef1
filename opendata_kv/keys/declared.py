"""Key fields declared as a NamedTuple: `repo: Annotated[str, fields.string]` (RFC 0013).

Reads a NamedTuple class into the (name, codec) pairs a RecordType compiles, so a typed and
a list declaration of the same fields are one layout and encode identically.
"""

from __future__ import annotations

import typing
from typing import Any

from opendata_kv.errors import SchemaError
from opendata_kv.keys.codecs import Field


def key_pairs(record: str, declared: type[Any]) -> tuple[tuple[str, Field], ...]:
    """The (field name, codec) pairs of a NamedTuple class whose every field is annotated
    `Annotated[type, codec]`; SchemaError naming the record and field otherwise."""
    names = getattr(declared, "_fields", None)
    if not (issubclass(declared, tuple) and isinstance(names, tuple)):
        raise SchemaError(
            f"{record}: a key class must be a typing.NamedTuple, got {declared.__qualname__}",
            record=record,
            value=declared,
        )
    defaults = getattr(declared, "_field_defaults", {})
    if defaults:
        raise SchemaError(
            f"{record}: key field {next(iter(defaults))!r} of {declared.__qualname__} has a "
            "default; every key field must be given",
            record=record,
            field=next(iter(defaults)),
        )
    try:
        hints = typing.get_type_hints(declared, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve
        raise SchemaError(
            f"{record}: the annotations of {declared.__qualname__} do not resolve: {exc}",
            record=record,
        ) from None
    return tuple((name, _codec(record, declared, name, hints.get(name))) for name in names)


def _codec(record: str, declared: type[Any], name: str, hint: object) -> Field:
    """The one Field in a field's Annotated metadata."""
    codecs = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Field)]
    if len(codecs) != 1:
        found = "no codec" if not codecs else f"{len(codecs)} codecs"
        raise SchemaError(
            f"{record}: key field {name!r} of {declared.__qualname__} is annotated {hint!r} "
            f"({found}); write it as Annotated[<type>, fields.<codec>], with one codec",
            record=record,
            field=name,
            value=hint,
        )
    return codecs[0]
