"""The id subcommands: output shapes, stdin mode, exit codes. They run in-process
(tests/clikit.py); test_the_real_entry_point runs `python -m opendata_kv` itself."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pytest
from clikit import CliResult, json_lines, run_in_process, run_process

ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"

run = run_in_process


def assert_bad_input(result: CliResult) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opendata-kv: error: "), result.stderr
    assert "Traceback" not in result.stderr


def tid_int(s: str) -> int:
    return int(s.translate(str.maketrans(ALPHABET, "0123456789abcdefghijklmnopqrstuv")), 32)


def test_the_real_entry_point() -> None:
    """The process itself: output, and exit statuses 0, 1 (one line, no traceback), 2."""
    made = run_process("tid", "validate", "-", stdin="3jzfcijpj2z2a\nnope\n")
    assert made.returncode == 1
    assert [r["valid"] for r in json_lines(made.stdout)] == [True, False]
    assert_bad_input(run_process("muid", "parse", "zz"))
    usage = run_process("tid", "decode")
    assert usage.returncode == 2 and "usage:" in usage.stderr and "Traceback" not in usage.stderr
    assert run_process("url-key", "https://example.com").returncode == 0


# --- tid ---------------------------------------------------------------------------------------


def test_tid_new_text_and_json() -> None:
    text = run("tid", "new", "-n", "5")
    assert text.returncode == 0, text.stderr
    made = text.stdout.splitlines()
    assert len(made) == 5 and made == sorted(set(made))
    assert all(len(t) == 13 and set(t) <= set(ALPHABET) for t in made)

    as_json = run("tid", "new", "-n", "2", "--clock-id", "7", "--json")
    assert as_json.returncode == 0, as_json.stderr
    rows = json_lines(as_json.stdout)
    assert [set(r) for r in rows] == [{"tid", "int", "timestamp_us", "clock_id", "datetime"}] * 2
    assert all(r["clock_id"] == 7 and tid_int(r["tid"]) == r["int"] for r in rows)


def test_tid_decode() -> None:
    result = run("tid", "decode", "--json", "3jzfcijpj2z2a")
    assert result.returncode == 0, result.stderr
    (row,) = json_lines(result.stdout)
    n = tid_int("3jzfcijpj2z2a")
    assert row == {
        "tid": "3jzfcijpj2z2a",
        "int": n,
        "timestamp_us": n >> 10,
        "clock_id": n & 1023,
        "datetime": "2023-06-30T15:03:01.887007+00:00",
    }
    text = run("tid", "decode", "2222222222222")
    assert text.returncode == 0
    assert "1970-01-01T00:00:00.000000+00:00" in text.stdout


@pytest.mark.parametrize("value", ["3JZFCIJPJ2Z2A", "j222222222222", "short"])
def test_tid_decode_bad_input(value: str) -> None:
    result = run("tid", "decode", value)
    assert_bad_input(result)
    assert result.stdout == ""


def test_tid_validate_stdin() -> None:
    result = run("tid", "validate", "-", stdin="3jzfcijpj2z2a\n\nnope\r\n2222222222222\n")
    assert result.returncode == 1
    rows = json_lines(result.stdout)
    assert [r["input"] for r in rows] == ["3jzfcijpj2z2a", "nope", "2222222222222"]
    assert [r["valid"] for r in rows] == [True, False, True]
    assert rows[0]["error"] is None and "length 4" in rows[1]["error"]
    assert run("tid", "validate", "-", stdin="3jzfcijpj2z2a\n").returncode == 0


def test_tid_decode_stdin_goes_on_after_a_bad_line() -> None:
    result = run("tid", "decode", "-", stdin="bad\n3jzfcijpj2z2a\n")
    assert result.returncode == 1
    rows = json_lines(result.stdout)
    assert set(rows[0]) == {"input", "error"} and rows[0]["input"] == "bad"
    assert rows[1]["tid"] == "3jzfcijpj2z2a"


def test_tid_usage_errors() -> None:
    for args in (["tid", "new", "-n", "0"], ["tid", "new", "--clock-id", "1024"], ["tid"]):
        result = run(*args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr


# --- rkey --------------------------------------------------------------------------------------


def test_rkey_validate() -> None:
    ok = run("rkey", "validate", "--json", "self", "3jzfcijpj2z2a")
    assert ok.returncode == 0
    assert [r["valid"] for r in json_lines(ok.stdout)] == [True, True]
    typed = run("rkey", "validate", "--type", "literal:self", "--json", "self", "other")
    assert typed.returncode == 1
    rows = json_lines(typed.stdout)
    assert [r["valid"] for r in rows] == [True, False]
    assert "literal 'self'" in rows[1]["error"]
    text = run("rkey", "validate", "a/b")
    assert text.returncode == 1 and "position 1" in text.stdout
    assert run("rkey", "validate", "--type", "uuid", "x").returncode == 2


def test_rkey_validate_stdin_with_type() -> None:
    result = run("rkey", "validate", "--type", "nsid", "-", stdin="app.bsky.feed.post\n..\n")
    assert result.returncode == 1
    assert [r["valid"] for r in json_lines(result.stdout)] == [True, False]


# --- muid --------------------------------------------------------------------------------------


def test_muid_new() -> None:
    result = run("muid", "new", "-n", "3", "--json")
    assert result.returncode == 0, result.stderr
    rows = json_lines(result.stdout)
    assert [r["offset"] for r in rows] == [1, 2, 3]
    assert len({(r["timestamp"], r["medallion"]) for r in rows}) == 1
    assert 0x10000000000 <= rows[0]["medallion"] <= 0x1FFFFFFFFFF
    assert all(set(r) == {"timestamp", "medallion", "offset", "string", "hex"} for r in rows)
    fixed = run("muid", "new", "--medallion", "0x123")
    assert fixed.returncode == 0 and fixed.stdout.split("-")[1] == "00000000123"


def test_muid_parse_and_encode_agree() -> None:
    parsed = run("muid", "parse", "--json", "5d5eac793e61f-1f8cb77ae1e")
    assert parsed.returncode == 0, parsed.stderr
    (row,) = json_lines(parsed.stdout)
    assert row["string"] == "5D5EAC793E61F-1F8CB77AE1E-00000000"
    assert (row["timestamp"], row["medallion"], row["offset"]) == (
        0x5D5EAC793E61F,
        0x1F8CB77AE1E,
        0,
    )
    assert row["hex"] == "5d5eac793e61f1f8cb77ae1e00000000"
    encoded = run("muid", "encode", "--json", str(row["timestamp"]), "0x1F8CB77AE1E", "0")
    assert encoded.returncode == 0, encoded.stderr
    assert json_lines(encoded.stdout)[0]["string"] == row["string"]


def test_muid_encode_sentinels_and_errors() -> None:
    result = run("muid", "encode", "--json", "-1", "-1", "-1")
    assert result.returncode == 0, result.stderr
    assert json_lines(result.stdout)[0]["hex"] == "f" * 32
    assert_bad_input(run("muid", "encode", "-2", "0", "0"))
    assert_bad_input(run("muid", "encode", "1", "2", "x"))
    assert_bad_input(run("muid", "parse", "zz"))
    assert run("muid", "encode", "1", "2").returncode == 2


def test_muid_encode_stdin() -> None:
    result = run("muid", "encode", "-", stdin="1 2 3\n1 2\n0x10 0x20 -5\n")
    assert result.returncode == 1
    rows = json_lines(result.stdout)
    assert rows[0]["string"] == "0000000000001-00000000002-00000003"
    assert set(rows[1]) == {"input", "error"}
    assert rows[2]["offset"] == -5 and rows[2]["string"].endswith("-FFFFFFFB")


# --- url-key -----------------------------------------------------------------------------------


def test_url_key_matches_vectors(vectors: Path) -> None:
    with (vectors / "scrape" / "url_keys.tsv").open(encoding="utf-8", newline="") as handle:
        rows = [
            r
            for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            if r["url"]  # blank stdin lines are skipped by design
        ]
    stdin = "".join(r["url"] + "\n" for r in rows)
    plain = run("url-key", "-", stdin=stdin)
    clean = run("url-key", "--clean", "-", stdin=stdin)
    assert plain.returncode == 0 and clean.returncode == 0, plain.stderr + clean.stderr
    for row, got, got_clean in itertools.zip_longest(
        rows, json_lines(plain.stdout), json_lines(clean.stdout)
    ):
        assert got["input"] == row["url"]
        assert (got["url"], got["key"], got["hex"]) == (
            row["neturl_string"],
            int(row["neturl_key_dec"]),
            row["neturl_key_hex"],
        )
        assert (got_clean["url"], got_clean["key"], got_clean["hex"]) == (
            row["cleaned_string"],
            int(row["cleaned_key_dec"]),
            row["cleaned_key_hex"],
        )


def test_url_key_text_and_errors() -> None:
    text = run("url-key", "https://example.com")
    assert text.returncode == 0
    assert text.stdout == "0x597b2b5793a24030\t6447794946650030128\thttps://example.com\n"
    assert_bad_input(run("url-key", "http://[::1"))
    mixed = run("url-key", "-", stdin="http://exa mple.com/\nhttps://example.com\n")
    assert mixed.returncode == 1
    rows = json_lines(mixed.stdout)
    assert "host name" in rows[0]["error"] and rows[1]["key"] == 6447794946650030128
