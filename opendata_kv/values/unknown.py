"""Stored fields a typed value does not declare (RFC 0013, "Records that evolve").

`unknown="keep"` (the default of every typed codec): a record read through a type that lacks
some of its stored fields keeps them, and `put` of the object writes them back unchanged, in
their stored order, so a typed get and put of a record with unknown fields is byte-identical.
`unknown="forbid"`: such a record is a ValueDecodeError naming the record, field and bytes.

A dataclass, Struct or pydantic object keeps them beside itself: KEPT maps the object's id to
the map it was decoded from, for as long as the object lives (a weak reference's callback
drops the entry as the object is freed, before its id can be reused). A TypedDict value is
a dict and keeps them in itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from typing import Any, Literal

from opendata_kv.errors import ValueDecodeError, check_choice, show_bytes

UnknownFields = Literal["keep", "forbid"]
UNKNOWN_FIELDS: tuple[UnknownFields, ...] = ("keep", "forbid")


def check_unknown(unknown: object) -> UnknownFields:
    """Validate an `unknown=` choice ("keep" or "forbid")."""
    return check_choice(unknown, UNKNOWN_FIELDS, "unknown")


class _Kept:
    """id(object) -> the stored map the object was decoded from, while the object lives: the
    entry holds a weak reference to the object whose callback removes the entry as the
    object is freed (before its id can be reused)."""

    def __init__(self) -> None:
        self._maps: dict[int, tuple[dict[Any, Any], weakref.ref[Any]]] = {}

    def remember(self, obj: object, stored: dict[Any, Any]) -> bool:
        """Keep `stored` beside `obj`; False when `obj` takes no weak reference (a slotted
        dataclass without weakref_slot, a Struct without weakref=True): nothing is kept."""
        key = id(obj)
        maps = self._maps
        try:
            ref = weakref.ref(obj, lambda _ref: maps.pop(key, None))
        except TypeError:
            return False
        maps[key] = (stored, ref)
        return True

    def recall(self, obj: object) -> dict[Any, Any] | None:
        """The stored map `obj` was decoded from, when it was kept."""
        entry = self._maps.get(id(obj))
        if entry is None or entry[1]() is not obj:
            return None
        return entry[0]

    def __len__(self) -> int:
        return len(self._maps)


#: the one side table (an object decoded by one codec may be written by another of its type)
KEPT = _Kept()


def keep(
    name: str,
    made: object,
    stored: dict[Any, Any],
    unknown: Collection[Any],
    order: tuple[Any, ...],
    data: bytes,
) -> None:
    """Keep `stored` beside `made` (decoded by codec `name`) when it holds `unknown` fields
    or keys in another order than `order` (the codec's own): a put then writes the stored
    bytes again. ValueDecodeError when unknown fields cannot be kept (no weak reference)."""
    if not unknown and tuple(stored) == order[: len(stored)]:
        return
    if KEPT.remember(made, stored) or not unknown:
        return
    raise ValueDecodeError(
        f"{name}: the stored fields {list(unknown)!r} are not declared, and a "
        f"{type(made).__qualname__} cannot keep them beside itself (it takes no weak "
        "reference: declare a dataclass with weakref_slot=True, a msgspec.Struct with "
        "weakref=True), so a put would lose them; read it with unknown='forbid' to refuse "
        f"such records, or declare the fields: {show_bytes(data)}",
        field=str(next(iter(unknown))),
        value=data,
    )


def unknown_fields(value: object) -> dict[Any, Any]:
    """The stored fields `value` was read with and does not declare (empty when none were
    kept): what its next put writes back beside its own fields."""
    stored = KEPT.recall(value)
    if stored is None:
        return {}
    declared = getattr(value, "__dataclass_fields__", None) or getattr(
        value, "__struct_encode_fields__", None
    )
    fields = getattr(type(value), "model_fields", None)
    if fields is not None:
        declared = {info.alias or name for name, info in fields.items()}
    if declared is None:
        return {}
    return {key: item for key, item in stored.items() if key not in declared}


def merged(
    fresh: dict[Any, Any], stored: dict[Any, Any] | None, declared: Collection[Any]
) -> dict[Any, Any]:
    """The map to store for an object whose own fields are `fresh`, read from `stored`: the
    stored keys in their order (declared ones with the object's value, dropped when the
    object no longer has them; unknown ones as stored), then the object's new keys."""
    if not stored:
        return fresh
    out: dict[Any, Any] = {}
    for key, old in stored.items():
        if key in fresh:
            out[key] = in_order(fresh[key], old)
        elif key not in declared:
            out[key] = old
    for key, new in fresh.items():
        if key not in out:
            out[key] = new
    return out


def in_order(new: Any, old: Any) -> Any:
    """`new` with its maps' keys in `old`'s order wherever the two have the same shape (a
    nested value re-encoded by a model keeps the stored bytes when it did not change)."""
    if isinstance(new, dict) and isinstance(old, dict):
        out = {key: in_order(new[key], old[key]) for key in old if key in new}
        for key, item in new.items():
            if key not in out:
                out[key] = item
        return out
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [in_order(a, b) for a, b in zip(new, old, strict=True)]
    return new
