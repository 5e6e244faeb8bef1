"""The engines (issue 38): N records read into Arrow by 2 Dask worker processes beside one
process's `scan.to_arrow()`, both at one pinned checkpoint of the same store, alternating
rounds. (Splits and the parallel export: tools/bench_scaleout.py.)

    PYTHONPATH=. python tools/bench.py engines [--records N] [--rounds R] [--root DIR]
                                               [--split-bytes B]

The store is bench_tools_scale's (AT-Protocol-like keys, ~100 B msgpack values, batches of
50,000 raw puts). The Dask side runs on a LocalCluster of 2 worker processes (1 thread each)
started before the rounds; a round is the planning (pin given, splits, the first batch) and
the tasks. Two forms: `tasks` reads each split into Arrow record batches in its worker (what
one process's to_arrow does, the target's measure); `frame` is read_store's DataFrame (Arrow
plus the conversion to pandas ArrowDtype columns), run in alternating order round by round.
The 1-min load average is printed beside every figure: the machine is shared. Beside wall and
the critical path's CPU (the driver's plus the busiest worker's), "net of idle" subtracts what
each process spends idle per second of wall (measured for 10 s before the rounds): on a loaded
machine the rounds' wall stretches, and that idle cost with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_tools_scale import RECORD, pairs, put_raw_batches

import opendata_kv
from opendata_kv import Schema, Store, SyncStore

SCHEMA = Schema(RECORD)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def cpu_seconds() -> float:
    """This process's user + system CPU time (its worker threads too)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def workers_cpu(client: Any) -> list[float]:
    """Each Dask worker process's CPU seconds so far."""
    return sorted(client.run(cpu_seconds).values())


def _opened() -> int:
    from opendata_kv.store import pinned_readers

    return pinned_readers.opened()


def reader_opens(client: Any) -> list[int]:
    """How many readers each worker process opened so far (tasks after a worker's first
    borrow the one it keeps: store/pinned_readers.py)."""
    return sorted(client.run(_opened).values())


def idle_rates(client: Any, seconds: float = 10.0) -> tuple[float, list[float]]:
    """CPU seconds per second of wall the driver and each worker spend with nothing to do."""
    before, workers_before = cpu_seconds(), workers_cpu(client)
    time.sleep(seconds)
    driver = (cpu_seconds() - before) / seconds
    spent = [(a - b) / seconds for a, b in zip(workers_cpu(client), workers_before, strict=True)]
    return driver, spent


def build(path: str, count: int) -> None:
    async def write() -> None:
        async with Store.open(path, SCHEMA) as store:
            await put_raw_batches(store, pairs(count), lambda done: None)

    start = time.perf_counter()
    asyncio.run(write())
    print(f"built {count:,} records in {time.perf_counter() - start:.1f} s ({load()})")


def one_process(pin: Any) -> tuple[int, str]:
    """Rows of the record read into Arrow by one to_arrow() at the pin, in this process, and
    the shares of its wall this thread ran, waited for a CPU and was blocked."""
    rows = 0
    with Timed() as timed, pin.open_reader(schema=SCHEMA) as reader:
        for batch in reader.scan(RECORD).to_arrow():
            rows += batch.num_rows
    return rows, (
        f"driver thread: run {timed.run / timed.wall:.0%}, waiting for a CPU "
        f"{timed.wait / timed.wall:.0%}, blocked {timed.blocked / timed.wall:.0%}"
    )


def thread_sched() -> tuple[float, float]:
    """(seconds run on a CPU, seconds waited runnable for one) of the calling thread, from
    /proc/thread-self/schedstat (Linux; zeros elsewhere): wall time less both is time the
    thread was blocked (I/O, a lock, slatedb's runtime)."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            run, wait, _ = stat.read().split()
    except OSError:
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


class Timed:
    """Wall time and the calling thread's run, run-queue wait and blocked time of a block."""

    def __enter__(self) -> Timed:
        self.start, (self.run0, self.wait0) = time.perf_counter(), thread_sched()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.start
        run, wait = thread_sched()
        self.run, self.wait = run - self.run0, wait - self.wait0
        self.blocked = max(0.0, self.wall - self.run - self.wait)


def _task_rows(task: Any) -> tuple[int, float, float, float, float, int]:
    """(rows, wall, run, run-queue wait, blocked, worker pid) of one split read in a worker."""
    from opendata_kv.split_reads import read_batches

    with Timed() as timed:
        rows = sum(batch.num_rows for batch in read_batches(task))
    return rows, timed.wall, timed.run, timed.wait, timed.blocked, os.getpid()


def task_report(results: list[tuple[int, float, float, float, float, int]], took: float) -> str:
    """Per worker: the share of the round's wall its tasks ran (the rest: between tasks),
    and within them the shares run, waited for a CPU and blocked."""
    out = []
    for pid in sorted({r[5] for r in results}):
        mine = [r for r in results if r[5] == pid]
        wall = sum(r[1] for r in mine)
        run, wait, blocked = (sum(r[i] for r in mine) for i in (2, 3, 4))
        out.append(
            f"worker {pid}: {len(mine)} tasks, in tasks {wall / took:.0%} of the round; "
            f"of that run {run / max(wall, 1e-9):.0%}, waiting for a CPU "
            f"{wait / max(wall, 1e-9):.0%}, blocked {blocked / max(wall, 1e-9):.0%}"
        )
    return "; ".join(out)


def dask_tasks(client: Any, url: str, pin: Any, split_bytes: int) -> tuple[int, int, list[Any]]:
    """(rows, tasks, each task's timing): each split read into Arrow batches in a worker."""
    from opendata_kv.split_reads import plan_reads

    plan = plan_reads(
        url,
        RECORD,
        SCHEMA,
        split_bytes=split_bytes,
        pin=pin,
        lifetime=3600,
        store_options={},
        reader_options={},
    )
    futures = client.map(_task_rows, plan.tasks, pure=False)
    results = client.gather(futures)
    return sum(r[0] for r in results), len(plan.tasks), results


def dask_frame(client: Any, url: str, pin: Any, split_bytes: int) -> tuple[int, int]:
    """(rows, partitions) of read_store's DataFrame, computed to pandas in the workers."""
    import opendata_kv.dask

    frame = opendata_kv.dask.read_store(
        url, RECORD, schema=SCHEMA, split_bytes=split_bytes, pin=pin
    )
    lengths = client.compute(frame.map_partitions(len)).result()
    return int(lengths.sum()), frame.npartitions


def measure_dask(url: str, records: int, rounds: int, split_bytes: int, frame: bool) -> None:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
        opendata_kv.pinned(url) as pin,
    ):
        client.run(lambda: __import__("opendata_kv.split_reads"))  # warm imports
        idle_driver, idle_workers = idle_rates(client)
        print(
            f"idle CPU, s per s of wall: driver (with the LocalCluster's scheduler) "
            f"{idle_driver:.4f}, workers {', '.join(f'{w:.4f}' for w in idle_workers)} ({load()})"
        )
        idle_worker = max(idle_workers)
        times: dict[str, list[float]] = {"one process to_arrow": [], "2 workers, tasks": []}
        if frame:
            times["2 workers, read_store frame"] = []
        cpu: dict[str, list[float]] = {name: [] for name in times}
        net: dict[str, list[float]] = {name: [] for name in times}
        for r in range(rounds):
            for name in list(times) if r % 2 == 0 else list(reversed(times)):  # alternate
                before, workers_before = cpu_seconds(), workers_cpu(client)
                start = time.perf_counter()
                detail, results = "", None
                if name.startswith("one"):
                    (rows, detail), parts = one_process(pin), 1
                elif name.endswith("tasks"):
                    rows, parts, results = dask_tasks(client, url, pin, split_bytes)
                else:
                    rows, parts = dask_frame(client, url, pin, split_bytes)
                took = time.perf_counter() - start
                if results is not None:
                    detail = task_report(results, took)
                driver = cpu_seconds() - before
                spent = [a - b for a, b in zip(workers_cpu(client), workers_before, strict=True)]
                # the critical path on free cores: the driver's part plus the busiest worker's
                critical = driver + (max(spent) if name != "one process to_arrow" else 0.0)
                # the same, less what the processes spend idle over the round's wall time
                # (heartbeats, the scheduler's loop: a cost of the wall, which load stretches)
                work = max(0.0, driver - idle_driver * took)
                if name != "one process to_arrow":
                    work += max(0.0, max(spent) - idle_worker * took)
                assert rows == records, (name, rows)
                times[name].append(took)
                cpu[name].append(critical)
                net[name].append(work)
                print(
                    f"  round {r + 1} {name}: {took:.2f} s, {rows / took:,.0f} rows/s, "
                    f"{parts} parts; CPU s driver {driver:.2f}, workers "
                    f"{', '.join(f'{w:.2f}' for w in spent)}; net of idle {work:.2f}; "
                    "readers opened in the workers "
                    f"so far {reader_opens(client)} ({load()})",
                    flush=True,
                )
                if detail:
                    print(f"    {detail}", flush=True)
        base = statistics.median(times["one process to_arrow"])
        print(f"{records:,} records, median of {rounds} rounds ({load()}):")
        base_cpu = statistics.median(cpu["one process to_arrow"])
        base_net = statistics.median(net["one process to_arrow"])
        for name, took in times.items():
            mid, mid_cpu = statistics.median(took), statistics.median(cpu[name])
            mid_net = statistics.median(net[name])
            print(
                f"  {name:30} wall {records / mid:10,.0f} rows/s {base / mid:5.2f}x;"
                f" critical-path CPU {mid_cpu:6.2f} s, {base_cpu / mid_cpu:5.2f}x;"
                f" net of idle {mid_net:6.2f} s, {base_net / mid_net:5.2f}x"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--split-bytes", type=int, default=2 << 20)
    parser.add_argument("--root", help="a directory to build the store in (kept)")
    parser.add_argument("--no-frame", action="store_true", help="skip the read_store form")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(args.root or tmp) / f"engines-{args.records}")
        if not Path(url).exists():
            build(url, args.records)
        with SyncStore.open_reader(url, SCHEMA) as db:
            assert db.count(RECORD) == args.records
        measure_dask(url, args.records, args.rounds, args.split_bytes, not args.no_frame)
    return 0


def run(quick: bool) -> None:
    main(["--records", "20000"] if quick else [])


if __name__ == "__main__":
    main()
