"""`opendata-kv key inspect`: what a key's bytes mean.

    opendata-kv key inspect 0110646964...            prefix, version, record type, rest as hex
    opendata-kv key inspect KEY --schema app:SCHEMA  + record name and decoded fields
    opendata-kv key inspect - < keys.txt             one JSON line per key

Works on the key alone: never opens a database (and never loads slatedb).
"""

from __future__ import annotations

import argparse
from typing import Any

from opendata_kv.cli.common import (
    CliError,
    Result,
    SchemaSpec,
    add_json_flag,
    aligned,
    load_schema,
    parse_base64,
    parse_hex,
    run_each,
)
from opendata_kv.cli.key_description import describe_key
from opendata_kv.cli.layout_arg import (
    check_layout,
    layout_arg,
    opendata_object,
    reads_as_opendata,
)
from opendata_kv.cli.text import json_text
from opendata_kv.keys import Schema, record_type_text
from opendata_kv.layouts import opendata


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `key inspect`."""
    key = subparsers.add_parser(
        "key",
        help="decode (inspect) and build (encode) record keys",
        description="Work with opendata_kv record keys.",
    )
    actions = key.add_subparsers(dest="key_command", metavar="ACTION", required=True)
    inspect = actions.add_parser(
        "inspect",
        help="decode a key: prefix, version, record type, fields",
        description=(
            "Decode a record key. Without --schema: an OpenData key (starting 0102, "
            "020001, 020101, 020201, 0301 or 0401) is decoded with OpenData's built-in "
            "layouts (layout, subsystem, record, fields), any other key by its 2-byte seed "
            "prefix (version, record type, reserved bits) with the rest as hex; --layout "
            "chooses explicitly. With --schema: also the record name and its decoded fields "
            '(rest_hex is then ""). KEY is hex (0x optional, any case, spaces '
            "allowed, may be split over several arguments) or base64 with --base64; `-` reads "
            "one key per stdin line and prints one JSON line each."
        ),
    )
    inspect.add_argument("key", nargs="+", metavar="KEY", help="the key, or - for stdin")
    inspect.add_argument("--base64", action="store_true", help="KEY is base64, not hex")
    inspect.add_argument(
        "--schema",
        metavar="MODULE:ATTR",
        help="decode with this Schema (or Values, or a callable returning one)",
    )
    inspect.add_argument(
        "--keyspace",
        metavar="HEX",
        help="bytes in front of the version byte (default: none, or the schema's keyspace)",
    )
    layout_arg(inspect)
    add_json_flag(inspect)
    inspect.set_defaults(handler=run_inspect)

    from opendata_kv.cli import encode_cmds  # `key encode` lives in its own module

    encode_cmds.register(actions)


def run_inspect(args: argparse.Namespace) -> int:
    layout = check_layout(args.layout, bool(args.schema))
    spec = load_schema(args.schema) if args.schema else None
    keyspace = parse_hex(args.keyspace, "keyspace") if args.keyspace else None
    inspector = KeyInspector(spec, keyspace, base64=args.base64, layout=layout)
    values = ["-"] if args.key == ["-"] else [" ".join(args.key)]
    if "-" in args.key and values != ["-"]:
        raise CliError("`-` (read keys from stdin) must be the only KEY argument")
    return run_each(values, inspector.inspect, inspector.as_text, as_json=args.json)


class KeyInspector:
    """Decodes one key given as text into the `key inspect` result."""

    def __init__(
        self,
        spec: SchemaSpec | None,
        keyspace: bytes | None,
        *,
        base64: bool,
        layout: str = "auto",
    ) -> None:
        self.schema: Schema | None = spec.schema if spec else None
        self.keyspace = keyspace
        self.base64 = base64
        self.layout = layout

    def inspect(self, text: str) -> Result:
        key = parse_base64(text) if self.base64 else parse_hex(text)
        if self.schema is None and self.keyspace is None:
            if reads_as_opendata(self.layout, key):
                return opendata_object(key, opendata.decode_key(key))
            if self.layout == "none":
                return {"key_hex": key.hex(), "layout": "none", "rest_hex": key.hex()}
        # a seed key's object is unchanged (no "layout" member): its fields are DESIGN's
        return describe_key(key, self.schema, self.keyspace)

    def as_text(self, result: Result) -> str:
        pairs = [("key", result["key_hex"])]
        if result.get("layout") == "opendata":
            pairs += [("layout", "opendata"), ("subsystem", result["subsystem"])]
            if "segment" in result:
                pairs.append(("segment", result["segment"]))
            pairs += [("version", str(result["version"])), ("record", result["record"])]
            pairs += [(f"  {n}", show_value(v)) for n, v in result["fields"].items()]
            return aligned(pairs)
        if result.get("layout") == "none":
            return aligned([*pairs, ("layout", "none (bytes only)")])
        if result["keyspace_hex"]:
            pairs.append(("keyspace", result["keyspace_hex"]))
        pairs += [
            ("prefix", result["prefix_hex"]),
            ("version", str(result["version"])),
            ("record type", record_type_text(result["record_type"])),
            ("reserved", str(result["reserved"])),
        ]
        if self.schema is not None:
            pairs.append(("record", result["record"]))
            record_type = self.schema.get(result["record"], result["version"])
            kinds = dict(record_type.fields)
            for name, value in (result["fields"] or {}).items():
                pairs.append((f"  {name}", f"{show_value(value)}  ({kinds[name].kind})"))
        rest = result["rest_hex"]
        if self.schema is not None:
            pairs.append(("rest", "(none: every byte decoded)"))
        else:
            pairs.append(("rest", f"{rest}  ({len(rest) // 2} bytes)" if rest else "(empty)"))
        return aligned(pairs)


def show_value(value: Any) -> str:
    """A JSON-friendly field value for text output: plain when unambiguous, else JSON."""
    if isinstance(value, str) and value and value == value.strip() and value.isprintable():
        return value
    return json_text(value, compact=False)
