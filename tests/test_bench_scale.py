"""The scale bench's own small run: every side loads, reads back and decodes the workload
(counts and every decoded value checked by run_scale(verify=True)); no timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from storekit import aio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bench_scale


def test_hand_made_bytes_equal_the_key_layer() -> None:
    for i in (0, 1, 2**40, 2**64 - 1):
        assert bench_scale.hand_item_key(i) == bench_scale.ITEM.encode(i)
        assert bench_scale.hand_decode_item(bench_scale.ITEM.encode(i)) == i
    tid = bench_scale.event_tid(5)
    key = bench_scale.EVENT.encode("prefix-mid", bench_scale.tids.encode(tid))
    assert bench_scale.hand_event_key("prefix-mid", tid) == key
    assert bench_scale.hand_decode_event(key) == ("prefix-mid", tid)


@aio
async def test_small_run_counts_and_values(tmp_path: Path) -> None:
    # rocksdict is the bench extra: the Quickstart's `.[test]` environment runs the other sides
    sides = ("typed", "raw") + (("rocksdict",) if importlib.util.find_spec("rocksdict") else ())
    result = await bench_scale.run_scale(
        2000, root=tmp_path, progress=False, verify=True, sides=sides, settle_quiet_s=0.0
    )
    workload = bench_scale.Workload(2000)
    assert [size for _, size in workload.prefix_cases()] == [10, 250, 500]
    assert set(result["sides"]) == set(sides)
    for side in result["sides"].values():
        assert side["loaded"] == 2000
        assert side["full_scan_rows"] == 2000
        assert [p["rows"] for p in side["prefix"].values()] == [10, 250, 500]
        assert side["bytes_per_record"] > 0
        assert side["settle_s"] >= 0
        assert all(p["cpu_ms"] >= 0 and p["load"] >= 0 for p in side["prefix"].values())
    for name in ("typed", "raw"):  # slatedb: nothing compacted yet at this size
        assert result["sides"][name]["settled"]["l0_ssts"] >= 1
    typed = result["sides"]["typed"]
    assert typed["same_store_ratio"] > 0 and len(typed["same_store_ratio_range"]) == 2
    text = bench_scale.table(result)
    assert "typed u64 scan row rate / hand-decoded, same store" in text
    assert "u64 scan row rate, typed store / raw store" in text
