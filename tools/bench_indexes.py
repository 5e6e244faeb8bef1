"""Secondary index costs (issue 23), each as a ratio measured in one run on a local directory:

- batched put (put_many, 1000 per batch) of a record type with one value index and one count
  index vs the same record type without indexes (issue 32 target <= 2.5x the time per record),
  on two workloads: this bench's own (subjects n % 97) and issue 32's second measure, 20,000
  new likes over 997 subjects (nearly every group touched once per batch), wall time and the
  process's CPU time (slatedb's runtime threads included); and the likes measure's own rows
  written through the C floor (../shared/floor, no Python between the native calls): the
  records alone, with the index rows, and with a get of each record first, which is the
  least any upkeep that reads the value it replaces pays, as ratios to the records alone;
- index_scan returning records vs a primary-key scan of the same rows (target >= 0.5x the
  row rate), through a plain value index (one point read per record) and a covering one
  (the entries hold the values: no point read);
- online build rate (records/s) beside a primary scan of the same records.

Rounds alternate the compared paths; the median of each is reported.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_floor
from slatedb.uniffi import DbBuilder, KeyRange

from opendata_kv import Index, RecordType, fields
from opendata_kv.objstore.location import parse_location
from opendata_kv.store import Store

like = RecordType("like", 1, [("did", fields.string), ("rkey", fields.u32)])
by_subject = Index("by_subject", "like", [("subject", fields.string)])
per_subject = Index("per_subject", "like", [("subject", fields.string)], kind="count")
covering = Index("covering", "like", [("subject", fields.string)], covering=True)


def _value(n: int) -> dict[str, Any]:
    return {"subject": f"at://post/{n % 97}", "created": n}


#: process CPU seconds of each _load, by whether it had indexes (printed beside the wall time)
_LOAD_CPU: dict[bool, list[float]] = {False: [], True: []}


async def _load(url: str, count: int, indexes: list[Index]) -> float:
    async with Store.open(url, [like], indexes=indexes) as store:
        start, cpu = time.perf_counter(), time.process_time()
        await store.put_many(
            ((like, (f"did:{n % 50}", n), _value(n)) for n in range(count)), batch_size=1000
        )
        _LOAD_CPU[bool(indexes)].append(time.process_time() - cpu)
        return time.perf_counter() - start


LIKES = 20_000
LIKE_SUBJECTS = 997


async def _likes(url: str, indexes: list[Index]) -> tuple[float, float]:
    """(wall, CPU) seconds to put LIKES new likes over LIKE_SUBJECTS subjects, 1,000 a batch."""
    items = [
        (like, (f"did:{n % 50}", n), {"subject": f"at://post/{n % LIKE_SUBJECTS}", "created": n})
        for n in range(LIKES)
    ]
    async with Store.open(url, [like], indexes=indexes) as store:
        wall, cpu = time.perf_counter(), time.process_time()
        await store.put_many(items, batch_size=1000)
        return time.perf_counter() - wall, time.process_time() - cpu


def _likes_rounds(tmp: str, rounds: int) -> None:
    """Issue 32's second measure, the two paths alternating, medians printed."""
    plain: list[tuple[float, float]] = []
    indexed: list[tuple[float, float]] = []
    for r in range(rounds):
        plain.append(asyncio.run(_likes(str(Path(tmp) / f"lp{r}"), [])))
        indexed.append(asyncio.run(_likes(str(Path(tmp) / f"li{r}"), [by_subject, per_subject])))
    per = 1e6 / LIKES
    for at, label in ((0, "wall"), (1, "CPU ")):
        p = statistics.median(x[at] for x in plain)
        i = statistics.median(x[at] for x in indexed)
        print(
            f"{LIKES:,} new likes / {LIKE_SUBJECTS} subjects, {label}: no index {p * per:6.2f}, "
            f"value + count index {i * per:6.2f} us/record ({i / p:.2f}x, target <= 2.5x)"
        )


async def _raw_db(url: str) -> Any:
    location = parse_location(url)
    return await DbBuilder(location.db_path, location.object_store(create=True)).build()


async def _likes_rows(
    url: str,
) -> tuple[list[tuple[bytes, bytes]], list[list[tuple[bytes, bytes]]]]:
    """The rows an indexed likes load leaves: (record rows in put order, the index rows
    grouped by kind and index), read back raw after the load (untimed)."""
    items = [
        (like, (f"did:{n % 50}", n), {"subject": f"at://post/{n % LIKE_SUBJECTS}", "created": n})
        for n in range(LIKES)
    ]
    async with Store.open(url, [like], indexes=[by_subject, per_subject]) as store:
        await store.put_many(items, batch_size=1000)
    db = await _raw_db(url)
    try:
        stored: dict[bytes, bytes] = {}
        it = await db.scan(
            KeyRange(start=b"\x00", start_inclusive=True, end=None, end_inclusive=False)
        )
        while batch := await it.next_batch(1024):
            stored.update((kv.key, kv.value) for kv in batch)
    finally:
        await db.shutdown()
    records = [(key, stored.pop(key)) for key in (like.encode(*fields) for _, fields, _ in items)]
    by_prefix: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for key, data in stored.items():  # an index row: b"\x00\xf1" kind, the index name, b"\x00"
        by_prefix.setdefault(key.split(b"\x00")[1], []).append((key, data))
    return records, sorted(by_prefix.values(), key=len)


def _likes_floor(tmp: str, rounds: int) -> None:
    """The engine's own cost of the likes measure's rows, through the C floor (no Python
    between the native calls): what any index upkeep that reads a record before replacing
    it must pay at least, as a ratio to the no-index put of the same records."""
    floor = bench_floor.load()
    if not isinstance(floor, bench_floor.Floor):
        print(f"likes on the floor: {floor}")
        return
    fx = floor.fx
    records, index_rows = asyncio.run(_likes_rows(str(Path(tmp) / "rows")))
    entries = [rows for rows in index_rows if len(rows) == len(records)]
    groups = [rows for rows in index_rows if len(rows) == LIKE_SUBJECTS]
    assert len(entries) == len(groups) == 1, [len(rows) for rows in index_rows]
    batches = range(0, len(records), 1000)

    def batch_rows(start: int, indexed: bool) -> tuple[list[bytes], list[bytes]]:
        rows = records[start : start + 1000]
        if indexed:  # the batch's entries, and every group (each batch touches nearly all)
            rows = rows + [r for e in entries for r in e[start : start + 1000]]
            rows += [r for g in groups for r in g]
        return [k for k, _ in rows], [v for _, v in rows]

    async def one(url: str, indexed: bool, read: bool) -> float:
        db = await _raw_db(url)
        try:
            handle, get = db._handle, fx.get
            prepared = [(start, batch_rows(start, indexed)) for start in batches]
            begin = time.perf_counter()
            for start, (keys, values) in prepared:
                if read:  # the replaced value of each record (none: they are new)
                    for key, _ in records[start : start + 1000]:
                        get(handle, key)
                wb = fx.wb_new()
                fx.wb_put_many(wb, keys, values)
                fx.write(handle, wb)
                fx.wb_free(wb)
            return time.perf_counter() - begin
        finally:
            await db.shutdown()

    runs: dict[str, list[float]] = {"plain": [], "rows": [], "read": []}
    for r in range(rounds):
        runs["plain"].append(asyncio.run(one(str(Path(tmp) / f"fp{r}"), False, False)))
        runs["rows"].append(asyncio.run(one(str(Path(tmp) / f"fr{r}"), True, False)))
        runs["read"].append(asyncio.run(one(str(Path(tmp) / f"fg{r}"), True, True)))
    per = 1e6 / len(records)
    plain, rows, read = (statistics.median(runs[k]) * per for k in ("plain", "rows", "read"))
    print(
        f"the same likes on the C floor (engine only, wall): no index {plain:6.2f}, the index "
        f"rows too {rows:6.2f} ({rows / plain:.2f}x), and a get of each record first "
        f"{read:6.2f} us/record ({read / plain:.2f}x)"
    )


async def _scans(url: str) -> tuple[float, float, float]:
    async with Store.open(url, [like], indexes=[by_subject, per_subject, covering]) as store:
        start = time.perf_counter()
        rows = len(await store.scan("like").to_list())
        primary = time.perf_counter() - start
        start = time.perf_counter()
        found = len(await store.index_scan(by_subject, batch_size=1024).to_list())
        indexed = time.perf_counter() - start
        assert found == rows, (found, rows)
        start = time.perf_counter()
        found = len(await store.index_scan(covering, batch_size=1024).to_list())
        covered = time.perf_counter() - start
        assert found == rows, (found, rows)
        return primary, indexed, covered


async def _add_covering(url: str) -> None:
    """The covering index added to the loaded store and built (untimed)."""
    async with Store.open(url, [like], indexes=[by_subject, per_subject, covering]) as store:
        await store.build_index("covering")


async def _build(url: str) -> tuple[float, float, int]:
    async with Store.open(url, [like], indexes=[by_subject]) as store:
        start = time.perf_counter()
        rows = len(await store.scan("like").to_list())
        primary = time.perf_counter() - start
        start = time.perf_counter()
        await store.build_index("by_subject", batch_size=1000)
        return primary, time.perf_counter() - start, rows


def run(quick: bool) -> None:
    count = 5_000 if quick else 50_000
    rounds = 2 if quick else 3
    plain: list[float] = []
    indexed: list[float] = []
    scan_primary: list[float] = []
    scan_index: list[float] = []
    scan_covered: list[float] = []
    build_primary: list[float] = []
    build: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            plain.append(asyncio.run(_load(str(Path(tmp) / f"p{r}"), count, [])))
            url = str(Path(tmp) / f"i{r}")
            indexed.append(asyncio.run(_load(url, count, [by_subject, per_subject])))
            asyncio.run(_add_covering(url))
            primary, index_time, covered_time = asyncio.run(_scans(url))
            scan_primary.append(primary)
            scan_index.append(index_time)
            scan_covered.append(covered_time)
            bp, bt, _ = asyncio.run(_build(str(Path(tmp) / f"p{r}")))
            build_primary.append(bp)
            build.append(bt)
    med = statistics.median
    per = 1e6 / count
    print(f"records: {count}, rounds: {rounds} (medians)")
    print(
        f"put_many, no index:            {med(plain) * per:7.2f} us/record\n"
        f"put_many, value + count index: {med(indexed) * per:7.2f} us/record  "
        f"({med(indexed) / med(plain):.2f}x, target <= 2.5x)\n"
        f"  the same in process CPU:     {med(_LOAD_CPU[False]) * per:7.2f} / "
        f"{med(_LOAD_CPU[True]) * per:7.2f} us/record "
        f"({med(_LOAD_CPU[True]) / med(_LOAD_CPU[False]):.2f}x)"
    )
    print(
        f"primary scan:                  {count / med(scan_primary):10,.0f} rows/s\n"
        f"index_scan (records):          {count / med(scan_index):10,.0f} rows/s  "
        f"({med(scan_primary) / med(scan_index):.2f}x the row rate, target >= 0.5x)\n"
        f"index_scan (covering index):   {count / med(scan_covered):10,.0f} rows/s  "
        f"({med(scan_primary) / med(scan_covered):.2f}x the row rate, target >= 0.5x)"
    )
    print(
        f"primary scan:                  {count / med(build_primary):10,.0f} records/s\n"
        f"online build (one value index):{count / med(build):10,.0f} records/s  "
        f"({med(build_primary) / med(build):.2f}x)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        _likes_rounds(tmp, rounds if quick else 5)
    with tempfile.TemporaryDirectory() as tmp:
        _likes_floor(tmp, rounds if quick else 5)
