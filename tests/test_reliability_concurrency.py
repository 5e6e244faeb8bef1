"""Concurrency: one store shared by many threads (SyncStore) or many tasks (async Store).

Every value carries who wrote it and a per-writer sequence number plus a digest of both, so a
reader can tell a real write from a torn, mixed-up or invented one. Workers interleave

* put / get of their own "log" records (key: writer, seq)  -- read-your-writes must hold;
* put / get of a few shared "cell" records every worker overwrites -- a read must return one
  of the values some worker wrote to that very cell;
* atomic batches of a log record and a cell record;
* scans of a random writer's log -- keys in order, values intact, the sequence numbers a
  gap-free prefix 0..k, and for the scanning worker's own log at least everything it wrote.

At the end the store is flushed, reopened, and every log record must be there, intact.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.store import Store, SyncStore

pytestmark = pytest.mark.hang_guard(180)

LOG = RecordType("log", 1, [("writer", F.u16), ("seq", F.u32)])
CELL = RecordType("cell", 2, [("slot", F.u8)])
SCHEMA = Schema(LOG, CELL)
SLOTS = 5


def make_value(writer: int, seq: int, where: str) -> dict[str, Any]:
    digest = hashlib.sha256(f"{writer}:{seq}:{where}".encode()).hexdigest()
    return {"writer": writer, "seq": seq, "where": where, "digest": digest, "pad": "x" * (seq % 50)}


def check_value(value: Any, where: str, issued: set[tuple[int, int, str]]) -> None:
    """`value` is intact and is a write some worker issued to `where`."""
    assert isinstance(value, dict), f"{where}: not a value: {value!r}"
    assert value == make_value(value["writer"], value["seq"], where), f"{where}: torn {value!r}"
    # A worker records a write as issued before sending it, so anything readable is in here.
    assert (value["writer"], value["seq"], where) in issued, f"{where}: never written {value!r}"


def check_log_scan(records: Iterable[Any], writer: int, at_least: int, issued: Any) -> int:
    """The scanned log of `writer`: in key order, intact, seq 0..k gap-free, k >= at_least-1."""
    seqs = []
    for record in records:
        key = record.key
        assert key.writer == writer
        check_value(record.value, f"log/{writer}/{key.seq}", issued)
        assert record.value["seq"] == key.seq
        seqs.append(key.seq)
    assert seqs == list(range(len(seqs))), f"log of {writer} not a gap-free prefix: {seqs[:20]}"
    assert len(seqs) >= at_least, f"log of {writer}: {len(seqs)} records, wrote {at_least}"
    return len(seqs)


class Worker:
    """One worker's script: the same for threads and tasks, driven by a seeded RNG."""

    def __init__(self, writer: int, seed: int, issued: set[tuple[int, int, str]]) -> None:
        self.writer = writer
        self.rng = random.Random(seed * 1000 + writer)
        self.issued = issued
        self.lock = threading.Lock()
        self.seq = 0  # next log seq
        self.cell_seq = 0
        self.counts = {"put": 0, "get": 0, "cell": 0, "scan": 0, "batch": 0, "read_values": 0}

    def issue(self, where: str, seq: int) -> dict[str, Any]:
        with self.lock:  # set.add is atomic in CPython; the lock documents the intent
            self.issued.add((self.writer, seq, where))
        return make_value(self.writer, seq, where)

    def next_op(self) -> str:
        return self.rng.choices(["put", "get", "cell", "batch", "scan"], [4, 3, 3, 2, 1])[0]


def run_sync_worker(store: SyncStore, worker: Worker, ops: int, writers: int) -> None:
    for _ in range(ops):
        op = worker.next_op()
        if op == "put":
            seq = worker.seq
            store.put(LOG, (worker.writer, seq), worker.issue(f"log/{worker.writer}/{seq}", seq))
            worker.seq += 1
            worker.counts["put"] += 1
        elif op == "get":
            if worker.seq:
                seq = worker.rng.randrange(worker.seq)
                value = store.get(LOG, (worker.writer, seq))
                check_value(value, f"log/{worker.writer}/{seq}", worker.issued)
                worker.counts["read_values"] += 1
            worker.counts["get"] += 1
        elif op == "cell":
            slot = worker.rng.randrange(SLOTS)
            if worker.rng.random() < 0.5:
                worker.cell_seq += 1
                value = worker.issue(f"cell/{slot}", 1_000_000 + worker.cell_seq)
                store.put(CELL, (slot,), value)
            else:
                value = store.get(CELL, (slot,))
                if value is not None:
                    check_value(value, f"cell/{slot}", worker.issued)
                    worker.counts["read_values"] += 1
            worker.counts["cell"] += 1
        elif op == "batch":
            seq, slot = worker.seq, worker.rng.randrange(SLOTS)
            worker.cell_seq += 1
            with store.batch() as b:
                b.put(LOG, (worker.writer, seq), worker.issue(f"log/{worker.writer}/{seq}", seq))
                b.put(CELL, (slot,), worker.issue(f"cell/{slot}", 1_000_000 + worker.cell_seq))
            worker.seq += 1
            worker.counts["batch"] += 1
        else:
            other = worker.rng.randrange(writers)
            at_least = worker.seq if other == worker.writer else 0
            n = check_log_scan(store.scan(LOG, other), other, at_least, worker.issued)
            worker.counts["read_values"] += n
            worker.counts["scan"] += 1


async def run_async_worker(store: Store, worker: Worker, ops: int, writers: int) -> None:
    for _ in range(ops):
        op = worker.next_op()
        if op == "put":
            seq = worker.seq
            value = worker.issue(f"log/{worker.writer}/{seq}", seq)
            await store.put(LOG, (worker.writer, seq), value)
            worker.seq += 1
            worker.counts["put"] += 1
        elif op == "get":
            if worker.seq:
                seq = worker.rng.randrange(worker.seq)
                value = await store.get(LOG, (worker.writer, seq))
                check_value(value, f"log/{worker.writer}/{seq}", worker.issued)
                worker.counts["read_values"] += 1
            worker.counts["get"] += 1
        elif op == "cell":
            slot = worker.rng.randrange(SLOTS)
            if worker.rng.random() < 0.5:
                worker.cell_seq += 1
                await store.put(
                    CELL, (slot,), worker.issue(f"cell/{slot}", 1_000_000 + worker.cell_seq)
                )
            else:
                value = await store.get(CELL, (slot,))
                if value is not None:
                    check_value(value, f"cell/{slot}", worker.issued)
                    worker.counts["read_values"] += 1
            worker.counts["cell"] += 1
        elif op == "batch":
            seq, slot = worker.seq, worker.rng.randrange(SLOTS)
            worker.cell_seq += 1
            async with store.batch() as b:
                b.put(LOG, (worker.writer, seq), worker.issue(f"log/{worker.writer}/{seq}", seq))
                b.put(CELL, (slot,), worker.issue(f"cell/{slot}", 1_000_000 + worker.cell_seq))
            worker.seq += 1
            worker.counts["batch"] += 1
        else:
            other = worker.rng.randrange(writers)
            at_least = worker.seq if other == worker.writer else 0
            records = await store.scan(LOG, other, batch_size=7).to_list()
            worker.counts["read_values"] += check_log_scan(records, other, at_least, worker.issued)
            worker.counts["scan"] += 1
        if worker.rng.random() < 0.3:
            await asyncio.sleep(0)  # let other tasks in between steps too


async def verify_reopened(url: str, workers: list[Worker], issued: Any) -> int:
    async with Store.open(url, SCHEMA) as store:
        total = 0
        for worker in workers:
            records = await store.scan(LOG, worker.writer).to_list()
            assert check_log_scan(records, worker.writer, worker.seq, issued) == worker.seq
            total += worker.seq
        for slot in range(SLOTS):
            value = await store.get(CELL, (slot,))
            if value is not None:
                check_value(value, f"cell/{slot}", issued)
        return total


def _totals(workers: list[Worker]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for worker in workers:
        for name, n in worker.counts.items():
            totals[name] = totals.get(name, 0) + n
    return totals


def test_sync_store_from_eight_threads(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    threads_n, ops = 8, 250
    issued: set[tuple[int, int, str]] = set()
    workers = [Worker(w, seed=1, issued=issued) for w in range(threads_n)]
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def body(worker: Worker) -> None:
        try:
            start.wait(10)
            run_sync_worker(store, worker, ops, threads_n)
        except BaseException as exc:
            errors.append(exc)

    with SyncStore.open(url, SCHEMA) as store:
        threads = [threading.Thread(target=body, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a worker thread hung"
        if errors:
            raise errors[0]
        store.flush()
    total = asyncio.run(verify_reopened(url, workers, issued))
    print(f"\nSyncStore x{threads_n} threads: {_totals(workers)}; {total} log records reread")


def test_async_store_many_tasks(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    tasks_n, ops = 64, 60
    issued: set[tuple[int, int, str]] = set()
    workers = [Worker(w, seed=2, issued=issued) for w in range(tasks_n)]

    async def scenario() -> None:
        async with Store.open(url, SCHEMA) as store:
            await asyncio.wait_for(
                asyncio.gather(*(run_async_worker(store, w, ops, tasks_n) for w in workers)),
                timeout=120,
            )
            await store.flush()

    asyncio.run(scenario())
    total = asyncio.run(verify_reopened(url, workers, issued))
    print(f"\nasync Store x{tasks_n} tasks: {_totals(workers)}; {total} log records reread")
