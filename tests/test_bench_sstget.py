"""The warm-SST-get bench's own small run: the load lands in one L0 SST (checked through the
manifest, or the tool exits), every path times every get, pinning is undone afterwards and
both native paths report. No timing is asserted."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bench_sstget


def test_a_tiny_run_reports_every_path_on_both_native_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = os.sched_getaffinity(0)
    argv = ["--records", "300", "--gets", "50", "--rounds", "2", "--pin", "one", "--json"]
    assert bench_sstget.main(argv) == 0
    assert os.sched_getaffinity(0) == before  # pinning undone
    results = json.loads(capsys.readouterr().out)
    assert [("ctypes" in r["native"]) for r in results] == [False, True]
    for result in results:
        (variant,) = result["variants"].values()
        assert "1 L0 SST" in variant["where"]
        assert {"SyncStore.get", "Store.get (async)"} <= set(variant["rows"])
        for row in variant["rows"].values():
            assert row["gets"] == 100 and 0 < row["p50"] <= row["p99"]
