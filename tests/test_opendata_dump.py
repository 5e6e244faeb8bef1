"""The inspection commands on real slatedb databases configured as OpenData configures them:
segment extractors named opendata-log/v1, -timeseries/v2, -vector/v1, a merge operator and
merge operands. Each opens read-only and writes nothing."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import opendata_dbs
import pytest
from clikit import json_lines, run_in_process


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
        "CollectionMeta", "SeqBlock", "IdDictionary", "VectorData", "MetadataIndex",
        "CentroidStats", "Centroids", "CentroidInfo", "DeletionsSentinel", "TermStats",
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
        "field": "color", "value_type": 0, "value": "red"
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
