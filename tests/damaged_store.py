"""A small database with every kind of object, and ways to damage one (issue 13's matrix).

Run as a script it builds the database: a first writer session stores FIRST records and
closes (an L0 SST, manifests, compactions files), a second stores SECOND more, flushing every
PER_WAL records (one WAL file each), and exits without closing, as a crash would, so those
records live only in the WAL files after the manifest's replay point.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from writer_process import child_env

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F

FIRST = 60
SECOND = 60
PER_WAL = 10
TOTAL = FIRST + SECOND

item = RecordType("item", 1, [("n", F.u32)])
SCHEMA = Schema(item)

DAMAGES = ("flip", "truncate", "zero", "delete", "garbage")


def expected() -> dict[int, dict[str, int]]:
    return {n: {"n": n, "square": n * n} for n in range(TOTAL)}


async def _build(path: str) -> None:
    from opendata_kv.store import Store

    async with Store.open(path, SCHEMA) as store:
        for n in range(FIRST):
            await store.put(item, (n,), expected()[n])
            if n % PER_WAL == PER_WAL - 1:
                await store.flush()
    store = await Store.open(path, SCHEMA, settings={"flush_interval": "60s"})
    for n in range(FIRST, TOTAL):
        await store.put(item, (n,), expected()[n])
        if n % PER_WAL == PER_WAL - 1:
            await store.flush()
    os._exit(0)  # no close: the second session's records stay in the WAL only


def build(path: Path) -> None:
    """Build the database at `path` in a child process (it must die without closing)."""
    subprocess.run(
        [sys.executable, __file__, str(path)], env=child_env(), check=True, timeout=120
    )


def targets(path: Path) -> dict[str, Path]:
    """The object of each kind the matrix damages."""
    wal = sorted((path / "wal").iterdir())
    nonempty = [p for p in wal if p.stat().st_size > 0]
    manifests = sorted((path / "manifest").iterdir())
    compactions = sorted((path / "compactions").iterdir())
    ssts = sorted((path / "compacted").iterdir())
    assert len(nonempty) >= 4 and len(ssts) == 1, (wal, ssts)
    return {
        "middle WAL": nonempty[-3],
        "last WAL": nonempty[-1],
        "SST": ssts[0],
        "latest manifest": manifests[-1],
        "compactions file": compactions[-1],
    }


def damage(target: Path, how: str, seed: int = 13) -> None:
    """Apply one damage to the file `target`."""
    data = target.read_bytes()
    if how == "flip":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        target.write_bytes(bytes(flipped))
    elif how == "truncate":
        target.write_bytes(data[: len(data) // 2])
    elif how == "zero":
        target.write_bytes(b"")
    elif how == "delete":
        target.unlink()
    elif how == "garbage":
        target.write_bytes(random.Random(seed).randbytes(len(data)))
    else:
        raise ValueError(how)


def copy(base: Path, to: Path) -> Path:
    shutil.copytree(base, to)
    return to


if __name__ == "__main__":
    asyncio.run(_build(sys.argv[1]))
