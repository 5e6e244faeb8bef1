"""Footprint: what a store of AT Protocol records leaves on disk, beside rocksdict, per setting.

    PYTHONPATH=. python tools/bench.py footprint [--records N] [--variants a,b] [--root DIR]

The workload: N records through RecordCollection.put_many (batches of 1,000): repos of 100
records (`did:plc:` + 24 base32 characters), four app.bsky collections (post, like, follow,
repost) with TID record keys, ~100 B values (the subject URIs and texts differ per record, so
they compress about as real ones do).

Each variant (a named slatedb settings mapping, VARIANTS) gets its own store, one after the
other in one run:
  load      put_many, flush, close: the bytes then ("at close": SSTs + WAL)
  settle    reopen the writer, wait until compaction has settled (bench_scale.settle_slatedb):
            the bytes then ("settled, before GC": what a store holds while the garbage
            collector's retention, wal/compacted min_age, has not passed yet)
  collect   beside that writer, one garbage collection pass with a 1 s min_age
            (Admin.run_gc_once), then close: what the collector leaves once the retention
            has passed, whatever the retention ("settled"). Fair to both sides: rocksdict
            is measured after its own flush, reopen and compaction, and neither keeps a log
            of data already in its SSTs.
rocksdict gets the very bytes of the first variant's store (its keys and values, read back
with a raw scan) with rocksdict's default options, flushed, closed, reopened and compacted.

Reads, side by side on the settled stores (all open at once, ROUNDS interleaved rounds, the
median kept): point gets (the same GETS random keys on every store, µs per get, the block
cache warm after a first pass) and a full typed scan (µs per row, fill_cache=False).
Numbers are printed, never asserted; tests run run_footprint() on a few thousand records.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_scale import Progress, dir_bytes, settle_slatedb
from slatedb.uniffi import (
    AdminBuilder,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    KeyRange,
)

from opendata_kv import Store
from opendata_kv.collections import BSKY_KEY_TYPES, RecordCollection, default_schema
from opendata_kv.ids import tid as tids
from opendata_kv.objstore.location import parse_location
from opendata_kv.store.scan import scan_options
from opendata_kv.store.settings import LIBRARY_DEFAULTS, defaults

SCHEMA = default_schema()
PER_REPO = 100
COLLECTIONS = (
    "app.bsky.feed.post",
    "app.bsky.feed.like",
    "app.bsky.graph.follow",
    "app.bsky.feed.repost",
)
T0_US = 1_732_000_000_000_000
GETS = 2000
GC_MIN_AGE_S = 1.0
ROUNDS = 3
_B32 = "abcdefghijklmnopqrstuvwxyz234567"

#: name -> slatedb settings given to Store.open over the library's defaults. "slatedb" puts
#: back slatedb's own defaults (what the library opened with before issue 43: no codec),
#: "default" is the library's defaults as they are.
VARIANTS: dict[str, dict[str, Any] | None] = {
    "slatedb": None,
    "default": {},
    "lz4": {"compression_codec": "Lz4"},
    "zstd": {"compression_codec": "Zstd"},
    "snappy": {"compression_codec": "Snappy"},
}


def variant_settings(name: str) -> dict[str, Any]:
    """The settings a variant's store opens with."""
    given = VARIANTS[name]
    if given is None:
        slatedb = defaults()
        return {key: slatedb[key] for key in LIBRARY_DEFAULTS}
    return dict(given)


def _did(r: int) -> str:
    digest = hashlib.blake2b(r.to_bytes(8, "big"), digest_size=15).digest()
    bits = int.from_bytes(digest, "big")
    return "did:plc:" + "".join(_B32[(bits >> (5 * k)) & 31] for k in range(24))


def _cid(i: int) -> str:
    return "bafyrei" + hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).hexdigest()[:24]


def record(i: int) -> tuple[str, str, str, dict[str, Any]]:
    """The i-th record: (repo, collection, rkey, value)."""
    repo = _did(i // PER_REPO)
    collection = COLLECTIONS[i % len(COLLECTIONS)]
    rkey = tids.encode((T0_US + i * 977) << 10)
    created = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_732_000_000 + i // 7)) + ".000Z"
    value: dict[str, Any] = {"$type": collection, "createdAt": created}
    if collection == "app.bsky.feed.post":
        value["text"] = f"post {i} " + _cid(i)[7:31]
        value["langs"] = ["en"]
    elif collection == "app.bsky.graph.follow":
        value["subject"] = _did(i * 7919 + 13)
    else:
        target = tids.encode((T0_US + (i * 31) * 977) << 10)
        value["subject"] = {
            "uri": f"at://{_did(i * 31 // PER_REPO)}/app.bsky.feed.post/{target}",
            "cid": _cid(i * 31),
        }
    return repo, collection, rkey, value


def records(n: int) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    return (record(i) for i in range(n))


def total(stored: dict[str, int]) -> int:
    return sum(stored.values())


async def collect_all(url: str) -> None:
    """One garbage collection pass with a min_age of GC_MIN_AGE_S beside the settled writer:
    removes every object no manifest refers to (what the collector does once the retention
    has passed); nothing is being compacted then, so nothing newer than that is at stake."""
    now = GarbageCollectorDirectoryOptions(min_age_ms=round(GC_MIN_AGE_S * 1000), dry_run=False)
    location = parse_location(url)
    admin = AdminBuilder(location.db_path, location.object_store(create=False)).build()
    await admin.run_gc_once(
        GarbageCollectorOptions(
            manifest_options=now, wal_options=now, compacted_options=now, compactions_options=now
        )
    )


async def open_variant(url: str, name: str, create: bool = False) -> Store:
    return await Store.open(url, SCHEMA, settings=variant_settings(name) or None)


async def load_variant(root: Path, name: str, n: int, progress: bool) -> dict[str, Any]:
    url = str(root / name)
    out: dict[str, Any] = {"variant": name, "settings": variant_settings(name)}
    store = await open_variant(url, name, create=True)
    repo = RecordCollection(store, key_types=BSKY_KEY_TYPES)
    start = time.perf_counter()
    await repo.put_many(records(n), progress=Progress(name, n, progress))
    await store.flush()
    out["load_s"] = time.perf_counter() - start
    out["load_load_avg"] = os.getloadavg()[0]
    await store.close()
    out["at_close"] = dir_bytes(root / name)
    store = await open_variant(url, name)
    start = time.perf_counter()
    out["compaction"] = await settle_slatedb(url)
    out["settle_s"] = time.perf_counter() - start
    out["before_gc"] = dir_bytes(root / name)
    # with the writer open: slatedb collects a compacted SST only once a running writer has
    # moved its GC-safe time past it (RFC 0029); on a closed store the merged L0 SSTs stayed
    await asyncio.sleep(GC_MIN_AGE_S + 0.1)
    await collect_all(url)
    await store.close()
    out["settled"] = dir_bytes(root / name)
    out["bytes_per_record"] = total(out["settled"]) / n
    return out


async def load_rocksdict(root: Path, source: str, n: int) -> dict[str, Any]:
    """rocksdict (default options, raw bytes) holding the same keys and values as `source`."""
    import rocksdict as rd

    path = root / "rocksdict"
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    db = rd.Rdict(str(path), options)
    store = await Store.open_reader(str(root / source), SCHEMA)
    start = time.perf_counter()
    copied = 0
    everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    it = await store._source.scan_with_options(everything, scan_options(False, fill_cache=False))
    while rows := await it.next_batch(1024):
        batch = rd.WriteBatch(raw_mode=True)
        for kv in rows:
            batch.put(kv.key, kv.value)
        db.write(batch)
        copied += len(rows)
    db.flush(True)
    db.flush_wal(True)
    db.close()
    await store.close()
    db = rd.Rdict(str(path), options)
    db.compact_range(None, None)
    busy = ("rocksdb.compaction-pending", "rocksdb.num-running-compactions")
    while any(db.property_int_value(p) for p in busy):
        await asyncio.sleep(0.25)
    db.close()
    stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return {
        "copied": copied,
        "copy_s": time.perf_counter() - start,
        "settled": {"all": stored},
        "bytes_per_record": stored / n,
    }


def sample(n: int) -> list[tuple[str, str, str]]:
    rng = random.Random(43)
    return [record(rng.randrange(n))[:3] for _ in range(min(GETS, n))]


async def read_costs(root: Path, names: list[str], n: int) -> dict[str, dict[str, Any]]:
    """Get and full-scan cost per row on every settled store, ROUNDS interleaved rounds."""
    keys = sample(n)
    stores = {name: await open_variant(str(root / name), name) for name in names}
    colls = {name: RecordCollection(s, key_types=BSKY_KEY_TYPES) for name, s in stores.items()}
    times: dict[str, dict[str, list[float]]] = {
        m: {"get": [], "scan": [], "get_cpu": [], "scan_cpu": []} for m in names
    }
    clock = time.perf_counter
    try:
        for name in names:  # a first pass warms each store's block cache alike
            for key in keys:
                await colls[name].get(*key)
        for r in range(ROUNDS):
            for name in names if r % 2 == 0 else names[::-1]:
                start, cpu = clock(), time.process_time()
                for key in keys:
                    if await colls[name].get(*key) is None:
                        raise AssertionError(f"{name}: {key} not found")
                times[name]["get"].append((clock() - start) / len(keys) * 1e6)
                times[name]["get_cpu"].append((time.process_time() - cpu) / len(keys) * 1e6)
                start, cpu = clock(), time.process_time()
                rows = 0
                async for rec in stores[name].scan(colls[name].record, fill_cache=False):
                    rec.value  # noqa: B018 - decoded, as a reader would
                    rows += 1
                if rows != n:
                    raise AssertionError(f"{name}: scan saw {rows} rows, not {n}")
                times[name]["scan"].append((clock() - start) / n * 1e6)
                times[name]["scan_cpu"].append((time.process_time() - cpu) / n * 1e6)
    finally:
        for s in stores.values():
            await s.close()
    return {
        name: {
            "get_us": statistics.median(t["get"]),
            "scan_us_per_row": statistics.median(t["scan"]),
            # CPU time of the whole process (slatedb's threads too) per get / row: what the
            # codec costs, less sensitive than wall time to cores other jobs hold
            "get_cpu_us": statistics.median(t["get_cpu"]),
            "scan_cpu_us_per_row": statistics.median(t["scan_cpu"]),
            "get_us_rounds": t["get"],
            "scan_us_rounds": t["scan"],
        }
        for name, t in times.items()
    }


async def run_footprint(
    n: int,
    variants: list[str],
    root: Path | None = None,
    *,
    progress: bool = True,
    rocks: bool = True,
) -> dict[str, Any]:
    """Load, settle and measure every variant, then rocksdict; returns the figures."""
    own = root is None
    base = Path(tempfile.mkdtemp(prefix="bench-footprint-")) if root is None else root
    base.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"records": n, "uptime_load": os.getloadavg(), "variants": {}}
    try:
        for name in variants:
            out["variants"][name] = await load_variant(base, name, n, progress)
        if rocks:
            out["rocksdict"] = await load_rocksdict(base, variants[0], n)
        reads = await read_costs(base, variants, n)
        for name in variants:
            out["variants"][name].update(reads[name])
        out["reads_load_avg"] = os.getloadavg()
        return out
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


def _mb(b: int) -> str:
    return f"{b / 1e6:,.1f}"


def table(result: dict[str, Any]) -> str:
    """One row per variant: bytes at each moment, against rocksdict, and read costs."""
    n = result["records"]
    rocks = result.get("rocksdict")
    base = next(iter(result["variants"].values()))
    lines = [
        f"footprint: {n:,} AT Protocol records; load average at start "
        f"{result['uptime_load'][0]:.2f}, during the reads {result['reads_load_avg'][0]:.2f}",
        "| store | at close MB (SST + WAL) | settled, before GC MB | settled MB | B/record "
        "| x rocksdict | get µs (CPU) | x first | scan µs/row (CPU) | x first |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in result["variants"].items():
        c, b, s = v["at_close"], v["before_gc"], v["settled"]
        ratio = f"{total(s) / total(rocks['settled']):.2f}" if rocks else "-"
        lines.append(
            f"| {name} | {_mb(total(c))} ({_mb(c['sst'])} + {_mb(c['wal'])}) | {_mb(total(b))} "
            f"| {_mb(total(s))} | {total(s) / n:.1f} | {ratio} "
            f"| {v['get_us']:.1f} ({v['get_cpu_us']:.1f}) "
            f"| {v['get_us'] / base['get_us']:.2f} ({v['get_cpu_us'] / base['get_cpu_us']:.2f}) "
            f"| {v['scan_us_per_row']:.2f} ({v['scan_cpu_us_per_row']:.2f}) "
            f"| {v['scan_us_per_row'] / base['scan_us_per_row']:.2f} "
            f"({v['scan_cpu_us_per_row'] / base['scan_cpu_us_per_row']:.2f}) |"
        )
    if rocks:
        all_ = rocks["settled"]["all"]
        lines.append(f"| rocksdict | | | {_mb(all_)} | {all_ / n:.1f} | 1.00 | | | | |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.py footprint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--variants",
        default="slatedb,default",
        help=f"comma-separated, first is the baseline; known: {', '.join(VARIANTS)}",
    )
    parser.add_argument("--root", type=Path, default=None, help="keep the stores here")
    parser.add_argument("--no-rocksdict", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    for name in names:
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    result = asyncio.run(
        run_footprint(
            args.records,
            names,
            args.root,
            progress=not args.no_progress,
            rocks=not args.no_rocksdict,
        )
    )
    text = table(result)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(result, indent=2))
    else:
        print(text)
    return 0


def run(quick: bool) -> None:
    main(["--records", "20000" if quick else "1000000"])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
