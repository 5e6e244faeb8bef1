"""`opendata-kv stats` in bounded memory (issue 43 point 5): its walk reads with the lean
window (store/scan.py LEAN_*: 1 MiB x 2 per SST) where dump and export keep the bulk one
(4 MiB x 4, which held stats of 10M records at 364 MiB peak RSS). Memory itself is measured by
tools/bench_tools_scale.py (docs/performance.md), not here: the test checks the options each
command's scans hand to slatedb."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process

import opendata_kv.store.scan as scanmod
from opendata_kv import RecordType, Store, fields

thing = RecordType("thing", 1, [("n", fields.u32)])


def windows(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, bool]]:
    """(read_ahead_bytes, max_fetch_tasks, cache_blocks) of every scan slatedb opens (scans
    open through calls.scan)."""
    seen: list[tuple[int, int, bool]] = []
    scan = scanmod.calls.scan

    def spy(source: Any, *args: Any) -> Any:
        options = args[-1]
        seen.append((options.read_ahead_bytes, options.max_fetch_tasks, options.cache_blocks))
        return scan(source, *args)

    monkeypatch.setattr(scanmod.calls, "scan", spy)
    return seen


@pytest.fixture
def db(tmp_path: Path) -> str:
    async def fill() -> None:
        async with Store.open(tmp_path / "db", [thing]) as store:
            await store.put_many((thing, (n,), {"n": n}) for n in range(300))

    asyncio.run(fill())
    return str(tmp_path / "db")


def test_stats_reads_with_the_lean_window(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = windows(monkeypatch)
    result = run_in_process("stats", db, "--json")
    assert result.returncode == 0, result.stderr
    assert '"count": 300' in result.stdout
    lean = (scanmod.LEAN_READ_AHEAD_BYTES, scanmod.LEAN_FETCH_TASKS, False)
    assert seen and set(seen) == {lean}, seen


@pytest.mark.parametrize("command", ["dump", "export"])
def test_dump_and_export_keep_the_bulk_window(
    db: str, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    seen = windows(monkeypatch)
    result = run_in_process(command, db)
    assert result.returncode == 0, result.stderr
    bulk = (scanmod.BULK_READ_AHEAD_BYTES, scanmod.BULK_FETCH_TASKS, False)
    assert (
        bulk in seen
        and (scanmod.LEAN_READ_AHEAD_BYTES, scanmod.LEAN_FETCH_TASKS, False) not in seen
    ), seen
