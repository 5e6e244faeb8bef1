"""`opendata-kv key inspect`, `dump` and `stats` against databases these tests write
(tests/cli_schema.py is the schema: `--schema cli_schema:SCHEMA`). Commands run in-process
(tests/clikit.py); test_the_real_entry_point and the terminal test start real processes."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_schema import BLOB, EVENT, LIKE, LIKE_V3, POST, POST_V2, SCHEMA, VALUES, Post
from clikit import CHILD_ENV, CliResult, json_lines, run_in_process, run_process

from opendata_kv.ids.muid import Muid
from opendata_kv.values import pack

cli = run_in_process


def ok(*args: str, **kw: Any) -> str:
    result = cli(*args, **kw)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def fails(*args: str, code: int = 1, runner: Any = cli, **kw: Any) -> str:
    """Run a command that must fail with `code` and one clean line on stderr; that line."""
    result: CliResult = runner(*args, **kw)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    if code == 1:
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("opendata-kv: error: ")
        return lines[0]
    return result.stderr


# --- the databases -----------------------------------------------------------------------------

MUID = Muid(1_700_000_000_000_000, 0x12345678901, 3)


@dataclass(frozen=True)
class Item:
    key: bytes
    value: bytes


def clean_items() -> list[Item]:
    """Records that all decode with cli_schema:VALUES, in key order."""
    items = [
        Item(POST.encode("did:plc:alice", "3k2a"), VALUES.encode(POST, {"text": "hello"})),
        Item(POST.encode("did:plc:alice", "3k2b"), VALUES.encode(POST, {"text": "world"})),
        Item(POST.encode("did:plc:bob", "3k2c"), VALUES.encode(POST, {"text": "hi", "n": 2})),
        *(Item(LIKE.encode(n), VALUES.encode(LIKE, n * 10)) for n in range(5)),
        Item(EVENT.encode(MUID, b"\x00\xff", -1.5), VALUES.encode(EVENT, {"k": b"\x01\x02"})),
        Item(BLOB.encode("logo"), VALUES.encode(BLOB, b"\x89PNG")),
        Item(POST_V2.encode("did:plc:bob", "3kzz"), VALUES.encode(POST_V2, Post("new", "fr"))),
        *(Item(LIKE_V3.encode(n), VALUES.encode(LIKE_V3, n)) for n in (7, 8)),
    ]
    return sorted(items, key=lambda i: i.key)


CLEAN = clean_items()
UNKNOWN_KEY = b"\x05\x50unknown"
BAD_VALUE_KEY = POST.encode("did:plc:carol", "3k9z")
TRUNCATED_KEY = b"\x01\x10no-terminator"
MESS = [Item(UNKNOWN_KEY, pack("raw")), Item(TRUNCATED_KEY, pack(1)), Item(BAD_VALUE_KEY, b"\xc1")]


def write(path: Path | str, items: list[Item]) -> None:
    from opendata_kv.store import SyncStore

    with SyncStore.open(str(path), SCHEMA, values=VALUES) as store:
        for item in items:
            store.put_raw(item.key, item.value)
        store.flush()


@pytest.fixture(scope="module")
def clean_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("clean") / "db"
    write(path, CLEAN)
    return str(path)


@pytest.fixture(scope="module")
def messy_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The clean records plus one key no RecordType owns, one that does not decode, and one
    value that is not msgpack."""
    path = tmp_path_factory.mktemp("messy") / "db"
    write(path, [*CLEAN, *MESS])
    return str(path)


SCHEMA_ARG = ("--schema", "cli_schema:SCHEMA")


def dump_keys(*args: str, **kw: Any) -> list[bytes]:
    return [bytes.fromhex(r["key_hex"]) for r in json_lines(ok("dump", *args, "--json", **kw))]


# --- key inspect -------------------------------------------------------------------------------


def test_inspect_without_schema_decodes_the_prefix_and_shows_the_rest() -> None:
    key = POST.encode("did:plc:alice", "3k2a")
    [result] = json_lines(ok("key", "inspect", key.hex(), "--json"))
    assert result == {
        "key_hex": key.hex(),
        "keyspace_hex": "",
        "prefix_hex": "0110",
        "version": 1,
        "record_type": 1,
        "reserved": 0,
        "record": None,
        "fields": None,
        "rest_hex": key[2:].hex(),
    }


def test_inspect_text_is_aligned_label_value_lines() -> None:
    key = POST.encode("did:plc:alice", "3k2a")
    text = ok("key", "inspect", key.hex(), *SCHEMA_ARG)
    lines = text.splitlines()
    assert lines[0] == f"key:         {key.hex()}"
    assert "record type: 0x1" in lines
    assert "record:      post" in lines
    assert "  repo:      did:plc:alice  (string)" in lines
    column = lines[0].index(key.hex())
    for line in lines:  # every value starts in the same column, after "label:" and spaces
        assert line[:column].rstrip().endswith(":") and line[column] != " ", line


def test_inspect_with_schema_names_the_record_and_decodes_fields() -> None:
    key = EVENT.encode(MUID, b"\x00\xff", -1.5)
    [result] = json_lines(ok("key", "inspect", key.hex(), *SCHEMA_ARG, "--json"))
    assert result["record"] == "event"
    assert (result["version"], result["record_type"], result["reserved"]) == (1, 3, 0)
    assert result["fields"] == {"id": str(MUID), "blob": "00ff", "score": -1.5}
    assert result["rest_hex"] == ""


@pytest.mark.parametrize(
    "spelling",
    [
        lambda h: h,
        lambda h: "0x" + h,
        lambda h: "0X" + h.upper(),
        lambda h: h.upper(),
        lambda h: " ".join(h[i : i + 4] for i in range(0, len(h), 4)),
        lambda h: "  0x" + " ".join(h[i : i + 2] for i in range(0, len(h), 2)) + " ",
    ],
    ids=["plain", "0x", "0X-upper", "upper", "spaced", "0x-bytes-spaced"],
)
def test_inspect_accepts_hex_spellings(spelling: Any) -> None:
    key = LIKE.encode(42)
    [result] = json_lines(ok("key", "inspect", spelling(key.hex()), *SCHEMA_ARG, "--json"))
    assert result["key_hex"] == key.hex()
    assert result["fields"] == {"n": 42}


def test_inspect_joins_a_key_split_over_arguments() -> None:
    key = LIKE.encode(42)
    words = [key.hex()[i : i + 4] for i in range(0, 20, 4)]
    [result] = json_lines(ok("key", "inspect", *words, "--json"))
    assert result["key_hex"] == key.hex()


@pytest.mark.parametrize("urlsafe", [False, True])
def test_inspect_base64(urlsafe: bool) -> None:
    key = EVENT.encode(MUID, b"\xff\xfe\xfb", 2.0)  # bytes that give + and / in base64
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(key).decode()
    if urlsafe:
        encoded = encoded.rstrip("=")
    [result] = json_lines(ok("key", "inspect", encoded, "--base64", *SCHEMA_ARG, "--json"))
    assert result["key_hex"] == key.hex()
    assert result["fields"]["blob"] == "fffefb"


def test_inspect_bad_base64() -> None:
    assert "bad base64 key" in fails("key", "inspect", "!!!", "--base64")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("01zz", "'z' at position 2 is not a hex digit"),
        ("0x011", "odd number of hex digits"),
        ("0x", "no hex digits"),
    ],
)
def test_inspect_bad_hex(text: str, message: str) -> None:
    assert message in fails("key", "inspect", text)


def test_inspect_truncated_keys() -> None:
    assert "too short for a record prefix" in fails("key", "inspect", "01")
    line = fails("key", "inspect", "0110 6469 64", *SCHEMA_ARG)
    assert "field 'repo'" in line and "terminator" in line
    line = fails("key", "inspect", LIKE.encode(1)[:-1].hex(), *SCHEMA_ARG)
    assert "field 'n'" in line and "needs 8 bytes" in line


def test_inspect_extra_bytes_with_schema() -> None:
    line = fails("key", "inspect", (LIKE.encode(1) + b"\x00").hex(), *SCHEMA_ARG)
    assert "unexpected bytes" in line


@pytest.mark.parametrize("schema", [(), SCHEMA_ARG])
def test_inspect_reserved_version_and_type(schema: tuple[str, ...]) -> None:
    assert "version 0x00 at offset 0 is reserved" in fails("key", "inspect", "0010aa", *schema)
    assert "reserved record type 0x0" in fails("key", "inspect", "0105aa", *schema)


def test_inspect_unknown_prefix() -> None:
    line = fails("key", "inspect", "0550aa", *SCHEMA_ARG)
    assert "no record type registered for prefix 0x0550" in line
    # without a schema there is nothing to disagree with: the prefix decodes
    [result] = json_lines(ok("key", "inspect", "0550aa", "--json"))
    assert (result["version"], result["record_type"], result["rest_hex"]) == (5, 5, "aa")


def test_inspect_keyspace() -> None:
    key = b"\xab" + LIKE.encode(3)
    [result] = json_lines(ok("key", "inspect", key.hex(), "--keyspace", "ab", "--json"))
    assert (result["keyspace_hex"], result["prefix_hex"], result["version"]) == ("ab", "ab0120", 1)
    assert result["rest_hex"] == LIKE.encode(3)[2:].hex()
    line = fails("key", "inspect", "ff0120aa", "--keyspace", "ab")
    assert "does not start with keyspace 0xab" in line


def test_inspect_stdin_one_json_line_per_key() -> None:
    good = LIKE.encode(9).hex()
    lines = [good, "zz", "", "00 10 aa", "0550aa", "0x" + POST.encode("r", "k").hex()]
    result = cli("key", "inspect", "-", *SCHEMA_ARG, stdin="\n".join(lines) + "\n")
    assert result.returncode == 1  # some lines were bad
    assert result.stderr == ""
    out = json_lines(result.stdout)
    assert len(out) == 5  # the blank line is skipped
    assert out[0]["fields"] == {"n": 9}
    assert out[1]["input"] == "zz" and "not a hex digit" in out[1]["error"]
    assert out[2]["input"] == "00 10 aa" and "reserved" in out[2]["error"]
    assert "no record type registered" in out[3]["error"]
    assert out[4]["record"] == "post" and out[4]["fields"] == {"repo": "r", "rkey": "k"}


def test_inspect_stdin_all_good_exits_0() -> None:
    keys = "\n".join(LIKE.encode(n).hex() for n in range(3))
    out = json_lines(ok("key", "inspect", "-", stdin=keys))
    assert [r["rest_hex"] for r in out] == [LIKE.encode(n)[2:].hex() for n in range(3)]


def test_inspect_dash_must_be_alone() -> None:
    assert "only KEY argument" in fails("key", "inspect", "-", "0110")


@pytest.mark.parametrize(
    "spec",
    [
        "cli_schema:SCHEMA",
        "cli_schema:VALUES",
        "cli_schema:make_schema",
        "cli_schema:HOLDER",
        "cli_schema:Holder.schema",
        "cli_schema:LIKE",
    ],
)
def test_schema_forms(spec: str) -> None:
    [result] = json_lines(ok("key", "inspect", LIKE.encode(4).hex(), "--schema", spec, "--json"))
    assert (result["record"], result["fields"]) == ("like", {"n": 4})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:SCHEMA", "cannot import module 'no_such_module_xyz'"),
        ("cli_schema:NOPE", "'cli_schema' has no attribute 'NOPE'"),
        ("cli_schema:HOLDER.nope", "'cli_schema:HOLDER' has no attribute 'nope'"),
        ("cli_schema", "wants MODULE:ATTR or FILE.py:ATTR"),
        ("cli_schema:NOT_A_SCHEMA", "is a int, not a Schema"),
        ("broken_schema:SCHEMA", "importing module 'broken_schema' failed: ZeroDivisionError"),
    ],
)
def test_bad_schema_paths_exit_1(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "broken_schema.py").write_text("SCHEMA = 1 / 0\n")
    line = fails("key", "inspect", "0120", "--schema", spec, cwd=tmp_path)  # cwd is importable
    assert message in line


def test_usage_errors_exit_2(clean_db: str) -> None:
    fails("key", "inspect", code=2)
    fails("key", code=2)
    fails("dump", code=2)
    fails("dump", clean_db, "--type", "0", code=2)
    fails("dump", clean_db, "--type", "16", code=2)
    fails("dump", clean_db, "--version", "0", code=2)
    fails("dump", clean_db, "--limit", "-1", code=2)
    fails("dump", clean_db, "--limit", "many", code=2)
    fails("dump", clean_db, "--bogus", code=2)
    assert "memory://" in fails("dump", "memory://db", code=2)
    fails("stats", code=2)


def test_the_real_entry_point(clean_db: str, messy_db: str, tmp_path: Path) -> None:
    """`python -m opendata_kv` itself: output, exit statuses 0/1/2, and bad input reported
    in one line without a traceback, as the in-process runs above assume."""
    done = run_process("dump", clean_db, *SCHEMA_ARG, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    assert [json.loads(line)["key_hex"] for line in done.stdout.splitlines()] == [
        i.key.hex() for i in CLEAN
    ]
    rows = run_process("dump", messy_db, *SCHEMA_ARG)  # without --values: 2 keys are bad
    total = len(CLEAN) + len(MESS)
    assert rows.returncode == 1 and rows.stdout.endswith(f"({total} records, 2 with errors)\n")
    assert rows.stderr == (
        f"opendata-kv: error: 2 of {total} records did not decode (shown raw with the reason)\n"
    )
    (tmp_path / "broken_schema.py").write_text("SCHEMA = 1 / 0\n")
    for args, code in (
        (("stats", str(tmp_path / "missing")), 1),
        (("key", "inspect", "0120", "--schema", "broken_schema:SCHEMA"), 1),
        (("dump", clean_db, "--limit", "-1"), 2),
    ):
        line = fails(*args, code=code, runner=run_process, cwd=tmp_path)
        assert "Traceback" not in line


# --- dump --------------------------------------------------------------------------------------


def test_dump_json_every_record_in_key_order(clean_db: str) -> None:
    rows = json_lines(ok("dump", clean_db, *SCHEMA_ARG, "--json"))
    assert [bytes.fromhex(r["key_hex"]) for r in rows] == [i.key for i in CLEAN]
    assert [bytes.fromhex(r["value_hex"]) for r in rows] == [i.value for i in CLEAN]
    first = rows[0]
    assert set(first) == {
        "key_hex",
        "version",
        "record_type",
        "reserved",
        "record",
        "fields",
        "value_hex",
        "value_size",
        "error",
    }
    assert (first["record"], first["fields"]) == ("post", {"repo": "did:plc:alice", "rkey": "3k2a"})
    assert all(r["error"] is None for r in rows)
    names = [r["record"] for r in rows]
    assert names.count("like") == 7 and names.count("post") == 4


def test_dump_without_schema_shows_keys_raw(clean_db: str) -> None:
    rows = json_lines(ok("dump", clean_db, "--json"))
    assert len(rows) == len(CLEAN)
    assert all(r["record"] is None and r["fields"] is None and r["error"] is None for r in rows)
    assert [(r["version"], r["record_type"]) for r in rows][:1] == [(1, 1)]


def test_dump_plain_table(clean_db: str) -> None:
    lines = ok("dump", clean_db, *SCHEMA_ARG).splitlines()
    assert re.match(r"KEY +RECORD +FIELDS +VALUE$", lines[0])
    assert lines[-1] == f"({len(CLEAN)} records)"
    body = lines[1:-1]
    assert len(body) == len(CLEAN)
    assert body[0].startswith("0110 ")  # the prefix is set apart
    assert "post v1 0x1" in body[0] and "repo=did:plc:alice rkey=3k2a" in body[0]
    record_column = lines[0].index("RECORD")
    assert all(line[record_column - 2 : record_column] == "  " for line in body)


def test_dump_plain_values_and_empty(clean_db: str, tmp_path: Path) -> None:
    out = ok("dump", clean_db, *SCHEMA_ARG, "--values", "--type", "2", "--limit", "2")
    assert out.splitlines()[1].rstrip().endswith("  0")
    assert out.splitlines()[2].rstrip().endswith("  10")
    assert ok("dump", clean_db, "--prefix", "0f").strip() == "(no records)"


def test_dump_type_walks_every_version(clean_db: str) -> None:
    likes = [i.key for i in CLEAN if i.key[1] >> 4 == 2]
    assert {k[0] for k in likes} == {1, 3}
    assert dump_keys(clean_db, "--type", "2") == likes
    assert dump_keys(clean_db, "--type", "0x2", "--reverse") == likes[::-1]
    posts = [i.key for i in CLEAN if i.key[1] >> 4 == 1]
    assert dump_keys(clean_db, "--type", "1") == posts
    assert dump_keys(clean_db, "--type", "9") == []


def test_dump_type_limit_crosses_versions(clean_db: str) -> None:
    likes = [i.key for i in CLEAN if i.key[1] >> 4 == 2]
    assert dump_keys(clean_db, "--type", "2", "--limit", "6") == likes[:6]
    assert dump_keys(clean_db, "--type", "2", "--limit", "3", "--reverse") == likes[::-1][:3]
    assert dump_keys(clean_db, "--type", "2", "--limit", "0") == []


def test_dump_version(clean_db: str) -> None:
    assert dump_keys(clean_db, "--version", "3") == [i.key for i in CLEAN if i.key[0] == 3]
    assert dump_keys(clean_db, "--version", "2") == [POST_V2.encode("did:plc:bob", "3kzz")]
    likes = [LIKE.encode(n) for n in range(5)]
    assert dump_keys(clean_db, "--version", "1", "--type", "2") == likes
    assert dump_keys(clean_db, "--version", "4") == []


def test_dump_prefix_start_end(clean_db: str) -> None:
    alice = POST.prefix("did:plc:alice")
    assert dump_keys(clean_db, "--prefix", alice.hex()) == [
        POST.encode("did:plc:alice", r) for r in ("3k2a", "3k2b")
    ]
    start, end = LIKE.encode(1), LIKE.encode(3)
    between = dump_keys(clean_db, "--start", start.hex(), "--end", end.hex())
    assert between == [start, LIKE.encode(2)]
    # filters combine: a prefix inside the type range, bounds inside the prefix
    assert dump_keys(clean_db, "--type", "2", "--start", LIKE_V3.encode(8).hex()) == [
        LIKE_V3.encode(8)
    ]
    assert dump_keys(clean_db, "--prefix", "0120", "--end", start.hex()) == [LIKE.encode(0)]
    assert dump_keys(clean_db, "--prefix", "01", "--version", "3") == []


def test_dump_reverse_and_limit(clean_db: str) -> None:
    keys = [i.key for i in CLEAN]
    assert dump_keys(clean_db, "--reverse") == keys[::-1]
    assert dump_keys(clean_db, "--limit", "4") == keys[:4]
    assert dump_keys(clean_db, "--reverse", "--limit", "2") == keys[::-1][:2]
    assert dump_keys(clean_db, "--prefix", "0120", "--reverse", "--limit", "2") == [
        LIKE.encode(4),
        LIKE.encode(3),
    ]


def test_dump_bad_hex_options_exit_1(clean_db: str) -> None:
    assert "bad hex --prefix" in fails("dump", clean_db, "--prefix", "xyz")
    assert "bad hex --start" in fails("dump", clean_db, "--start", "0")


def test_dump_values_json(clean_db: str) -> None:
    rows = {
        r["key_hex"]: r
        for r in json_lines(
            ok("dump", clean_db, "--schema", "cli_schema:VALUES", "--values", "--json")
        )
    }
    post = rows[POST.encode("did:plc:alice", "3k2a").hex()]
    assert post["value"] == {"text": "hello"} and "value_hex" not in post
    # a dataclass codec (post v2), shown as its fields; no upgrade is applied
    post_v2 = rows[POST_V2.encode("did:plc:bob", "3kzz").hex()]
    assert post_v2["value"] == {"text": "new", "lang": "fr"}
    # msgpack bin inside a value: hex
    assert rows[EVENT.encode(MUID, b"\x00\xff", -1.5).hex()]["value"] == {"k": "0102"}
    # a raw-bytes codec: value_hex, and that is no error
    blob = rows[BLOB.encode("logo").hex()]
    assert blob["value_hex"] == "89504e47" and "value" not in blob and blob["error"] is None
    assert rows[LIKE.encode(4).hex()]["value"] == 40


def test_dump_values_without_schema_reads_msgpack(clean_db: str) -> None:
    rows = json_lines(ok("dump", clean_db, "--values", "--json", "--prefix", "0120"))
    assert [r["value"] for r in rows] == [0, 10, 20, 30, 40]


def test_dump_shows_undecodable_keys_raw_with_the_reason(messy_db: str) -> None:
    result = cli("dump", messy_db, *SCHEMA_ARG, "--json")
    assert result.returncode == 1
    assert result.stderr == (
        f"opendata-kv: error: 2 of {len(CLEAN) + 3} records did not decode "
        "(shown raw with the reason)\n"
    )
    rows = {r["key_hex"]: r for r in json_lines(result.stdout)}
    assert len(rows) == len(CLEAN) + 3  # nothing dropped
    unknown = rows[UNKNOWN_KEY.hex()]
    assert (unknown["version"], unknown["record_type"], unknown["record"]) == (5, 5, None)
    assert unknown["fields"] is None
    assert "no record type registered for prefix 0x0550" in unknown["error"]
    truncated = rows[TRUNCATED_KEY.hex()]
    assert truncated["record"] is None and "field 'repo'" in truncated["error"]
    # its value was not asked for: no value error without --values
    assert rows[BAD_VALUE_KEY.hex()]["error"] is None


def test_dump_undecodable_values(messy_db: str) -> None:
    result = cli("dump", messy_db, *SCHEMA_ARG, "--values", "--json", "--prefix", "0110")
    assert result.returncode == 1
    rows = {r["key_hex"]: r for r in json_lines(result.stdout)}
    bad = rows[BAD_VALUE_KEY.hex()]
    assert bad["record"] == "post" and bad["fields"] == {"repo": "did:plc:carol", "rkey": "3k9z"}
    assert bad["value_hex"] == "c1" and "value" not in bad
    assert bad["error"].startswith("value: post v1 key 0x") and "does not decode" in bad["error"]
    # a key that did not decode still gets its value decoded as plain msgpack
    assert rows[TRUNCATED_KEY.hex()]["value"] == 1


def test_dump_plain_table_shows_reasons(messy_db: str) -> None:
    result = cli("dump", messy_db, "--schema", "cli_schema:VALUES", "--values")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    unknown = next(line for line in lines if line.startswith("0550 "))
    assert "v5 0x5" in unknown and "! prefix not in the schema" in unknown
    assert '"raw"' in unknown
    bad = next(line for line in lines if "rkey=3k9z" in line)
    assert "c1  ! value does not decode with msgpack: not msgpack (FormatError)" in bad
    assert lines[-1] == f"({len(CLEAN) + 3} records, 3 with errors)"


def test_dump_plain_table_without_schema(tmp_path: Path) -> None:
    path = tmp_path / "raw"
    write(path, [Item(b"\x00\x10zero", b""), Item(b"\x07", b"\x01"), Item(LIKE.encode(1), b"\x0a")])
    result = cli("dump", str(path), "--values")
    assert result.returncode == 1  # two keys have no valid prefix (and one value is empty)
    lines = result.stdout.splitlines()
    assert re.match(r"KEY +RECORD +VALUE$", lines[0])  # no FIELDS column without a schema
    assert re.match(r"00107a65726f +! version 0 +\(empty\)  ! not msgpack", lines[1])
    assert re.match(r"0120 0000000000000001 +v1 0x2 +10$", lines[2])
    assert re.match(r"07 +! too short +1$", lines[3])
    assert lines[-1] == "(3 records, 2 with errors)"


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_missing_database_exits_1_and_creates_nothing(tmp_path: Path, form: str) -> None:
    path = tmp_path / "nowhere" / "db"
    target = str(path) if form == "path" else path.as_uri()
    for command in ("dump", "stats"):
        line = fails(command, target)
        assert "no database at" in line and "does not exist" in line
    assert not (tmp_path / "nowhere").exists()


def test_empty_directory_is_not_a_database(tmp_path: Path) -> None:
    for command in ("dump", "stats"):
        line = fails(command, str(tmp_path))
        assert line == f"opendata-kv: error: no SlateDB database at {tmp_path} (no manifest found)"
    assert list(tmp_path.iterdir()) == []
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is not a directory" in fails("dump", str(a_file))


def test_unsupported_url_scheme_exits_1(tmp_path: Path) -> None:
    assert "unsupported database URL scheme" in fails("dump", "ftp://host/db")


def test_dump_never_fences_the_writer(tmp_path: Path) -> None:
    from opendata_kv.store import SyncStore

    path = str(tmp_path / "live")
    with SyncStore.open(path, SCHEMA, values=VALUES) as writer:
        writer.put(LIKE, (1,), 10)
        writer.flush()
        assert dump_keys(path) == [LIKE.encode(1)]
        assert json.loads(ok("stats", path, "--json"))["count"] == 1
        # the writer was not fenced: it keeps writing, and a new reader sees it
        writer.put(LIKE, (2,), 20)
        writer.flush()
        assert writer.get(LIKE, (2,)) == 20
        assert dump_keys(path) == [LIKE.encode(1), LIKE.encode(2)]
        writer.put(LIKE, (3,), 30)
        writer.flush()
    assert dump_keys(path, "--prefix", "0120") == [LIKE.encode(n) for n in (1, 2, 3)]


# --- stats -------------------------------------------------------------------------------------


def test_stats_counts_and_bytes_are_exact(messy_db: str) -> None:
    report = json.loads(ok("stats", messy_db, *SCHEMA_ARG, "--json"))
    items = [*CLEAN, *MESS]
    assert report["database"] == messy_db
    assert report["count"] == len(items)
    assert report["key_bytes"] == sum(len(i.key) for i in items)
    assert report["value_bytes"] == sum(len(i.value) for i in items)
    groups = {(g["version"], g["record_type"]): g for g in report["groups"]}
    assert list(groups) == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (3, 2), (5, 5)]

    def expect(version: int, record_type: int, record: str | None) -> None:
        mine = sorted(
            (i for i in items if i.key[0] == version and i.key[1] >> 4 == record_type),
            key=lambda i: i.key,
        )
        assert groups[version, record_type] == {
            "keyspace_hex": "",
            "version": version,
            "record_type": record_type,
            "record": record,
            "count": len(mine),
            "key_bytes": sum(len(i.key) for i in mine),
            "value_bytes": sum(len(i.value) for i in mine),
            "first_key_hex": mine[0].key.hex(),
            "last_key_hex": mine[-1].key.hex(),
        }

    expect(1, 1, "post")
    expect(1, 2, "like")
    expect(3, 2, "like")
    expect(2, 1, "post")
    expect(5, 5, None)
    assert groups[1, 1]["count"] == 5  # three posts, the bad value, the truncated key
    assert groups[1, 2]["count"] == 5 and groups[1, 2]["key_bytes"] == 50


def test_stats_text(clean_db: str) -> None:
    lines = ok("stats", clean_db, *SCHEMA_ARG).splitlines()
    assert re.match(
        r"VERSION +TYPE +RECORD +COUNT +KEY BYTES +VALUE BYTES +FIRST KEY +LAST KEY$", lines[0]
    )
    like = next(line for line in lines[1:] if " like " in line and line.split()[0] == "1")
    assert like.split()[:7] == [
        "1",
        "0x2",
        "like",
        "5",
        "50",
        str(sum(len(i.value) for i in CLEAN if i.key[:2] == b"\x01\x20")),
        "01200000000000000000",
    ]
    total = lines[-1].split()
    assert total[0] == "total" and total[1] == str(len(CLEAN))
    assert total[2] == f"{sum(len(i.key) for i in CLEAN):,}"


def test_stats_without_schema_and_empty_database(clean_db: str, tmp_path: Path) -> None:
    report = json.loads(ok("stats", clean_db, "--json"))
    assert report["count"] == len(CLEAN)
    assert all(g["record"] is None for g in report["groups"])
    empty = tmp_path / "empty"
    write(empty, [])
    assert ok("stats", str(empty)) == "(no records)\n"
    assert json.loads(ok("stats", str(empty), "--json"))["groups"] == []
    assert ok("dump", str(empty)) == "(no records)\n"


def test_stats_keyspace(tmp_path: Path) -> None:
    path = tmp_path / "ks"
    write(path, [Item(b"\xab" + LIKE.encode(1), b"\x01"), Item(LIKE.encode(2), b"\x02")])
    report = json.loads(ok("stats", str(path), "--keyspace", "ab", "--json"))
    assert [
        (g["keyspace_hex"], g["version"], g["record_type"], g["count"]) for g in report["groups"]
    ] == [("ab", 1, 2, 1)]
    rows = json_lines(ok("dump", str(path), "--keyspace", "ab", "--type", "2", "--json"))
    assert [r["key_hex"] for r in rows] == ["ab" + LIKE.encode(1).hex()]
    assert rows[0]["keyspace_hex"] == "ab"


# --- pieces tested in-process ------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TtyBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_after_a_delay_and_throttled() -> None:
    from opendata_kv.cli.progress import Progress

    clock = FakeClock()
    quiet = io.StringIO()
    progress = Progress(quiet, clock=clock)
    clock.now += 10
    progress.update(5, 50)
    assert quiet.getvalue() == ""  # not a terminal

    tty = TtyBuffer()
    progress = Progress(tty, delay=1.0, every=0.25, clock=clock)
    progress.update(1, 10)
    assert tty.getvalue() == ""  # a short scan shows nothing
    clock.now += 1.0
    progress.update(1000, 2048)
    # the count and size, then the rate (1,000 records in the 1 s since it started)
    assert tty.getvalue().endswith("scanned 1,000 records, 2.0 KiB, 1,000 records/s")
    drawn = tty.getvalue()
    clock.now += 0.1
    progress.update(2000, 4096)
    assert tty.getvalue() == drawn  # at most four redraws a second
    clock.now += 0.2
    progress.update(3000, 4096)
    assert tty.getvalue().endswith("scanned 3,000 records, 4.0 KiB, 2,308 records/s")
    progress.done()
    assert tty.getvalue().endswith("\r\x1b[K")  # the line is erased at the end


def test_stats_progress_goes_to_a_terminal_stderr_only(clean_db: str) -> None:
    """stats on a pty: progress may appear on stderr but stdout stays clean JSON."""
    import pty

    main_fd, child_fd = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "opendata_kv", "stats", clean_db, "--json"],
            stdout=subprocess.PIPE,
            stderr=child_fd,
            env=CHILD_ENV,
            timeout=60,
            text=True,
        )
    finally:
        os.close(child_fd)
        os.close(main_fd)
    assert result.returncode == 0
    assert json.loads(result.stdout)["count"] == len(CLEAN)


def test_type_walk_seeks_instead_of_reading_other_records(tmp_path: Path) -> None:
    """--type without --version reads the matching records plus one seek per version present,
    not the records of other types in between."""
    import asyncio

    from opendata_kv.cli.dump_cmds import Walk, open_reader
    from opendata_kv.keys import RecordType
    from opendata_kv.keys import fields as F

    noise = RecordType("noise", 1, [("n", F.u32)])
    items = [Item(noise.encode(n), b"") for n in range(2000)]
    wanted = [Item(LIKE.encode(n), b"") for n in range(3)] + [Item(LIKE_V3.encode(9), b"")]
    items += wanted
    items += [
        Item(RecordType("n", 1, [("n", F.u32)], version=v).encode(1), b"") for v in (2, 200, 255)
    ]
    path = tmp_path / "walk"
    write(path, items)

    async def walk(reverse: bool) -> tuple[list[bytes], int]:
        store = await open_reader(str(path))
        original = store.scan_all
        rows_read = 0

        def counting(**options: Any) -> Any:
            scan = original(**options)
            fetch = scan.next_chunk

            async def next_chunk(size: int | None = None) -> Any:
                nonlocal rows_read
                chunk = await fetch(size)
                rows_read += len(chunk)
                return chunk

            scan.next_chunk = next_chunk  # type: ignore[method-assign]
            return scan

        store.scan_all = counting  # type: ignore[method-assign]
        try:
            walker = Walk((None, None), b"", None, 2, reverse, None)
            keys = [k for chunk in [c async for c in walker.chunks(store)] for k, _ in chunk]
        finally:
            await store.close()
        return keys, rows_read

    keys, rows_read = asyncio.run(walk(False))
    assert keys == [i.key for i in wanted]
    assert rows_read <= len(wanted) + 5  # five versions present: 1, 2, 3, 200, 255
    keys, rows_read = asyncio.run(walk(True))
    assert keys == [i.key for i in wanted][::-1]
    assert rows_read <= len(wanted) + 5


# --- S3 (moto) ---------------------------------------------------------------------------------


@pytest.mark.s3
def test_dump_and_stats_on_s3(s3_env: Any) -> None:
    """On the session's moto server (s3_env sets AWS_* for this test)."""
    s3_env.create_bucket("dumps")
    s3 = s3_env.client()
    write("s3://dumps/db", CLEAN)
    assert dump_keys("s3://dumps/db", "--type", "2") == [i.key for i in CLEAN if i.key[1] >> 4 == 2]
    assert json.loads(ok("stats", "s3://dumps/db", "--json"))["count"] == len(CLEAN)
    line = fails("dump", "s3://dumps/missing")
    assert "error: no SlateDB database at s3://dumps/missing (endpoint " in line
    assert line.endswith(", bucket dumps) (no manifest found)")
    assert s3.list_objects_v2(Bucket="dumps", Prefix="missing").get("KeyCount", 0) == 0
