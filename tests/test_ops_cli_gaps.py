"""The small gaps of issue 20 point 8: an empty --start/--end range, a mistyped record name,
checkpoint names that must be unique, verify --retries, help texts and progress on stderr."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from storekit import SCHEMA, VALUES, like

from opendata_kv.cli.main import main
from opendata_kv.cli.progress import Progress
from opendata_kv.store import SyncStore


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "db")
    with SyncStore.open(path, SCHEMA, values=VALUES) as store:
        store.put(like, (1,), {"v": 1})
    return path


def test_dump_with_start_after_end_is_an_error(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", db, "--start", "0120", "--end", "0110"]) != 0
    assert "--start 0120 is after --end 0110" in capsys.readouterr().err
    assert main(["dump", db, "--start", "0110", "--end", "0110"]) == 0  # empty, not reversed


def test_mistyped_record_name_suggests_the_closest(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dump", db, "--schema", "cli_schema:SCHEMA", "--type", "lik"]) != 0
    assert "did you mean 'like'?" in capsys.readouterr().err


def test_checkpoint_names_are_unique(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checkpoint", "create", db, "--name", "nightly"]) == 0
    assert main(["checkpoint", "create", db, "--name", "nightly"]) == 1
    assert "named 'nightly' already exists" in capsys.readouterr().err
    assert main(["dump", db, "--checkpoint", "nightly"]) == 0  # one state, not ambiguous


def test_verify_takes_retries(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", db, "--retries", "2"]) == 0
    assert "ok" in capsys.readouterr().out


@pytest.mark.parametrize("action", ["create", "list", "delete"])
def test_checkpoint_subcommands_have_a_description(
    action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["checkpoint", action, "--help"])
    help_text = capsys.readouterr().out
    body = help_text.split("\n\n", 2)[1]  # usage, then the description paragraph
    assert not body.lstrip().startswith(("positional", "options")), help_text


def test_clone_progress_draws_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    progress = Progress(shown, "clone")
    progress.next_draw = 0.0
    progress.step(1234, "records copied")
    progress.done()
    assert "clone: 1,234 records copied" in shown.getvalue()
    assert shown.getvalue().endswith("\x1b[K")
    piped = io.StringIO()
    quiet = Progress(piped, "clone")
    quiet.next_draw = 0.0
    quiet.step(1234, "records copied")
    assert piped.getvalue() == ""
    json_mode = Progress(Terminal(), "clone", quiet=True)  # --json: never drawn
    json_mode.next_draw = 0.0
    json_mode.step(1234, "records copied")
    assert not json_mode.drawn


def test_s3_error_code_survives_the_cut() -> None:
    from opendata_kv.objstore.s3http import code_in

    body = "x" * 400 + "<Error><Code>NoSuchBucket</Code><Message>" + "m" * 500
    assert code_in(body) == "NoSuchBucket" and code_in("no xml here") is None
