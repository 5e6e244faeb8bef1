"""Key fields declared as a NamedTuple: `repo: Annotated[str, fields.string]` (RFC 0013).

Reads a NamedTuple class into the (name, codec) pairs a RecordType compiles, so a typed and
a list declaration of the same fields are one layout and encode identically.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

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
    pairs = tuple((name, _codec(record, declared, name, hints.get(name))) for name in names)
    for name, codec in pairs:
        check_annotation(record, declared, name, hints[name], codec)
    return pairs


def _classes(hint: object) -> list[type] | None:
    """The classes an annotation stands for (`int | None`: int and NoneType; a NewType or a
    Literal: the class of its values); None for Any (unchecked). TypeError when a part of it
    is no class at all (a TypeVar, a Protocol, a string)."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _classes(getattr(hint, "__origin__", Any))
    if origin is Union or origin is types.UnionType:
        found: list[type] = []
        for arg in typing.get_args(hint):
            inner = _classes(arg)
            if inner is None:
                return None
            found += inner
        return found
    if origin is Literal:
        return [type(arg) for arg in typing.get_args(hint)]
    supertype = getattr(hint, "__supertype__", None)  # a NewType: its values are its supertype's
    if supertype is not None:
        return _classes(supertype)
    if hint is None or hint is type(None):
        return [type(None)]
    if isinstance(origin, type):  # list[int] and the like: a list
        return [origin]
    if isinstance(hint, type) and not getattr(hint, "_is_protocol", False):
        return [hint]
    raise TypeError(hint)


def _names(classes: tuple[type, ...] | list[type]) -> str:
    return " | ".join("None" if c is type(None) else c.__qualname__ for c in classes)


def check_annotation(
    record: str, declared: type[Any], name: str, hint: object, codec: Field
) -> None:
    """SchemaError naming the field, its annotation and the codec's type unless the annotation
    holds every value the codec decodes to (so what mypy says a key field is, it is) and names
    only values the codec takes (so what mypy lets key() take, encode takes): `int` for the
    integer codecs, `float` for f64, `str` for string, tid and rkey, `bytes` for the byte
    codecs, `Muid` for muid; a NewType or Literal of those, or `Any`, too."""
    decodes = codec.value_types()
    if decodes is None:  # a codec that does not say what it decodes to
        return
    takes = codec.input_types()
    inner = getattr(hint, "__origin__", hint) if typing.get_origin(hint) is Annotated else hint
    try:
        classes = _classes(inner)
    except TypeError:
        problem = "which names no class"
    else:
        if classes is None:
            return
        missing = [d for d in decodes if not any(issubclass(d, c) for c in classes)]
        extra = [c for c in classes if not any(issubclass(c, t) for t in takes)]
        if not missing and not extra:
            return
        if missing:
            problem = f"but the codec decodes to {_names(missing)}, which it does not hold"
        else:
            problem = f"but the codec does not take {_names(extra)}"
    shown = _names(decodes)
    raise SchemaError(
        f"{record}: key field {name!r} of {declared.__qualname__} is annotated "
        f"{_shown(inner)}, {problem}: {codec!r} decodes to {shown} (and takes "
        f"{_names(takes)}); annotate it Annotated[{shown}, {codec!r}]",
        record=record,
        field=name,
        value=inner,
    )


def _shown(hint: object) -> str:
    """An annotation as written (`int`, `str | None`), not as its repr (`<class 'int'>`)."""
    return hint.__qualname__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


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
