"""Record keys and Lexicon key types: atproto vectors, rules, messages, NSID syntax."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import RkeyError
from opendata_kv.ids import nsid, rkey

RKEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:~-"


def vector_lines(path: Path) -> list[str]:
    assert path.is_file(), f"missing vector file {path}"
    lines = path.read_text(encoding="utf-8").split("\n")
    return [line for line in lines if line and not line.startswith("#")]


def test_valid_vectors(vectors: Path) -> None:
    lines = vector_lines(vectors / "atproto" / "recordkey_syntax_valid.txt")
    assert len(lines) >= 15
    for line in lines:
        assert rkey.is_valid(line), line
        assert rkey.validate(line) == line


def test_invalid_vectors(vectors: Path) -> None:
    lines = vector_lines(vectors / "atproto" / "recordkey_syntax_invalid.txt")
    assert len(lines) >= 10
    for line in lines:
        assert not rkey.is_valid(line), line
        with pytest.raises(RkeyError):
            rkey.validate(line)


def test_length_limits() -> None:
    assert rkey.is_valid("a" * 512)
    assert not rkey.is_valid("a" * 513)
    assert not rkey.is_valid("")
    with pytest.raises(RkeyError, match="513 characters"):
        rkey.validate("a" * 513)
    with pytest.raises(RkeyError, match="empty"):
        rkey.validate("")


@pytest.mark.parametrize("text", [".", ".."])
def test_dot_keys_are_reserved(text: str) -> None:
    assert not rkey.is_valid(text)
    with pytest.raises(RkeyError, match="reserved"):
        rkey.validate(text)
    assert rkey.is_valid(text + "x") and rkey.is_valid("...")


def test_trailing_newline_and_case() -> None:
    assert not rkey.is_valid("self\n")
    assert rkey.is_valid("Self") and rkey.is_valid("self")
    assert not rkey.is_valid("caf\u00e9")
    assert not rkey.is_valid(b"self")


def test_message_names_character_and_position() -> None:
    with pytest.raises(RkeyError) as info:
        rkey.validate("alpha/beta")
    assert "'/'" in str(info.value) and "position 5" in str(info.value)


@given(st.text(alphabet=RKEY_CHARS, min_size=1, max_size=600))
def test_allowed_alphabet(s: str) -> None:
    expected = len(s) <= 512 and s not in (".", "..")
    assert rkey.is_valid(s) is expected


@given(st.text(max_size=30))
def test_garbage_raises_only_rkey_error(s: str) -> None:
    try:
        rkey.validate(s)
    except RkeyError:
        assert not rkey.is_valid(s)
    else:
        assert rkey.is_valid(s)


# --- key types ---------------------------------------------------------------------------------


def test_key_type_tid() -> None:
    assert rkey.validate("3jzfcijpj2z2a", "tid") == "3jzfcijpj2z2a"
    with pytest.raises(RkeyError, match="not a TID"):
        rkey.validate("self", "tid")
    assert rkey.is_valid_for("3jzfcijpj2z2a", "tid")
    assert not rkey.is_valid_for("3jzfcijpj2z2", "tid")


def test_key_type_literal() -> None:
    assert rkey.validate("self", "literal:self") == "self"
    with pytest.raises(RkeyError, match="literal 'self'"):
        rkey.validate("Self", "literal:self")
    with pytest.raises(RkeyError, match="literal value"):
        rkey.KeyType.parse("literal:")
    with pytest.raises(RkeyError, match="literal value"):
        rkey.KeyType.parse("literal:a/b")


def test_key_type_nsid() -> None:
    assert rkey.validate("app.bsky.feed.post", "nsid") == "app.bsky.feed.post"
    with pytest.raises(RkeyError, match="not an NSID"):
        rkey.validate("example.com", "nsid")


def test_key_type_any_and_unknown() -> None:
    assert rkey.validate("pre:fix", "any") == "pre:fix"
    for bad in ["", "TID", "literal", "record", "nsid "]:
        with pytest.raises(RkeyError, match="unknown record key type"):
            rkey.validate("self", bad)
    with pytest.raises(RkeyError, match="unknown record key type"):
        rkey.is_valid_for("self", "uuid")


def test_syntax_checked_before_key_type() -> None:
    with pytest.raises(RkeyError, match="position 3"):
        rkey.validate("abc def", "tid")
    with pytest.raises(RkeyError, match="reserved"):
        rkey.validate("..", "nsid")


def test_key_type_parse_and_str() -> None:
    assert rkey.KeyType.parse("literal:self") == rkey.KeyType("literal", "self")
    assert str(rkey.KeyType.parse("literal:self")) == "literal:self"
    assert str(rkey.KeyType.parse("tid")) == "tid"
    kind = rkey.KeyType.parse("nsid")
    assert rkey.KeyType.parse(kind) is kind


# --- NSID syntax -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "com.example.fooBar",
        "com.example.fooBarV2",
        "a.b.c",
        "one.2.three",
        "org.4chan.lex.getThing",
        "xn--ls8h.example.record",
        "com." + "o" * 63 + ".foo",
        "com.example." + "o" * 63,
        "com" + ".middle" * 40 + ".foo",  # authority over 253 characters: accepted (see RFC)
    ],
)
def test_valid_nsids(text: str) -> None:
    assert nsid.is_valid(text), nsid.explain(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("com.example", "at least 3"),
        ("com.example.foo.*", "'*'"),
        ("com.exa\U0001f4a9ple.thing", "position 7"),
        ("1.0.0.127.record", "starts with a digit"),
        ("com.example-.foo", "'-'"),
        ("com.example.fooBar.2", "name"),
        ("com.example.foo-bar", "name"),
        ("one.two..three", "empty segment"),
        ("com." + "o" * 64 + ".foo", "at most 63"),
        ("com" + ".middle" * 50 + ".foo", "at most 317"),
        ("one.two.three ", "' '"),
    ],
)
def test_invalid_nsids(text: str, reason: str) -> None:
    explanation = nsid.explain(text)
    assert explanation is not None and reason in explanation, explanation
    assert not nsid.is_valid(text)
