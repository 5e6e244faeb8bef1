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


#: Defaults of --timeout and --retries: a read-only command fails within seconds against a
#: missing bucket or an endpoint that is down, instead of waiting for it as the library does.
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 0


def read_limit_args(parser: argparse.ArgumentParser, *, retries: bool = True) -> None:
    """--timeout and (unless `retries` is False) --retries, for commands that read a database."""
    parser.add_argument(
        "--timeout",
        type=timeout_arg,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=(
            f"give up when opening the database, or one read, takes longer (default "
            f"{DEFAULT_TIMEOUT:g}; 0: wait as long as it takes); for S3 also the limit of one "
            "request"
        ),
    )
    if not retries:
        return
    parser.add_argument(
        "--retries",
        type=retries_arg,
        default=DEFAULT_RETRIES,
        metavar="N",
        help=(
            f"how often SlateDB retries a failed object-store call (default {DEFAULT_RETRIES}; "
            "the object store client retries each request on its own as well)"
        ),
    )


def cache_dir_args(parser: argparse.ArgumentParser) -> None:
    """--cache-dir, for commands that open the database as its writer."""
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=(
            "keep the object-store parts the writer reads in this local directory (SlateDB's "
            "disk cache): reading them again makes no request; default: no disk cache"
        ),
    )


def timeout_arg(text: str) -> float:
    """argparse type for --timeout: seconds >= 0 (0 = no bound)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"timeout must be seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"timeout must be >= 0 seconds, got {text}")
    return value


def poll_arg(text: str) -> float:
    """argparse type for --poll: seconds > 0 (a follower polls the object store that often)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"poll must be seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"poll must be > 0 seconds, got {text}")
    return value


def retries_arg(text: str) -> int:
    """argparse type for --retries: 0 or more."""
    return _int_arg(text, 0, None, "retries")


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
    if high is None and value < low:
        raise argparse.ArgumentTypeError(f"{what} must be >= {low}, got {value}")
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"{what} must be in {low}..{high}, got {value}")
    return value


def nibble_arg(text: str) -> int:
    """argparse type for a record type: 1..15 (0 is reserved), decimal or 0x."""
    return _int_arg(text, 1, 15, "record type (0 is reserved)")


def type_arg(text: str) -> int | str:
    """argparse type for dump --type: a record type number (1..15, decimal or 0x) or, when it
    is not a number, a record name that --schema must define (checked once it is loaded)."""
    try:
        int(text, 0)
    except ValueError:
        if not text or not text.strip():
            raise argparse.ArgumentTypeError("empty record type") from None
        return text
    return nibble_arg(text)


def version_arg(text: str) -> int:
    """argparse type for a key version: 1..255 (0 is reserved)."""
    return _int_arg(text, 1, 255, "version (0 is reserved)")


def count_arg(text: str) -> int:
    """argparse type for a limit: 0 or more."""
    return _int_arg(text, 0, None, "limit")
