"""Checks that a decoded value matches a dataclass field's declared type (DataclassCodec).

msgpack gives back plain data; a stored {"text": 1} would otherwise become a dataclass whose
`text: str` holds an int. A checker is built once per field from its annotation: scalars,
None, Optional / unions, Literal, list / tuple / set / dict (elements checked too), nested
types by isinstance. An annotation it cannot interpret (Any, a TypeVar, an unresolvable
forward reference) accepts anything.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Checker = Callable[[Any], bool]


def _all(inner: Checker | None, items: Any) -> bool:
    return inner is None or all(inner(item) for item in items)


def checker_for(annotation: Any, *, extra_keys: bool = False) -> Checker | None:
    """A predicate for values of `annotation`, or None when anything is accepted.
    `extra_keys`: a nested TypedDict may hold keys it does not declare (unknown="keep")."""
    if annotation is Any or isinstance(annotation, (str, typing.TypeVar)):
        return None
    if annotation is None or annotation is type(None):
        return lambda value: value is None
    if annotation is bool:
        return lambda value: isinstance(value, bool)
    if annotation is int:
        return lambda value: isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is datetime.datetime:
        return lambda value: isinstance(value, datetime.datetime)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return checker_for(args[0], extra_keys=extra_keys)
    if origin is typing.Union or origin is types.UnionType:
        options = [checker_for(arg, extra_keys=extra_keys) for arg in args]
        if any(option is None for option in options):
            return None
        return lambda value: any(option(value) for option in options if option is not None)
    if origin is typing.Literal:
        return lambda value: any(value == arg and type(value) is type(arg) for arg in args)
    if origin in (list, set, frozenset, Sequence, tuple):
        if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
            parts = [checker_for(arg, extra_keys=extra_keys) for arg in args]
            return lambda value: (
                isinstance(value, (list, tuple))
                and len(value) == len(parts)
                and all(part is None or part(item) for part, item in zip(parts, value, strict=True))
            )
        inner = checker_for(args[0], extra_keys=extra_keys) if args else None
        return lambda value: isinstance(value, (list, tuple)) and _all(inner, value)
    if origin in (dict, Mapping):
        key = checker_for(args[0], extra_keys=extra_keys) if args else None
        item = checker_for(args[1], extra_keys=extra_keys) if len(args) > 1 else None
        return lambda value: (
            isinstance(value, dict) and _all(key, value.keys()) and _all(item, value.values())
        )
    if isinstance(annotation, type) and typing.is_typeddict(annotation):
        return _typeddict_checker(annotation, extra_keys)
    if annotation in (list, tuple, set, frozenset):
        return lambda value: isinstance(value, (list, tuple))
    if annotation is dict:
        return lambda value: isinstance(value, dict)
    if isinstance(annotation, type) and origin is None:
        return lambda value: isinstance(value, annotation)
    return None


def _typeddict_checker(cls: type[Any], extra_keys: bool = False) -> Checker:
    """A nested TypedDict: a dict with its required keys, each value checked, and no other
    keys unless `extra_keys`."""
    hints = typing.get_type_hints(cls)  # Required/NotRequired stripped
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    checks = {
        name: checker_for(annotation, extra_keys=extra_keys) for name, annotation in hints.items()
    }

    def check(value: Any) -> bool:
        if not isinstance(value, dict) or not required <= value.keys():
            return False
        for name, item in value.items():
            if name not in checks:
                if extra_keys:
                    continue
                return False
            inner = checks[name]
            if inner is not None and not inner(item):
                return False
        return True

    return check


def field_checkers(cls: type[Any], *, extra_keys: bool = False) -> dict[str, tuple[Checker, str]]:
    """name -> (checker, type shown in errors) for each init field of a dataclass whose
    declared type can be checked."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a forward reference that does not resolve: check what is concrete
        hints = {}
    checkers: dict[str, tuple[Checker, str]] = {}
    for spec in dataclasses.fields(cls):
        if not spec.init:
            continue
        annotation = hints.get(spec.name, spec.type)
        checker = checker_for(annotation, extra_keys=extra_keys)
        if checker is not None:
            plain = isinstance(annotation, type) and typing.get_origin(annotation) is None
            shown = annotation.__name__ if plain else repr(annotation)
            checkers[spec.name] = (checker, str(shown).replace("typing.", ""))
    return checkers
