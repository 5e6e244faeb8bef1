"""What a record key's bytes mean, as the JSON result of `key inspect` and `key encode`:
shared by both commands' modules, so neither imports the other."""

from __future__ import annotations

from typing import Any

from opendata_kv.cli.common import CliError, jsonable
from opendata_kv.keys import Schema, parse_prefix


def describe_key(key: bytes, schema: Schema | None, keyspace: bytes | None) -> dict[str, Any]:
    """The JSON result for one key (`key inspect --json`); KeyDecodeError when it is bad.

    With a schema the whole key must decode: an unknown prefix, a truncated field or extra
    bytes after the last field are errors, and `rest_hex` is "" (nothing left undecoded).
    Without one, only the prefix is decoded and `rest_hex` holds every byte after it.
    """
    owner = schema.try_record_type_of(key) if schema is not None else None
    if owner is not None and keyspace is not None and owner.keyspace != keyspace:
        raise CliError(
            f"key {key.hex()} belongs to {owner.name!r} in keyspace "
            f"{owner.keyspace.hex() or '(none)'}, not in --keyspace {keyspace.hex() or '(none)'}"
        )
    if keyspace is None:
        keyspace = owner.keyspace if owner is not None else guess_keyspace(schema, key)
    prefix = parse_prefix(key, keyspace)  # short keys, reserved version / record type
    head = len(keyspace) + 2
    record: str | None = None
    fields: dict[str, Any] | None = None
    rest = key[head:]
    if schema is not None:
        # record_type_of raises UnknownRecordError naming the prefix when no one owns it
        record_type = owner if owner is not None else schema.record_type_of(key)
        decoded = record_type.decode(key)
        record = record_type.name
        fields = {name: jsonable(value) for name, value in decoded.asdict().items()}
        rest = b""
    return {
        "key_hex": key.hex(),
        "keyspace_hex": keyspace.hex(),
        "prefix_hex": key[:head].hex(),
        "version": prefix.version,
        "record_type": prefix.record_type,
        "reserved": prefix.reserved,
        "record": record,
        "fields": fields,
        "rest_hex": rest.hex(),
    }


def guess_keyspace(schema: Schema | None, key: bytes) -> bytes:
    """The longest keyspace of `schema` that `key` starts with; b"" when there is none."""
    if schema is None:
        return b""
    candidates = [t.keyspace for t in schema if t.keyspace and key.startswith(t.keyspace)]
    return max(candidates, key=len, default=b"")
