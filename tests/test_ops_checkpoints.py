"""Checkpoints (pinned states) and clones (independent copies), on a local directory and S3;
and a FOLLOW_LATEST reader's long scan while the writer compacts and collects garbage."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from opskit import collect_garbage
from opskit import object_store as opskit_store
from slatedb.uniffi import AdminBuilder, Settings
from storekit import SCHEMA, VALUES, aio, like

from opendata_kv.errors import CheckpointError, SnapshotGoneError, StoreError
from opendata_kv.store import Store, SyncStore
from opendata_kv.store import scan as scanmod


@pytest.fixture(autouse=True)
def one_block_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scans here read one block per request, one request at a time (slatedb's own default):
    the tests delete SSTs under a running scan, and with the store's read-ahead (8 requests
    of 256 KiB) a scan would already hold these small SSTs whole before they vanish."""
    monkeypatch.setattr(scanmod, "READ_AHEAD_BYTES", 1)
    monkeypatch.setattr(scanmod, "BULK_READ_AHEAD_BYTES", 1)
    monkeypatch.setattr(scanmod, "FETCH_TASKS", 1)
    monkeypatch.setattr(scanmod, "BULK_FETCH_TASKS", 1)
    monkeypatch.setattr(
        scanmod, "_OPTIONS", {key: scanmod.scan_options(*key) for key in scanmod._OPTIONS}
    )


async def likes(store: Store) -> dict[int, Any]:
    return {record.key.n: record.value async for record in store.scan("like")}


def test_checkpoint_isolation_and_lifecycle(url: str) -> None:
    async def run() -> None:
        async with Store.open(url, SCHEMA, values=VALUES) as store:
            await store.put(like, (1,), {"v": 1})
            await store.put(like, (2,), {"v": 2})  # never flushed: the checkpoint flushes
            made = await store.checkpoint("first", lifetime=3600)
            assert made.name == "first" and made.expires is not None
            assert made.expires - made.created >= datetime.timedelta(seconds=3599)
            await store.put(like, (1,), {"v": 10})
            await store.delete(like, (2,))
            await store.put(like, (3,), {"v": 3})
            await store.flush()
            forever = await store.checkpoint()
            assert forever.expires is None
            assert [c.id for c in await store.checkpoints()] == [made.id, forever.id]
            assert [c.id for c in await store.checkpoints("first")] == [made.id]
            async with Store.open_reader(url, SCHEMA, values=VALUES, checkpoint=made.id) as r:
                assert await likes(r) == {1: {"v": 1}, 2: {"v": 2}}
                await store.put(like, (4,), {"v": 4})
                await store.flush()
                assert await likes(r) == {1: {"v": 1}, 2: {"v": 2}}  # pinned: never changes
            async with Store.open_reader(url, SCHEMA, values=VALUES, checkpoint="first") as r:
                assert r.checkpoint_id == made.id  # a unique name stands for its id
                assert await likes(r) == {1: {"v": 1}, 2: {"v": 2}}
            async with Store.open_reader(url, SCHEMA, values=VALUES) as latest:
                assert await likes(latest) == {1: {"v": 10}, 3: {"v": 3}, 4: {"v": 4}}
            refreshed = await store.refresh_checkpoint(made.id, None)
            assert refreshed.expires is None
            with pytest.raises(CheckpointError, match="named 'first' already exists"):
                await store.checkpoint("first")  # names are unique (issue 20, point 8)
            await store.delete_checkpoint("first")  # by its (unique) name
            assert [c.id for c in await store.checkpoints()] == [forever.id]
            with pytest.raises(CheckpointError, match="no checkpoint"):
                await store.delete_checkpoint(made.id)
            with pytest.raises(CheckpointError, match="no such checkpoint"):
                await Store.open_reader(url, SCHEMA, checkpoint=made.id)
            with pytest.raises(CheckpointError, match="not a checkpoint id"):
                await Store.open_reader(url, SCHEMA, checkpoint="nightly")

    aio(run)()


@aio
async def test_checkpoint_from_a_reader_keeps_unflushed_writes(tmp_path: Path) -> None:
    """A live writer's acknowledged writes that are only in the WAL: a checkpoint made by a
    reader (or the CLI) keeps a copy with their WAL files beside it; its readers and clones
    hold them, later writes do not show, and deleting it removes the copy and its pin."""
    path = str(tmp_path / "db")
    async with Store.open(path, SCHEMA, values=VALUES) as writer:
        await writer.put(like, (1,), {"v": 1})
        await writer.flush()  # acknowledged: in a WAL file, not in an SST
        async with Store.open_reader(path, SCHEMA, values=VALUES) as reader:
            outside = await reader.checkpoint("from-reader")
            await writer.put(like, (2,), {"v": 2})
            await writer.flush()
            async with Store.open_reader(
                path, SCHEMA, values=VALUES, checkpoint="from-reader"
            ) as pinned:
                assert await likes(pinned) == {1: {"v": 1}}
            assert [c.id for c in await reader.checkpoints()] == [outside.id]  # pin hidden
            await Store.clone(path, tmp_path / "clone", checkpoint=outside.id)
            async with Store.open_reader(tmp_path / "clone", SCHEMA, values=VALUES) as cloned:
                assert await likes(cloned) == {1: {"v": 1}}
            await reader.delete_checkpoint(outside.id)
            assert await reader.checkpoints() == []  # the copy's pin went with it
            assert not (tmp_path / "db" / "opendata-kv" / "checkpoints" / outside.id).exists()
            await writer.checkpoint()  # flushes the memtable into an SST
            made = await reader.checkpoint("after-flush")
        async with Store.open_reader(path, SCHEMA, values=VALUES, checkpoint=made.id) as pinned:
            assert await likes(pinned) == {1: {"v": 1}, 2: {"v": 2}}


def test_clone_is_independent(url: str, tmp_path: Path) -> None:
    """A clone (here always into a local directory, also from S3) holds the checkpoint's
    state; writes to either side never show in the other; deleting the source leaves the
    clone whole."""
    clone_path = str(tmp_path / "clone")

    async def run() -> None:
        async with Store.open(url, SCHEMA, values=VALUES) as source:
            await source.put(like, (1,), {"v": 1})
            await source.put(like, (2,), {"v": 2}, ttl=3600)
            made = await source.checkpoint()
            await source.put(like, (3,), {"v": 3})
            await source.flush()
            result = await Store.clone(url, clone_path, checkpoint=made.id)
            assert (result.source, result.destination, result.checkpoint) == (
                url,
                clone_path,
                made.id,
            )
            assert result.records == 2
            async with Store.open(clone_path, SCHEMA, values=VALUES) as clone:
                assert await likes(clone) == {1: {"v": 1}, 2: {"v": 2}}
                await clone.put(like, (100,), {"v": "clone"})
                await clone.delete(like, (1,))
                await clone.flush()
                await source.put(like, (200,), {"v": "source"})
                await source.flush()
                assert await likes(clone) == {2: {"v": 2}, 100: {"v": "clone"}}
                assert await likes(source) == {
                    1: {"v": 1},
                    2: {"v": 2},
                    3: {"v": 3},
                    200: {"v": "source"},
                }
            with pytest.raises(StoreError, match="already holds a database"):
                await Store.clone(url, clone_path)

    aio(run)()
    if not url.startswith("s3://"):
        shutil.rmtree(url)
    with SyncStore.open_reader(clone_path, SCHEMA, values=VALUES) as clone:
        assert {r.key.n for r in clone.scan("like")} == {2, 100}
    # the blocking form takes the same keyword arguments
    again = str(tmp_path / "clone-of-clone")
    result = SyncStore.clone(clone_path, again, checkpoint=None, destination_options=None)
    assert (result.source, result.destination, result.records) == (clone_path, again, 2)
    with SyncStore.open_reader(again, SCHEMA, values=VALUES) as copy:
        assert {r.key.n: r.value for r in copy.scan("like")} == {2: {"v": 2}, 100: {"v": "clone"}}


@aio
async def test_long_follow_latest_scan_while_the_writer_collects_garbage(tmp_path: Path) -> None:
    """A FOLLOW_LATEST reader pins nothing: the writer compacts away the L0 SSTs a scan of it
    is reading and the garbage collector deletes them. The scan meets the deleted SST,
    re-seeks after its cursor at the newer state, and still yields every key once."""
    path = str(tmp_path / "db")
    defaults = json.loads(Settings.default().to_json_string())["compactor_options"]

    def compacting_every(interval: str) -> dict[str, Any]:
        """Settings whose compactor (its scheduler and its worker) looks for work this often."""
        compactor = json.loads(json.dumps(defaults))
        compactor["poll_interval"] = interval
        compactor["worker"]["compactions_poll_interval"] = interval
        compactor["commit_compacted_interval"] = interval
        return {"l0_sst_size_bytes": 1 << 20, "compactor_options": compactor}

    total = 600  # L0 SSTs of ~300 KB, more than a scan reads ahead: most blocks are read lazily
    # The first writer never compacts: the scan below starts on its L0 SSTs.
    async with Store.open(path, SCHEMA, values=VALUES, settings=compacting_every("1h")) as first:
        for start in range(0, total, 100):
            async with first.batch() as batch:
                for n in range(start, start + 100):
                    batch.put(like, (n,), {"v": "x" * 3000})
            await first.checkpoint()  # flushes the memtable: one more L0 SST
        for made in await first.checkpoints():
            await first.delete_checkpoint(made.id)
    admin = AdminBuilder("", opskit_store(path)).build()
    async with Store.open_reader(path, SCHEMA, values=VALUES, poll_interval=0.05) as reader:
        read_by_scan = {view.id for view in (await admin.read_manifest(None)).l0}
        assert len(read_by_scan) == total // 100
        scan = reader.scan("like", batch_size=20)
        seen = [r.key.n for r in await scan.next_chunk()]
        # The next writer compacts at once (every 10 ms, not the default 5 s: the test waits
        # for it): it merges the scan's L0 SSTs with the ones it adds.
        async with Store.open(
            path, SCHEMA, values=VALUES, settings=compacting_every("10ms")
        ) as writer:
            for start in range(0, total, 200):
                async with writer.batch() as batch:
                    for n in range(start, start + 200):
                        batch.put(like, (n,), {"v": "y" * 3000})
                await writer.checkpoint()
            for made in await writer.checkpoints():
                await writer.delete_checkpoint(made.id)
            for _ in range(1500):  # until the scan's L0 SSTs are compacted (bounded: ~30 s)
                manifest = await admin.read_manifest(None)
                if not read_by_scan & {view.id for view in manifest.l0}:
                    break
                await asyncio.sleep(0.02)
            before = set(os.listdir(os.path.join(path, "compacted")))
            await collect_garbage(path)
            assert before - set(os.listdir(os.path.join(path, "compacted")))
            seen += [r.key.n async for r in scan]
            assert seen == list(range(total))
            assert scan._gone >= 1  # it did meet a deleted SST, and re-seeked


@aio
async def test_scan_whose_ssts_vanish_says_to_use_a_checkpoint(tmp_path: Path) -> None:
    """SSTs deleted under a FOLLOW_LATEST scan with no newer state to re-seek to: after its
    bounded re-seeks the scan fails with SnapshotGoneError pointing at checkpoints."""
    path = str(tmp_path / "db")
    async with Store.open(path, SCHEMA, values=VALUES) as writer:
        for start in range(0, 400, 100):
            async with writer.batch() as batch:
                for n in range(start, start + 100):
                    batch.put(like, (n,), {"v": "x" * 3000})  # SSTs beyond the read-ahead
            await writer.checkpoint()
        for made in await writer.checkpoints():
            await writer.delete_checkpoint(made.id)
    async with Store.open_reader(path, SCHEMA, values=VALUES, poll_interval=0.01) as reader:
        scan = reader.scan("like", batch_size=20)
        await scan.next_chunk()
        for name in os.listdir(os.path.join(path, "compacted")):
            os.remove(os.path.join(path, "compacted", name))
        with pytest.raises(SnapshotGoneError, match="checkpoint=ID"):
            [r async for r in scan]
        assert scan._gone == 4  # three re-seeks, then the error


@aio
async def test_checkpoint_scan_survives_garbage_collection(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    async with Store.open(path, SCHEMA, values=VALUES, settings={"l0_sst_size_bytes": 4096}) as w:
        for start in range(0, 600, 100):
            async with w.batch() as batch:
                for n in range(start, start + 100):
                    batch.put(like, (n,), {"v": "x" * 40})
            await w.flush()
        pinned = await w.checkpoint("long-scan")
        async with Store.open_reader(path, SCHEMA, values=VALUES, checkpoint=pinned.id) as r:
            scan = r.scan("like", batch_size=20)
            seen = [rec.key.n for rec in await scan.next_chunk()]
            async with w.batch() as batch:
                for n in range(600):
                    batch.delete(like, (n,))
            await w.checkpoint()
            await collect_garbage(path)
            seen += [rec.key.n async for rec in scan]
            assert seen == list(range(600))
