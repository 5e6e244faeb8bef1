"""Entry point of `opendata-kv`: builds the parser from the command modules and maps errors
to exit codes (0 ok, also when the reader of a pipe left early; 1 bad input with one line on
stderr, 2 usage, 130 interrupted by Ctrl-C)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from opendata_kv.cli.common import EXIT_INTERRUPTED, EXIT_OK, fail
from opendata_kv.cli.text import EscapingStream
from opendata_kv.errors import OpendataKvError

# Each module defines register(subparsers); the handler is stored as the `handler` default.
COMMAND_MODULES: tuple[str, ...] = (
    "opendata_kv.cli.ids_cmds",
    "opendata_kv.cli.inspect_cmds",
    "opendata_kv.cli.dump_cmds",
    "opendata_kv.cli.get_cmds",
    "opendata_kv.cli.tree_cmds",
    "opendata_kv.cli.export_cmds",
    "opendata_kv.cli.import_cmds",
    "opendata_kv.cli.stats_cmds",
    "opendata_kv.cli.changes_cmds",
    "opendata_kv.cli.checkpoint_cmds",
    "opendata_kv.cli.verify_cmds",
    "opendata_kv.cli.index_cmds",
    "opendata_kv.cli.jetstream_cmds",
    "opendata_kv.cli.demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, one subcommand group per command module."""
    parser = argparse.ArgumentParser(
        prog="opendata-kv",
        description="Inspect opendata_kv keys and SlateDB databases; TID, rkey, muid, URL keys.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        nargs=0,
        help="show the version and the active native path, then exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    return parser


def version_text() -> str:
    """`opendata-kv X (slatedb Y, Python Z)`, without loading slatedb's native library."""
    from importlib import metadata

    from opendata_kv import __version__

    try:
        slatedb = metadata.version("slatedb")
    except metadata.PackageNotFoundError:
        slatedb = "not installed"
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"opendata-kv {__version__} (slatedb {slatedb}, Python {python})"


def native_path_text() -> str:
    """Which native path is active (loads slatedb and runs the self-checks: --version only)."""
    from opendata_kv.native import accel, calls

    return accel.describe(calls.status())


class _VersionAction(argparse.Action):
    """--version: the version line and the native path, computed only when asked for."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"{version_text()}; {native_path_text()}\n")
        parser.exit()


def _tolerate_undecodable_stdio() -> None:
    """Bytes on stdin that are not UTF-8 are bad input like any other line: read them with
    surrogateescape and echo them back the same way, as Python already does under the C
    locale, instead of dying with UnicodeDecodeError under a strict UTF-8 locale."""
    for stream in (sys.stdin, sys.stdout):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="surrogateescape")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user for bad input."""
    _tolerate_undecodable_stdio()
    parser = build_parser()
    args = parser.parse_args(argv)
    stdout = sys.stdout
    sys.stdout = EscapingStream(stdout)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
    except OpendataKvError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        sys.stderr.write("opendata-kv: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_left(stdout)
    finally:
        sys.stdout = stdout
    return status


def _reader_left(stdout: TextIO) -> int:
    """The reader closed the pipe (`dump DB | head -1`): as `head` wanted, not a failure, so
    exit 0 without a word (docs/cli.md). stdout is pointed at /dev/null, so the flush at exit
    cannot raise again for the output still buffered."""
    try:
        fileno = stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test's StringIO): nothing to redirect
        return EXIT_OK
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
