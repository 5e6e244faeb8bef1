"""The footprint bench's own small run: every variant loads, settles and is read back (every
get found, every scan the whole count, rocksdict holding the same number of records); the
library's defaults leave fewer bytes than slatedb's. No timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from storekit import aio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bench_footprint


def test_records_are_valid_and_distinct() -> None:
    keys = {bench_footprint.record(i)[:3] for i in range(2000)}
    assert len(keys) == 2000
    repo, collection, _, value = bench_footprint.record(7)
    assert repo.startswith("did:plc:") and len(repo) == 32 and value["$type"] == collection


@aio
async def test_small_run(tmp_path: Path) -> None:
    rocks = importlib.util.find_spec("rocksdict") is not None
    result = await bench_footprint.run_footprint(
        3000, ["slatedb", "default"], tmp_path, progress=False, rocks=rocks
    )
    slatedb, default = result["variants"]["slatedb"], result["variants"]["default"]
    assert bench_footprint.total(default["settled"]) < bench_footprint.total(slatedb["settled"])
    assert default["settings"] == {} and slatedb["settings"] == {"compression_codec": None}
    if rocks:
        assert result["rocksdict"]["copied"] == 3000
    assert "| default |" in bench_footprint.table(result)
