"""Writes as values (issue 29 point 2, RFC 0010): a Batch is a list of typed ops with no
reference to the store, the index maintainers turn record ops into index ops through a small
read protocol (driven here by a fake, no store), and an indexed SyncStore.put encodes each
argument once and builds one native batch."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from indexkit import ALL, SCHEMA, by_handle, by_tag, covered, likes, per_tag, post
from storekit import aio

import opendata_kv
from opendata_kv.errors import (
    InvalidArgumentError,
    StoreError,
    TransactionConflictError,
    UniqueIndexError,
)
from opendata_kv.native import calls as native_calls
from opendata_kv.store import Batch, Store, SyncBatch, SyncStore
from opendata_kv.store.indexes.layout import ROOT, encode_aggregate, encode_fields
from opendata_kv.store.indexes.maintain import index_ops_for
from opendata_kv.store.indexes.registry import READABLE, IndexSet
from opendata_kv.store.schema_arg import as_schema
from opendata_kv.store.writes import UNDECODED, Delete, MaintenanceReads, Op, Put

EXAMPLES = int(os.environ.get("OPENDATA_KV_WRITES_EXAMPLES", "60"))


# --- a Batch is a list of values -------------------------------------------------------------


@aio
async def test_a_batch_holds_its_ops_and_no_store() -> None:
    async with Store.open("memory://", SCHEMA) as plain:  # no index: no typed value kept
        unindexed = Batch(plain)
        unindexed.put(post, ("a", 1), {"tag": "x"})
        assert [op.value for op in unindexed.ops] == [UNDECODED]
    async with Store.open("memory://", SCHEMA, indexes=[by_tag]) as store:
        batch = Batch(store)
        held = [getattr(batch, name) for name in Batch.__slots__]
        assert not any(v is store or getattr(v, "__self__", None) is store for v in held)
        batch.put(post, ("a", 1), {"tag": "x"})
        batch.put(post, ("a", 2), {"tag": "y"}, ttl=60)
        batch.put_raw(post.encode("a", 3), b"\x80")
        batch.delete(post, ("a", 4))
        batch.delete_raw(post.encode("a", 5))
        ops = batch.ops
        assert [type(op) for op in ops] == [Put, Put, Put, Delete, Delete]
        assert [op.key for op in ops] == [post.encode("a", n) for n in range(1, 6)]
        first, timed, raw = ops[0], ops[1], ops[2]
        assert isinstance(first, Put) and isinstance(timed, Put) and isinstance(raw, Put)
        assert first.value == {"tag": "x"} and first.expire_at is None and first.options is None
        assert timed.expire_at is not None and timed.options is not None
        assert raw.value is UNDECODED and raw.data == b"\x80"
        await store.write(batch)
        assert await store.get(post, ("a", 1)) == {"tag": "x"}
        with pytest.raises(StoreError, match="already written"):
            batch.delete_raw(post.encode("a", 1))


@aio
async def test_delete_range_on_a_batch_reads_through_the_store_it_is_given() -> None:
    async with Store.open("memory://", SCHEMA) as store:
        for n in range(5):
            await store.put(post, ("a", n), {"tag": "x"})
        with pytest.raises(InvalidArgumentError, match="reader=store") as info:
            await Batch(store).delete_range(post)
        assert info.value.field == "reader"
        batch = Batch(store, reader=store)
        assert await batch.delete_range(post, "a", start=("a", 1), end=("a", 3)) == 2
        assert [op.key for op in batch.ops] == [post.encode("a", 1), post.encode("a", 2)]
        await store.write(batch)
        assert [r.key.rkey for r in await store.scan(post).to_list()] == [0, 3, 4]


def test_a_sync_batch_made_on_a_store_deletes_a_range() -> None:
    with SyncStore.open("memory://", SCHEMA) as db:
        for n in range(4):
            db.put(post, ("a", n), {"tag": "x"})
        lone = SyncBatch(db)
        assert lone.delete_range(post, "a", start=("a", 2)) == 2
        db.write(lone)
        assert [r.key.rkey for r in db.scan(post)] == [0, 1]


@aio
async def test_a_transaction_planned_before_an_index_state_change_is_refused() -> None:
    """Its index ops were planned at one index generation; a rebuild moved it before the
    commit, so the commit rolls back (nothing of it lands) instead of writing stale entries."""
    async with Store.open("memory://", SCHEMA, indexes=[by_tag, per_tag]) as store:
        with pytest.raises(TransactionConflictError, match="index build or state change"):
            async with store.transaction() as tx:
                await tx.put(post, ("a", 1), {"tag": "x"})
                await store.rebuild_index("per_tag")
        assert await store.get(post, ("a", 1)) is None
        async with store.transaction() as tx:  # planned and committed at one generation
            await tx.put(post, ("a", 1), {"tag": "x"})
        assert await store.index_count(per_tag, "x") == 1
        assert await store.check_indexes() == []


# --- maintainers through a fake read protocol ------------------------------------------------

INDEXES = [by_tag, by_handle, per_tag, likes, covered]
SCHEMA_OBJ, VALUES_OBJ = as_schema(SCHEMA)


class FakeReads:
    """MaintenanceReads over a dict of stored rows (no TTLs: plain bytes)."""

    def __init__(self, rows: dict[bytes, bytes]) -> None:
        self.rows = rows

    async def replaced(self, keys: list[bytes]) -> list[bytes | None]:
        return [self.rows.get(key) for key in keys]

    async def current(self, keys: list[bytes]) -> list[bytes | None]:
        return [self.rows.get(key) for key in keys]


def _index_set() -> IndexSet:
    indexes = IndexSet(SCHEMA_OBJ, INDEXES)
    for index in INDEXES:
        indexes.stored[index.name] = {"state": READABLE}
    indexes.refresh()
    return indexes


def _apply(rows: dict[bytes, bytes], ops: list[Op]) -> None:
    for op in ops:
        if isinstance(op, Put):
            assert op.data is not None
            rows[op.key] = op.data
        else:
            rows.pop(op.key, None)


def _recount(rows: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """Every index row the records in `rows` call for, counted from the records alone."""
    want: dict[bytes, bytes] = {}
    groups: Counter[bytes] = Counter()
    totals: Counter[bytes] = Counter()
    for key, data in rows.items():
        if key.startswith(ROOT):
            continue
        key_obj = post.decode(key)
        value = VALUES_OBJ.decode(post, key, data)
        for index in INDEXES:
            for entry in index.entries(key_obj, value):
                field_key = encode_fields(index.name, index.fields, entry)
                if index.kind == "unique":
                    assert field_key not in want, "the recount found two holders"
                    want[field_key] = key
                elif index.aggregate:
                    groups[field_key] += 1
                    totals[field_key] += index.amount_of(key_obj, value)
                else:
                    want[field_key + key] = data if index.covering else b""
    for group, count in groups.items():
        want[group] = encode_aggregate(count, totals[group])
    return want


def _has_two_holders(rows: dict[bytes, bytes]) -> bool:
    try:
        _recount(rows)
    except AssertionError:
        return True
    return False


OPS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 3),
        st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "tag": st.sampled_from(["x", "y"]),
                "handle": st.sampled_from(["h1", "h2", "h3"]),
                "likes": st.integers(-2, 5),
            },
        ),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(OPS, min_size=1, max_size=6))
def test_maintainers_keep_index_rows_equal_to_a_recount(batches: list[list[Any]]) -> None:
    """Value, unique, count, sum and covering maintainers, planned over a fake read protocol:
    after every batch the index rows equal a recount from the records; a batch refused for a
    unique clash is one whose records would give a value two holders."""
    indexes = _index_set()
    rows: dict[bytes, bytes] = {}
    reads: MaintenanceReads = FakeReads(rows)
    for batch in batches:
        ops: list[Op] = []
        for author, rkey, value in batch:
            key = post.encode(author, rkey)
            if value is None:
                ops.append(Delete(key))
            else:
                ops.append(Put(key, VALUES_OBJ.encode(post, value, key), None, value, None))
        try:
            written = indexes.indexed_ops(ops)
            index_ops = asyncio.run(index_ops_for(indexes, VALUES_OBJ, written, reads))
        except UniqueIndexError:
            after = dict(rows)
            _apply(after, ops)
            assert _has_two_holders(after)
            continue
        assert all(op.key.startswith(ROOT) for op in index_ops)
        _apply(rows, ops + index_ops)
        assert {k: v for k, v in rows.items() if k.startswith(ROOT)} == _recount(rows)


# --- one indexed put, walked -----------------------------------------------------------------


def test_an_indexed_put_encodes_once_and_builds_one_native_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An indexed SyncStore.put: its arguments read and encoded once, indexing decided once,
    one plan, one native batch and one write (the store-level files it crosses: see the
    RFC 0010 note)."""
    root = os.path.dirname(opendata_kv.__file__) + os.sep
    writes: list[object] = []
    native_write = native_calls.write  # the C accelerator's (no Python frame) or the driver's

    def counted(*args: Any) -> Any:
        writes.append(args[1])
        return native_write(*args)

    monkeypatch.setattr(native_calls, "write", counted)
    calls: Counter[tuple[str, str]] = Counter()
    files: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            name = frame.f_code.co_filename[len(root) :]
            calls[name, frame.f_code.co_name] += 1
            if not files or files[-1] != name:
                files.append(name)

    with SyncStore.open("memory://", SCHEMA, indexes=ALL) as db:
        db.put(post, ("a", 1), {"tag": "x", "handle": "h1", "likes": 1})
        writes.clear()
        sys.setprofile(profile)
        try:
            db.put(post, ("a", 2), {"tag": "y", "handle": "h2", "likes": 2})
        finally:
            sys.setprofile(None)
        written = len(writes)
        assert db.index_count(per_tag, "y") == 1 and db.check_indexes() == []
    once = [
        ("store/views.py", "put_args"),
        ("store/views.py", "encode_put"),
        ("values/registry.py", "encode"),
        ("store/reader.py", "_writable"),
        ("store/indexes/registry.py", "indexed"),
        ("store/indexes/maintain.py", "index_rows_for"),
        ("store/indexes/old_values.py", "current_values"),  # unique holders and groups
        ("store/batch.py", "native_batch"),
    ]
    assert {f: calls[f] for f in once} == dict.fromkeys(once, 1)
    assert written == 1  # one native write, whichever path drives it
    # one read of the replaced values, one (through current_values) of holders and groups
    assert calls["store/indexes/old_values.py", "old_values"] == 2
    # no Batch object, no hooks: batch.py only builds the one native batch
    # (fill's check that every op is a plain put, then its one run)
    assert {n for f, n in calls if f == "store/batch.py"} == {
        "native_batch",
        "fill",
        "_plain",
        "<genexpr>",
        "_put_run",
    }
    assert not any("hooks" in f for f in files)
