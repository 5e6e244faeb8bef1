"""The one progress line of the long commands (export, import, clone, index build/rebuild):
on a terminal's stderr only, never with --json, shown once a command has run for a second,
redrawn at most four times a second, erased at the end.

It shows the count and the rate, and with a known total (the bytes of the SSTs and WAL files
the manifest names, `manifest_bytes`) how far the command has got and an estimate of the
time left. Written by hand rather than with rich or tqdm: one line of `\\r` and an erase
needs no dependency, and neither library gives the rules above (a delay, no output off a
terminal) without configuring as much as this is.

`OPENDATA_KV_PROGRESS_DELAY` (seconds) overrides the one-second delay.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO, Any

from opendata_kv.cli.text import human_bytes

ENV_DELAY = "OPENDATA_KV_PROGRESS_DELAY"


def _delay(default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_DELAY, default)))
    except ValueError:
        return default


class Progress:
    """`LABEL: N records, SIZE, R records/s[, P% of ~TOTAL, ETA]` on a terminal's stderr.

    `update(records, size)` after each batch (the interface stats and dump use); `step(done,
    state)` for a phase name instead of a size (index build, import, clone); `done()` erases
    the line. `total_bytes`: what `size` counts towards, for the percentage and the
    estimate. `quiet` (--json) keeps it off whatever stderr is."""

    def __init__(
        self,
        stream: IO[str],
        label: str = "scanned",
        *,
        unit: str = "records",
        total_bytes: int | None = None,
        quiet: bool = False,
        delay: float = 1.0,
        every: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.label = label
        self.unit = unit
        self.total_bytes = total_bytes
        self.every = every
        self.clock = clock
        self.enabled = not quiet and stream.isatty()
        self.started = clock()
        self.next_draw = self.started + _delay(delay)
        self.drawn = False

    def _due(self) -> float | None:
        """The time now when a redraw is due, else None."""
        if not self.enabled:
            return None
        now = self.clock()
        if now < self.next_draw:
            return None
        self.next_draw = now + self.every
        return now

    def rate(self, count: int, now: float) -> str:
        elapsed = now - self.started
        if elapsed <= 0 or count <= 0:
            return ""
        return f", {count / elapsed:,.0f} {self.unit}/s"

    def estimate(self, size: int, now: float) -> str:
        """`, P% of ~TOTAL, ETA Ns` when the total is known (and not yet passed)."""
        total = self.total_bytes
        elapsed = now - self.started
        if not total or size <= 0 or elapsed <= 0:
            return ""
        share = min(size / total, 1.0)
        text = f", {share:.0%} of ~{human_bytes(total)}"
        if share < 1.0:
            left = (total - size) / (size / elapsed)
            text += f", about {_duration(left)} left"
        return text

    def update(self, records: int, size: int) -> None:
        now = self._due()
        if now is None:
            return
        self._draw(
            f"{self.label} {records:,} {self.unit}, {human_bytes(size)}"
            + self.rate(records, now)
            + self.estimate(size, now)
        )

    def step(self, done: int, state: str) -> None:
        now = self._due()
        if now is None:
            return
        self._draw(f"{self.label}: {done:,} {state}{self.rate(done, now)}")

    def _draw(self, text: str) -> None:
        self.stream.write(f"\r\x1b[K{text}")
        self.stream.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


async def manifest_bytes(store: Any, bound: Callable[[Any, str], Any]) -> int | None:
    """The bytes a full read of `store` goes through, as its manifest tells them: the
    estimated sizes of every SST it names (L0, sorted runs, segments). None when the manifest
    cannot be read; a read-only manifest read, within `bound` (ReadLimits.bound)."""
    from opendata_kv.objstore.objects import manifest_ssts
    from opendata_kv.store.ops.feed import admin

    location = store.location
    try:
        handle = admin(location.db_path, store._object_store, store.where)
        manifest = await bound(handle.read_manifest(None), f"read the manifest of {store.where}")
    except Exception:  # only an estimate: the command goes on without it
        return None
    if manifest is None:
        return None
    return sum(int(sst.estimated_size_bytes) for _, sst in manifest_ssts(manifest)) or None
