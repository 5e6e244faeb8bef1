"""`opendata-kv tree DB`: the LSM tree from the manifest and the object listing, on a local
directory and on moto S3: a store with WAL files only, one with L0 SSTs, one compacted into a
sorted run, one with a checkpoint; keys decoded by --schema, hostile text escaped, read-only."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from opendata_kv.store import SyncStore
from tests.cli_schema import POST, VALUES
from tests.clikit import run_in_process
from tests.hang_guard import hang_guard

SPEC = ("--schema", "cli_schema:VALUES")
HOSTILE = "did:\x1b[31mred\x07"
#: small L0 SSTs and a quick compactor: a few flushes make a sorted run
COMPACTING = {
    "l0_sst_size_bytes": 4096,
    "flush_interval": "60s",
    "compactor_options.poll_interval": "50ms",
    "compactor_options.worker.compactions_poll_interval": "50ms",
    "compactor_options.commit_compacted_interval": "50ms",
}


def tree(url: str, *extra: str) -> dict[str, Any]:
    result = run_in_process("tree", url, *SPEC, "--json", *extra)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def objects(url: str) -> set[str] | None:
    """The names of the files under a local database (None for s3://): to see nothing is
    written by the tree command."""
    if url.startswith("s3://"):
        return None
    return {
        os.path.join(root, name)
        for root, _, names in os.walk(url)
        for name in names
        if "opendata-kv" not in root
    }


def test_wal_only_while_the_writer_is_open(url: str) -> None:
    with SyncStore.open(url, VALUES) as store:
        for n in range(5):
            store.put(POST, ("did:plc:a", f"r{n}"), {"t": "x"})
        store.flush()  # in a WAL file; the memtable is not flushed while the writer runs
        before = objects(url)
        report = tree(url)
        assert objects(url) == before
        assert report["l0"] == [] and report["sorted_runs"] == []
        wal = report["wal"]
        assert wal["files"] >= 1 and wal["bytes"] > 0 and wal["unreplayed_files"] >= 1
        assert wal["first_seq"] is not None and wal["last_seq"] - wal["first_seq"] >= 4
        assert report["manifest"]["last_l0_seq"] < wal["first_seq"]


def test_l0_ssts_with_decoded_key_ranges_and_hostile_keys(url: str) -> None:
    with SyncStore.open(url, VALUES) as store:
        for n in range(20):
            store.put(POST, ("did:plc:a", f"r{n:02d}"), {"t": "x"})
    with SyncStore.open(url, VALUES) as store:
        store.put(POST, (HOSTILE, "r"), {"t": "y"})
    report = tree(url)
    assert len(report["l0"]) == 2 and report["sorted_runs"] == []
    older = report["l0"][-1]  # newest first, as slatedb keeps them
    assert older["first_key"]["fields"] == {"repo": "did:plc:a", "rkey": "r00"}
    assert older["last_key"]["fields"] == {"repo": "did:plc:a", "rkey": "r19"}
    assert older["first_key"]["record"] == "post"
    assert all(s["bytes"] > 0 for s in report["l0"])
    assert report["l0_bytes"] == sum(s["bytes"] for s in report["l0"])
    assert report["l0"][0]["first_key"]["fields"]["repo"] == HOSTILE  # JSON keeps the text
    text = run_in_process("tree", url, *SPEC)
    assert text.returncode == 0, text.stderr
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout
    assert "L0: 2 SSTs" in text.stdout and "repo=did:plc:a rkey=r00" in text.stdout
    raw = run_in_process("tree", url, "--json")  # no schema: keys as hex
    first = json.loads(raw.stdout)["l0"][-1]["first_key"]
    assert bytes.fromhex(first["key_hex"]) == POST.encode("did:plc:a", "r00")


def test_compacted_into_a_sorted_run(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, VALUES, settings=COMPACTING) as store:
        for n in range(36):
            store.put(POST, ("did:plc:a", f"r{n:02d}"), {"t": "z" * 1000})
            if n % 4 == 3:
                store.flush()
        with hang_guard(60):
            while not tree(url)["sorted_runs"]:
                time.sleep(0.05)
    report = tree(url)
    # one run as a rule; on a loaded machine the compactor can take the L0 SSTs in more
    # than one compaction, each its own run (seen with 3 pytest workers on 2 cores)
    runs = report["sorted_runs"]
    assert runs
    for run in runs:
        assert run["ssts"] and run["bytes"] == sum(s["bytes"] for s in run["ssts"])
        keys = [s["first_key"]["key_hex"] for s in run["ssts"]]
        assert keys == sorted(keys)  # a sorted run's SSTs are in key order
    # the first compaction took the first flush's SST
    assert min(run["first_key"]["fields"]["rkey"] for run in runs) == "r00"
    assert report["manifest"]["compactor_epoch"] >= 1
    text = run_in_process("tree", url, *SPEC).stdout
    assert f"sorted runs: {len(runs)}" in text


def test_checkpoint_pins_its_manifest_and_gc_says_what_is_collectable(url: str) -> None:
    with SyncStore.open(url, VALUES) as store:
        for n in range(10):
            store.put(POST, ("did:plc:a", f"r{n}"), {"t": "x"})
        checkpoint = store.checkpoint("night\x1b[2J")
        for n in range(10, 20):
            store.put(POST, ("did:plc:a", f"r{n}"), {"t": "x"})
    report = tree(url)
    (shown,) = report["checkpoints"]
    assert shown["id"] == checkpoint.id and shown["manifest_id"] == checkpoint.manifest_id
    assert shown["name"] == "night\x1b[2J"
    assert shown["manifest_id"] < report["manifest"]["id"]
    assert shown["pins"]["ssts"] == 1 and len(report["l0"]) == 2
    gc = report["gc"]
    assert gc["oldest_pinned_manifest"] == checkpoint.manifest_id
    assert gc["wal_needed_after_id"] == shown["pins"]["replay_after_wal_id"]
    assert gc["ssts"] == {"count": 0, "bytes": 0}  # both L0 SSTs are needed
    assert gc["manifests"]["count"] >= 1
    text = run_in_process("tree", url, *SPEC).stdout
    assert "\x1b" not in text and checkpoint.id in text


def test_missing_database(tmp_path: Path, s3_url: str) -> None:
    missing = run_in_process("tree", str(tmp_path))
    assert missing.returncode == 1 and "no SlateDB database" in missing.stderr
    on_s3 = run_in_process("tree", s3_url)
    assert on_s3.returncode == 1 and "no SlateDB database" in on_s3.stderr


def test_a_stopped_endpoint_fails_within_the_bound(
    private_moto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "s3://opendata-kv-test/stopped"
    with SyncStore.open(url, VALUES) as store:
        store.put(POST, ("did:plc:a", "r"), {"t": "x"})
    private_moto.stop()
    with hang_guard(60):
        result = run_in_process("tree", url, "--timeout", "2")
    assert result.returncode == 1
    assert "no answer within 2 s" in result.stderr and "--timeout" in result.stderr
