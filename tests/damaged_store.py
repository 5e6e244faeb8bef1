"""A small database with every kind of object, and ways to damage one (issues 13 and 21).

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
#: the matrix's targets: whole objects, and the blocks of the SST (damaged in place)
TARGETS = (
    "middle WAL",
    "last WAL",
    "SST data",
    "SST index",
    "SST filter",
    "latest manifest",
    "compactions file",
)

#: (offset, length) of the part of an object a damage applies to (None: the whole object)
Region = tuple[int, int] | None


def expected() -> dict[int, dict[str, int]]:
    return {n: {"n": n, "square": n * n} for n in range(TOTAL)}


async def _build(path: str) -> None:
    from opendata_kv.store import Store

    # min_filter_keys=1: the first session's SST gets a filter block (the matrix damages it)
    async with Store.open(path, SCHEMA, settings={"min_filter_keys": 1}) as store:
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


def build(path: Path | str, env: dict[str, str] | None = None) -> None:
    """Build the database at `path` (a directory or URL) in a child process (it must die
    without closing); `env` adds to its environment (the S3 endpoint)."""
    subprocess.run(
        [sys.executable, __file__, str(path)], env=child_env(env), check=True, timeout=120
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


def sst_regions(info: object) -> dict[str, tuple[int, int]]:
    """The data, index and filter blocks of an SST, from its manifest info."""
    index = (int(info.index_offset), int(info.index_len))  # type: ignore[attr-defined]
    bloom = (int(info.filter_offset), int(info.filter_len))  # type: ignore[attr-defined]
    assert bloom[1] > 0, "the SST has no filter block (min_filter_keys)"
    return {"SST data": (0, min(index[0], bloom[0])), "SST index": index, "SST filter": bloom}


def latest_sst_regions(url: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The one SST of the database at `url` (its object name) and its block regions."""
    from slatedb.uniffi import AdminBuilder

    from opendata_kv.objstore.location import parse_location
    from opendata_kv.objstore.objects import manifest_ssts, sst_name

    location = parse_location(url)
    admin = AdminBuilder(location.db_path, location.object_store()).build()
    manifest = asyncio.run(admin.read_manifest(None))
    ((ulid, handle),) = list(manifest_ssts(manifest))
    return sst_name(ulid), sst_regions(handle.info)


def object_targets(names: dict[str, int], url: str) -> dict[str, tuple[str, Region]]:
    """Each target of the matrix as (object name, region), from the names and sizes of the
    objects present (relative to the database root) and the manifest of the database."""
    wal = sorted(n for n in names if n.startswith("wal/"))
    nonempty = [n for n in wal if names[n] > 0]
    manifests = sorted(n for n in names if n.startswith("manifest/"))
    compactions = sorted(n for n in names if n.startswith("compactions/"))
    assert len(nonempty) >= 4, wal
    sst, regions = latest_sst_regions(url)
    return {
        "middle WAL": (nonempty[-3], None),
        "last WAL": (nonempty[-1], None),
        **{target: (sst, region) for target, region in regions.items()},
        "latest manifest": (manifests[-1], None),
        "compactions file": (compactions[-1], None),
    }


def local_targets(path: Path) -> dict[str, tuple[str, Region]]:
    """object_targets of the local database at `path`."""
    names = {
        p.relative_to(path).as_posix(): p.stat().st_size for p in path.rglob("*") if p.is_file()
    }
    return object_targets(names, str(path))


def damaged(data: bytes, how: str, region: Region = None, seed: int = 13) -> bytes | None:
    """`data` after one damage to `region` of it (None: deleted). A region is flipped at its
    middle, cut at its middle (the object truncated there), zeroed or overwritten in place;
    the whole object is emptied by "zero" and removed by "delete"."""
    if how == "delete":
        return None
    if region is None:
        if how == "zero":
            return b""
        region = (0, len(data))
    offset, length = region
    assert length > 0 and offset + length <= len(data), (region, len(data))
    middle = offset + length // 2
    if how == "flip":
        flipped = bytearray(data)
        flipped[middle] ^= 0x10
        return bytes(flipped)
    if how == "truncate":
        return data[:middle]
    if how == "zero":
        return data[:offset] + bytes(length) + data[offset + length :]
    if how == "garbage":
        noise = random.Random(seed).randbytes(length)
        return data[:offset] + noise + data[offset + length :]
    raise ValueError(how)


def damage_local(path: Path, target: tuple[str, Region], how: str) -> None:
    """Apply one damage to a target (object_targets) of the local database at `path`."""
    name, region = target
    result = damaged((path / name).read_bytes(), how, region)
    if result is None:
        (path / name).unlink()
    else:
        (path / name).write_bytes(result)


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
