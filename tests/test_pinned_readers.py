"""Readers at a pinned checkpoint (issue 38's scale-out target): an engine worker's tasks after
the first borrow the reader it keeps (store/pinned_readers.py), each still reading exactly
its split's rows; kept readers are bounded, closed when the pin ends, and a reader that raised
is not kept. A reader at a checkpoint skips the damage checks of the database's WAL (it never
reads that WAL): damage there refuses a reader of the latest state, not one at the pin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import damaged_store as ds
import pyarrow as pa
import pytest
from engine_schema import SCHEMA, post
from enginekit import POSTS, SPLIT_BYTES, build_store

import opendata_kv
from opendata_kv import SyncStore
from opendata_kv.errors import StoreClosedError, StoreDataError
from opendata_kv.split_reads import plan_reads, read_batches
from opendata_kv.store import pinned_readers


def plan(url: str, pin: opendata_kv.Pinned) -> Any:
    return plan_reads(
        url,
        post,
        SCHEMA,
        split_bytes=SPLIT_BYTES,
        pin=pin,
        lifetime=60,
        store_options={},
        reader_options={},
    )


def read_task(task: Any) -> Any:
    return pa.Table.from_batches(list(read_batches(task)), schema=task.arrow_schema)


def test_tasks_after_the_first_borrow_the_kept_reader(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    with opendata_kv.pinned(url) as pin:
        with pin.open_reader(schema=SCHEMA) as reader:
            whole = reader.scan(post).to_arrow().read_all()
            split_rows = [
                reader.count(post, range=r) for r in reader.splits(post, target_bytes=SPLIT_BYTES)
            ]
        tasks = plan(url, pin).tasks
        assert len(tasks) > 2
        before = pinned_readers.opened()
        tables = [read_task(task) for task in tasks]
        assert pinned_readers.opened() - before == 1  # one open for every task
        assert [t.num_rows for t in tables] == split_rows  # each task: exactly its split
        assert pa.concat_tables(tables).equals(whole)
        # a retried task (a second read of one split) gives the same rows from the kept reader
        assert read_task(tasks[1]).equals(tables[1])
        assert pinned_readers.opened() - before == 1
        assert pin.checkpoint_id in pinned_readers.idle_readers()
        checkpoint = pin.checkpoint_id
    assert checkpoint not in pinned_readers.idle_readers()  # closed when the pin ended
    assert sum(t.num_rows for t in tables) == POSTS


def test_kept_readers_are_bounded_and_one_that_raised_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "db")
    build_store(url, 600)
    monkeypatch.setattr(pinned_readers, "MAX_IDLE", 1)
    lent: list[Any] = []

    def borrowed(pin: opendata_kv.Pinned) -> Any:
        with pinned_readers.borrow(
            ("test", pin.checkpoint_id), pin.checkpoint_id, 60, pin.open_reader
        ) as reader:
            lent.append(reader)
            return reader.count(post)

    with (
        opendata_kv.pinned(url, schema=SCHEMA) as first,
        opendata_kv.pinned(url, schema=SCHEMA) as second,
    ):
        assert borrowed(first) == 600
        assert borrowed(second) == 600  # over the bound: the least recently used is closed
        assert pinned_readers.idle_readers() == [second.checkpoint_id]
        with pytest.raises(StoreClosedError):
            lent[0].count(post)
        assert lent[1].count(post) == 600
        with (
            pytest.raises(ZeroDivisionError),
            pinned_readers.borrow(
                ("test", second.checkpoint_id), second.checkpoint_id, 60, second.open_reader
            ) as reader,
        ):
            assert reader is lent[1]  # the kept one
            raise ZeroDivisionError  # a task that failed: its reader is not kept
        assert pinned_readers.idle_readers() == []
        with pytest.raises(StoreClosedError):
            lent[1].count(post)


def test_a_kept_reader_past_its_pins_lifetime_is_not_lent(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build_store(url, 300)
    with opendata_kv.pinned(url, schema=SCHEMA) as pin:
        key = ("lifetime", pin.checkpoint_id)
        with pinned_readers.borrow(key, pin.checkpoint_id, 0.0, pin.open_reader) as old:
            pass
        with pinned_readers.borrow(key, pin.checkpoint_id, 60, pin.open_reader) as new:
            assert new is not old and new.count(post) == 300
        with pytest.raises(StoreClosedError):
            old.count(post)


def test_a_checkpoint_reader_skips_only_the_wal_it_does_not_read(tmp_path: Path) -> None:
    """A WAL file emptied after the pin refuses a reader of the latest state (the damage
    check reads the WAL) but not one at the checkpoint, which reads its own copy's WAL files
    and sees every record; damage to what it does read (the SST) still refuses it."""
    path = tmp_path / "db"
    ds.build(path)
    # entered, not left: deleting the checkpoint opens a reader of the latest state, which
    # the damage below refuses; the lifetime bounds it
    pin = opendata_kv.pinned(str(path), lifetime=120).__enter__()
    if True:
        ds.damage_local(path, ds.local_targets(path)["middle WAL"], "zero")
        with pytest.raises(StoreDataError), SyncStore.open_reader(str(path), ds.SCHEMA):
            pass
        with pin.open_reader(schema=ds.SCHEMA) as reader:
            found = {r.key.n: r.value for r in reader.scan(ds.item)}
        assert found == ds.expected()
        ds.damage_local(path, ds.local_targets(path)["SST data"], "delete")
        with pytest.raises(StoreDataError), pin.open_reader(schema=ds.SCHEMA):
            pass
