"""The shared test support works as the other tests assume: the hang_guard marker arms the
alarm (and only where it is set), and in-process CLI runs leave nothing behind."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from clikit import run_in_process


@pytest.mark.hang_guard(30)
def test_the_hang_guard_marker_arms_the_alarm() -> None:
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < remaining <= 30


def test_unmarked_tests_run_unguarded() -> None:
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_in_process_runs_are_independent(tmp_path: Path) -> None:
    """A --schema module written in one folder must not answer for a same-named one written
    in another; cwd, environment and sys.path come back as they were."""
    before = (os.getcwd(), dict(os.environ), list(sys.path))
    for n, folder in enumerate((tmp_path / "a", tmp_path / "b")):
        folder.mkdir()
        (folder / "same_name_schema.py").write_text(
            "from opendata_kv.keys import RecordType, Schema, fields\n"
            f"SCHEMA = Schema(RecordType('kind{n}', 1, [('n', fields.u8)]))\n"
        )
        result = run_in_process(
            "key",
            "inspect",
            "011007",
            "--schema",
            "same_name_schema:SCHEMA",
            "--json",
            cwd=folder,
            env={"OPENDATA_KV_TEST_MARK": "1"},
        )
        assert result.returncode == 0, result.stderr
        assert f'"record": "kind{n}"' in result.stdout
    assert (os.getcwd(), dict(os.environ), list(sys.path)) == before
    assert "same_name_schema" not in sys.modules
