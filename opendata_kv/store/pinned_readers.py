"""Readers at pinned checkpoints kept open in one process for the tasks that follow (issue 38):
an engine worker runs many tasks of one job, and a pinned version never changes, so the
reader the first task opened serves the next ones without another open.

A reader is lent to one task at a time (`borrow`) and given back when the task ends; one that
raised is closed instead. At most MAX_IDLE idle readers are kept per process (the least
recently used closed first); one idle for IDLE_SECONDS, or older than its pin's lifetime (the
checkpoint may be gone), is closed at the next borrow; `release(checkpoint_id)` closes a
checkpoint's readers (Pinned does, when the pin ends, and runs the hooks engines register with
`on_release` to do so in their workers); the rest are closed when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opendata_kv.store.sync import SyncStoreReader

#: idle readers kept per process: a worker runs the tasks of a job or two at a time
MAX_IDLE = 4
#: seconds an idle reader is kept (it polls its checkpoint's manifest meanwhile)
IDLE_SECONDS = 300.0


@dataclass
class _Idle:
    reader: SyncStoreReader
    checkpoint_id: str
    since: float  # time.monotonic() when given back
    expires: float  # time.monotonic() after which the pin may be gone


_lock = threading.Lock()
_idle: OrderedDict[tuple[Hashable, int], _Idle] = OrderedDict()  # oldest first
_opened = 0  # readers opened through borrow, for tests and the benchmark
_hooks: dict[str, list[Callable[[], None]]] = {}
_serial = 0


def opened() -> int:
    """How many readers `borrow` opened in this process so far."""
    return _opened


def idle_readers() -> list[str]:
    """The checkpoint ids of the idle readers kept (oldest first)."""
    with _lock:
        return [entry.checkpoint_id for entry in _idle.values()]


@contextlib.contextmanager
def borrow(
    key: Hashable, checkpoint_id: str, lifetime: float, open_reader: Callable[[], SyncStoreReader]
) -> Iterator[SyncStoreReader]:
    """A reader for `key` (which names the store, the checkpoint and every open option): a kept
    one when there is one, else `open_reader()`; kept again after the block unless it raised."""
    global _opened
    now = time.monotonic()
    reader = None
    expires = now + lifetime
    with _lock:
        stale = _take_stale(now)
        for slot, entry in _idle.items():
            if slot[0] == key:
                reader = _idle.pop(slot).reader
                expires = entry.expires
                break
    _close_all(stale)
    if reader is None:
        reader = open_reader()
        with _lock:
            _opened += 1
    try:
        yield reader
    except GeneratorExit:  # the task's consumer stopped early: the reader is sound
        _give_back(key, checkpoint_id, reader, expires)
        raise
    except BaseException:
        _close_all([reader])
        raise
    _give_back(key, checkpoint_id, reader, expires)


def _give_back(key: Hashable, checkpoint_id: str, reader: SyncStoreReader, expires: float) -> None:
    global _serial
    with _lock:
        _serial += 1
        _idle[(key, _serial)] = _Idle(reader, checkpoint_id, time.monotonic(), expires)
        over = [_idle.popitem(last=False)[1].reader for _ in range(len(_idle) - MAX_IDLE)]
    _close_all(over)


def _take_stale(now: float) -> list[SyncStoreReader]:
    """Remove (under _lock) the idle readers kept too long or past their pin's lifetime."""
    stale = [
        slot
        for slot, entry in _idle.items()
        if now - entry.since > IDLE_SECONDS or now > entry.expires
    ]
    return [_idle.pop(slot).reader for slot in stale]


def release(checkpoint_id: str) -> None:
    """Close this process's idle readers of `checkpoint_id` and run the hooks registered for
    it (the pin ends: its checkpoint is about to be deleted)."""
    with _lock:
        gone = [slot for slot, entry in _idle.items() if entry.checkpoint_id == checkpoint_id]
        readers = [_idle.pop(slot).reader for slot in gone]
        hooks = _hooks.pop(checkpoint_id, [])
    _close_all(readers)
    for hook in hooks:
        with contextlib.suppress(Exception):  # a worker gone: its readers went with it
            hook()


def on_release(checkpoint_id: str, hook: Callable[[], None]) -> None:
    """Run `hook` when this process's pin of `checkpoint_id` ends (an engine closing the
    readers its workers keep)."""
    with _lock:
        hooks = _hooks.setdefault(checkpoint_id, [])
        if hook not in hooks:
            hooks.append(hook)


def close_all() -> None:
    """Close every idle reader of this process (at exit)."""
    with _lock:
        readers = [entry.reader for entry in _idle.values()]
        _idle.clear()
    _close_all(readers)


def _close_all(readers: list[Any]) -> None:
    for reader in readers:
        with contextlib.suppress(Exception):  # a reader of a checkpoint already deleted
            reader.close()


atexit.register(close_all)

__all__ = ["borrow", "close_all", "idle_readers", "on_release", "opened", "release"]
