"""The progress line of the long commands (cli/progress.py): a count, a rate and, with a total
from the manifest, how far and how long; drawn on a terminal's stderr only (a pseudo-terminal
here), never when stderr is piped or with --json."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from indexkit import SCHEMA as INDEXED
from indexkit import post

from opendata_kv.cli.progress import ENV_DELAY, Progress
from opendata_kv.store import SyncStore
from tests.clikit import CHILD_ENV

ENV = {**CHILD_ENV, ENV_DELAY: "0"}  # draw from the first batch on


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_and_estimate_from_a_known_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_DELAY, raising=False)
    clock = Clock()
    shown = Terminal()
    bar = Progress(shown, "exported", total_bytes=4096, clock=clock)
    bar.update(10, 100)
    assert shown.getvalue() == ""  # the first second shows nothing
    clock.now += 2.0
    bar.update(1000, 1024)
    line = shown.getvalue().rpartition("\r\x1b[K")[2]
    assert line == "exported 1,000 records, 1.0 KiB, 500 records/s, 25% of ~4.0 KiB, about 6s left"
    clock.now += 6.0
    bar.update(4000, 5000)  # past the estimate: no time left is claimed
    assert shown.getvalue().endswith("4,000 records, 4.9 KiB, 500 records/s, 100% of ~4.0 KiB")
    clock.now += 1.0
    bar.step(4100, "records")
    assert shown.getvalue().endswith("exported: 4,100 records, 456 records/s")
    bar.done()
    assert shown.getvalue().endswith("\r\x1b[K")


def test_quiet_and_piped_draw_nothing() -> None:
    clock = Clock()
    for bar in (Progress(io.StringIO(), clock=clock), Progress(Terminal(), quiet=True)):
        bar.next_draw = 0.0
        bar.update(1, 1)
        bar.step(1, "records")
        bar.done()
        assert not bar.drawn and bar.stream.getvalue() == ""


def run_on_pty(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """Run `opendata-kv ARGS` with stderr on a pseudo-terminal: (status, stdout, stderr)."""
    main_fd, child_fd = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "opendata_kv", *args],
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=child_fd,
            env=ENV,
            timeout=120,
            text=True,
        )
    finally:
        os.close(child_fd)
    chunks = []
    try:
        while chunk := os.read(main_fd, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the terminal's other end is closed and everything was read
        pass
    finally:
        os.close(main_fd)
    return result.returncode, result.stdout, b"".join(chunks).decode("utf-8", "replace")


def run_piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opendata_kv", *args],
        capture_output=True,
        env=ENV,
        timeout=120,
        text=True,
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("progress") / "db"
    with SyncStore.open(path, INDEXED) as store:
        store.put_many((post, ("a", n), {"tag": f"t{n % 3}"}) for n in range(3000))
    return str(path)


def test_export_shows_rate_and_estimate_on_a_terminal_only(db: str, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    status, _, err = run_on_pty(["export", db, "--output", str(out)])
    assert status == 0, err
    assert "exported" in err and "records/s" in err and "% of ~" in err
    assert err.endswith("\r\x1b[K")  # erased at the end
    assert len(out.read_text().splitlines()) == 3000
    piped = run_piped(["export", db, "--output", str(tmp_path / "again.jsonl")])
    assert piped.returncode == 0 and piped.stderr == ""


def test_clone_import_and_index_build_show_progress_and_not_with_json(
    db: str, tmp_path: Path
) -> None:
    status, out, err = run_on_pty(["clone", db, str(tmp_path / "copy")])
    assert status == 0, err
    assert "clone: " in err and "records/s" in err
    status, out, err = run_on_pty(["clone", db, str(tmp_path / "copy2"), "--json"])
    assert status == 0 and "clone: " not in err and json.loads(out)

    rows = tmp_path / "rows.jsonl"
    assert run_piped(["export", db, "--output", str(rows)]).returncode == 0
    status, out, err = run_on_pty(
        ["import", str(tmp_path / "imported"), str(rows), "--schema", "indexkit:SCHEMA"]
    )
    assert status == 0, err
    assert "import: " in err and "records/s" in err

    status, out, err = run_on_pty(
        ["index", "build", db, "by_tag", "--schema", "indexkit:SCHEMA", "--indexes", "indexkit:ALL"]
    )
    assert status == 0, err
    assert "index build by_tag: " in err and "records/s" in err
    status, out, err = run_on_pty(
        ["index", "rebuild", db, "by_tag", "--schema", "indexkit:SCHEMA", "--json"]
    )
    assert status == 0, err
    assert "index rebuild" not in err and json.loads(out)
