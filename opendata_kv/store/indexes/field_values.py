"""Reading an index field from a record: a key field first, then the value's mapping key or
attribute (RFC 0010). Below declare.py and the maintainers, which both read fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opendata_kv.keys import Key

_ABSENT = object()


def field_of(key: Key | None, value: Any, name: str) -> Any:
    """The field `name` of a record: a key field, else a value's mapping key or attribute;
    None when the record has no such field. `key` None: the caller knows no field of this
    index is a key field (Index.reads_key), so the key was not decoded."""
    if key is not None and name in key._fields:
        return getattr(key, name)
    if value.__class__ is dict:  # the common case, without the ABC check
        return value.get(name)
    if isinstance(value, Mapping):
        return value.get(name)
    found = getattr(value, name, _ABSENT)
    return None if found is _ABSENT else found
