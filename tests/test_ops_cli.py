"""opendata-kv changes, checkpoint create|list|delete, clone and dump/stats --checkpoint:
the JSON keys issue 12 names, exit codes, and a clean stop of --follow on Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from storekit import SCHEMA, VALUES, Post, like, post2
from writer_process import child_env

from opendata_kv.cli.main import main
from opendata_kv.store import SyncStore


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Any], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "db")
    with SyncStore.open(path, SCHEMA, values=VALUES) as store:
        store.put(post2, ("did:plc:a", "3k"), Post("hi"))
        store.put(like, (1,), {"v": b"\x00\x01", "f": float("nan")})
        store.delete(post2, ("did:plc:a", "3k"))
        store.put_raw(b"\xf0\x01", b"\xc1")  # no RecordType; not msgpack either
        store.flush()
    return path


def test_changes_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, changes, err = run(capsys, "changes", db, "--schema", "storekit:VALUES", "--json")
    # the value that does not decode makes it exit 1, after every change, with one line
    assert code == 1
    assert err == (
        "opendata-kv: error: 1 of 4 changes did not decode (shown raw with the reason)\n"
    )
    head = ["cursor", "seq", "op", "key_hex", "record", "key"]
    assert [list(c) for c in changes] == [[*head, "value", "error"]] * 3 + [
        [*head, "value_hex", "error"]
    ]
    assert [(c["op"], c["record"], c["key"], c.get("value")) for c in changes] == [
        ("put", "post", {"repo": "did:plc:a", "rkey": "3k"}, {"text": "hi", "lang": "en"}),
        ("put", "like", {"n": 1}, {"v": "0001", "f": "nan"}),  # as dump shows them
        ("delete", "post", {"repo": "did:plc:a", "rkey": "3k"}, None),
        ("put", None, None, None),  # no RecordType owns it, not msgpack: bytes, and why
    ]
    assert changes[3]["value_hex"] == "c1" and "not a msgpack value" in changes[3]["error"]
    assert [c["error"] for c in changes[:3]] == [None] * 3
    code, rest, _ = run(capsys, "changes", db, "--json", "--since", changes[1]["cursor"])
    assert [c["cursor"] for c in rest] == [c["cursor"] for c in changes[2:]]
    assert all(c["record"] is None for c in rest)  # no --schema: nothing is named
    code, first, _ = run(capsys, "changes", db, "--json", "--limit", "1")
    assert [c["seq"] for c in first] == [changes[0]["seq"]]
    code, _, err = run(capsys, "changes", db, "--since", "nonsense")
    assert code == 1 and "malformed change cursor" in err
    for poll in ("0", "-1", "nan", "soon"):  # a usage error, not a traceback
        with pytest.raises(SystemExit) as usage:
            main(["changes", db, "--poll", poll])
        assert usage.value.code == 2
        assert (
            capsys.readouterr()
            .err.splitlines()[-1]
            .startswith("opendata-kv changes: error: argument --poll: poll must be")
        )


def test_checkpoint_commands(db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, made, _ = run(
        capsys, "checkpoint", "create", db, "--name", "nightly", "--lifetime", "3600", "--json"
    )
    assert code == 0 and list(made[0]) == ["id", "name", "manifest_id", "created", "expires"]
    assert made[0]["name"] == "nightly" and made[0]["expires"] is not None
    code, listed, _ = run(capsys, "checkpoint", "list", db, "--json")
    assert [c["id"] for c in listed] == [made[0]["id"]]
    with SyncStore.open(db, SCHEMA, values=VALUES) as store:
        store.put(like, (2,), {"v": 2})
        store.flush()
    code, dumped, _ = run(capsys, "dump", db, "--checkpoint", made[0]["id"], "--json")
    assert len(dumped) == 2  # like 1 and the raw key, not like 2
    code, by_name, _ = run(capsys, "dump", db, "--checkpoint", "nightly", "--json")
    assert by_name == dumped
    code, stats, _ = run(capsys, "stats", db, "--checkpoint", made[0]["id"], "--json")
    assert stats[0]["count"] == 2
    code, cloned, _ = run(  # by name: the JSON names the checkpoint by its id
        capsys, "clone", db, str(tmp_path / "copy"), "--checkpoint", "nightly", "--json"
    )
    assert code == 0 and len(cloned) == 1
    assert cloned[0] == {
        "source": db,
        "destination": str(tmp_path / "copy"),
        "checkpoint": made[0]["id"],
        "records": 2,  # the count the library returns (issue 20.3)
        "index_rows": 0,  # index rows apart (issue 27 point 11)
        "source_cursor": cloned[0]["source_cursor"],
        "resumed": False,
    }
    code, copied, _ = run(capsys, "dump", str(tmp_path / "copy"), "--json")
    assert [d["key_hex"] for d in copied] == [d["key_hex"] for d in dumped]
    code, _, err = run(capsys, "clone", db, str(tmp_path / "copy"))
    assert code == 1 and "already holds a database" in err
    code, deleted, _ = run(capsys, "checkpoint", "delete", db, "nightly", "--json")
    assert code == 0 and deleted == [{"id": made[0]["id"], "deleted": True}]
    code, _, err = run(capsys, "checkpoint", "delete", db, made[0]["id"])
    assert code == 1 and "no checkpoint" in err
    code, _, err = run(capsys, "dump", db, "--checkpoint", made[0]["id"])
    assert code == 1 and "no such checkpoint" in err
    code, _, err = run(capsys, "dump", db, "--checkpoint", "nosuch")  # named once, not twice
    assert code == 1 and err.startswith(f"opendata-kv: error: open reader on {db}: no checkpoint")


def test_follow_stops_cleanly_on_ctrl_c(db: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "opendata_kv", "changes", db, "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]  # the existing changes
        with SyncStore.open(db, SCHEMA, values=VALUES) as store:
            store.put(like, (9,), {"v": 9})
            store.flush()
        followed = json.loads(proc.stdout.readline())  # a change made while following
        assert followed["key_hex"] == "01300000000000000009"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # a clean stop; the fixture's undecodable value (b"\xc1") still makes it exit 1
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert f"resume with --since {followed['cursor']}" in err
    assert err.endswith("1 of 5 changes did not decode (shown raw with the reason)\n")
    assert len(lines) == 4 and out == ""


ITEM_SCHEMA = """
from opendata_kv import RecordType, Schema, fields
from opendata_kv.values import DecodeLimits, Values

item = RecordType("item", 6, [("n", fields.u32)])
S = Schema(item)
CAPPED = Values(S, limits=DecodeLimits(max_str_len=16))
"""


def test_changes_tells_undecodable_values_from_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28.6: poison bytes and a value over a decode cap are bytes with an error (value_hex
    and error in --json, hex and `!` in text) and exit 1; the string "c1c1" stays a string."""
    (tmp_path / "items.py").write_text(ITEM_SCHEMA)
    path = str(tmp_path / "db")
    from opendata_kv import RecordType, Schema, fields

    item = RecordType("item", 6, [("n", fields.u32)])
    with SyncStore.open(path, Schema(item)) as store:
        store.put_raw(item.encode(2), b"\xc1\xc1 poison")
        store.put(item, (3,), "c1c1")
        store.put(item, (4,), "x" * 17)  # over CAPPED's max_str_len only
        store.flush()
    spec = f"{tmp_path / 'items.py'}:S"
    code, changes, err = run(capsys, "changes", path, "--schema", spec, "--json")
    assert code == 1 and err.endswith("1 of 3 changes did not decode (shown raw with the reason)\n")
    poison, string, long = changes
    assert poison["value_hex"] == b"\xc1\xc1 poison".hex() and "value" not in poison
    assert "not a msgpack value" in poison["error"]
    assert string["value"] == "c1c1" and string["error"] is None and "value_hex" not in string
    assert long["value"] == "x" * 17
    code, changes, err = run(capsys, "changes", path, "--schema", spec[:-1] + "CAPPED", "--json")
    assert code == 1 and "2 of 3 changes did not decode" in err
    assert "max_str_len" in changes[2]["error"] and changes[2]["value_hex"].startswith("b1")
    assert main(["changes", path, "--schema", spec]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "put     item(n=2) c1c120706f69736f6e  ! item v1 key 0x016000000002: value" in lines[0]
    assert "item(n=3) 'c1c1'  [" in lines[1] and "!" not in lines[1]
