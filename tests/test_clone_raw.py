"""A clone holds exactly the source's live rows, byte for byte: records, index rows and each
row's expiry (ops/clone.py writes slatedb WriteBatches itself, below the typed store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import Index, RecordType, Schema, fields
from opendata_kv.native.driver import run
from opendata_kv.native.slatedb import KeyRange
from opendata_kv.store import Store, SyncStore, clone_sync
from opendata_kv.store.scan import scan_options

user = RecordType("user", 1, [("id", fields.u32)])
by_name = Index("users_by_name", "user", [("name", fields.string)])


async def _rows(url: Path) -> list[tuple[bytes, bytes, Any]]:
    async with Store.open_reader(url, Schema()) as reader:
        everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        iterator = await reader._source.scan_with_options(everything, scan_options(False))
        rows: list[tuple[bytes, bytes, Any]] = []
        while batch := await iterator.next_batch(1000):
            rows += [(kv.key, kv.value, kv.expire_ts) for kv in batch]
        return rows


@settings(max_examples=8, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.text(max_size=8), st.none() | st.integers(600, 9000)),
        max_size=30,
    ),
    st.integers(1, 7),
)
def test_a_clone_holds_the_sources_rows_and_expiries(
    tmp_path_factory: Any, puts: list[tuple[int, str, int | None]], batch_size: int
) -> None:
    base = tmp_path_factory.mktemp("clone")
    source, copy = base / "source", base / "copy"
    with SyncStore.open(source, [user], indexes=[by_name]) as store:
        for n, name, ttl in puts:
            store.put(user, (n,), {"name": name}, ttl=ttl)
        store.flush()
    result = clone_sync(source, copy, batch_size=batch_size)
    want, got = run(_rows(source)), run(_rows(copy))
    assert got == want
    last = {n: ttl for n, _, ttl in puts}  # the put that stands
    assert any(expire is not None for _, _, expire in got) == any(last.values())
    assert result.records == len(last)
    assert result.records + result.index_rows == len(got)
