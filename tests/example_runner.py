"""Runs Python scripts as fresh processes forked from one warm interpreter (the docs examples).

    python tests/example_runner.py      # prints "ready", then per request line
    SCRIPT<TAB>CWD<TAB>SECONDS          # -> "status N" (its exit status) or "timeout"

Each script runs in a child forked from this process after opendata_kv is imported, as
`python SCRIPT` would run it: as __main__, in CWD, its stdout and stderr in SCRIPT.out and
SCRIPT.err, ending with a normal interpreter exit (atexit handlers, non-daemon threads
joined). A child still running after SECONDS is killed. What the fork saves is the start of
an interpreter and the import of slatedb's native library, per script.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time

import opendata_kv.store  # noqa: F401  (the expensive import, done once)


def _child(script: str, cwd: str) -> None:
    """In the forked child: become `python SCRIPT` and never return to the loop."""
    os.chdir(cwd)
    for fd, suffix in ((1, ".out"), (2, ".err")):
        os.dup2(os.open(script + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.argv = [script]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
    sys.exit(0)


def _wait(pid: int, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return f"status {os.waitstatus_to_exitcode(status)}"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        script, cwd, seconds = line.rstrip("\n").split("\t")
        pid = os.fork()
        if pid == 0:
            _child(script, cwd)  # raises SystemExit or the script's error: the child ends
        print(_wait(pid, float(seconds)), flush=True)


if __name__ == "__main__":
    main()
