"""The inspection commands on real slatedb databases configured as OpenData configures them:
segment extractors named opendata-log/v1, -timeseries/v2, -vector/v1, a merge operator and
merge operands. Each opens read-only and writes nothing."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import opendata_dbs
import pytest
from clikit import json_lines, run_in_process

from opendata_kv.layouts import opendata
from opendata_kv.native import opendata_compat


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("opendata")
    return {kind: opendata_dbs.build(str(root / kind), kind) for kind in opendata_dbs.KINDS}


def snapshot(path: str) -> dict[str, str]:
    """Every file under `path` with a hash of its bytes."""
    out = {}
    for folder, _dirs, files in os.walk(path):
        for name in files:
            full = Path(folder, name)
            out[str(full)] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


EXPECTED_RECORDS = {
    "log": {"SeqBlock", "SegmentMeta", "LogEntry", "ListingEntry"},
    "timeseries": {"SeriesDictionary", "ForwardIndex", "InvertedIndex", "TimeSeries"},
    "vector": {
        "CollectionMeta",
        "SeqBlock",
        "IdDictionary",
        "VectorData",
        "MetadataIndex",
        "CentroidStats",
        "Centroids",
        "CentroidInfo",
        "DeletionsSentinel",
        "TermStats",
        "FieldStats",
    },
}


@pytest.mark.parametrize("kind", list(EXPECTED_RECORDS))
def test_dump_decodes_every_kind_and_writes_nothing(dbs: dict[str, str], kind: str) -> None:
    before = snapshot(dbs[kind])
    result = run_in_process("dump", dbs[kind], "--values", "--json")
    assert result.returncode == 0, result.stderr
    rows = json_lines(result.stdout)
    assert {r["record"] for r in rows} == EXPECTED_RECORDS[kind]
    assert all(r["layout"] == "opendata" and r["subsystem"] == kind for r in rows)
    assert all(r["error"] is None and "value" in r for r in rows)
    assert snapshot(dbs[kind]) == before


def test_dump_values_and_merge_operands(dbs: dict[str, str]) -> None:
    rows = json_lines(run_in_process("dump", dbs["vector"], "--values", "--json").stdout)
    by_record = {r["record"]: r for r in rows}
    stats = by_record["CentroidStats"]["value"]
    assert stats["base"] is None
    # the writer's merge may have folded the two operands; their sum is what remains
    assert sum(op["num_vectors_delta"] for op in stats["operands"]) == 3
    assert by_record["VectorData"]["value"]["vector"] == [0.5, -1.0]
    assert by_record["MetadataIndex"]["fields"] == {
        "field": "color",
        "value_type": 0,
        "value": "red",
    }
    log = json_lines(run_in_process("dump", dbs["log"], "--values", "--json").stdout)
    segments = [r["fields"]["segment_id"] for r in log if r["record"] == "LogEntry"]
    assert segments == [1, 1, 256]


def test_stats_per_record_and_log_segment(dbs: dict[str, str]) -> None:
    before = snapshot(dbs["log"])
    result = run_in_process("stats", dbs["log"], "--json")
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    records = {r["record"]: r["count"] for r in obj["opendata"]["records"]}
    assert records == {"SeqBlock": 1, "SegmentMeta": 2, "LogEntry": 3, "ListingEntry": 2}
    segments = {s["segment_id"]: (s["keys"], s["records"]) for s in obj["opendata"]["log_segments"]}
    assert segments == {0: (3, 0), 1: (3, 2), 256: (2, 1)}
    assert obj["count"] == 8
    assert snapshot(dbs["log"]) == before


def test_changes_and_verify_open_read_only(dbs: dict[str, str]) -> None:
    for kind in ("log", "timeseries", "vector"):
        before = snapshot(dbs[kind])
        changes = run_in_process("changes", dbs[kind], "--json")
        assert changes.returncode == 0, changes.stderr
        seen: list[dict[str, Any]] = json_lines(changes.stdout)
        assert {c["record"] for c in seen} <= EXPECTED_RECORDS[kind]
        verify = run_in_process("verify", dbs[kind], "--json")
        report = json.loads(verify.stdout)
        assert report["checked"]["rows read from SSTs"] > 0
        # a database written with a segment extractor keeps its L0 per segment: verify
        # reads it whole and finds nothing wrong (exit 0)
        assert report["problems"] == [] and verify.returncode == 0, report
        # ... including each SST's filter, index and stats blocks (issue 28, point 7: the
        # block probe once lacked the extractor, said "ok" and left them unread)
        assert report["checked"]["SST filter, index and stats blocks"] > 0, report
        assert not any("could not be read" in note for note in report["notes"]), report
        assert snapshot(dbs[kind]) == before


def test_plain_reader_needs_what_compat_adds(dbs: dict[str, str]) -> None:
    import asyncio

    from slatedb.uniffi import DbReaderBuilder, ObjectStore

    async def bare() -> None:
        await DbReaderBuilder(dbs["log"], ObjectStore.resolve("file:///")).build()

    with pytest.raises(Exception, match="segment extractor configuration mismatch"):
        asyncio.run(bare())


MARKER = b"\xffopendata-kv:operands\x00"  # the frame marker as main at 6d7b970 wrote it


def test_stored_marker_bytes_are_plain_values(tmp_path: Path) -> None:
    """Issue 28.1: a LogEntry or KeyValue value that starts with the frame's marker is the
    plain bytes it is: no operands made up, no decode error."""
    forged = MARKER + b"\x00" + bytes.fromhex("00000003616263")
    entry = opendata.LOG.get("LogEntry").encode(1, b"orders", 0)
    kv = opendata.KEYVALUE.get("KeyValue")
    log = opendata_dbs.build_sst_runs(
        str(tmp_path / "log"), "opendata-log/v1", [[("put", entry, forged)]]
    )
    plain = opendata_dbs.build_sst_runs(
        str(tmp_path / "kv"),
        None,
        [[("put", kv.encode(b"a"), MARKER), ("put", kv.encode(b"b"), forged)]],
    )
    for path, values in ((log, [forged]), (plain, [MARKER, forged])):
        result = run_in_process("dump", path, "--values", "--json")
        assert result.returncode == 0, result.stderr
        rows = json_lines(result.stdout)
        assert [r["error"] for r in rows] == [None] * len(values)
        assert [r["value"] for r in rows] == [{"bytes": v.hex()} for v in values]
        changes = run_in_process("changes", path, "--json")
        assert changes.returncode == 0, changes.stderr
        assert [c["value"] for c in json_lines(changes.stdout)] == [
            {"bytes": v.hex()} for v in values
        ]


@pytest.fixture
def marker_base(tmp_path: Path) -> str:
    """Issue 28.2: a vector database where CentroidStats(7) holds the marker plus one byte in
    one SST and a merge operand in another."""
    key = opendata.VECTOR.get("CentroidStats").encode(7)
    runs = [[("put", key, MARKER + b"\x01")], [("merge", key, struct.pack("<i", 5))]]
    return opendata_dbs.build_sst_runs(str(tmp_path / "vec"), "opendata-vector/v1", runs)


def test_marker_base_under_an_operand_reads_everywhere(marker_base: str) -> None:
    for args in (["dump"], ["dump", "--layout", "none"], ["stats"]):
        result = run_in_process(*args, marker_base, "--json")
        assert result.returncode == 0 and "panicked" not in result.stderr, result.stderr
    (row,) = json_lines(run_in_process("dump", marker_base, "--json").stdout)
    assert row["record"] == "CentroidStats" and row["error"] is None
    # the frame as shown has the process's secret cut out: base, then the operand
    parts = [MARKER + b"\x01", struct.pack("<i", 5)]
    shown = MARKER + b"\x01" + b"".join(struct.pack(">I", len(p)) + p for p in parts)
    assert row["value_hex"] == shown.hex() and row["value_size"] == len(shown)
    # with --values the base is a stored CentroidStats value, 19 bytes too long: its own error
    result = run_in_process("dump", marker_base, "--values", "--json")
    (row,) = json_lines(result.stdout)
    assert result.returncode == 1 and "19 unexpected bytes after the value" in row["error"]
    assert "value_hex" in row and "value" not in row
    verify = run_in_process("verify", marker_base, "--json")
    report = json.loads(verify.stdout)
    assert verify.returncode == 0 and report["problems"] == [], report
    assert report["checked"]["rows read from SSTs"] == 1


def test_a_failing_merge_is_an_error_row_not_a_panic(
    marker_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28.2: whatever the merge operator's work raises stays out of Rust; the key becomes
    one error row (no value bytes to show), one stderr line, exit 1; verify stays clean."""

    def broken(existing: bytes | None, operand: bytes) -> bytes:
        raise RuntimeError("no memory today")

    monkeypatch.setattr(opendata_compat, "keep_apart", broken)
    for args in (["--values"], [], ["--layout", "none"]):
        result = run_in_process("dump", marker_base, "--json", *args)
        assert result.returncode == 1, result.stderr
        (row,) = json_lines(result.stdout)
        assert row["error"] == (
            "value: the merge failed for this key: RuntimeError: no memory today"
        )
        assert row["value_hex"] is None and row["value_size"] is None and "value" not in row
        assert result.stderr == (
            "opendata-kv: error: 1 of 1 records did not decode (shown raw with the reason)\n"
        )
    table = run_in_process("dump", marker_base)
    assert "(no value)  ! the merge failed for this key: RuntimeError" in table.stdout
    assert run_in_process("stats", marker_base).returncode == 0
    verify = run_in_process("verify", marker_base, "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["problems"] == []


def test_a_value_over_a_cap_is_shown_raw_with_its_reason(tmp_path: Path) -> None:
    """Issue 28.3/28.6: 120,000 empty TermPostings blocks ask for more than max_objects; dump
    and changes show the bytes (value_hex) with the ValueLimitError naming the record, exit 1."""
    key = opendata.VECTOR.get("TermPostings").encode("body", "fox")
    value = b"\x00" * 5 * 120_000
    path = opendata_dbs.build_sst_runs(
        str(tmp_path / "v"), "opendata-vector/v1", [[("put", key, value)]]
    )
    reason = f"value: TermPostings value of {len(value)} bytes refused: more than 500000 objects"
    for command in (["dump", "--values"], ["changes"]):
        result = run_in_process(*command, path, "--json")
        assert result.returncode == 1, result.stderr
        (row,) = json_lines(result.stdout)
        assert row["value_hex"] == value.hex() and "value" not in row
        assert row["error"].startswith(reason) and "max_objects=500000" in row["error"]
        assert result.stderr.count("\n") == 1 and "1 of 1" in result.stderr
