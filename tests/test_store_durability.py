"""Durability and sharing: reopen keeps flushed records, readers follow the writer without
fencing it, a second writer fences the first, and SyncStore under many threads."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
from storekit import SCHEMA, VALUES, Post, aio, eventually, like, post1, post2

from opendata_kv import Store, SyncStore
from opendata_kv.errors import FencedError

DURABLE = pytest.mark.parametrize(
    "store_url", ["local", "relative", "file_url", "s3"], indirect=True
)


@DURABLE
@aio
async def test_reopen_keeps_every_flushed_record(store_url: str) -> None:
    expected: dict[int, object] = {}
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        for start in range(0, 300, 100):
            async with store.batch() as batch:
                for n in range(start, start + 100):
                    batch.put(like, (n,), {"n": n, "pad": "x" * (n % 50)})
                    expected[n] = {"n": n, "pad": "x" * (n % 50)}
        await store.put(post2, ("did:d", "1"), Post("single put"))
        await store.put(post1, ("did:d", "0"), {"t": "v1"})
        await store.delete(like, (7,))
        del expected[7]
        await store.flush()
        await store.put(like, (1000,), "after the last flush")  # close() flushes it too
        expected[1000] = "after the last flush"

    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        got = {r.key.n: r.value async for r in store.scan(like)}
        assert got == expected
        assert await store.get(post2, ("did:d", "1")) == Post("single put")
        assert await store.get(post1, ("did:d", "0")) == Post("v1")
        await store.put(like, (2000,), "second session")
        await store.flush()

    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        assert await store.get(like, (2000,)) == "second session"
        assert len(await store.scan(like).to_list()) == len(expected) + 1


@pytest.mark.parametrize("store_url", ["local", "s3"], indirect=True)
@aio
async def test_reader_follows_the_writer_and_never_fences_it(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA) as writer:
        await writer.put(like, (1,), "first")
        await writer.flush()
        async with Store.open_reader(store_url, SCHEMA, poll_interval=0.1) as reader:
            assert await reader.get(like, (1,)) == "first"
            for round_ in range(3):
                async with writer.batch() as batch:
                    for n in range(10):
                        batch.put(like, (100 * (round_ + 1) + n,), round_)
                await writer.flush()

                async def caught_up(round_: int = round_) -> bool:
                    return await reader.get(like, (100 * (round_ + 1) + 9,)) == round_

                await eventually(caught_up, timeout=10)
            assert len(await reader.scan(like).to_list()) == 31
            # the writer is still the writer
            await writer.put(like, (2,), "still writing")
            await writer.flush()
            assert await writer.get(like, (2,)) == "still writing"
            assert not hasattr(reader, "put")  # a StoreReader has no write methods


@pytest.mark.parametrize("store_url", ["local", "s3"], indirect=True)
@aio
async def test_second_writer_fences_the_first(store_url: str) -> None:
    first = await Store.open(store_url, SCHEMA)
    put_returned = False
    try:
        await first.put(like, (1,), "from first")
        await first.flush()
        async with (
            Store.open_reader(store_url, SCHEMA, poll_interval=0.1) as reader,
            Store.open(store_url, SCHEMA) as second,
        ):
            assert await second.get(like, (1,)) == "from first"
            # the fenced writer's put is only accepted in memory; its flush fails
            with pytest.raises(FencedError) as info:
                await first.put(like, (2,), "lost")
                put_returned = True
                await first.flush()
            message = str(info.value)
            assert "another writer opened" in message
            assert store_url in message
            await second.put(like, (3,), "from second")
            await second.flush()

            async def sees_second() -> bool:
                return await reader.get(like, (3,)) == "from second"

            await eventually(sees_second, timeout=10)
            assert await reader.get(like, (1,)) == "from first"
            # the fenced writer stays fenced
            with pytest.raises(FencedError):
                async with first.batch() as batch:
                    batch.put(like, (4,), "still lost")
    finally:
        if put_returned:  # the put was acknowledged and lost: close says so
            with pytest.raises(FencedError, match="1 write acknowledged") as closing:
                await first.close()
            assert closing.value.unflushed == 1
        else:  # nothing acknowledged after the last flush: a quiet close
            await first.close()
    async with Store.open(store_url, SCHEMA) as store:
        assert await store.get(like, (2,)) is None
        assert await store.get(like, (3,)) == "from second"


def test_sync_store_from_eight_threads(tmp_path: object) -> None:
    threads_n, per_thread = 8, 60

    def value_of(n: int) -> dict[str, int]:
        return {"n": n, "sq": n * n}

    errors: list[BaseException] = []
    with SyncStore.open(f"{tmp_path}/db", SCHEMA, values=VALUES) as store:
        for n in range(50):  # something to read from the start
            store.put(like, (n,), value_of(n))

        def work(tid: int) -> None:
            rng = random.Random(tid)
            try:
                for i in range(per_thread):
                    n = 1000 + tid * per_thread + i
                    action = rng.random()
                    if action < 0.4:
                        store.put(like, (n,), value_of(n))
                    elif action < 0.5:
                        with store.batch() as batch:
                            batch.put(like, (n,), value_of(n))
                            batch.put(like, (n + 100_000,), value_of(n + 100_000))
                    elif action < 0.8:
                        k = rng.randrange(50)
                        assert store.get(like, (k,)) == value_of(k)
                    else:
                        start = rng.randrange(0, 2000)
                        for record in store.scan(like, limit=15, after=like.encode(start)):
                            assert record.value == value_of(record.key.n)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        everything = store.scan(like).to_list()
        assert all(r.value == value_of(r.key.n) for r in everything)
        assert len(everything) >= 50


@aio
async def test_private_moto_survives_a_pause_and_loses_state_on_restart(
    private_moto: object,
) -> None:
    from conftest import S3_BUCKET, MotoServer

    assert isinstance(private_moto, MotoServer)
    url = f"s3://{S3_BUCKET}/private"
    async with Store.open(url, SCHEMA) as store:
        await store.put(like, (1,), "before")
        await store.flush()
        private_moto.pause()
        await store.put(like, (2,), "while paused")  # accepted in memory
        flushing = asyncio.ensure_future(store.flush())
        await asyncio.sleep(0.3)
        assert not flushing.done()  # the WAL write waits for the endpoint
        private_moto.resume()
        await asyncio.wait_for(flushing, timeout=30)
        assert await store.get(like, (2,)) == "while paused"
    port = private_moto.port
    private_moto.restart()
    assert private_moto.port == port
    assert private_moto.running
    assert private_moto.client().list_buckets()["Buckets"] == []  # moto keeps state in memory
