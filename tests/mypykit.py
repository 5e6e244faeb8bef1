"""mypy --strict, in this process, on files a test wrote (docs examples, typing checks).

Every call uses the project's pyproject.toml settings, finds opendata_kv in this checkout and
shares the run's cache directory (the `mypy_cache` fixture in conftest.py, one for every
xdist worker): the first call checks the standard library stubs and opendata_kv (~45 s of
CPU), later calls only their own files. Calls take turns on the cache (a file lock), so a
worker's first call waits for the other's warm-up instead of repeating it.
"""

from __future__ import annotations

import fcntl
import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hang_guard import hang_guard

REPO = Path(__file__).resolve().parent.parent
#: a bound on one run (a cold one takes a few seconds)
MYPY_SECONDS = 300


@contextmanager
def _turn(cache_dir: Path) -> Iterator[None]:
    """The cache to this process alone (another worker's run may hold it for a cold check)."""
    with open(cache_dir.parent / f"{cache_dir.name}.lock", "w") as lock:
        with hang_guard(MYPY_SECONDS):
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def mypy_strict(directory: Path, files: Sequence[str], cache_dir: Path) -> tuple[int, str]:
    """(exit status, output) of mypy --strict on `files`, names relative to `directory` (so
    its messages say `name.py:LINE: ...`)."""
    from mypy import api

    options = ["--strict", "--config-file", str(REPO / "pyproject.toml")]
    options += ["--cache-dir", str(cache_dir), "--no-error-summary", "--show-error-codes"]
    cwd, mypypath = os.getcwd(), os.environ.get("MYPYPATH")
    os.chdir(directory)
    os.environ["MYPYPATH"] = str(REPO)
    try:
        with _turn(cache_dir), hang_guard(MYPY_SECONDS):
            out, err, status = api.run([*options, *files])
    finally:
        # mypy's build unfreezes the whole heap (gc.freeze then gc.unfreeze, its own speed-up):
        # conftest's freeze of what collection left alive is put back, without mypy's garbage
        gc.collect()
        gc.freeze()
        os.chdir(cwd)
        if mypypath is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = mypypath
    return status, out + err
