"""`opendata-kv key encode RECORD FIELD... --schema S`: the key bytes of field values, the
inverse of `key inspect` (one field value per argument, each parsed by its codec as
cli/field_text.py describes). Works on the schema alone: never opens a database."""

from __future__ import annotations

import argparse
import sys

from opendata_kv.cli.common import EXIT_OK, CliError, add_json_flag, emit_json, load_schema
from opendata_kv.cli.field_text import parse_field
from opendata_kv.cli.key_description import describe_key
from opendata_kv.errors import SchemaError


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `key encode` to the `key` command's actions."""
    encode = actions.add_parser(
        "encode",
        help="the key bytes of a record's field values (needs --schema)",
        description=(
            "Print the key of RECORD (a record name of the schema) with these FIELD values, "
            "as hex, in key order. Integers may be decimal or 0x hex, bytes are hex, muids "
            "their string form, booleans true/false; text fields are taken as written. With "
            "--prefix, leading fields only: the prefix every such key starts with (for "
            "`dump --prefix`). --json prints what `key inspect --json` prints for the key."
        ),
    )
    encode.add_argument("record", metavar="RECORD", help="record name in the schema")
    encode.add_argument("fields", nargs="*", metavar="FIELD", help="field values, in key order")
    encode.add_argument(
        "--schema",
        metavar="MODULE:ATTR",
        required=True,
        help="the Schema (module:attr or ./file.py:attr) that defines RECORD",
    )
    encode.add_argument(
        "--version",
        type=int,
        metavar="V",
        help="key version of RECORD (default: the newest in the schema)",
    )
    encode.add_argument(
        "--prefix",
        action="store_true",
        help="allow fewer fields than the record has: print the prefix of those keys",
    )
    add_json_flag(encode)
    encode.set_defaults(handler=run_encode)


def run_encode(args: argparse.Namespace) -> int:
    spec = load_schema(args.schema)
    try:
        record_type = spec.schema.get(args.record, args.version)
    except SchemaError as exc:
        raise CliError(str(exc)) from None
    names = record_type.field_names
    texts: list[str] = args.fields
    if len(texts) > len(names) or (len(texts) < len(names) and not args.prefix):
        missing = ""
        if len(texts) < len(names):
            missing = f"; missing {list(names[len(texts) :])} (or give --prefix)"
        raise CliError(
            f"{record_type.name} v{record_type.version} has {len(names)} fields "
            f"{list(names)}, got {len(texts)} values{missing}"
        )
    values = [
        parse_field(record_type.name, name, field, text)
        for (name, field), text in zip(record_type.fields, texts, strict=False)
    ]
    whole = len(values) == len(names)
    key = record_type.encode(*values) if whole else record_type.prefix(*values)
    if not args.json:
        sys.stdout.write(key.hex() + "\n")
    elif whole:
        emit_json(describe_key(key, spec.schema, None))
    else:
        emit_json(
            {"record": record_type.name, "version": record_type.version, "prefix_hex": key.hex()}
        )
    return EXIT_OK
