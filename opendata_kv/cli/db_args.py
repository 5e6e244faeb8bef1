"""argparse types and flags shared by the commands that read a database: the DB location,
--schema/--keyspace, record type and version numbers, limits."""

from __future__ import annotations

import argparse


def schema_args(parser: argparse.ArgumentParser) -> None:
    """--schema and --keyspace, for commands that decode keys read from a database."""
    parser.add_argument(
        "--schema",
        metavar="MODULE:ATTR",
        help="name records and decode fields with this Schema (or Values, or a callable)",
    )
    parser.add_argument(
        "--keyspace",
        metavar="HEX",
        help="only keys in this keyspace; the version byte follows it",
    )


def database_arg(text: str) -> str:
    """argparse type for DB: memory:// databases live inside one process, so they are usage."""
    if text.lower().startswith("memory:"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a memory:// database exists only inside the process that made it; "
            "give a directory, file:///abs/path or s3://bucket/prefix"
        )
    if not text:
        raise argparse.ArgumentTypeError("empty database location")
    return text


def _int_arg(text: str, low: int, high: int | None, what: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        top = "" if high is None else f"..{high}"
        raise argparse.ArgumentTypeError(f"{what} must be in {low}{top}, got {value}")
    return value


def nibble_arg(text: str) -> int:
    """argparse type for a record type: 1..15 (0 is reserved), decimal or 0x."""
    return _int_arg(text, 1, 15, "record type (0 is reserved)")


def version_arg(text: str) -> int:
    """argparse type for a key version: 1..255 (0 is reserved)."""
    return _int_arg(text, 1, 255, "version (0 is reserved)")


def count_arg(text: str) -> int:
    """argparse type for a limit: 0 or more."""
    return _int_arg(text, 0, None, "limit")
