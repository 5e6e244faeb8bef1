"""Jetstream's pipelined write: a batch is written while the next one is parsed, its reads
wait for that write's acknowledgement, and a write that fails or is cancelled in flight
leaves the stored cursor at the last acknowledged batch, from which a restart loses nothing
and takes nothing twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from jetstreamkit import generate
from test_jetstream import SCHEMA, check_holds, replay, source

from opendata_kv import Store
from opendata_kv.atproto import IngestState, Jetstream
from opendata_kv.collections import BSKY_KEY_TYPES, COVERING_BACKLINKS, RecordCollection
from opendata_kv.store.reader import Opening


def _records(store: Store) -> RecordCollection[Store]:
    return RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS)


def _opened(name: str) -> Opening[Store]:
    """A fresh in-memory store with the covering backlinks' indexes."""
    return Store.open(f"memory://{name}", SCHEMA, indexes=COVERING_BACKLINKS.indexes)


def test_the_next_batch_is_parsed_while_the_last_is_written() -> None:
    stream = generate(3, 60)
    log: list[str] = []

    async def main() -> None:
        async with _opened("js-pipe") as store:
            ingest = Jetstream(_records(store), batch_size=10)
            real_write, real_take = store.write, ingest._take_commit
            writes = 0

            async def write(batch: Any, *, durable: bool = False) -> None:
                nonlocal writes
                n, writes = writes, writes + 1
                log.append(f"write {n}")
                for _ in range(3):  # slatedb's turn: the loop goes back to the consumer
                    await asyncio.sleep(0)
                await real_write(batch, durable=durable)
                log.append(f"acked {n}")

            def take(*args: Any) -> Any:
                log.append("parse")
                return real_take(*args)

            store.write = write  # type: ignore[method-assign]
            ingest._take_commit = take  # type: ignore[method-assign]
            await ingest.run(source(stream.messages))
            del store.write
            await check_holds(store, stream)

    asyncio.run(main())
    first, acked = log.index("write 0"), log.index("acked 0")
    assert "parse" in log[first:acked]  # the next batch parsed before the first was acked
    assert log.index("write 1") > acked  # and written only after it
    assert [e for e in log if e.startswith("acked")] == [f"acked {n}" for n in range(6)]


def test_a_write_failing_in_flight_stops_at_the_last_stored_batch() -> None:
    stream = generate(4, 80)
    written: list[IngestState] = []

    async def main() -> None:
        async with _opened("js-pipe-fail") as store:
            ingest = Jetstream(_records(store), batch_size=10, on_written=written.append)
            real_write = store.write
            calls = 0

            async def write(batch: Any, *, durable: bool = False) -> None:
                nonlocal calls
                calls += 1
                if calls == 3:
                    raise RuntimeError("the object store went away")
                await real_write(batch, durable=durable)

            store.write = write  # type: ignore[method-assign]
            with pytest.raises(RuntimeError, match="went away"):
                await ingest.run(source(stream.messages))
            del store.write
            assert len(written) == 2
            assert (await ingest.state()) == written[-1]
            again = Jetstream(_records(store), batch_size=10)
            state = await again.state()
            await again.run(source(replay(stream, state.cursor)))
            await check_holds(store, stream)

    asyncio.run(main())


def test_a_run_cancelled_with_a_write_in_flight_resumes_whole() -> None:
    stream = generate(5, 80)

    async def main() -> None:
        async with _opened("js-pipe-cancel") as store:
            ingest = Jetstream(_records(store), batch_size=10)
            real_write = store.write
            calls = 0
            stuck = asyncio.Event()

            async def write(batch: Any, *, durable: bool = False) -> None:
                nonlocal calls
                calls += 1
                if calls == 4:
                    stuck.set()
                    await asyncio.Event().wait()  # a write that never comes back
                await real_write(batch, durable=durable)

            store.write = write  # type: ignore[method-assign]
            run = asyncio.ensure_future(ingest.run(source(stream.messages)))
            await asyncio.wait_for(stuck.wait(), 30)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            del store.write
            stored = await ingest.state()
            assert stored.events == 30  # three batches of ten, the fourth never written
            again = Jetstream(_records(store), batch_size=10)
            await again.run(source(replay(stream, stored.cursor)))
            await check_holds(store, stream)

    asyncio.run(main())
