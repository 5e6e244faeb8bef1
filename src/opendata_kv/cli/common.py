"""What every subcommand shares: JSON output, `-` for many values on stdin, exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opendata_kv.errors import OpendataKvError

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2

Result = Mapping[str, Any]


class CliError(OpendataKvError):
    """A failure the command line reports as one line on stderr with exit code 1."""


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Every subcommand takes --json."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def emit_json(obj: Any) -> None:
    """Print one JSON line (compact, UTF-8 kept readable)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n")


def fail(message: str) -> int:
    """Report one clear line on stderr and return the bad-input exit code."""
    sys.stderr.write(f"opendata-kv: error: {message}\n")
    return EXIT_BAD_INPUT


def stdin_values() -> Iterator[str]:
    """Lines of stdin without their line ending; blank lines are skipped."""
    for line in sys.stdin:
        value = line.rstrip("\r\n")
        if value:
            yield value


def run_each(
    values: list[str],
    compute: Callable[[str], Result],
    as_text: Callable[[Result], str],
    *,
    as_json: bool,
    ok: Callable[[Result], bool] = lambda _r: True,
) -> int:
    """Apply `compute` to one value, or to every stdin line when the value is `-`.

    A single value: its result as text or JSON; bad input exits 1 with one line on stderr.
    With `-`: one JSON line per input; a bad line prints {"input", "error"} and the run goes on,
    exiting 1 at the end. `ok` says whether a computed result counts as success (validate).
    """
    if values != ["-"]:
        status = EXIT_OK
        for value in values:
            try:
                result = compute(value)
            except OpendataKvError as exc:
                return fail(str(exc))
            if as_json:
                emit_json(result)
            else:
                sys.stdout.write(as_text(result) + "\n")
            if not ok(result):
                status = EXIT_BAD_INPUT
        return status
    status = EXIT_OK
    for value in stdin_values():
        try:
            result = compute(value)
        except OpendataKvError as exc:
            emit_json({"input": value, "error": str(exc)})
            status = EXIT_BAD_INPUT
            continue
        emit_json(result)
        if not ok(result):
            status = EXIT_BAD_INPUT
    return status
