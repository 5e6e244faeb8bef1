"""A fence slatedb's close does not report: it marks the database closed before its final WAL
write, so a refusal of that write can come back as a clean close (once in CI, on a loaded
machine, test_reliability_fence_writes saw close() return quietly after puts it then lost).
The close compares slatedb's durable sequence number with the one at the last flush() that
returned: writes acknowledged since, with the number unmoved, raise FencedError."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import indexkit as ik
import pytest
from fence_peer import value

from opendata_kv.errors import FencedError
from opendata_kv.native import calls
from opendata_kv.store import Store
from opendata_kv.store.fencing import Fence

#: A hears of the fence from nothing but its close: no WAL flush tick, no manifest poll
QUIET = {"flush_interval": "60s", "manifest_poll_interval": "60s"}


def test_a_close_that_reports_nothing_but_wrote_nothing_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "db")

    async def run() -> None:
        a = await Store.open(url, ik.SCHEMA, settings=QUIET)
        for rkey in range(3):
            await a.put(ik.post, ("a", rkey), value("a", rkey))
        await a.flush()
        async with Store.open(url, ik.SCHEMA) as b:  # fences A
            await b.put(ik.post, ("b", 1), value("b", 1))
        for rkey in range(10, 15):
            await a.put(ik.post, ("a", rkey), value("a", rkey))  # returns: A does not know
        real = calls.method
        a_db = a._source

        def method(target: Any, name: str, *args: Any) -> Any:
            if target is a_db and name == "shutdown":

                async def quiet() -> None:  # the clean close slatedb can report
                    return None

                return quiet()
            return real(target, name, *args)

        monkeypatch.setattr(calls, "method", method)
        with pytest.raises(FencedError, match="did not become durable") as closing:
            await a.close()
        assert closing.value.unflushed == 5
        monkeypatch.setattr(calls, "method", real)
        # the real shutdown stops A's tasks; slatedb reports the fence there, which is what
        # the test emulated it not doing
        with contextlib.suppress(Exception):
            await real(a_db, "shutdown")
        async with Store.open(url, ik.SCHEMA) as c:
            assert await c.get(ik.post, ("a", 2)) == value("a", 2)
            assert [await c.get(ik.post, ("a", r)) for r in range(10, 15)] == [None] * 5

    asyncio.run(run())


def test_the_durable_sequence_number_decides() -> None:
    fence = Fence()
    fence.acked, fence.flushed, fence.durable, fence.wrote = 7, 4, 10, True
    assert fence.closing_error("w", False, 11) is None  # the final WAL write landed
    unmoved = fence.closing_error("w", False, 10)
    assert isinstance(unmoved, FencedError) and unmoved.unflushed == 3
    assert fence.closing_error("w", False, None) is None  # slatedb could not say
    assert isinstance(fence.closing_error("w", True, 11), FencedError)  # slatedb reported it
    fence.wrote = False  # only empty batches or uncertain writes since: nothing to compare
    assert fence.closing_error("w", False, 10) is None
    fence.flushed = 7
    assert fence.closing_error("w", True, 10) is None  # nothing acknowledged since the flush
