"""The listing bench's own small run: repos() and collections() find every repo and
collection its workload wrote (bench_listing.measure asserts it); no timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

from storekit import aio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bench_listing


@aio
async def test_small_run_lists_every_repo(tmp_path: Path) -> None:
    result = await bench_listing.measure(str(tmp_path / "db"), repos=30, per_repo=4)
    assert result["repos"] == 30 and result["records"] == 29 * 4 + 400
    assert result["keys_scan_s"] > 0 and result["repos_s"] > 0
