"""The forms Store.open takes as `schema` (the same the CLI's --schema accepts), turned into
one Schema and its Values; anything else is a SchemaError at open, not an AttributeError later."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opendata_kv.errors import SchemaError
from opendata_kv.keys import RecordType, Schema
from opendata_kv.values import Values
from opendata_kv.values.schema_forms import schema_and_values

#: what `schema=` may be: a Schema, one RecordType, RecordTypes, a Values (its schema and codecs)
SchemaArg = Schema | RecordType | Iterable[RecordType] | Values


def as_schema(schema: Any, values: Values | None = None) -> tuple[Schema, Values]:
    """(Schema, Values) for a Schema, a RecordType, an iterable of RecordTypes, a Values, or an
    object with a `.schema` Schema (and optionally `.values`), with `values` (if given) for the
    codecs; SchemaError for anything else, or for a `values` built for another Schema."""
    found = schema_and_values(schema)
    if found is None:
        raise SchemaError(
            f"schema must be a Schema, a RecordType, RecordTypes, a Values or an object with a "
            f".schema, got {type(schema).__name__} {schema!r:.80}",
            value=schema,
        )
    result, carried = found
    if values is None:
        return result, with_declared(carried or Values(result))
    if not isinstance(values, Values):
        raise SchemaError(
            f"values must be a Values, got {type(values).__name__} {values!r:.80}", value=values
        )
    if values.schema is not result:
        raise SchemaError(
            f"values was built for {values.schema!r}, not for the schema given {result!r}: "
            "build it as Values(schema), or pass the Values alone as the schema",
            value=values,
        )
    return result, with_declared(values)


def with_declared(values: Values) -> Values:
    """`values` with the declared value class (`RecordType(..., value=Post)`) as the codec of
    each RecordType that declares one and has no codec registered, so a store reads back the
    type its RecordType promises the type checker."""
    for record_type in values.schema:
        declared = record_type.value_type
        if declared is not None and values.plan(record_type).codec is values.default:
            values.register(record_type, declared)
    return values
