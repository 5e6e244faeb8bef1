"""The caller's time budget, carried down to every wait under it, and blocking calls that
cannot hold the process.

`within(timeout)` sets a deadline (a monotonic time) for everything awaited or started in its
context, `each_wait(timeout)` a bound on each single wait (a caller's "no answer within N s"):
tasks and threads started there inherit both, and `budget(limit)` gives a wait the smallest
of its own limit, the bound on each wait and what is left before the deadline.

A blocking call (urllib, a file) runs through `in_thread` in a daemon thread that nobody
joins: a caller that gives up returns at once, the thread ends with its own (budgeted)
timeout, and the process never waits for it at exit (asyncio.to_thread's executor threads
are joined by asyncio.run and at interpreter exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from opendata_kv.errors import StoreUnavailableError

T = TypeVar("T")

#: the monotonic time by which the current operation must end (None: no bound)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "opendata_kv_deadline", default=None
)
#: seconds any one wait may take (None: only its own limit)
_EACH: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "opendata_kv_each_wait", default=None
)
#: seconds a reader's open waits by default before StoreUnavailableError
READER_TIMEOUT = 30.0

#: seconds a reader that only read may take to shut down before it is abandoned (against a
#: silent endpoint slatedb's shutdown waits ~30 s; on a live one it takes milliseconds)
READER_SHUTDOWN = 0.5
#: the least a budgeted wait is given, so a spent budget still fails by timing out
FLOOR = 0.05


def left() -> float | None:
    """Seconds left before the current deadline (None: no deadline), at least 0."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def budget(limit: float | None) -> float | None:
    """The smallest of `limit`, the bound on each wait and the time left (None when none
    bounds), at least FLOOR."""
    bounds = [b for b in (limit, _EACH.get(), left()) if b is not None]
    return max(FLOOR, min(bounds)) if bounds else None


@contextlib.contextmanager
def each_wait(timeout: float | None) -> Iterator[None]:
    """Every budgeted wait in this context takes at most `timeout` seconds (None: as before)."""
    if timeout is None:
        yield
        return
    current = _EACH.get()
    token = _EACH.set(timeout if current is None else min(current, timeout))
    try:
        yield
    finally:
        _EACH.reset(token)


@contextlib.contextmanager
def within(timeout: float | None) -> Iterator[None]:
    """Everything run in this context ends by now + `timeout` (or an earlier deadline)."""
    if timeout is None:
        yield
        return
    deadline = time.monotonic() + timeout
    current = _DEADLINE.get()
    token = _DEADLINE.set(deadline if current is None else min(current, deadline))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


async def bounded(
    awaitable: Awaitable[T],
    timeout: float | None,
    doing: str,
    advice: str = "check that the object store is up",
    value: Any = None,
    *,
    option: str = "timeout=",
    error: Callable[[str], Exception] | None = None,
) -> T:
    """Await `awaitable` at most `timeout` seconds (None: no bound), every wait under it given
    what is left; past it "`doing`: no answer within N s (`option`); `advice`" as a
    StoreUnavailableError (or as `error(message)`)."""
    if timeout is None:
        return await awaitable
    try:
        with within(timeout):  # the task wait_for starts inherits the deadline
            return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        named = f" ({option})" if option else ""
        message = f"{doing}: no answer within {timeout:g} s{named}; {advice}"
        raise (
            StoreUnavailableError(message, value=value) if error is None else error(message)
        ) from None


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller gave up (cancelled, timed out)
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a daemon thread (with this context: its deadline); cancelling the
    await abandons the thread, which never delays the process's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(function, *args))
        except BaseException as exc:  # handed to the awaiting task
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, future, *outcome)

    threading.Thread(target=target, name="opendata-kv-io", daemon=True).start()
    return await future
