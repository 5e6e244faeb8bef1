"""The forms a schema may be given in -- a Schema, a Values (its schema and codecs), one
RecordType, RecordTypes, or an object with a `.schema` (and optionally `.values`) -- turned
into (Schema, Values or None). One home for Store.open's `schema=` and the CLI's --schema."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opendata_kv.keys import RecordType, Schema
from opendata_kv.values.registry import Values


def schema_and_values(obj: Any) -> tuple[Schema, Values | None] | None:
    """(Schema, the Values it carried or None) for any accepted form; None for anything else."""
    if isinstance(obj, Schema):
        return obj, None
    if isinstance(obj, Values):
        return obj.schema, obj
    if isinstance(obj, RecordType):
        return Schema(obj), None
    if isinstance(obj, (str, bytes, bytearray, dict)) or obj is None:
        return None
    inner = getattr(obj, "schema", None)
    if isinstance(inner, Schema):
        carried = getattr(obj, "values", None)
        return inner, carried if isinstance(carried, Values) and carried.schema is inner else None
    if isinstance(obj, Iterable):
        items = list(obj)
        if items and all(isinstance(t, RecordType) for t in items):
            return Schema(items), None
    return None
