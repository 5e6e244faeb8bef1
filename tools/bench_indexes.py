"""Secondary index costs (issue 23), each as a ratio measured in one run on a local directory:

- batched put (put_many, 1000 per batch) of a record type with one value index and one count
  index vs the same record type without indexes (issue 32 target <= 2.5x the time per record),
  on two workloads: this bench's own (subjects n % 97) and issue 32's second measure, 20,000
  new likes over 997 subjects (nearly every group touched once per batch), wall time and the
  process's CPU time (slatedb's runtime threads included);
- both workloads against the C floor (../shared/floor) doing exactly our work (issue 40
  point 2, target <= 1.3x): the rows of each of our native batches (records, index entries,
  count groups) and our reads (a get of each record's key, the read that tells a new record
  from a replaced one, and of each group the writer did not know), captured from an untimed
  indexed load by wrapping the names store/writer.py calls, then replayed with no Python
  between the native calls; wall and process CPU;
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
from typing import Any, NamedTuple

import bench_floor
from slatedb.uniffi import DbBuilder

from opendata_kv import Index, RecordType, fields
from opendata_kv.objstore.location import parse_location
from opendata_kv.store import Store, writer
from opendata_kv.store.batch import Batch
from opendata_kv.store.settings import slatedb_settings
from opendata_kv.store.writes import Put

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
    """A slatedb Db as Store.open makes one: the same settings (the library's defaults, Lz4
    SSTs among them), so the floor's engine does the same work in its background too."""
    location = parse_location(url)
    builder = DbBuilder(location.db_path, location.object_store(create=True))
    builder.with_settings(slatedb_settings(None))
    return await builder.build()


Item = tuple[RecordType, tuple[Any, ...], dict[str, Any]]


class _Work(NamedTuple):
    """One batch of an indexed put_many as the engine sees it: the rows written in its one
    native write (records, then index rows) and the keys it reads first (the replaced
    values, one per record, and the aggregate groups the writer did not know)."""

    keys: list[bytes]
    values: list[bytes]
    reads: list[bytes]


def _likes_items() -> list[Item]:
    return [
        (like, (f"did:{n % 50}", n), {"subject": f"at://post/{n % LIKE_SUBJECTS}", "created": n})
        for n in range(LIKES)
    ]


def _load_items(count: int) -> list[Item]:
    return [(like, (f"did:{n % 50}", n), _value(n)) for n in range(count)]


async def _captured(url: str, items: list[Item]) -> list[_Work]:
    """The work of each batch of an indexed put_many of `items` (untimed): the writer's own
    native batches and reads, recorded by wrapping the names store/writer.py calls."""
    work: list[_Work] = []
    index_rows: list[tuple[bytes, bytes]] = []
    group_reads: list[bytes] = []
    real_fill, real_current, real_write = (
        writer.fill_index_rows,
        writer.current_values,
        Store.write,
    )

    def fill(native: Any, rows: Any, where: str) -> None:
        for op in rows.ops:  # the likes are new records: their index ops are plain puts
            assert isinstance(op, Put) and op.data is not None and op.options is None, op
            index_rows.append((op.key, op.data))
        index_rows.extend(zip(rows.keys, rows.data, strict=True))  # the plain puts' columns
        real_fill(native, rows, where)

    async def current(source: Any, where: str, keys: list[bytes], **kw: Any) -> Any:
        group_reads.extend(keys)
        return await real_current(source, where, keys, **kw)

    async def write(store: Store, batch: Batch, *, durable: bool = False) -> None:
        await real_write(store, batch, durable=durable)
        keys, data, _ = batch.columns()
        assert all(isinstance(d, bytes) for d in data)
        work.append(
            _Work(
                keys + [k for k, _ in index_rows],
                [d for d in data if d is not None] + [v for _, v in index_rows],
                list(dict.fromkeys(keys)) + group_reads[:],
            )
        )
        index_rows.clear()
        group_reads.clear()

    writer.fill_index_rows, writer.current_values = fill, current  # type: ignore[assignment]
    Store.write = write  # type: ignore[method-assign]
    try:
        async with Store.open(url, [like], indexes=[by_subject, per_subject]) as store:
            await store.put_many(items, batch_size=1000)
    finally:
        writer.fill_index_rows, writer.current_values = real_fill, real_current
        Store.write = real_write  # type: ignore[method-assign]
    return work


def _floor_dir() -> Path:
    """../shared/floor beside the checkout, or beside the checkout's parent (a worktree)."""
    for parent in bench_floor.REPO.parents:
        if (parent / "shared" / "floor").is_dir():
            return parent / "shared" / "floor"
    return bench_floor.FLOOR_DIR


def _same_work(tmp: str, label: str, items: list[Item], rounds: int) -> None:
    """Ours against the C floor doing exactly our work (issue 40 point 2): per batch, a get
    of each record's key (the read that tells a new record from a replaced one) and of each
    aggregate group the writer read, then our batch's rows (records, index entries, groups)
    written in one WriteBatch, with no Python between the native calls. Rounds alternate;
    medians of wall and process CPU (slatedb's threads included)."""
    floor = bench_floor.load(_floor_dir())
    if not isinstance(floor, bench_floor.Floor):
        print(f"{label} on the floor: {floor}")
        return
    fx = floor.fx
    work = asyncio.run(_captured(str(Path(tmp) / "capture"), items))
    rows = sum(len(w.keys) for w in work)
    reads = sum(len(w.reads) for w in work)

    async def on_floor(url: str) -> tuple[float, float]:
        db = await _raw_db(url)
        try:
            handle, get, new, put_many, write, free = (
                db._handle,
                fx.get,
                fx.wb_new,
                fx.wb_put_many,
                fx.write,
                fx.wb_free,
            )
            wall, cpu = time.perf_counter(), time.process_time()
            for keys, values, read in work:
                for key in read:
                    get(handle, key)
                wb = new()
                put_many(wb, keys, values)
                write(handle, wb)
                free(wb)
            return time.perf_counter() - wall, time.process_time() - cpu
        finally:
            await db.shutdown()

    async def ours(url: str) -> tuple[float, float]:
        async with Store.open(url, [like], indexes=[by_subject, per_subject]) as store:
            wall, cpu = time.perf_counter(), time.process_time()
            await store.put_many(items, batch_size=1000)
            return time.perf_counter() - wall, time.process_time() - cpu

    runs: dict[str, list[tuple[float, float]]] = {"floor": [], "ours": []}
    for r in range(rounds):  # alternating, which goes first too
        first, second = ("floor", "ours") if r % 2 == 0 else ("ours", "floor")
        for side in (first, second):
            measure = on_floor if side == "floor" else ours
            runs[side].append(asyncio.run(measure(str(Path(tmp) / f"{side}{r}"))))
    per = 1e6 / len(items)
    for at, what in ((0, "wall"), (1, "CPU ")):
        f = statistics.median(x[at] for x in runs["floor"]) * per
        o = statistics.median(x[at] for x in runs["ours"]) * per
        # each round's ratio (ours over the floor beside it): the machine's drift from round
        # to round moves both sides of a pair, not the ratio
        paired = [o_[at] / f_[at] for f_, o_ in zip(runs["floor"], runs["ours"], strict=True)]
        print(
            f"{label}, {what}: the C floor doing the same rows ({rows / len(items):.2f} a "
            f"record) and reads ({reads / len(items):.2f} a record) {f:6.2f}, ours "
            f"{o:6.2f} us/record; round by round {statistics.median(paired):.2f}x "
            f"({min(paired):.2f}-{max(paired):.2f}; target <= 1.3x), of the medians "
            f"{o / f:.2f}x"
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
        _same_work(tmp, f"{count:,} records / 97 subjects", _load_items(count), rounds + 4)
    with tempfile.TemporaryDirectory() as tmp:
        _same_work(
            tmp,
            f"{LIKES:,} new likes / {LIKE_SUBJECTS} subjects",
            _likes_items(),
            rounds if quick else 7,
        )
