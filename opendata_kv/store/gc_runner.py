"""The writer's garbage collection, run beside the Db instead of inside it, off the close path.

slatedb's Db runs its garbage collector as one of its tasks, and Db.shutdown waits for a pass
in flight: a pass deletes each obsolete object with its own request (8 at a time), so closing
a writer while ~250 objects were being collected took 5-6 s through an 80 ms endpoint
(issue 43). The writer therefore opens its Db with every collector task off and runs the same
collection, with the same `garbage_collector_options`, through slatedb's Admin.run_gc_once on
a thread of its own: close() tells it to stop and returns without waiting for the pass (its
deletes are idempotent; whatever it leaves, the next writer's pass collects).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import re
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any, Final

from opendata_kv.native.slatedb import (
    AdminBuilder,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
)
from opendata_kv.store.settings import slatedb_settings

#: the collector's tasks with a min_age, and the one (detach) with an interval only
AGED: Final = (
    "manifest_options",
    "wal_options",
    "wal_fence_options",
    "compacted_options",
    "compactions_options",
)
SCHEDULED: Final = ("detach_options",)
#: slatedb's interval when a task gives none
DEFAULT_INTERVAL_S: Final = 600.0

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_UNIT["d"] = 86400.0


def seconds(text: str) -> float:
    """A duration as slatedb's settings JSON writes it ("600s", "1s+500ms") in seconds."""
    return sum(float(n) * _UNIT[unit] for n, unit in _PART.findall(text))


def off(group: Mapping[str, Any]) -> dict[str, Any]:
    """`garbage_collector_options` with every task off (what the Db itself is given)."""
    return {**group, **dict.fromkeys((*AGED, *SCHEDULED))}


def split(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the settings the Db opens with: the collector's tasks off, the collector's effective
    `garbage_collector_options`: slatedb's defaults, the library's and `settings` merged)."""
    effective = json.loads(slatedb_settings(settings).to_json_string())
    group: dict[str, Any] = effective["garbage_collector_options"]
    db = {k: v for k, v in settings.items() if not k.startswith("garbage_collector_options")}
    db["garbage_collector_options"] = off(group)
    return db, group


def _ms(text: str | None) -> int | None:
    return None if text is None else round(seconds(text) * 1000)


class GcRunner:
    """Runs the collector's due tasks (each on its own interval, the first pass at once, as
    slatedb's does) on a daemon thread until stop(), which cancels a pass in flight."""

    def __init__(self, db_path: str, object_store: Any, group: Mapping[str, Any]) -> None:
        self._admin = AdminBuilder(db_path, object_store).build()
        self._group = dict(group)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self.passes = 0  # passes finished (for tests)

    @property
    def tasks(self) -> list[str]:
        """The tasks configured to run."""
        return [name for name in (*AGED, *SCHEDULED) if self._group.get(name) is not None]

    def start(self) -> None:
        if not self.tasks:
            return
        self._thread = threading.Thread(target=self._run, name="opendata-kv-gc", daemon=True)
        _RUNNING.add(self)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, cancelling a pass in flight (its deletes are idempotent; the next
        pass collects what it left); returns at once."""
        with self._lock:
            self._stopped.set()
            if self._loop is not None and self._main is not None:
                with contextlib.suppress(RuntimeError):  # the loop has already finished
                    self._loop.call_soon_threadsafe(self._main.cancel)

    def join(self, timeout: float) -> None:
        """Wait (at most `timeout` s) for the thread to end after stop()."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _options(self, due: list[str]) -> Any:
        chosen: dict[str, Any] = {}
        for name in due:
            task = self._group[name]
            if name in SCHEDULED:
                chosen[name] = GarbageCollectorScheduleOptions(interval_ms=_ms(task["interval"]))
            else:
                chosen[name] = GarbageCollectorDirectoryOptions(
                    interval_ms=_ms(task.get("interval")),
                    min_age_ms=_ms(task["min_age"]) or 0,
                    dry_run=bool(task.get("dry_run", False)),
                )
        return GarbageCollectorOptions(
            **chosen,
            disable_boundary_files=not self._group.get("boundary_files_enabled", True),
            object_store_max_retries=self._group.get("object_store_max_retries"),
        )

    def _interval(self, name: str) -> float:
        text = self._group[name].get("interval")
        return DEFAULT_INTERVAL_S if text is None else max(seconds(text), 0.01)

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(self._passes())
        _RUNNING.discard(self)

    async def _passes(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            self._loop, self._main = asyncio.get_running_loop(), asyncio.current_task()
        now = time.monotonic()
        due_at = dict.fromkeys(self.tasks, now)
        while True:
            now = time.monotonic()
            due = [name for name, at in due_at.items() if at <= now]
            if not due:
                await asyncio.sleep(min(due_at.values()) - now)
                continue
            # a failed pass (endpoint down, ...) is tried again on the next interval, as
            # slatedb's own collector does: it logs the error and carries on
            with contextlib.suppress(Exception):
                await self._admin.run_gc_once(self._options(due))
            self.passes += 1
            for name in due:
                due_at[name] = time.monotonic() + self._interval(name)


#: runners whose thread is alive: stopped and joined at interpreter exit, so no thread is
#: inside slatedb when the interpreter tears down
_RUNNING: weakref.WeakSet[GcRunner] = weakref.WeakSet()
EXIT_JOIN_S: Final = 5.0


@atexit.register
def _stop_all() -> None:
    runners = list(_RUNNING)
    for runner in runners:
        runner.stop()
    for runner in runners:
        runner.join(EXIT_JOIN_S)
