"""The store bench's own small runs: every path runs on rows in the memtable and then in an
SST (checked through the manifest), the tables name every row, ratios are taken against the
floor when it builds and say "no floor" when it does not. No timing is asserted."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bench_floor
import bench_store

from opendata_kv import Store, SyncStore

TINY = bench_store.Sizes(records=300, gets=70, rounds=2, durability=0)
HAS_FLOOR = (bench_floor.FLOOR_DIR / "floorext.c").is_file() and shutil.which("gcc") is not None


def _check_shape(result: dict[str, Any]) -> None:
    json.dumps(result)  # the --json output
    assert set(result["tables"]) == {"memtable", "sst"}
    memtable, sst = result["tables"]["memtable"], result["tables"]["sst"]
    assert memtable["as_expected"] and "0 L0 SSTs, 0 sorted runs" in memtable["slatedb"]
    assert sst["as_expected"] and "1 L0 SSTs" in sst["slatedb"]
    for t in (memtable, sst):
        assert set(t["columns"]) == set(bench_store.COLUMNS)
        for column, cells in t["columns"].items():
            for row, cell in cells.items():
                if "missing" in cell:
                    continue
                assert len(cell["samples_us"]) == TINY.rounds, (column, row)
                assert all(us > 0 for us in cell["samples_us"])
        get_many = t["columns"]["get"]
        for row, face in (("store_many", Store), ("sync_many", SyncStore)):
            assert ("missing" in get_many[row]) == (not hasattr(face, "get_many"))
    text = bench_store.table(result)
    assert text.count("| path |") == 2
    for label in bench_store.ROWS.values():
        assert text.count(f"| {label} |") == 2


@pytest.mark.usefixtures("frozen_heap")  # the bench runs gc.collect() before every sample
def test_without_the_floor_every_ratio_says_so(tmp_path: Path) -> None:
    result = bench_store.measure(
        TINY, tmp_path / "stores", floor_dir=tmp_path / "absent", build_dir=tmp_path / "build"
    )
    assert result["floor"] == f"no floor: {tmp_path / 'absent'} not found"
    _check_shape(result)
    for t in result["tables"].values():
        for cells in t["columns"].values():
            assert cells["floor"] == {"missing": "no floor", "target": None}
            assert all(c.get("ratio") is None for c in cells.values())
    text = bench_store.table(result)
    assert "(no floor)" in text and "x, target" not in text


@pytest.mark.skipif(not HAS_FLOOR, reason="needs ../shared/floor and gcc")
@pytest.mark.usefixtures("frozen_heap")
def test_with_the_floor_ratios_are_per_round(tmp_path: Path) -> None:
    result = bench_store.measure(TINY, tmp_path / "stores", build_dir=tmp_path / "build")
    assert result["floor"].startswith(str(tmp_path / "build")), result["floor"]
    _check_shape(result)
    for t in result["tables"].values():
        for cells in t["columns"].values():
            if "missing" in cells["floor"]:  # a column the floor has no call for (single put)
                assert all(c.get("ratio") is None for c in cells.values())
                continue
            floor = cells["floor"]["samples_us"]
            assert cells["floor"]["ratio"] == 1.0
            for cell in cells.values():
                if "missing" not in cell:
                    ratios = [a / b for a, b in zip(cell["samples_us"], floor, strict=True)]
                    assert min(ratios) <= cell["ratio"] <= max(ratios)
                    assert cell["met"] == (
                        None if cell["target"] is None else cell["ratio"] <= cell["target"]
                    )


def test_cells_name_the_target_and_the_verdict() -> None:
    measured = {"us": 12.345, "ratio": 2.5, "target": 3.0, "met": True, "samples_us": []}
    assert bench_store._cell("sync", measured, False) == "12.3 (2.50x, target ≤ 3.0x: met)"
    missed = {**measured, "ratio": 3.5, "met": False}
    assert bench_store._cell("sync", missed, False) == "12.3 (3.50x, target ≤ 3.0x: MISSED)"
    untargeted = {**measured, "target": None, "met": None}
    assert bench_store._cell("generated", untargeted, False) == "12.3 (2.50x)"
    no_floor = {**measured, "ratio": None, "met": None}
    assert bench_store._cell("sync", no_floor, True) == "12.3 (no floor)"
    assert bench_store._cell("store_many", {"missing": "n/a (no get_many)"}, False) == (
        "n/a (no get_many)"
    )
    assert bench_store._cell("rocksdict", None, False) == "-"
