"""--layout auto|opendata|seed|none: which key layout the inspection commands read keys with
when no --schema is given (RFC 0009), and the JSON of an OpenData key.

auto (the default): a key that starts with the subsystem and version bytes of one of
OpenData's layouts (01 02, 02 00 01, 02 01 01, 02 02 01, 03 01, 04 01) is an OpenData key; any
other key is a seed key ([version][tag], RFC 0001). No valid seed key is read as OpenData: its
second byte, the tag, is 0x10 or more.
"""

from __future__ import annotations

import argparse
from typing import Any

from opendata_kv.cli.common import CliError, jsonable
from opendata_kv.keys import Key
from opendata_kv.layouts import opendata

LAYOUTS = ("auto", "opendata", "seed", "none")


def layout_arg(parser: argparse.ArgumentParser) -> None:
    """Add --layout."""
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="auto",
        help="how to read keys without --schema: auto (OpenData keys by their subsystem "
        "byte, others as seed keys; the default), opendata, seed (the 2-byte "
        "[version][tag] prefix), none (bytes only)",
    )


def check_layout(layout: str, schema_given: bool) -> str:
    """The layout to use; CliError when --layout contradicts --schema."""
    if schema_given and layout not in ("auto", "seed"):
        raise CliError(f"--layout {layout} and --schema exclude each other")
    return layout


def reads_as_opendata(layout: str, key: bytes) -> bool:
    """True when `key` is read with OpenData's layouts under `layout`."""
    return layout == "opendata" or (layout == "auto" and opendata.is_opendata_key(key))


def opendata_object(key: bytes, decoded: Key) -> dict[str, Any]:
    """The JSON of one decoded OpenData key: layout, subsystem, record, fields, and the prefix
    bytes read (subsystem, vector's segment, version, record tag)."""
    record_type = decoded.record_type
    obj: dict[str, Any] = {
        "key_hex": key.hex(),
        "layout": "opendata",
        "subsystem": opendata.SUBSYSTEMS[key[0]],
        "record": record_type.name,
        "fields": {name: jsonable(value) for name, value in decoded.asdict().items()},
        "version": record_type.version,
        "record_tag": record_type.tag_byte,
    }
    segment = opendata.segment_name(decoded)
    if segment is not None:
        obj["segment"] = segment
    if record_type.suffix:
        obj["suffix_hex"] = record_type.suffix.hex()
    obj["rest_hex"] = ""
    return obj
