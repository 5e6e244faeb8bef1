"""Drive tests/crash_writer.py as a child process and collect what it acknowledged.

A reader thread collects the child's stdout lines; only complete lines (ending in a newline)
count, so a line cut short by SIGKILL is not a promise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent
SCRIPT = TESTS / "crash_writer.py"


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child Python that imports opendata_kv from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SRC), str(TESTS), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


class _WriterLines:
    """What one crash_writer child printed: `acked` lists the batch ids it acknowledged, in
    order; `opened_at` is the batch it resumed at."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._cond = threading.Condition()
        self.lines: list[str] = []
        self.acked: list[int] = []
        self.opened_at: int | None = None
        self.eof = False
        self.stderr = ""

    def _status(self) -> object:
        raise NotImplementedError

    def _collect(self, stream: Any) -> None:
        for line in stream:
            if not line.endswith("\n"):
                break  # cut short by the kill: not a promise
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                if kind == "ack":
                    self.acked.append(int(rest))
                elif kind == "open":
                    self.opened_at = int(rest)
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_until(self, what: str, test: Any, timeout: float) -> None:
        """Block until `test()` is true (checked under the lock after every line)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not test():
                if self.eof:
                    raise AssertionError(
                        f"writer exited (status {self._status()}) before {what}: "
                        f"{self.lines[-3:]} {self.stderr[-2000:]}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"writer: no {what} within {timeout} s: {self.lines[-3:]}")
                self._cond.wait(left)

    def wait_open(self, timeout: float = 60.0) -> int:
        self.wait_until("open line", lambda: self.opened_at is not None, timeout)
        assert self.opened_at is not None
        return self.opened_at

    def wait_acks(self, count: int, timeout: float = 60.0) -> None:
        self.wait_until(f"{count} acks", lambda: len(self.acked) >= count, timeout)


class WriterProcess(_WriterLines):
    """One crash_writer child started as a process of its own."""

    def __init__(
        self,
        url: str,
        *,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        max_batches: int | None = None,
        delay: float = 0.0,
    ) -> None:
        super().__init__()
        cmd = [sys.executable, str(SCRIPT), url, "--settings", json.dumps(dict(settings or {}))]
        if max_batches is not None:
            cmd += ["--max-batches", str(max_batches)]
        if delay:
            cmd += ["--delay", str(delay)]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(env),
            text=True,
        )
        self._out = threading.Thread(target=self._collect, args=(self.proc.stdout,), daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _status(self) -> object:
        return self.proc.poll()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def kill(self) -> None:
        """SIGKILL the child (if still running) and collect everything it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.finish()

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the child to exit and its output to be read; its exit status."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait(10)
        self._out.join(10)
        self._err.join(10)
        return status


class ForkServer:
    """One warm `crash_writer.py --fork-server` process (Python and slatedb already imported)
    that forks a fresh writer per round: starting a writer costs milliseconds, not the second
    of an interpreter start, and the kill still lands at any moment of the writer's work."""

    def __init__(
        self,
        url: str,
        workdir: Path,
        *,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        cmd = [sys.executable, str(SCRIPT), url, "--settings", json.dumps(dict(settings or {}))]
        self.proc = subprocess.Popen(
            [*cmd, "--fork-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=child_env(env),
            text=True,
        )
        self.workdir = workdir
        self.forked = 0
        self._expect("ready")

    def _expect(self, kind: str) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        head, _, rest = line.rstrip("\n").partition(" ")
        assert head == kind, f"fork server: expected {kind!r}, got {line!r}"
        return rest

    def writer(self) -> ForkedWriter:
        """A writer that starts (forks) when its go() is called."""
        self.forked += 1
        return ForkedWriter(self, self.workdir / f"writer-{self.forked}.out")

    def fork(self, out: Path) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{out}\n")
        self.proc.stdin.flush()
        return int(self._expect("child"))

    def close(self) -> None:
        """End the server (its stdin closes; it exits when the loop sees EOF)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ForkedWriter(_WriterLines):
    """A writer forked by a ForkServer; its stdout comes through a FIFO."""

    def __init__(self, server: ForkServer, out: Path) -> None:
        super().__init__()
        self.server = server
        self.out = out
        self.pid: int | None = None
        os.mkfifo(out)
        self._out = threading.Thread(target=self._read_fifo, daemon=True)
        self._fd: int | None = None

    def _read_fifo(self) -> None:
        assert self._fd is not None
        with open(self._fd, encoding="utf-8") as stream:
            self._collect(stream)

    def _status(self) -> object:
        return "unknown (a forked writer's status goes to the fork server)"

    def go(self) -> None:
        """Fork the writer: it opens the database at once.

        The read end is opened first (non-blocking: there is no writer yet), so the fork
        server's open of the write end does not block, and the forked writer holds that write
        end from its first instant: reading starts once the fork is reported, and ends with EOF
        when the writer dies, whenever the kill lands. (Opening the FIFO in the reader thread
        and in the writer left a kill before the writer's open with a reader blocked in open().)
        """
        self._fd = os.open(self.out, os.O_RDONLY | os.O_NONBLOCK)
        self.started = time.monotonic()
        self.pid = self.server.fork(self.out)
        os.set_blocking(self._fd, True)  # the writer holds the write end: reads wait for it
        self._out.start()

    def kill(self) -> None:
        """SIGKILL the writer (if it ran) and collect everything it printed."""
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._out.join(60)
        assert not self._out.is_alive(), f"writer {self.pid}: its output never ended"
        err = Path(f"{self.out}.err")
        self.stderr = err.read_text(errors="replace") if err.exists() else ""
