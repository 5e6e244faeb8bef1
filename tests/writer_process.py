"""Drive tests/crash_writer.py as a child process and collect what it acknowledged.

A reader thread collects the child's stdout lines; only complete lines (ending in a newline)
count, so a line cut short by SIGKILL is not a promise.
"""

from __future__ import annotations

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


class WriterProcess:
    """One crash_writer child. `acked` lists the batch ids it acknowledged, in order."""

    def __init__(
        self,
        url: str,
        *,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        max_batches: int | None = None,
        delay: float = 0.0,
    ) -> None:
        cmd = [sys.executable, str(SCRIPT), url, "--settings", json.dumps(dict(settings or {}))]
        if max_batches is not None:
            cmd += ["--max-batches", str(max_batches)]
        if delay:
            cmd += ["--delay", str(delay)]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(env),
            text=True,
        )
        self._cond = threading.Condition()
        self.lines: list[str] = []
        self.acked: list[int] = []
        self.opened_at: int | None = None
        self.eof = False
        self.stderr = ""
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
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

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_until(self, what: str, test: Any, timeout: float) -> None:
        """Block until `test()` is true (checked under the lock after every line)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not test():
                if self.eof:
                    raise AssertionError(
                        f"writer exited (status {self.proc.poll()}) before {what}: "
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
