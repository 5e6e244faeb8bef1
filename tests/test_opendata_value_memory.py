"""Issue 28.3 measured: a 10 MB TermPostings value of empty 5-byte blocks through `dump
--values` and `changes` stays within a small multiple of its size (peak RSS of the child
process, from os.wait4), where uncapped decoding took ~840 MB. OPENDATA_KV_MEMORY_MB sets
another value size; the figures go to stdout under `pytest -s`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import opendata_dbs
import pytest
from writer_process import child_env

from opendata_kv.layouts import opendata

MB = 1 << 20
VALUE_MB = int(os.environ.get("OPENDATA_KV_MEMORY_MB", "10"))


def peak_rss_mb(*args: str) -> tuple[int, float]:
    """(exit status, peak RSS in MB) of `opendata-kv ARGS` run as a child, output discarded."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "opendata_kv", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024  # Linux reports KiB


def postings_db(path: Path, size: int) -> str:
    key = opendata.VECTOR.get("TermPostings").encode("body", "fox")
    value = b"\x00" * (size - size % 5)  # empty blocks: type 0, length 0
    return opendata_dbs.build_sst_runs(str(path), "opendata-vector/v1", [[("put", key, value)]])


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 (POSIX)")
def test_hostile_postings_value_stays_small(tmp_path: Path) -> None:
    size = VALUE_MB * MB
    small = postings_db(tmp_path / "small", 5)
    big = postings_db(tmp_path / "big", size)
    for command in (["dump", "--values", "--json"], ["changes", "--json"]):
        base_status, base = peak_rss_mb(*command, small)
        status, peak = peak_rss_mb(*command, big)
        print(f"{' '.join(command)}: {peak:.0f} MB peak for {VALUE_MB} MB ({base:.0f} MB idle)")
        assert (base_status, status) == (0, 1)  # the big value is refused: an error row
        # the value held a few times (bytes, hex, the JSON line) and a capped partial decode
        assert peak - base < 8 * size / MB, (command, peak, base)
