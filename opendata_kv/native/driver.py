"""Drives slatedb's Rust futures to completion: inline on the calling thread for sync callers,
through the running event loop only when a future pends for async callers.

A started call is a u64 future handle. `poll(handle, continuation, data)` polls the Rust
future on the calling thread and calls `continuation(data, code)` exactly once per poll:
inside the poll with READY when it is done, or later with WAKE from a slatedb runtime thread,
after which it is polled again. Then `complete` (errors in the call status) and `free`,
exactly once each. Poll, complete and free are never called from inside the continuation,
and they release the GIL (the library is loaded with ctypes.CDLL), which a waking runtime
thread needs while it holds the future's scheduler lock.

The same awaitable (`Pending`) serves both faces: awaited in an asyncio task it parks on an
asyncio future when (and only when) the Rust future pends; awaited under `drive()` it blocks
the calling thread on a lock instead, so a sync call needs no event loop and no other thread.
Ctrl-C while blocked frees (cancels) the Rust future and leaves the store usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import sys
import threading
from collections.abc import Awaitable, Callable, Generator, Sequence
from types import CoroutineType
from typing import Any, Generic, TypeVar

from opendata_kv.native.binding import generated

T = TypeVar("T")

READY = 0
WAKE = 1

_B = generated()
_Status = _B._UniffiRustCallStatus
_check_status = _B._uniffi_check_call_status
_Errors = _B._UniffiFfiConverterTypeError
_byref = ctypes.byref


class _Local(threading.local):
    sync = False
    lost = False  # a Ctrl-C killed a continuation on this thread (see _note_lost)


_local = _Local()


_waiters: dict[int, Waiter] = {}


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _on_continue(token: int, code: int) -> None:
    """The continuation: note the poll's code, wake whoever waits for it."""
    waiter = _waiters.pop(token, None)
    if waiter is None:  # never: each poll's token is called once
        return
    waiter.code = code
    # read after setting the code: a waiter that sets its lock or future before looking at
    # the code again is seen here, or sees the code there
    lock = waiter.lock
    if lock is not None:
        lock.release()
    future = waiter.future
    if future is not None and waiter.loop is not None:
        waiter.loop.call_soon_threadsafe(_wake, future)


def _note_lost(unraisable: Any) -> None:
    """sys.unraisablehook, chained: a Ctrl-C that lands inside the continuation (called
    inline by a poll on the main thread) cannot propagate through C, and the continuation's
    work may be undone. Note it, so the poller raises KeyboardInterrupt and frees the
    future instead of waiting for a wake-up that will not come."""
    if unraisable.object is _on_continue and issubclass(unraisable.exc_type, KeyboardInterrupt):
        _local.lost = True
        return
    _previous_hook(unraisable)


_continuation = _B._UNIFFI_RUST_FUTURE_CONTINUATION_CALLBACK(_on_continue)
_previous_hook = sys.unraisablehook
sys.unraisablehook = _note_lost


def _check_lost(waiter: Waiter) -> None:
    """KeyboardInterrupt when a Ctrl-C killed this poll's continuation (see _note_lost)."""
    if waiter.code < 0 and _local.lost:
        _local.lost = False
        raise KeyboardInterrupt


class FutureKind:
    """The poll / complete / free functions of one Rust future return type."""

    __slots__ = ("complete", "free", "name", "poll")

    def __init__(self, name: str) -> None:
        lib = _B._UniffiLib
        self.name = name
        self.poll = getattr(lib, f"ffi_slatedb_uniffi_rust_future_poll_{name}")
        self.complete = getattr(lib, f"ffi_slatedb_uniffi_rust_future_complete_{name}")
        self.free = getattr(lib, f"ffi_slatedb_uniffi_rust_future_free_{name}")


class Waiter:
    """One outstanding poll: `code` is what its continuation was called with (-1 until
    then), `lock` / `future` what a caller that had to wait for it blocks or parks on (set
    only when the poll pended). The object's id is the continuation's token."""

    __slots__ = ("code", "future", "lock", "loop")

    code: int
    lock: threading.Lock | None
    future: asyncio.Future[None] | None
    loop: asyncio.AbstractEventLoop | None


class Pending(Waiter, Generic[T]):
    """A started Rust future and how to lift its result; await it once (either face). It is
    its own poll's waiter (one poll is outstanding at a time)."""

    __slots__ = ("errors", "handle", "kind", "lift")

    def __init__(
        self, handle: int, kind: FutureKind, lift: Callable[[Any], T], errors: Any = _Errors
    ) -> None:
        self.handle = handle
        self.kind = kind
        self.lift = lift
        self.errors = errors
        self.code = -1
        self.lock = None
        self.future = None
        self.loop = None  # set with `future`

    def poll(self) -> Pending[T]:
        """Poll once; `code` is set once the continuation has fired."""
        if self.code >= 0:  # a second poll (after a WAKE): forget the first one's waiting
            self.code = -1
            self.lock = self.future = None
        token = id(self)
        _waiters[token] = self
        self.kind.poll(self.handle, _continuation, token)
        return self

    def finish(self) -> T:
        """Complete a READY future and lift its result (errors raise as slatedb's)."""
        status = _Status()
        result = self.kind.complete(self.handle, _byref(status))
        if status.code:
            _check_status(self.errors, status)
        return self.lift(result)

    def free(self) -> None:
        """Free the future (cancelling it if it still pends, which fires its continuation);
        exactly once. No continuation can come after it, so a registration left by a poll
        an interrupt cut short is dropped too."""
        self.kind.free(self.handle)
        _waiters.pop(id(self), None)

    def __await__(self) -> Generator[Any, None, T]:
        try:
            self.poll()
            while True:
                if self.code < 0:  # pending: the continuation fires later
                    _check_lost(self)
                    yield from _settle(self)
                if self.code == READY:
                    return self.finish()
                self.poll()
        finally:
            self.free()


def forget(call: Waiter) -> None:
    """Drop a registration left by a poll an interrupt cut short (after the future's free:
    no continuation can come any more)."""
    _waiters.pop(id(call), None)


def poll_once(poll: Any, handle: int, waiter: Waiter) -> None:
    """Register `waiter` and poll the future `handle` once (settle_now waits for it)."""
    waiter.code = -1
    waiter.lock = waiter.future = None
    token = id(waiter)
    _waiters[token] = waiter
    poll(handle, _continuation, token)


def settle_now(poll: Any, handle: int, waiter: Waiter) -> None:
    """After poll_once: block this thread until the future is READY, polling again after
    each WAKE."""
    while True:
        if waiter.code < 0:
            _check_lost(waiter)
            lock = threading.Lock()
            lock.acquire()
            waiter.lock = lock
            if waiter.code < 0:
                lock.acquire()  # released by the continuation; Ctrl-C interrupts
        if waiter.code == READY:
            return
        poll_once(poll, handle, waiter)


def settle(poll: Any, handle: int, waiter: Waiter) -> Generator[Any, None, None]:
    """After poll_once: wait until the future is READY (blocking under drive(), parked in
    the event loop otherwise), polling again after each WAKE."""
    while True:
        if waiter.code < 0:
            _check_lost(waiter)
            yield from _settle(waiter)
        if waiter.code == READY:
            return
        poll_once(poll, handle, waiter)


def poll_now(poll: Any, handle: int, waiter: Waiter) -> None:
    """Poll the future `handle` until READY, blocking this thread while it pends: what
    Pending.__await__ does under drive(), as a plain call for the sync face's point reads."""
    poll_once(poll, handle, waiter)
    settle_now(poll, handle, waiter)


def _settle(waiter: Waiter) -> Generator[Any, None, None]:
    """Wait until the continuation of a pending poll fired: blocking this thread (sync face;
    Ctrl-C interrupts) or parked in the running event loop (async face)."""
    if _local.sync:
        lock = threading.Lock()
        lock.acquire()
        waiter.lock = lock
        if waiter.code < 0:
            lock.acquire()  # released by the continuation
        return
    loop = asyncio.get_running_loop()
    while waiter.code < 0:
        future = loop.create_future()
        waiter.loop = loop
        waiter.future = future
        if waiter.code >= 0:
            return
        yield from future.__await__()


class Gather(Generic[T]):
    """Many started futures awaited together (get_many): each is polled once before any is
    waited for, so all are in flight at once; results in the order given."""

    __slots__ = ("calls",)

    def __init__(self, calls: Sequence[Pending[T]]) -> None:
        self.calls = calls

    def __await__(self) -> Generator[Any, None, list[T]]:
        calls = self.calls
        results: list[T] = []
        freed = 0
        try:
            for call in calls:
                call.poll()
            for call in calls:
                while True:
                    if call.code < 0:
                        _check_lost(call)
                        yield from _settle(call)
                    if call.code == READY:
                        break
                    call.poll()
                try:
                    results.append(call.finish())
                finally:
                    freed += 1
                    call.free()
        finally:
            for call in calls[freed:]:  # a failure or Ctrl-C part-way
                call.free()
        return results


def syncing() -> bool:
    """True while the calling thread runs under drive() (sync face)."""
    return _local.sync


#: the C accelerator's send_to_end (None: off) and the awaitables it steps (use_send)
_send_to_end: Callable[[Any, Any], Any] | None = None
_SENT: frozenset[type] = frozenset((CoroutineType,))
#: what _send_to_end returns for an operation that awaited something else
_AWAITED = object()


def use_send(send_to_end: Callable[[Any, Any], Any] | None, *kinds: type) -> None:
    """drive() steps coroutines (and `kinds`, awaitables with an am_send: the accelerator's
    TimedAwait) through the accelerator's `send_to_end`, with no StopIteration at the end;
    None: through their send() as before (calls.py installs it with the accelerator)."""
    global _send_to_end, _SENT
    _send_to_end = send_to_end
    _SENT = frozenset((CoroutineType, *kinds))


def drive(awaitable: Awaitable[T]) -> T:
    """Run an operation whose only waits are native calls to completion on this thread, with
    no event loop. One that awaits anything else is a bug: RuntimeError."""
    send = _send_to_end
    local = _local
    previous = local.sync
    local.sync = True
    try:
        if send is not None and awaitable.__class__ in _SENT:
            steps: Any = awaitable
            result: T = send(awaitable, _AWAITED)
            if result is not _AWAITED:
                return result
        else:
            steps = awaitable if awaitable.__class__ is CoroutineType else awaitable.__await__()
            try:
                steps.send(None)
            except StopIteration as stop:
                ended: T = stop.value
                return ended
    finally:
        local.sync = previous
    steps.close()
    raise RuntimeError("drive(): the operation awaited something that is not a native call")


class _LoopLocal(threading.local):
    loop: asyncio.AbstractEventLoop | None = None


_loops = _LoopLocal()


def run(coroutine: Awaitable[T]) -> T:
    """Run a coroutine that may use asyncio (timeouts, sleeps) for a sync caller: on a private
    event loop of the calling thread, or, when this thread already runs a loop (a sync call
    made from async code), on a private loop in a short-lived thread. An interrupt (Ctrl-C)
    cancels the coroutine before it propagates, so nothing is left pending on the loop."""
    if asyncio._get_running_loop() is not None:
        return _run_in_thread(coroutine)
    loop = _loops.loop
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
    task = asyncio.ensure_future(coroutine, loop=loop)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


def _run_in_thread(coroutine: Awaitable[T]) -> T:
    box: list[tuple[bool, Any]] = []

    async def main() -> T:
        return await coroutine

    def target() -> None:
        try:
            box.append((True, asyncio.run(main())))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=target, name="opendata-kv-sync", daemon=True)
    thread.start()
    thread.join()
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value
