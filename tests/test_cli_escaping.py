"""Output an attacker can shape (issue 21, point 9): text stored in a database (key fields,
values) reaches the terminal with every control and format character escaped, so it cannot
move the cursor, recolour the screen or forge lines; record names with such characters, or in
a form Unicode normalisation changes, or looking like another name, are refused."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from clikit import run_in_process
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.cli.text import printable
from opendata_kv.errors import SchemaError
from opendata_kv.store import SyncStore

HOSTILE = "a\x1b[31mred\x1b[0m\nFORGED LINE\r\u202eevil\x85\x7f\u2028end"

NOTE = RecordType("note", 5, [("title", F.string)])
SCHEMA = Schema(NOTE)


@given(st.text())
def test_printable_leaves_no_character_a_terminal_acts_on(text: str) -> None:
    shown = printable(text)
    assert shown.isprintable()
    if text.isprintable():
        assert shown == text  # plain text is shown as it is


@given(st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zl", "Zp"]), min_size=1))
def test_printable_escapes_every_control_and_format_character(text: str) -> None:
    shown = printable(text)
    assert all(c not in shown for c in text)
    assert shown.count("\\") == len(text)


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    path = str(tmp_path / "db")
    with SyncStore.open(path, SCHEMA) as store:
        store.put(NOTE, (HOSTILE,), {"body": HOSTILE})
        store.flush()
    return path


@pytest.mark.parametrize(
    "command",
    [
        ("dump", "--schema", "test_cli_escaping:SCHEMA"),
        ("dump", "--schema", "test_cli_escaping:SCHEMA", "--values"),
        ("dump",),
        ("stats", "--schema", "test_cli_escaping:SCHEMA"),
        ("changes", "--schema", "test_cli_escaping:SCHEMA"),
    ],
)
def test_text_output_escapes_stored_control_characters(db: str, command: tuple[str, ...]) -> None:
    result = run_in_process(command[0], db, *command[1:])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert all(line.isprintable() for line in lines), result.stdout  # no ESC, CR, U+202E...
    assert not any(line.startswith("FORGED") for line in lines), result.stdout
    if command[0] == "changes" or "--values" in command:
        assert "FORGED LINE" in result.stdout  # shown, escaped, inside its row


@pytest.mark.parametrize(
    "name",
    ["bad\nname", "\x1b[2Jname", "name\u202e", "tab\tname", "nul\x00", "del\x7f", "c1\x85"],
)
def test_a_record_name_with_control_characters_is_refused(name: str) -> None:
    with pytest.raises(SchemaError, match="control or format character"):
        RecordType(name, 1, [("n", F.u32)])


def test_a_record_name_not_in_nfc_is_refused() -> None:
    decomposed = unicodedata.normalize("NFD", "café")
    assert decomposed != "café"
    with pytest.raises(SchemaError, match="NFC") as caught:
        RecordType(decomposed, 1, [("n", F.u32)])
    assert "'café'" in str(caught.value)
    RecordType("café", 1, [("n", F.u32)])  # the composed form is fine


def test_two_record_names_that_look_alike_are_refused() -> None:
    plain = RecordType("file", 1, [("n", F.u32)])
    ligature = RecordType("\ufb01le", 2, [("n", F.u32)])  # NFC keeps the ligature
    with pytest.raises(SchemaError, match="looks like"):
        Schema(plain, ligature)
    wide = RecordType("\uff49tem", 3, [("n", F.u32)])
    with pytest.raises(SchemaError, match="looks like"):
        Schema(RecordType("item", 4, [("n", F.u32)]), wide)
    Schema(plain, RecordType("files", 5, [("n", F.u32)]))  # different names are fine
