"""docs/opendata.md shows real output: its databases are built here as OpenData builds them
(tests/opendata_dbs.py) in the directory the page was recorded in, and every `$ opendata-kv`
line of its ```text blocks must print exactly what the page shows (stdout, then stderr)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import opendata_dbs
import pytest
from clikit import run_in_process

PAGE = Path(__file__).resolve().parent.parent / "docs" / "opendata.md"
#: the working directory of the page's transcripts
SHOWN_DIR = Path("/tmp/docex-opendata")


def transcripts() -> list[tuple[str, str]]:
    """(command, expected output) for each `$ opendata-kv` line of a ```text block."""
    found: list[tuple[str, str]] = []
    in_text = False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_text = line == "```text"
            continue
        if not in_text:
            continue
        if line.startswith("$ opendata-kv "):
            found.append((line[len("$ opendata-kv ") :], ""))
        elif found:
            command, expected = found[-1]
            found[-1] = (command, expected + line + "\n")
    return found


@pytest.fixture(scope="module")
def sample() -> Path:
    shutil.rmtree(SHOWN_DIR, ignore_errors=True)
    for kind in opendata_dbs.KINDS:
        opendata_dbs.build(str(SHOWN_DIR / kind), kind)
    return SHOWN_DIR


def test_page_has_transcripts() -> None:
    commands = [c.split()[0] for c, _ in transcripts()]
    assert {"key", "dump", "stats"} <= set(commands)


@pytest.mark.parametrize(("command", "expected"), transcripts())
def test_transcript(sample: Path, command: str, expected: str) -> None:
    result = run_in_process(*shlex.split(command), cwd=sample)
    assert result.stdout + result.stderr == expected
