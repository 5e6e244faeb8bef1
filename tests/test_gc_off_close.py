"""The writer's garbage collection runs beside its Db (store/gc_runner.py), off the close path:
closing a writer while a pass deletes ~250 obsolete objects (one request each) sends no more
of those deletes and takes a few round trips, counted through a DelayProxy in front of moto."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import S3_BUCKET, MotoServer
from tcp_proxy import DelayProxy

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.store import gc_runner

ITEM = RecordType("item", 1, [("id", F.u64)])
SCHEMA = Schema(ITEM)
GC_NOW = {
    "garbage_collector_options": {
        group: {"interval": "600s", "min_age": "1s"}
        for group in ("manifest_options", "wal_options", "compacted_options")
    },
    # an L0 SST per flush, compacted at once: each flush leaves obsolete objects behind
    "l0_sst_size_bytes": 2048,
    "compactor_options": {"poll_interval": "1s"},
}


@pytest.fixture
def proxy(s3_env: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[DelayProxy]:
    with DelayProxy(("127.0.0.1", s3_env.port), delay=0.02) as p:
        monkeypatch.setenv("AWS_ENDPOINT_URL", p.endpoint)
        yield p


async def _obsolete_objects(url: str) -> None:
    """~250 flushes (WAL files and L0 SSTs), compacted, then closed: obsolete once 1 s old."""
    async with Store.open(url, SCHEMA, settings=GC_NOW) as store:
        for i in range(250):
            await store.put(ITEM, (i,), {"pad": "x" * 100})
            await store.flush()
        await asyncio.sleep(3)  # the compactor merges the L0 SSTs
    await asyncio.sleep(1.5)  # past min_age


def test_closing_a_writer_does_not_wait_for_its_garbage_collection(proxy: DelayProxy) -> None:
    url = f"s3://{S3_BUCKET}/t/{uuid.uuid4().hex[:12]}"
    delay, proxy.delay = proxy.delay, 0.0  # the setup's ~1,000 requests need no delay
    asyncio.run(_obsolete_objects(url))
    proxy.delay = delay

    async def open_and_close() -> Any:
        store = await Store.open(url, SCHEMA, settings=GC_NOW)
        started = time.monotonic()
        while proxy.log[-1].start < started or "delete" not in proxy.log[-1].path:
            await asyncio.sleep(0.01)  # the first pass, at open, has begun deleting
        with proxy.measure() as closing:
            await store.close()
        return closing

    closing = asyncio.run(open_and_close())
    deletes = closing.count("POST", "delete") + closing.count("DELETE")
    # at most the deletes already in flight (slatedb sends 8 at a time), and a close's own
    # few round trips; waiting for the pass was 170 deletes in 34 waves
    assert deletes <= 8 and closing.waves() <= 8, closing.describe()


def test_durations_as_slatedb_writes_them() -> None:
    assert gc_runner.seconds("600s") == 600
    assert gc_runner.seconds("1s+500ms") == 1.5
    assert gc_runner.seconds("1h+2m") == 3720


def test_the_db_gets_no_collector_and_the_runner_the_caller_s() -> None:
    settings = {"garbage_collector_options": {"wal_options": {"min_age": "86400s"}}}
    db, group = gc_runner.split(settings)
    assert all(db["garbage_collector_options"][t] is None for t in gc_runner.AGED)
    assert group["wal_options"]["min_age"] == "86400s"
    assert group["wal_options"]["interval"]  # merged over the defaults
    assert group["manifest_options"] is not None
