"""verify reports its stages and the rows it has read, and the CLI draws them on a terminal's
stderr (as stats and dump do), erased at the end."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.checks.verify import verify_sync
from opendata_kv.cli.verify_cmds import StageProgress

item = RecordType("item", 1, [("n", F.u64)])


def test_verify_reports_each_stage_and_the_rows_read(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with SyncStore.open(path, Schema(item)) as db:
        with db.batch() as batch:
            for n in range(3000):
                batch.put(item, (n,), {"n": n})
        db.flush()
    seen: list[tuple[str, int]] = []
    report = verify_sync(path, progress=lambda stage, count: seen.append((stage, count)))
    assert report.ok, report.problems
    stages = [stage for stage, _ in seen]
    assert stages[0] == "manifests" and "compactions and WAL files" in stages
    rows = [count for stage, count in seen if stage == "rows read from SSTs"]
    assert rows == sorted(rows)
    assert not rows or rows[-1] == report.checked["rows read from SSTs"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_cli_bar_draws_on_a_terminal_and_erases_itself() -> None:
    ticks = iter([0.0, 2.0, 2.1, 3.0])
    terminal = _Terminal()
    bar = StageProgress(terminal, delay=1.0, every=0.5, clock=lambda: next(ticks))
    bar.update("manifests", 0)  # 2.0 s: past the delay, drawn
    bar.update("rows read from SSTs", 1024)  # 2.1 s: too soon, skipped
    bar.update("rows read from SSTs", 2048)  # 3.0 s: drawn
    bar.done()
    shown: Any = terminal.getvalue()
    assert "verify: manifests" in shown and "2,048" in shown and "1,024" not in shown
    assert shown.endswith("\r\x1b[K")
    quiet = StageProgress(io.StringIO())
    quiet.update("manifests", 0)
    assert quiet.stream.getvalue() == ""  # type: ignore[attr-defined]
