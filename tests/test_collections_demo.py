"""`opendata-kv demo DIR`: writes every collection, dumps it, reruns, refuses directories it
did not create. Run in-process; tests/test_cli_dump.py proves the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import CliResult, run_in_process

from opendata_kv.cli.demo import MARKER, prepare
from opendata_kv.cli.main import build_parser
from opendata_kv.errors import OpendataKvError

RECORD_NAMES = ("atproto_record", "change", "change_by_medallion", "page", "page_id")


def demo(*args: str, cwd: Path | None = None) -> CliResult:
    """`opendata-kv demo ARGS`, in-process (tests/clikit.py)."""
    return run_in_process("demo", *args, cwd=cwd)


def test_demo_writes_and_dumps_every_collection(tmp_path: Path) -> None:
    target = tmp_path / "demo-db"
    first = demo(str(target))
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    lines = first.stdout.splitlines()
    assert lines[0].split() == ["RECORD", "TYPE", "KEY", "VALUE"]
    for name in RECORD_NAMES:
        assert any(line.startswith(f"{name} (0x") for line in lines), name
    assert "app.bsky.actor.profile self" in first.stdout
    assert "FFFFFFFFFFFFF-FFFFFFFFFFF-00000004" in first.stdout  # the sentinel container
    assert "records in" in lines[-1]
    assert (target / MARKER).is_file()

    again = demo(str(target))  # rerun into the same directory
    assert again.returncode == 0, again.stderr
    table = [line for line in lines if " (0x" in line]
    assert len([line for line in again.stdout.splitlines() if " (0x" in line]) == len(table)
    # records and changes use fixed clocks: the same rows every run
    assert [line for line in again.stdout.splitlines() if line.startswith("atproto_record")] == [
        line for line in lines if line.startswith("atproto_record")
    ]


def test_demo_json_lines(tmp_path: Path) -> None:
    result = demo(str(tmp_path / "db"), "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {row["record"] for row in rows} == set(RECORD_NAMES)
    # the row shape of `dump --values --json`
    shape = {
        "key_hex",
        "version",
        "record_type",
        "reserved",
        "record",
        "fields",
        "value",
        "value_size",
        "error",
    }
    assert all(set(row) == shape and row["error"] is None for row in rows)
    profile = next(r for r in rows if r["fields"].get("rkey") == "self")
    assert profile["record_type"] == 0xA
    assert profile["value"]["$type"] == "app.bsky.actor.profile"
    ids = [r["value"] for r in rows if r["record"] == "page_id"]
    redirects = [v for v in ids if v["requested"] != v["url"]]
    assert redirects == [
        {
            "requested": "https://example.com/blog/slatedb?ref=feed",  # utm_source cleaned off
            "url": "https://example.com/blog/slatedb-on-object-storage",
            "key": redirects[0]["key"],
        }
    ]
    page_keys = {r["fields"]["url_key"] for r in rows if r["record"] == "page"}
    assert {v["key"] for v in ids} <= page_keys

    dumped = run_in_process(
        "dump",
        str(tmp_path / "db"),
        "--values",
        "--json",
        "--schema",
        "opendata_kv.collections:default_schema",
    )
    assert dumped.returncode == 0, dumped.stderr
    assert [json.loads(line) for line in dumped.stdout.splitlines()] == rows


def test_demo_default_dir_is_relative_to_cwd(tmp_path: Path) -> None:
    result = demo(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "opendata-kv-demo" / MARKER).is_file()


def test_demo_refuses_a_directory_it_did_not_create(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    result = demo(str(precious))
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert "not a demo database" in result.stderr
    assert "Traceback" not in result.stderr
    assert (precious / "data.txt").read_text() == "keep me"

    a_file = tmp_path / "file"
    a_file.write_text("x")
    result = demo(str(a_file))
    assert result.returncode == 1
    assert "not a directory" in result.stderr and "Traceback" not in result.stderr


def test_prepare_accepts_an_empty_directory_and_wipes_only_demo_ones(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare(empty)
    assert (empty / MARKER).is_file()
    (empty / "wal").mkdir()
    (empty / "wal" / "0001.sst").write_bytes(b"x")
    prepare(empty)  # a demo directory: wiped
    assert sorted(p.name for p in empty.iterdir()) == [MARKER]
    (empty / MARKER).unlink()
    (empty / "other").write_text("y")
    with pytest.raises(OpendataKvError):
        prepare(empty)


def test_demo_is_registered() -> None:
    args = build_parser().parse_args(["demo", "somewhere", "--json"])
    assert args.dir == "somewhere" and args.json is True
    assert build_parser().parse_args(["demo"]).dir == "./opendata-kv-demo"
