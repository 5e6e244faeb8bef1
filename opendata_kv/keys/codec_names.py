"""Field codecs by the names they are stored under (an index definition, RFC 0010, names
each field's codec with `public_name or kind`): the inverse of that naming, so a reader that
never saw the declaration can rebuild the codecs and decode what was written with them.

    field_named("u64") is fields.u64
    field_named("desc(string)") == fields.desc(fields.string)
    field_named("fixed(16)") == fields.fixed(16)
"""

from __future__ import annotations

import re

from opendata_kv.errors import SchemaError
from opendata_kv.keys import fields
from opendata_kv.keys.codecs import _PUBLIC, Field

_CALL = re.compile(r"(?P<name>[a-z_]+)\((?P<arg>.*)\)\Z", re.DOTALL)


def codec_name(field: Field) -> str:
    """The name a stored definition gives `field` (its keys.fields name, else its kind)."""
    return field.public_name or field.kind


def field_named(name: str) -> Field:
    """The codec stored under `name`: a keys.fields name (`u64`, `bytes_`) or kind (`bytes`,
    `bool`), `desc(<name>)`, `fixed(<n>)`, `rkey` or `rkey(<key type>)`. SchemaError naming
    it for anything else (typed codecs need their RecordType and are never stored by name)."""
    if not isinstance(name, str):
        raise SchemaError(f"a field codec name is a string, got {name!r}", value=name)
    found = _PUBLIC.get(name) or _by_kind().get(name)
    if found is not None:
        return found
    if name == "rkey":
        return fields.rkey()
    call = _CALL.match(name)
    if call is not None:
        inner, arg = call["name"], call["arg"]
        try:
            if inner == "desc":
                return fields.desc(field_named(arg))
            if inner == "fixed" and arg.isascii() and arg.isdigit() and arg == str(int(arg)):
                return fields.fixed(int(arg))
            if inner == "rkey" and arg:
                return fields.rkey(arg)
        except SchemaError as exc:
            raise SchemaError(f"field codec {name!r}: {exc}", value=name) from None
    raise SchemaError(
        f"no field codec is named {name!r} (known: {sorted(_PUBLIC)}, desc(...), fixed(n), "
        "rkey(...))",
        value=name,
    )


def _by_kind() -> dict[str, Field]:
    return {codec.kind: codec for codec in _PUBLIC.values()}
