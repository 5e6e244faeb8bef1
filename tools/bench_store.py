"""Typed Store vs raw slatedb binding calls, side by side in one run on the same data.

    PYTHONPATH=. python tools/bench.py store [--quick]

Cases (local temporary directories, default slatedb settings):
    put 100 B / put 4 KiB   batched writes, 1000 records per batch: typed `store.batch()`
                            (key encode + msgpack encode) vs a raw WriteBatch of the same bytes
    get                     random point reads: typed get (key encode, expiry check, msgpack
                            decode) vs raw db.get of the same keys, on the same database
    get no-expiry           the same with check_expiry=False (typed get calls db.get too)
    get (patched)           typed get vs raw db.get with the binding speed-up on the raw side
                            as well (its key lowering patched; db.get's wrapper as shipped):
                            the typed get's point reader skips that wrapper (ffi_patch)
    get vs hand             typed get vs a loop doing its work by hand on the same point
                            reader (key bytes by struct, expiry check, msgpack.unpackb):
                            what the typed layer costs over the lowest floor this binding has
    scan                    a full scan of msgpack records: typed scan (key and value decoded)
                            vs a raw next_batch loop that only touches kv.key / kv.value
    scan vs hand            the typed scan vs a loop decoding the same rows by hand (u64 from
                            the key, msgpack.unpackb), both on the patched binding, same
                            ScanOptions: what the typed layer costs over the decode floor
    scan vs hand-columns    the same, with the hand loop reading batches as columns through
                            ffi_patch.columns_for as the typed scan does (no KeyValue objects):
                            what the typed layer costs over the lowest floor this binding has

The typed side runs with the binding speed-up (ffi_patch.install()); the raw side with it
uninstalled (ffi_patch.uninstall(), once that exists), i.e. the binding as shipped. The two
sides run interleaved step by step (one batch / 100 gets / one scan each, alternating
which goes first) so background flushes and compactions hit both alike; the best of several
rounds is reported, with the ratio of the medians beside it. Ratios
are typed/raw time (below 1: typed is faster); for scans also the typed/raw row rate.
Numbers are printed, never asserted.

Last, the latency of one put when accepted, with flush(), and with await_durable(), on a
local directory and, when OPENDATA_KV_BENCH_S3=s3://bucket/prefix is set (with the AWS_*
variables of location.py), on that S3 endpoint too.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack
from slatedb.uniffi import DbBuilder, KeyRange, ObjectStore, WriteBatch

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.store import ffi_patch
from opendata_kv.store.location import parse_location
from opendata_kv.store.scan import scan_options
from opendata_kv.values import Values, pack

REC = RecordType("bench", 1, [("id", F.u64)])
SCHEMA = Schema(REC)
BATCH = 1000

#: typed/raw targets, reported next to the measurements (time ratio; scan: row-rate ratio)
TARGETS = {
    "put 100 B": ("time", 1.0, "<="),
    "put 4 KiB": ("time", 0.2, "<="),  # typed >= 5x faster: needs the ffi speed-up
    "get": ("time", 1.15, "<="),
    "scan": ("rate", 0.75, ">="),
    # typed scan vs the same rows decoded by hand (u64 from the key, msgpack.unpackb), both
    # on the patched binding with the same ScanOptions (issue 15)
    "scan vs hand": ("rate", 0.85, ">="),
}
#: reported without a target: how far the typed scan is from hand decoding on the same columns
NO_TARGET = ("rate", None, "")


def _typed_side() -> None:
    ffi_patch.install()


def _raw_side() -> None:
    uninstall = getattr(ffi_patch, "uninstall", None)
    if uninstall is not None:
        uninstall()


def _value(i: int, size: int) -> dict[str, Any]:
    """A msgpack map of about `size` bytes."""
    body = size - 16
    return {"i": i, "body": bytes([i % 251]) * max(body, 1)}


async def _interleaved(
    steps: int,
    typed: Callable[[int], Awaitable[Any]],
    raw: Callable[[int], Awaitable[Any]],
    raw_patched: bool = False,
) -> tuple[float, float]:
    """Run step i of both sides back to back, alternating which goes first (A-B, B-A, ...),
    so background work (memtable flushes, compaction) lands on both alike. Returns the total
    seconds of each side. `raw_patched`: the raw side too runs on the patched binding."""
    typed_total = raw_total = 0.0
    clock = time.perf_counter
    for i in range(steps):
        for side in ("typed", "raw") if i % 2 == 0 else ("raw", "typed"):
            if side == "typed":
                _typed_side()
                start = clock()
                await typed(i)
                typed_total += clock() - start
            else:
                if not raw_patched:
                    _raw_side()
                start = clock()
                await raw(i)
                raw_total += clock() - start
    _typed_side()
    return typed_total, raw_total


def _report(name: str, ops: int, typed_times: list[float], raw_times: list[float]) -> None:
    """One line: best round of each side per op, the ratio, the target, the spread."""
    typed_best, raw_best = min(typed_times), min(raw_times)
    ratio = typed_best / raw_best
    kind, target, sense = TARGETS.get(name, ("time", 0.0, ""))
    line = (
        f"{name:<13} {ops:>7} ops  typed {typed_best / ops * 1e6:8.2f} µs/op  "
        f"raw {raw_best / ops * 1e6:8.2f} µs/op  typed/raw time {ratio:5.2f}"
    )
    measured = ratio
    if kind == "rate":
        measured = raw_best / typed_best
        line += f"  row rate typed/raw {measured:5.2f}"
    if sense:
        met = measured <= target if sense == "<=" else measured >= target
        line += f"  [target {sense} {target}: {'met' if met else 'MISSED'}]"
    medians = statistics.median(typed_times) / statistics.median(raw_times)
    line += f"  (median ratio {medians:.2f})"
    print(line, flush=True)


async def _bench_put(root: Path, size: int, count: int, rounds: int) -> None:
    values = [_value(i, size) for i in range(count)]
    encoded = [pack(v) for v in values]
    keys = [REC.encode(i) for i in range(count)]
    steps = (count + BATCH - 1) // BATCH
    typed_times: list[float] = []
    raw_times: list[float] = []
    for r in range(rounds):
        _raw_side()
        builder = DbBuilder(str(root / f"put{size}-raw-{r}"), ObjectStore.resolve("file:///"))
        db = await builder.build()
        _typed_side()
        store = await Store.open(root / f"put{size}-typed-{r}", SCHEMA)
        try:

            async def typed(step: int, store: Store = store) -> None:
                async with store.batch() as batch:
                    for i in range(step * BATCH, min((step + 1) * BATCH, count)):
                        batch.put(REC, (i,), values[i])

            async def raw(step: int, db: Any = db) -> None:
                wb = WriteBatch()
                for i in range(step * BATCH, min((step + 1) * BATCH, count)):
                    wb.put(keys[i], encoded[i])
                await db.write(wb)

            t, w = await _interleaved(steps, typed, raw)
            typed_times.append(t)
            raw_times.append(w)
        finally:
            await store.close()
            await db.shutdown()
    label = "put 100 B" if size <= 100 else f"put {size // 1024} KiB"
    _report(label, count, typed_times, raw_times)


async def _quiesce(store: Store) -> None:
    """Flush and let background work settle before timing reads."""
    await store.flush()
    await asyncio.sleep(0.5)


async def _bench_get(root: Path, count: int, rounds: int) -> None:
    async with Store.open(root / "get", SCHEMA) as store:
        for start in range(0, count, BATCH):
            async with store.batch() as batch:
                for i in range(start, min(start + BATCH, count)):
                    batch.put(REC, (i,), _value(i, 100))
        await _quiesce(store)
        db = store._source
        order = list(range(count))
        random.Random(7).shuffle(order)
        raw_keys = [REC.encode(i) for i in order]
        chunk = 100
        steps = (count + chunk - 1) // chunk
        no_ttl = Store(db, store.location, SCHEMA, Values(SCHEMA), False, check_expiry=False)

        async def raw(step: int) -> None:
            get = db.get
            for key in raw_keys[step * chunk : (step + 1) * chunk]:
                await get(key)

        head = REC.head
        pack_id = struct.Struct(">Q").pack

        async def hand(step: int) -> None:
            read = ffi_patch.row_reader_for(db)
            assert read is not None, "the hand side needs the ffi speed-up"
            for i in order[step * chunk : (step + 1) * chunk]:
                row = await read(db, head + pack_id(i))
                assert row is not None
                value, expire = row
                if expire is not None and expire <= time.time_ns() // 1_000_000:
                    continue
                msgpack.unpackb(value, raw=False, timestamp=3, strict_map_key=False)

        for label, view, baseline, raw_patched in (
            ("get", store, raw, False),
            ("get no-expiry", no_ttl, raw, False),
            ("get (patched)", store, raw, True),
            ("get vs hand", store, hand, True),
        ):

            async def typed(step: int, view: Store = view) -> None:
                get = view.get
                for i in order[step * chunk : (step + 1) * chunk]:
                    await get(REC, (i,))

            typed_times: list[float] = []
            raw_times: list[float] = []
            await _interleaved(steps, typed, baseline, raw_patched)  # warm-up round
            for _ in range(rounds):
                t, w = await _interleaved(steps, typed, baseline, raw_patched)
                typed_times.append(t)
                raw_times.append(w)
            _report(label, count, typed_times, raw_times)


async def _bench_scan(root: Path, count: int, rounds: int, pairs: int) -> None:
    async with Store.open(root / "scan", SCHEMA) as store:
        for start in range(0, count, 5000):
            async with store.batch() as batch:
                for i in range(start, min(start + 5000, count)):
                    batch.put(REC, (i,), {"i": i, "name": f"record {i}", "tags": ["a", "b"]})
        await _quiesce(store)
        db = store._source
        lo, hi = REC.range()

        async def typed(step: int) -> None:
            n = 0
            async for record in store.scan(REC):
                record.value  # noqa: B018 - touch it like the raw side does
                n += 1
            assert n == count, n

        async def raw(step: int) -> None:
            key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
            it = await db.scan(key_range)
            n = 0
            while rows := await it.next_batch(1024):
                for kv in rows:
                    kv.key  # noqa: B018
                    kv.value  # noqa: B018
                n += len(rows)
            assert n == count, n

        await _interleaved(1, typed, raw)  # warm-up
        typed_times: list[float] = []
        raw_times: list[float] = []
        for _ in range(rounds):
            t, w = await _interleaved(2, typed, raw)
            typed_times.append(t / 2)
            raw_times.append(w / 2)
        _report("scan", count, typed_times, raw_times)

        u64 = struct.Struct(">Q").unpack_from
        head = len(REC.head)
        unpackb = msgpack.unpackb
        options = scan_options(False)

        async def hand(step: int) -> None:
            key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
            it = await db.scan_with_options(key_range, options)
            n = 0
            while rows := await it.next_batch(1024):
                for kv in rows:
                    u64(kv.key, head)
                    unpackb(kv.value, raw=False, timestamp=3, strict_map_key=False)
                n += len(rows)
            assert n == count, n

        await _scan_vs_hand("scan vs hand", count, typed, hand, pairs)

        async def hand_columns(step: int) -> None:
            key_range = KeyRange(start=lo, start_inclusive=True, end=hi, end_inclusive=False)
            next_columns = ffi_patch.columns_for(await db.scan_with_options(key_range, options))
            assert next_columns is not None, "columns need the ffi speed-up"
            n = 0
            while True:
                keys, values, _expires = await next_columns(1024)
                if not keys:
                    break
                for key, value in zip(keys, values, strict=True):
                    u64(key, head)
                    msgpack.unpackb(value, raw=False, timestamp=3, strict_map_key=False)
                n += len(keys)
            assert n == count, n

        await _scan_vs_hand("scan vs hand-columns", count, typed, hand_columns, pairs)


async def _scan_vs_hand(
    name: str,
    count: int,
    typed: Callable[[int], Awaitable[Any]],
    hand: Callable[[int], Awaitable[Any]],
    pairs: int,
) -> None:
    """Typed vs hand-decoded scans as `pairs` back-to-back pairs over the same store (A-B,
    B-A, ...): each pair gives one row-rate ratio (hand time / typed time), so a load swing
    on the shared machine hits both halves of a pair alike; the median ratio and its spread
    (min-max) across pairs are reported with the best and median µs/row of each side."""
    await _interleaved(1, typed, hand, raw_patched=True)  # warm-up
    typed_times: list[float] = []
    hand_times: list[float] = []
    clock = time.perf_counter
    for i in range(pairs):
        timed = {}
        for side, run in (
            (("typed", typed), ("hand", hand)) if i % 2 == 0 else (("hand", hand), ("typed", typed))
        ):
            start = clock()
            await run(i)
            timed[side] = clock() - start
        typed_times.append(timed["typed"])
        hand_times.append(timed["hand"])
    ratios = sorted(w / t for t, w in zip(typed_times, hand_times, strict=True))
    median = statistics.median(ratios)
    _kind, target, _sense = TARGETS.get(name, NO_TARGET)
    per_row = {
        side: (min(times) / count * 1e6, statistics.median(times) / count * 1e6)
        for side, times in (("typed", typed_times), ("hand", hand_times))
    }
    verdict = ""
    if target is not None:
        verdict = f"  [target >= {target}: {'met' if median >= target else 'MISSED'}]"
    print(
        f"{name:<13} {count:>7} ops  typed {per_row['typed'][0]:8.2f} "
        f"(median {per_row['typed'][1]:.2f}) µs/row  hand "
        f"{per_row['hand'][0]:8.2f} (median {per_row['hand'][1]:.2f}) "
        f"µs/row  row rate typed/hand median {median:.2f} over {pairs} interleaved pairs "
        f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}){verdict}",
        flush=True,
    )


async def _bench_durability(label: str, url: str, count: int) -> None:
    """Latency of one 100 B put: accepted, + flush(), + await_durable() (raw binding)."""
    location = parse_location(url)
    db = await DbBuilder(location.path, location.object_store(create=True)).build()
    results = []
    try:
        for mode in ("put", "put+flush", "put+await_durable"):
            times = []
            for i in range(count):
                start = time.perf_counter()
                handle = await db.put(b"durability-%06d" % i, b"v" * 100)
                if mode == "put+flush":
                    await db.flush()
                elif mode == "put+await_durable":
                    await handle.await_durable()
                times.append(time.perf_counter() - start)
            results.append(
                f"{mode} {statistics.median(times) * 1e3:.2f} "
                f"({min(times) * 1e3:.2f}-{max(times) * 1e3:.2f})"
            )
    finally:
        await db.shutdown()
    status = getattr(ffi_patch, "status", None)
    active = bool(getattr(status(), "applied", False)) if status is not None else False
    speedup = f"ffi speed-up {'on' if active else 'off'}"
    print(
        f"durability {label} ({speedup}): median (min-max) ms of {count}: " + "; ".join(results),
        flush=True,
    )


async def _main(quick: bool) -> None:
    puts, gets, scans = (2000, 500, 10_000) if quick else (20_000, 5000, 100_000)
    rounds = 2 if quick else 4
    put_rounds = 1 if quick else 2  # a 4 KiB round is ~30 s a side before the ffi speed-up
    speedup = ffi_patch.install()
    print(
        f"store bench: {'quick' if quick else 'full'} sizes, {put_rounds} (put) / {rounds} "
        f"interleaved rounds, best of each side; ffi speed-up active on the typed side: "
        f"{speedup}; "
        f"uninstall available: {hasattr(ffi_patch, 'uninstall')}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        await _bench_put(root, 100, puts, put_rounds)
        await _bench_put(root, 4096, puts, put_rounds)
        await _bench_get(root, gets, rounds)
        await _bench_scan(root, scans, rounds, 4 if quick else 9)
        durability = 10 if quick else 30
        await _bench_durability("local directory", str(root / "durability"), durability)
        s3 = os.environ.get("OPENDATA_KV_BENCH_S3")
        if s3:  # e.g. s3://bucket/bench with AWS_* pointing at a moto_server on 127.0.0.1
            await _bench_durability(s3, f"{s3.rstrip('/')}/{os.getpid()}", durability)


def run(quick: bool) -> None:
    asyncio.run(_main(quick))
