"""A last-resort guard for the reliability tests: a hang fails the test instead of CI hanging.

pytest-timeout is not a dependency. `hang_guard(seconds)` arms SIGALRM: if the block is still
running after `seconds`, the main thread gets a TimeoutError right where it is stuck (blocking
waits are interrupted), so the test fails with that stack and the run goes on. If even that
cannot get through (stuck inside native code), faulthandler dumps every thread's stack and
ends the process 30 s later.
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class HangError(TimeoutError):
    """Raised in the main thread when a guarded block overran its time."""


@contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    def expired(signum: int, frame: FrameType | None) -> None:
        _show_tasks()
        raise HangError(f"hang guard: still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + 30, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()


def _show_tasks() -> None:
    """Every task of the event loop the main thread is running, with the await it is stuck
    in, on stderr: a hang in asyncio.run shows only the loop's select otherwise."""
    loop = asyncio._get_running_loop()
    if loop is None:
        return
    for task in asyncio.all_tasks(loop):
        print(f"hang guard: pending {task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
