"""Fencing: a second writer on the same database fences the first; nothing flushed is lost.

SlateDB takes no lock. Opening a writer bumps the database's writer epoch; the older writer
finds out at its next WAL write and from then on every call fails. opendata_kv surfaces that
as FencedError. The binding fact this pins down: the fenced writer's first put after the new
writer opened may still return normally (it only reached the old writer's memtable) and is
then lost -- which is why only writes that Store.flush() returned for are acknowledged.

1. In one process, step by step: A writes and flushes, a reader and then B open, A's next put
   (may or may not raise) is followed by a flush that raises FencedError saying another writer
   opened the database; every later call on A raises FencedError too, and so does A's close
   when that put had returned (it is lost); B sees all of A's flushed records and none of its
   fenced write; the reader works at every step.
2. Across processes, while A is writing flat out: B (another process) opens the same
   database; A exits on FencedError; B resumed after every batch A acknowledged; after B is
   killed every batch acknowledged by either is intact; a reader scanning in a background
   thread throughout never failed and never saw the database shrink.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import crash_writer as cw
import pytest
from writer_process import WriterProcess

from opendata_kv.errors import FencedError
from opendata_kv.store import Store, SyncStore

pytestmark = pytest.mark.hang_guard(120)

FENCED_WORDS = "another writer opened the same database"


async def _get(store: Store, batch: int) -> Any:
    return await store.get(cw.BLOB, (batch,))


def test_fencing_step_by_step(tmp_path: Path) -> None:
    url = str(tmp_path / "db")

    async def scenario() -> None:
        a = await Store.open(url, cw.SCHEMA, values=cw.VALUES)
        for batch in range(3):
            await cw.write_batch(a, batch, durable=True)
        reader = await Store.open_reader(url, cw.SCHEMA, values=cw.VALUES, poll_interval=0.05)
        assert (await cw.check_database(reader)).batches == {0, 1, 2}

        b_store = await Store.open(url, cw.SCHEMA, values=cw.VALUES)
        # A's read path may still answer from memory, but the reader certainly does.
        assert (await cw.check_database(reader)).batches == {0, 1, 2}

        # A's first write after B opened: it may return normally (binding fact) ...
        try:
            await a.put(cw.BLOB, (99,), b"written by A after B opened")
            put_raised = False
        except FencedError:
            put_raised = True
        # ... but the flush that would acknowledge it fails, naming the cause.
        with pytest.raises(FencedError, match=FENCED_WORDS):
            await a.flush()
        # From now on every call on A fails the same way.
        with pytest.raises(FencedError, match=FENCED_WORDS):
            await a.put(cw.BLOB, (100,), b"x")
        with pytest.raises(FencedError, match=FENCED_WORDS):
            await _get(a, 0)
        with pytest.raises(FencedError, match=FENCED_WORDS):
            async with a.batch() as batch_a:
                batch_a.put(cw.BLOB, (101,), b"y")
        with pytest.raises(FencedError, match=FENCED_WORDS):
            async with a.transaction() as tx:
                await tx.put(cw.BLOB, (102,), b"z")
        with pytest.raises(FencedError, match=FENCED_WORDS):
            await a.flush()
        if put_raised:
            await a.close()  # nothing acknowledged after A's last flush: a quiet close
        else:  # the put A was fenced on returned and is lost: close says so too
            with pytest.raises(FencedError, match=FENCED_WORDS) as closing:
                await a.close()
            assert closing.value.unflushed == 1

        # B has every record A flushed, and not the write A was fenced on.
        assert (await cw.check_database(b_store)).batches == {0, 1, 2}
        for key in (99, 100, 101, 102):
            assert await _get(b_store, key) is None, f"fenced write {key} reached B"
        for batch in range(3, 6):
            await cw.write_batch(b_store, batch, durable=True)

        # The reader follows the new writer (it polls every 50 ms).
        deadline = time.monotonic() + 10
        while (await cw.check_database(reader)).batches != set(range(6)):
            assert time.monotonic() < deadline, "reader never saw B's flushed batches"
            await asyncio.sleep(0.05)
        await b_store.close()
        await reader.close()

        # Reopened: everything acknowledged by A (0-2) and B (3-5), nothing else.
        async with Store.open(url, cw.SCHEMA, values=cw.VALUES) as c:
            assert (await cw.check_database(c)).batches == set(range(6))
        print(f"\nfencing step by step: A's put after the fence raised: {put_raised}")

    asyncio.run(scenario())


class _BackgroundReader:
    """A SyncStore reader checking the whole database in a loop on its own thread."""

    def __init__(self, url: str) -> None:
        self.store = SyncStore.open_reader(url, cw.SCHEMA, values=cw.VALUES, poll_interval=0.05)
        self.errors: list[BaseException] = []
        self.passes = 0
        self.sizes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                check = cw.check_records(self.store.scan_all())
                self.sizes.append(len(check.batches))
                self.passes += 1
                time.sleep(0.01)
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.store.close()


@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_fencing_second_writer_process(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # s3: the session's moto server (s3_url sets AWS_* here; the writers inherit them)
    url = str(tmp_path / "db") if backend == "local" else request.getfixturevalue("s3_url")
    a = WriterProcess(url, delay=0.002)
    b: WriterProcess | None = None
    reader: _BackgroundReader | None = None
    try:
        a.wait_acks(5)
        reader = _BackgroundReader(url)
        a.wait_acks(40)
        b = WriterProcess(url)  # the same database, while A is writing
        b_start = b.wait_open()
        status_a = a.finish(timeout=30)
        b.wait_acks(30)
    finally:
        a.kill()
        if b is not None:
            b.kill()
        if reader is not None:
            reader.stop()
    assert b is not None and reader is not None

    fenced = [line for line in a.lines if line.startswith("fenced ")]
    assert status_a == 3 and fenced, f"A did not exit fenced: {status_a} {a.lines[-3:]}"
    assert FENCED_WORDS in fenced[0]
    # B's view when it opened already held every batch A acknowledged.
    assert max(a.acked) < b_start, f"A acknowledged {max(a.acked)}, B resumed at {b_start}"
    assert b.acked[0] == b_start

    assert not reader.errors, f"the reader failed: {reader.errors[0]!r}"
    assert reader.passes > 0
    assert reader.sizes == sorted(reader.sizes), "the reader saw the database shrink"

    async def final() -> cw.Check:
        async with Store.open(url, cw.SCHEMA, values=cw.VALUES) as store:
            return await cw.check_database(store)

    check = asyncio.run(final())
    acked = set(a.acked) | set(b.acked)
    assert acked <= check.batches, f"lost: {sorted(acked - check.batches)}"
    assert check.batches == set(range(check.next_batch))
    assert check.next_batch <= max(b.acked) + 2
    print(
        f"\nfencing across processes ({backend}): A acked {len(a.acked)} batches, "
        f"B resumed at {b_start} and acked {len(b.acked)}; "
        f"reader made {reader.passes} full passes; {check.records} records verified"
    )
