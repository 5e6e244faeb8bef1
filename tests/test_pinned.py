"""Pinned reads (RFC 0014): `opendata_kv.pinned(url)` makes a detached checkpoint for a job,
readers open it by id in any process and see exactly that version while a writer writes, and
leaving deletes it (also when the block raises); on a local directory and on moto S3."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import random
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

import opendata_kv
from opendata_kv import KeyRange, Pinned, RecordType, Schema, pinned
from opendata_kv import fields as F
from opendata_kv.errors import CheckpointError, InvalidArgumentError
from opendata_kv.store import Store, SyncStore

post = RecordType("post", 2, [("repo", F.string), ("n", F.u32)])
SCHEMA = Schema(post)
SMALL_SSTS = {"l0_sst_size_bytes": 4096, "flush_interval": "60s"}


def fill(db: SyncStore, first: int, count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    with db.batch() as b:
        for n in range(first, first + count):
            b.put(post, ("r", n), rng.randbytes(60))
    db.flush()


def rows_at(pin: Pinned, split: KeyRange | None = None) -> list[tuple[bytes, bytes]]:
    """What a reader at the pinned checkpoint scans (all posts, or one split's)."""
    with pin.open_reader() as reader:
        return [(r.raw_key, r.value) for r in reader.scan(post, range=split)]


def checkpoint_ids(url: str) -> set[str]:
    with SyncStore.open_reader(url, SCHEMA) as reader:
        return {cp.id for cp in reader.checkpoints()}


def test_a_writer_writing_changes_nothing_a_pinned_read_sees(url: str) -> None:
    """Pinned while a writer runs (its last writes only in the WAL): the tasks' readers see
    the state at the pin, whatever the writer then puts, overwrites and deletes."""
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
        fill(db, 0, 300)
        fill(db, 300, 50, seed=2)  # recent: maybe only in the WAL
        before = [(r.raw_key, r.value) for r in db.scan(post)]
        with pinned(url, schema=SCHEMA, lifetime=600) as pin:
            assert pin.checkpoint_id in checkpoint_ids(url)
            splits = pin.splits(post, n=4)
            fill(db, 100, 400, seed=3)  # overwrites and new records
            db.delete_range(post, "r", start=("r", 0), end=("r", 50))
            db.flush()
            assert [(r.raw_key, r.value) for r in db.scan(post)] != before
            assert rows_at(pin) == before
            assert [kv for s in splits for kv in rows_at(pin, s)] == before
            assert pin.splits(post, n=4) == splits  # the pinned version's manifest
            held = pin.checkpoint_id
        assert held not in checkpoint_ids(url)


def test_pinned_without_a_writer_and_gone_after_an_error(url: str) -> None:
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
        fill(db, 0, 200)
    with pytest.raises(RuntimeError, match="task failed"), pinned(url, schema=SCHEMA) as pin:
        held = pin.checkpoint_id
        assert held in checkpoint_ids(url)
        raise RuntimeError("task failed")
    assert held not in checkpoint_ids(url)
    with pytest.raises(CheckpointError):
        pin.checkpoint_id  # noqa: B018  # released: no id


def test_the_lifetime_bounds_the_checkpoint(tmp_path: Any) -> None:
    """A job that dies inside the block leaves a checkpoint expiring `lifetime` after it was
    made (slatedb drops it then)."""
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA) as db:
        fill(db, 0, 10)
    pin = pinned(url, lifetime=120)
    held = asyncio.run(pin.pin())  # what entering does; a dead worker never leaves
    with SyncStore.open_reader(url, SCHEMA) as reader:
        (cp,) = [c for c in reader.checkpoints() if c.id == held]
    assert cp.expires is not None
    assert 110 <= (cp.expires - cp.created).total_seconds() <= 130
    asyncio.run(pin.release())
    assert held not in checkpoint_ids(url)


def test_async_with_and_async_readers(tmp_path: Any) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA) as db:
        fill(db, 0, 100)

    async def main() -> tuple[str, int, list[KeyRange]]:
        async with opendata_kv.pinned(url, schema=SCHEMA, lifetime=60) as pin:
            async with pin.open_reader_async() as reader:
                count = await reader.count(post)
                assert reader.checkpoint_id == pin.checkpoint_id
            splits = await pin.splits_async(post, n=2)
            return pin.checkpoint_id, count, splits

    held, count, splits = asyncio.run(main())
    assert count == 100
    assert splits[0].start == post.range()[0]
    assert held not in checkpoint_ids(url)


def read_split(pin: Pinned, split: KeyRange) -> list[tuple[bytes, bytes]]:
    """A task in another process: a reader at the pin, one split."""
    return rows_at(pin, split)


def test_a_pickled_pin_reads_in_other_processes(url: str) -> None:
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
        fill(db, 0, 400)
        before = [(r.raw_key, r.value) for r in db.scan(post)]
        with pinned(url, schema=SCHEMA) as pin:
            copy = pickle.loads(pickle.dumps(pin))
            assert (copy.url, copy.checkpoint_id) == (pin.url, pin.checkpoint_id)
            splits = pin.splits(post, n=3)
            fill(db, 0, 400, seed=9)  # every value changes
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(2, mp_context=context) as pool:
                parts = list(pool.map(read_split, [pin] * len(splits), splits))
        assert [kv for part in parts for kv in part] == before


def test_pinned_arguments(tmp_path: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        pinned(str(tmp_path), lifetime=0)
    with pytest.raises(InvalidArgumentError):
        pinned(str(tmp_path), checkpoint="x")
    pin = pinned(str(tmp_path))
    with pytest.raises(CheckpointError):
        pin.checkpoint_id  # noqa: B018
    assert isinstance(pin, Pinned)
    assert Store is not None
