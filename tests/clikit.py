"""Running `opendata-kv` from tests, two ways.

`run_in_process` calls opendata_kv.cli.main.main(argv) with stdin, stdout and stderr swapped
for strings: no interpreter or slatedb start-up per call, so most CLI tests use it. It puts
back what a command may change (environment, cwd, sys.path, the modules a --schema imported)
so calls stay independent. `run_process` starts the real entry point (`python -m
opendata_kv`) for the few tests that prove exit statuses, stdio handling and the
no-traceback rule end to end.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
#: the environment of a child Python that imports opendata_kv (and tests/ helpers) from here
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
CHILD_ENV.pop("PYTHONSTARTUP", None)


def json_lines(text: str) -> list[dict[str, Any]]:
    """One JSON object per output line (--json output, or `-` mode)."""
    return [json.loads(line) for line in text.splitlines()]


@dataclass(frozen=True)
class CliResult:
    """What one run printed and the exit status it ended with."""

    returncode: int
    stdout: str
    stderr: str


def run_process(
    *args: str,
    stdin: str | bytes | None = None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> CliResult:
    """`python -m opendata_kv ARGS` in a child process; `env` adds to the child's variables.
    Bytes on stdin are passed as they are (and the output decoded with surrogateescape)."""
    result = subprocess.run(
        [sys.executable, "-m", "opendata_kv", *args],
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        env={**CHILD_ENV, **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )
    return CliResult(
        result.returncode,
        result.stdout.decode("utf-8", "surrogateescape"),
        result.stderr.decode("utf-8", "surrogateescape"),
    )


@contextlib.contextmanager
def _restored_process_state() -> Iterator[None]:
    environ, path, cwd, modules = dict(os.environ), list(sys.path), os.getcwd(), set(sys.modules)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            # a --schema module a test wrote in a temporary folder: forget it, so the next
            # test's module of the same name is imported afresh (library modules stay)
            file = getattr(sys.modules[name], "__file__", None) or ""
            if not file.startswith((str(REPO), sys.prefix, sys.base_prefix)):
                del sys.modules[name]


def _main(args: tuple[str, ...], stdin: Any, out: Any, err: Any) -> int:
    from opendata_kv.cli.main import main

    stdin_before = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                return main(list(args))
            except SystemExit as exc:  # argparse: usage errors and --help
                code = exc.code
                return code if isinstance(code, int) else 0 if code is None else 1
    finally:
        sys.stdin = stdin_before


def run_in_process(
    *args: str,
    stdin: str | None = None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
) -> CliResult:
    """opendata_kv.cli.main.main(ARGS) in this process; `env` adds to os.environ for the call.
    argparse's SystemExit (usage errors, --help) becomes the exit status, as in a process."""
    out, err = io.StringIO(), io.StringIO()
    with _restored_process_state():
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        status = _main(args, io.StringIO(stdin or ""), out, err)
    return CliResult(status, out.getvalue(), err.getvalue())


def run_in_process_bytes(*args: str, stdin: bytes, strict_io: bool) -> tuple[int, bytes, bytes]:
    """Like run_in_process, with byte-level stdio as a process has it: UTF-8 text streams over
    bytes, erroring on undecodable bytes when `strict_io` (PYTHONIOENCODING=utf-8:strict, a
    strict UTF-8 locale) or escaping them (surrogateescape, Python's C-locale default).
    Returns (status, stdout bytes, stderr bytes)."""
    errors = "strict" if strict_io else "surrogateescape"
    streams = [
        io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors, newline="\n")
        for data in (stdin, b"", b"")
    ]
    with _restored_process_state():
        status = _main(args, *streams)
    for stream in streams[1:]:
        stream.flush()
    out, err = (stream.buffer.getvalue() for stream in streams[1:])
    return status, out, err
