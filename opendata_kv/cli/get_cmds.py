"""`opendata-kv get DB KEY`: one record by its key, decoded as `dump` decodes it, read-only.

KEY is hex, base64 with --base64, or with --schema a record name followed by its field values
(parsed as `key encode` parses them). Exit 0 with the record, 1 when there is none (absent,
or its TTL has passed) or it does not decode (shown raw with the reason, as dump shows it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from opendata_kv.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    CliError,
    add_json_flag,
    emit_json,
    parse_base64,
    parse_hex,
)
from opendata_kv.cli.db_args import database_arg, read_limit_args, schema_args
from opendata_kv.cli.db_read import ReadLimits, checkpoint_arg, open_reader
from opendata_kv.cli.dump_cmds import DumpTable
from opendata_kv.cli.field_text import parse_field
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.rows import Decoder
from opendata_kv.errors import SchemaError, show_bytes
from opendata_kv.store.expiry import now_ms


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `get`."""
    get = subparsers.add_parser(
        "get",
        help="print one record by its key (read-only)",
        description=(
            "Print the record stored under one key, decoded as `dump` decodes it, read-only "
            "(never fences the writer). KEY is hex, base64 with --base64, or with --schema a "
            "RECORD name followed by its FIELD values (as `key encode` takes them). Exit 1 "
            "when no live record is there (absent, or its TTL has passed) or it does not decode."
        ),
    )
    get.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    get.add_argument("key", metavar="KEY", help="the key: hex, base64 (--base64) or a RECORD name")
    get.add_argument(
        "fields", nargs="*", metavar="FIELD", help="with --schema: RECORD's field values"
    )
    get.add_argument("--base64", action="store_true", help="KEY is base64 (standard or URL-safe)")
    get.add_argument(
        "--version",
        type=int,
        metavar="V",
        help="with RECORD FIELD...: the key version of RECORD (default: the newest)",
    )
    schema_args(get)
    checkpoint_arg(get)
    layout_arg(get)
    read_limit_args(get)
    add_json_flag(get)
    get.set_defaults(handler=run_get)


def key_from_args(args: argparse.Namespace, decoder: Decoder) -> bytes:
    """The raw key KEY (and FIELD...) name."""
    schema = decoder.schema
    typed = schema is not None and (args.fields or args.key in schema.names())
    if not typed:
        if args.fields:
            raise CliError(
                f"FIELD values need --schema and a RECORD name as KEY; got {len(args.fields)} "
                "after a key"
            )
        key = parse_base64(args.key) if args.base64 else parse_hex(args.key)
        return (decoder.keyspace or b"") + key
    assert schema is not None
    try:
        record_type = schema.get(args.key, args.version)
    except SchemaError as exc:
        raise CliError(str(exc)) from None
    names = record_type.field_names
    if len(args.fields) != len(names):
        raise CliError(
            f"{record_type.name} v{record_type.version} has {len(names)} fields "
            f"{list(names)}, got {len(args.fields)} values"
        )
    values = [
        parse_field(record_type.name, name, field, text)
        for (name, field), text in zip(record_type.fields, args.fields, strict=True)
    ]
    return (decoder.keyspace or b"") + record_type.encode(*values)


def run_get(args: argparse.Namespace) -> int:
    """Print the record under KEY: a one-row table, or with --json one object with dump's
    fields (key_hex, record, fields, value | value_hex, value_size, error, ...) and
    `found`, `expire_at` (Unix ms or null); absent: {"key_hex", "found": false, "expired"}."""
    decoder = Decoder.from_args(args)
    key = key_from_args(args, decoder)
    return asyncio.run(_get(args, decoder, key))


async def _get(args: argparse.Namespace, decoder: Decoder, key: bytes) -> int:
    limits = ReadLimits.from_args(args)
    store = await open_reader(args.db, limits, args.checkpoint, check_expiry=False)
    try:
        expiries: dict[bytes, int] = {}
        (data,) = await limits.bound(store._fetch_many([key], expiries), f"read {store.where}")
    finally:
        await store.close()
    expire_at = expiries.get(key)
    expired = data is not None and expire_at is not None and expire_at <= now_ms()
    if data is None or expired:
        if args.json:
            emit_json({"key_hex": key.hex(), "found": False, "expired": expired})
        why = f"its TTL passed at {expire_at} ms" if expired else "none stored"
        sys.stdout.flush()
        sys.stderr.write(f"opendata-kv: no record under key {show_bytes(key)} ({why})\n")
        return EXIT_BAD_INPUT
    row = decoder.row(key, data, with_values=True)
    if args.json:
        emit_json({**row.obj, "found": True, "expire_at": expire_at})
    else:
        with_fields = True if decoder.schema is not None or decoder.layout == "opendata" else None
        DumpTable(sys.stdout, with_fields=with_fields).rows([row])
        if expire_at is not None:
            sys.stdout.write(f"(expires at {expire_at} ms, Unix time)\n")
    if row.obj["error"]:
        sys.stdout.flush()
        sys.stderr.write(
            "opendata-kv: error: the record did not decode (shown raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK
