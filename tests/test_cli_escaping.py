"""Output an attacker can shape (issue 21, point 9; issue 28, point 5): text stored in a
database (key fields, values, index entries) reaches the terminal with every control and
format character escaped, so it cannot move the cursor, recolour the screen or forge lines,
and --json holds the same characters as \\uXXXX escapes that give the string back; record
and index field names with such characters, or in a form Unicode normalisation changes, or
looking like another name, are refused."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv import Index, RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.cli.text import json_text, printable
from opendata_kv.errors import SchemaError
from opendata_kv.store import SyncStore

HOSTILE = "a\x1b[31mred\x1b[0m\nFORGED LINE\r\u202eevil\x85\x7f\u2028end"

NOTE = RecordType("note", 5, [("title", F.string)])
SCHEMA = Schema(NOTE)
BY_BODY = Index("by_body", "note", [("body", F.string)])

#: one character of each class a terminal acts on or hides: C0 (ESC, LF, CR, NUL), DEL, C1
#: (NEL, CSI), format (bidi override, zero-width space, BOM, an astral tag), line and
#: paragraph separators
CLASSES = {
    "Cc": "\x1b\n\r\x00\x7f\x85\x9b",
    "Cf": "\u202e\u200b\ufeff\U000e0041",
    "Zl": "\u2028",
    "Zp": "\u2029",
}
EVERY = "".join(CLASSES.values())
assert {unicodedata.category(c) for c in EVERY} == set(CLASSES)
#: stored in a key field, a value and (through the index) an index entry
STORED = "t" + EVERY + "FORGED\n\x1b[2Jend"


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


@given(st.text())
def test_json_text_is_printable_and_gives_the_string_back(text: str) -> None:
    shown = json_text({"k": text, text: [text]})
    assert shown.isprintable()
    assert json.loads(shown) == {"k": text, text: [text]}


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


@pytest.fixture
def hostile_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every class of hostile character in a key field, a value and an index entry."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    path = str(tmp_path / "hostile")
    with SyncStore.open(path, SCHEMA, indexes=[BY_BODY]) as store:
        store.put(NOTE, (STORED,), {"body": STORED, STORED: [STORED]})
        store.build_index("by_body")
        store.flush()
    return path


S = ("--schema", "test_cli_escaping:SCHEMA")
KEY_HEX = NOTE.encode(STORED).hex()

#: every command that prints stored text (or echoes its input), text and --json
COMMANDS: list[tuple[str, ...]] = [
    ("key", "inspect", KEY_HEX, *S),
    # an OpenData IdDictionary key (its terminated string holds no NUL)
    ("key", "inspect", "02000150" + STORED.replace("\x00", "").encode().hex() + "00"),
    ("dump", "{db}"),
    ("dump", "{db}", *S, "--values"),
    ("dump", "{db}", *S, "--values", "--indexes"),
    ("dump", "{db}", "--indexes", "--values"),
    ("changes", "{db}", *S),
    ("changes", "{db}", *S, "--indexes"),
    ("stats", "{db}", *S),
    ("verify", "{db}"),
    ("verify", "{db}", "--indexes", *S),
    ("index", "list", "{db}"),
    ("checkpoint", "list", "{db}"),
]


def _lines_are_safe(text: str) -> None:
    for line in text.split("\n"):
        assert line.replace("\t", "").isprintable(), repr(line)  # tabs: the ids' columns
        assert not any(c in line for c in EVERY), repr(line)
    assert not any(line.startswith("FORGED") for line in text.split("\n"))


def _holds(obj: Any, wanted: str) -> bool:
    """True when `wanted` is one of the strings (or map keys) inside a JSON value."""
    if isinstance(obj, str):
        return obj == wanted
    if isinstance(obj, dict):
        return any(_holds(k, wanted) or _holds(v, wanted) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_holds(v, wanted) for v in obj)
    return False


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:4])[:40])
def test_every_command_escapes_every_class_in_text_and_json(
    hostile_db: str, command: tuple[str, ...]
) -> None:
    argv = [part.replace("{db}", hostile_db) for part in command]
    text = run_in_process(*argv)
    assert text.returncode == 0, text.stderr
    _lines_are_safe(text.stdout)
    _lines_are_safe(text.stderr)
    shown = run_in_process(*argv, "--json")
    assert shown.returncode == 0, shown.stderr
    _lines_are_safe(shown.stdout)
    objects = [json.loads(line) for line in shown.stdout.splitlines()]
    if command[0] in ("key", "changes") or "--values" in command:  # decoded: the exact
        wanted = (STORED, STORED.replace("\x00", ""))  # string comes back (no NUL: OpenData)
        assert any(_holds(obj, w) for obj in objects for w in wanted), shown.stdout


def test_the_issue_repro_shows_no_raw_character() -> None:
    key = (
        "02000150611b5b33316d7265641b5b306d0a464f52474544204c494e450de280ae6576696cc285c29b"
        "33316d7fe280a8656e6400"
    )
    for extra in ((), ("--json",)):
        result = run_in_process("key", "inspect", key, *extra)
        assert result.returncode == 0, result.stderr
        _lines_are_safe(result.stdout)
    assert "\\u202eevil\\u0085\\u009b31m\\u007f\\u2028end" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ("tid", "decode", "3k" + EVERY),
        ("rkey", "validate", "a" + EVERY),
        ("url-key", "http://a/" + EVERY),
        ("key", "inspect", "01" + EVERY),
        ("key", "encode", "note", STORED, "--schema", "nowhere" + EVERY + ":S"),
    ],
)
def test_error_lines_escape_the_input_they_echo(argv: tuple[str, ...]) -> None:
    result = run_in_process(*argv)
    assert result.returncode == 1
    _lines_are_safe(result.stdout)
    _lines_are_safe(result.stderr)
    # one line, however hostile the input (validate reports on stdout, the others on stderr)
    assert (result.stdout + result.stderr).count("\n") == 1, result


def test_stdin_mode_echoes_hostile_input_as_json_that_gives_it_back() -> None:
    result = run_in_process("key", "inspect", "-", stdin="zz" + EVERY.replace("\n", "") + "\n")
    assert result.returncode == 1
    _lines_are_safe(result.stdout)
    (obj,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert obj["input"] == "zz" + EVERY.replace("\n", "")


def test_an_index_field_name_with_control_characters_is_refused() -> None:
    for name in ("ti\x1btle", "a\u202e", "x\u2028", "t\x85", "9lives", "a-b"):
        with pytest.raises(SchemaError, match="is not an identifier") as caught:
            Index("ix", "note", [(name, F.string)])
        assert caught.value.value == name
    with pytest.raises(SchemaError, match="duplicate field name 'a'"):
        Index("ix", "note", [("a", F.string), ("a", F.u8)])
