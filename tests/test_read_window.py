"""How many point reads a store keeps in flight (views.read_window): 64 on a local directory
or in memory, where a read is a task on slatedb's runtime and no round trip, 256 on object
storage; get_many and index upkeep's reads of replaced values go by it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from opendata_kv import Index, RecordType, Store, fields
from opendata_kv.native import calls
from opendata_kv.store import views
from opendata_kv.store.views import GET_MANY_WINDOW, LOCAL_READ_WINDOW, read_window

item = RecordType("item", 1, [("n", fields.u32)])
by_colour = Index("by_colour", "item", [("colour", fields.string)])


def test_the_window_follows_the_location() -> None:
    assert read_window("file") == read_window("memory") == LOCAL_READ_WINDOW == 64
    assert read_window("s3") == GET_MANY_WINDOW == 256


@pytest.mark.parametrize("where", ["memory://window", "dir"])
def test_reads_go_a_window_at_a_time(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = where if where.startswith("memory") else str(tmp_path / where)
    sizes: list[int] = []
    real = calls.get_rows

    def counted(source: Any, keys: list[bytes]) -> Any:
        sizes.append(len(keys))
        return real(source, keys)

    async def main() -> None:
        async with Store.open(url, [item], indexes=[by_colour]) as store:
            assert store.read_window == LOCAL_READ_WINDOW
            await store.put_many((item, (n,), {"colour": "red"}) for n in range(200))
            monkeypatch.setattr(calls, "get_rows", counted)
            found = await store.get_many(item, [(n,) for n in range(150)])
            assert all(value == {"colour": "red"} for value in found)
            assert sizes == [64, 64, 22]
            sizes.clear()
            # replaced values (read_before_write's and index upkeep's) the same way, once a
            # walk of their range gave up (WalkHistory: point reads for the next batches)
            store._walk_histories()[0].walked(gave_up=True)
            known = await store.read_before_write([item.encode(n) for n in range(150)])
            assert all(known.live(item.encode(n)) for n in range(150))
            assert sizes == [64, 64, 22]

    asyncio.run(main())
    assert views.GET_MANY_WINDOW == 256
