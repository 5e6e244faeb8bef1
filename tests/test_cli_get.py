"""`opendata-kv get DB KEY`: one record by its key (hex, --base64, or typed fields with
--schema), decoded as dump decodes it; exit 1 when it is absent, expired or undecodable."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from opendata_kv.store import SyncStore
from opendata_kv.store.expiry import now_ms
from tests.cli_schema import LIKE, POST, VALUES
from tests.clikit import run_in_process

SPEC = ("--schema", "cli_schema:VALUES")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("get") / "db"
    with SyncStore.open(path, VALUES) as store:
        store.put(POST, ("did:plc:a", "3k2"), {"t": "hello"})
        store.put(LIKE, (7,), 42, ttl=3600)
        store.put_raw(LIKE.encode(8), b"\xc1")  # not msgpack
        store.put(POST, ("\x1b[31m", "evil\x07"), {"t": "\x1b]0;title\x07"})  # hostile text
        store.flush()
    return str(path)


def test_present_by_hex_json_as_dump_shows_it(db: str) -> None:
    key = POST.encode("did:plc:a", "3k2")
    result = run_in_process("get", db, key.hex(), *SPEC, "--json")
    assert result.returncode == 0, result.stderr
    (obj,) = [json.loads(line) for line in result.stdout.splitlines()]
    dumped = run_in_process("dump", db, *SPEC, "--values", "--json", "--prefix", key.hex())
    (row,) = [json.loads(line) for line in dumped.stdout.splitlines()]
    assert obj == {**row, "found": True, "expire_at": None}
    assert obj["fields"] == {"repo": "did:plc:a", "rkey": "3k2"} and obj["value"] == {"t": "hello"}


def test_typed_fields_and_base64_name_the_same_record(db: str) -> None:
    key = LIKE.encode(7)
    typed = run_in_process("get", db, "like", "7", "--version", "1", *SPEC, "--json")
    b64 = run_in_process("get", db, base64.b64encode(key).decode(), "--base64", *SPEC, "--json")
    assert typed.returncode == b64.returncode == 0, typed.stderr + b64.stderr
    assert typed.stdout == b64.stdout
    obj = json.loads(typed.stdout)
    assert obj["value"] == 42 and obj["expire_at"] > now_ms()


def test_table_output(db: str) -> None:
    result = run_in_process("get", db, "post", "did:plc:a", "3k2", "--version", "1", *SPEC)
    assert result.returncode == 0
    header, line = result.stdout.splitlines()
    assert header.split() == ["KEY", "RECORD", "FIELDS", "VALUE"]
    assert "repo=did:plc:a" in line and '{"t": "hello"}' in line


def test_absent_exits_1(db: str) -> None:
    result = run_in_process("get", db, "like", "1000", "--version", "1", *SPEC, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "key_hex": LIKE.encode(1000).hex(),
        "found": False,
        "expired": False,
    }
    assert "no record under key" in result.stderr
    plain = run_in_process("get", db, LIKE.encode(1000).hex())
    assert plain.returncode == 1 and plain.stdout == ""


def test_expired_is_absent_and_says_so(tmp_path: Path) -> None:
    # slatedb drops an expired row when a flush rewrites it: this one expires after the
    # writer closed (its rows still in the WAL then), and the read waits until it has
    with SyncStore.open(tmp_path, VALUES) as store:
        store.put(LIKE, (9,), 1, ttl=2)
        expired_by = now_ms() + 2000  # the TTL counts from before this line
    while now_ms() <= expired_by:
        time.sleep(0.05)
    result = run_in_process("get", str(tmp_path), "like", "9", "--version", "1", *SPEC, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["expired"] is True
    assert "TTL passed" in result.stderr


def test_undecodable_value_is_shown_raw_with_the_reason(db: str) -> None:
    result = run_in_process("get", db, "like", "8", "--version", "1", *SPEC, "--json")
    assert result.returncode == 1
    obj = json.loads(result.stdout)
    assert obj["found"] is True and obj["value_hex"] == "c1" and obj["error"]


def test_hostile_key_and_value_are_escaped(db: str) -> None:
    key = POST.encode("\x1b[31m", "evil\x07")
    for extra in ((), ("--json",)):
        result = run_in_process("get", db, key.hex(), *SPEC, "--version", "1", *extra)
        assert result.returncode == 0, result.stderr
        for text in (result.stdout, result.stderr):
            assert "\x1b" not in text and "\x07" not in text


def test_bad_arguments_are_one_line_errors(db: str) -> None:
    fields = run_in_process("get", db, "0110", "extra")
    assert fields.returncode == 1 and "need --schema" in fields.stderr
    arity = run_in_process("get", db, "post", "only-one", *SPEC)
    assert arity.returncode == 1 and "has 2 fields" in arity.stderr
    bad = run_in_process("get", db, "zz")
    assert bad.returncode == 1 and "bad hex key" in bad.stderr
    missing = run_in_process("get", str(Path(db).parent / "nope"), "00")
    assert missing.returncode == 1 and "no database" in missing.stderr
