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

from opendata_kv.native import accel, calls


@pytest.mark.usefixtures("frozen_heap")  # the bench runs gc.collect() before every sample
def test_a_tiny_run_reports_every_path_on_both_native_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = os.sched_getaffinity(0)
    argv = ["--records", "300", "--gets", "50", "--rounds", "2", "--pin", "one", "--json"]
    assert bench_sstget.main(argv) == 0
    assert os.sched_getaffinity(0) == before  # pinning undone
    results = json.loads(capsys.readouterr().out)
    # this process's own run (none when OPENDATA_KV_NO_EXTENSIONS is set: it would repeat the
    # pure run; ctypes where the extension is not built), then the pure path's
    accelerated = accel.describe(calls.status()) == "native: C accelerator"
    own = [] if os.environ.get("OPENDATA_KV_NO_EXTENSIONS") else [not accelerated]
    assert [("ctypes" in r["native"]) for r in results] == [*own, True]
    for result in results:
        (variant,) = result["variants"].values()
        assert "1 L0 SST" in variant["where"]
        assert {"SyncStore.get", "Store.get (async)"} <= set(variant["rows"])
        for row in variant["rows"].values():
            assert row["gets"] == 100 and 0 < row["p50"] <= row["p99"]
