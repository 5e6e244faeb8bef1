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
    code, changes, _ = run(capsys, "changes", db, "--schema", "storekit:VALUES", "--json")
    assert code == 0
    assert [list(c) for c in changes] == [
        ["cursor", "seq", "op", "key_hex", "record", "key", "value"]
    ] * 4
    assert [(c["op"], c["record"], c["key"], c["value"]) for c in changes] == [
        ("put", "post", {"repo": "did:plc:a", "rkey": "3k"}, {"text": "hi", "lang": "en"}),
        ("put", "like", {"n": 1}, {"v": "0001", "f": "nan"}),  # as dump shows them
        ("delete", "post", {"repo": "did:plc:a", "rkey": "3k"}, None),
        ("put", None, None, "c1"),  # no RecordType owns it; value bytes as hex
    ]
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
        assert capsys.readouterr().err.splitlines()[-1].startswith(
            "opendata-kv changes: error: argument --poll: poll must be"
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
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert f"resume with --since {followed['cursor']}" in err
    assert len(lines) == 4 and out == ""
