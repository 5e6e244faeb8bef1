"""Pipes and --json shapes (issue 28, point 8): a reader that closes the pipe early
(`dump DB | head -1`) ends the command with exit 0 and nothing on stderr, so a pipeline under
`set -o pipefail` stays healthy; listings print JSON Lines (one object per line, no wrapper),
reports one object (docs/cli.md)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest
from clikit import CHILD_ENV, json_lines, run_in_process

from opendata_kv import Index, RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.cli import main as cli_main
from opendata_kv.store import SyncStore

ITEM = RecordType("item", 3, [("n", F.u32)])
SCHEMA = Schema(ITEM)
BY_COLOUR = Index("by_colour", "item", [("colour", F.string)])
#: enough rows that dump's output is many times a pipe's 64 KiB buffer
ROWS = 3000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("pipes") / "db")
    with SyncStore.open(path, SCHEMA, indexes=[BY_COLOUR]) as store:
        store.put_many((ITEM, (n,), {"colour": "red" if n % 2 else "blue"}) for n in range(ROWS))
        store.build_index("by_colour")
        store.flush()
    return path


def _first_line_then_close(*args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Run the real entry point, read one line of its stdout and close the pipe, as
    `head -1` does; the exit status, that line and all of stderr."""
    child = subprocess.Popen(
        [sys.executable, "-m", "opendata_kv", *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=CHILD_ENV,
    )
    assert child.stdout is not None and child.stderr is not None
    if stdin is not None:  # fed from a thread: the child's stdout fills while it reads
        feeder = threading.Thread(target=_feed, args=(child.stdin, stdin), daemon=True)
        feeder.start()
    first = child.stdout.readline()
    child.stdout.close()
    stderr = child.stderr.read()
    return child.wait(timeout=60), first, stderr


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    assert pipe is not None
    try:
        pipe.write(data)
        pipe.close()
    except BrokenPipeError:  # the child may exit before it read everything
        pass


@pytest.mark.parametrize(
    "argv",
    [
        ("dump", "{db}"),
        ("dump", "{db}", "--json", "--indexes", "--values"),
        ("changes", "{db}"),
        ("changes", "{db}", "--json"),
        ("tid", "new", "-n", "100000"),
    ],
    ids=" ".join,
)
def test_a_reader_closing_the_pipe_is_exit_0_and_silent(db: str, argv: tuple[str, ...]) -> None:
    status, first, stderr = _first_line_then_close(*(a.replace("{db}", db) for a in argv))
    assert first  # it did print
    assert (status, stderr) == (0, b"")


def test_stdin_mode_whose_reader_leaves_is_exit_0_and_silent() -> None:
    keys = b"".join(b"0110%04x\n" % n for n in range(20000))
    status, first, stderr = _first_line_then_close("key", "inspect", "-", stdin=keys)
    assert json.loads(first)["key_hex"] == "01100000"
    assert (status, stderr) == (0, b"")


def test_broken_pipe_in_process_returns_0(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert cli_main.main(["dump", db]) == 0


#: each listing with the member every one of its items has (a wrapper would lack it)
LISTINGS = [
    (("dump", "{db}", "--indexes"), "key_hex"),
    (("changes", "{db}"), "key_hex"),
    (("checkpoint", "list", "{db}"), "id"),
    (("index", "list", "{db}"), "name"),
]
REPORTS = [("stats", "{db}"), ("verify", "{db}"), ("key", "inspect", "0130000000")]


@pytest.mark.parametrize(("argv", "member"), LISTINGS, ids=lambda a: " ".join(a))
def test_a_listing_is_json_lines_without_a_wrapper(
    db: str, argv: tuple[str, ...], member: str
) -> None:
    if argv[0] == "checkpoint":
        assert run_in_process("checkpoint", "create", db).returncode == 0
    result = run_in_process(*(a.replace("{db}", db) for a in argv), "--json")
    assert result.returncode == 0, result.stderr
    objects = json_lines(result.stdout)
    assert objects and all(isinstance(obj, dict) and member in obj for obj in objects)
    if argv[0] == "index":
        assert [obj["name"] for obj in objects] == ["by_colour"]


def test_an_empty_listing_prints_nothing(db: str, tmp_path: Path) -> None:
    assert run_in_process("dump", db, "--prefix", "ff", "--json").stdout == ""
    bare = str(tmp_path / "bare")
    with SyncStore.open(bare, SCHEMA) as store:
        store.put(ITEM, (1,), {})
    for argv in (("index", "list", bare), ("checkpoint", "list", bare)):
        result = run_in_process(*argv, "--json")
        assert (result.returncode, result.stdout) == (0, ""), result.stderr


@pytest.mark.parametrize("argv", REPORTS, ids=" ".join)
def test_a_report_is_one_object(db: str, argv: tuple[str, ...]) -> None:
    result = run_in_process(*(a.replace("{db}", db) for a in argv), "--json")
    assert result.returncode == 0, result.stderr
    (obj,) = json_lines(result.stdout)
    assert isinstance(obj, dict)


def test_dump_lists_the_records_before_any_index_row(db: str) -> None:
    rows = json_lines(run_in_process("dump", db, "--indexes", "--json").stdout)
    flags = [r.get("layout") == "index" for r in rows]
    assert flags.index(True) == ROWS and all(flags[ROWS:])  # every record, then index rows
    assert sum(flags) == ROWS + 2  # one entry per item, the metadata row and the catalog
    assert not any(
        r.get("layout") == "index"
        for r in json_lines(run_in_process("dump", db, "--json", "--limit", "5").stdout)
    )
    limited = json_lines(run_in_process("dump", db, "--indexes", "--json", "--limit", "5").stdout)
    assert [r.get("layout") for r in limited] == [None] * 5  # the limit counts records first
