"""The command line guide (docs/cli.md) shows real output: every `$ opendata-kv ...` line of
its ```text blocks is run in-process against the guide's own sample database (made by the
guide's blog_schema.py) and must print exactly what the guide shows. Transcripts that need a
state the sample does not have (checkpoints, later writes, damage) sit in plain ``` blocks."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from opendata_kv.cli.main import main

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "cli.md"
#: the working directory the guide's transcripts were recorded in
SHOWN_DIR = "/tmp/docex"

_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Transcript:
    line: int
    command: str
    expected: str


def transcripts(text: str) -> list[Transcript]:
    """Each `$ ` command of the guide's non-Python blocks with the output shown under it."""
    found: list[Transcript] = []
    lines = text.splitlines()
    block: str | None = None
    current: list[str] = []
    start = 0

    def close() -> None:
        if current:
            expected = "\n".join(current[1:]).rstrip("\n")
            found.append(Transcript(start, current[0][2:], expected))
            current.clear()

    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if fence and block is None:
            block = fence.group(1)
            continue
        if fence and block is not None:
            close()
            block = None
            continue
        if block != "text":
            continue
        if line.startswith("$ "):
            close()
            start = number
        if current or line.startswith("$ "):
            current.append(line)
    return found


TRANSCRIPTS = transcripts(GUIDE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def guide_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the guide's blog_schema.py and the ./data it writes."""
    directory = tmp_path_factory.mktemp("docex")
    text = GUIDE.read_text(encoding="utf-8")
    module = text.split("```python\n", 1)[1].split("```", 1)[0]
    (directory / "blog_schema.py").write_text(module, encoding="utf-8")
    subprocess.run(
        [sys.executable, "blog_schema.py"],
        cwd=directory,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=120,
    )
    return directory


def test_the_guide_has_transcripts() -> None:
    assert len(TRANSCRIPTS) >= 10


@pytest.mark.parametrize("shown", TRANSCRIPTS, ids=[f"cli.md:{t.line}" for t in TRANSCRIPTS])
def test_transcript(
    shown: Transcript,
    guide_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(guide_dir)
    monkeypatch.syspath_prepend(str(guide_dir))
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    # credentials as a user has them: without any, the S3 client asks instance metadata first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "guide")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "guide")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    command = shown.command
    while re.match(r"[A-Z_]+=\S* ", command):  # NAME=value in front: the environment
        assignment, _, command = command.partition(" ")
        name, _, value = assignment.partition("=")
        monkeypatch.setenv(name, value)
    stdin = ""
    if command.startswith("printf "):
        printed, _, command = command.partition(" | ")
        stdin = shlex.split(printed)[1].encode().decode("unicode_escape")
    argv = shlex.split(command)
    assert argv[0] == "opendata-kv"
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with contextlib.suppress(SystemExit):  # argparse's usage errors
        main(argv[1:])
    out, err = capsys.readouterr()
    actual = (out + err).rstrip("\n").replace(str(guide_dir), SHOWN_DIR)
    # " ... " in the guide (or " ..." ending a line) stands for text that changes from run to
    # run (timings, how many WAL files a writer's flushes left)
    first, *rest = re.split(r" \.\.\.(?= |\n|$)", shown.expected)
    parts = [first, *(part.removeprefix(" ") for part in rest)]
    pattern = ".*?".join(re.escape(part) for part in parts)
    assert re.fullmatch(pattern, actual, re.DOTALL), (
        f"docs/cli.md:{shown.line} shows other output; now:\n{actual}"
    )
