"""Batch.create: a put that never overwrites, checked under the store's write lock when the
batch is written; a refused batch writes nothing (RFC 0010, "Creates")."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio, run

from opendata_kv import Index, RecordType, Store, SyncStore, fields
from opendata_kv.errors import RecordExistsError, TransactionConflictError
from opendata_kv.store import Batch

THING = RecordType("thing", 1, [("id", fields.string)])
EXAMPLES = int(os.environ.get("OPENDATA_KV_CREATE_EXAMPLES", "20"))
BY_TAG = Index("by_tag", "thing", [("tag", fields.string)])


def open_store(indexed: bool) -> Any:
    indexes = [BY_TAG] if indexed else []
    return Store.open(f"memory://create-{uuid.uuid4().hex}", THING, indexes=indexes)


async def stored(store: Store) -> dict[str, Any]:
    return {record.key.id: record.value async for record in store.scan(THING)}


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_create_writes_a_new_key_and_refuses_a_stored_one_writing_nothing(
    indexed: bool,
) -> None:
    async with open_store(indexed) as store:
        async with store.batch() as batch:
            batch.create(THING, ("a",), {"tag": "x"})
            batch.create(THING.key("b"), {"tag": "y"})
        before = await stored(store)
        assert before == {"a": {"tag": "x"}, "b": {"tag": "y"}}
        batch = Batch(store)
        batch.put(THING, ("c",), {"tag": "x"})
        batch.create(THING, ("b",), {"tag": "z"})
        with pytest.raises(RecordExistsError, match=r"thing .*id='b'.* a stored record") as info:
            await store.write(batch)
        assert info.value.record == "thing"
        assert info.value.value == THING.key("b")
        assert await stored(store) == before
        if indexed:
            assert [r.key.id async for r in store.index_scan("by_tag", "x")] == ["a"]
            assert await store.check_indexes() == []


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_a_key_the_same_batch_writes_before_is_refused(indexed: bool) -> None:
    async with open_store(indexed) as store:
        for first in ("put", "create"):
            batch = Batch(store)
            getattr(batch, first)(THING, ("d",), {"tag": "x"})
            batch.create(THING, ("d",), {"tag": "y"})
            with pytest.raises(RecordExistsError, match="earlier put or create of the same batch"):
                await store.write(batch)
            assert await stored(store) == {}
        batch = Batch(store)  # a put after the create replaces it, as a put does
        batch.delete(THING, ("e",))
        batch.create(THING, ("e",), {"tag": "x"})
        batch.put(THING, ("e",), {"tag": "y"})
        await store.write(batch)
        assert await stored(store) == {"e": {"tag": "y"}}


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_an_expired_record_is_absent_to_create(indexed: bool) -> None:
    async with open_store(indexed) as store:
        batch = Batch(store)
        past = time.time_ns() // 10**6 - 1000
        batch.put_raw(THING.encode("old"), b"\x81\xa3tag\xa1x", expire_at=past)
        await store.write(batch)
        assert await store.get(THING, ("old",)) is None
        async with store.batch() as batch:
            batch.create(THING, ("old",), {"tag": "new"})
        assert await stored(store) == {"old": {"tag": "new"}}
        if indexed:
            assert await store.check_indexes() == []


def test_the_sync_face_creates_and_refuses() -> None:
    with SyncStore.open(f"memory://create-sync-{uuid.uuid4().hex}", THING) as db:
        with db.batch() as batch:
            batch.create(THING, ("a",), {"tag": "x"})
        with pytest.raises(RecordExistsError, match="a stored record"), db.batch() as batch:
            batch.create(THING, ("b",), {"tag": "x"})
            batch.create(THING, ("a",), {"tag": "y"})
        assert [r.key.id for r in db.scan(THING)] == ["a"]
        assert db.get(THING, ("a",)) == {"tag": "x"}


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_a_transaction_that_read_a_key_a_batch_then_creates_cannot_commit(
    indexed: bool,
) -> None:
    """What RecordCollection.create relies on beside create_many: its serializable read of
    the key conflicts with a batch of creates written since (SlateDB's check sees it)."""
    async with open_store(indexed) as store:
        with pytest.raises(TransactionConflictError):
            async with store.transaction("serializable") as tx:
                assert not await tx.exists(THING, ("k",))
                async with store.batch() as batch:
                    batch.create(THING, ("k",), {"tag": "batch"})
                await tx.put(THING, ("k",), {"tag": "transaction"})
        assert await stored(store) == {"k": {"tag": "batch"}}
        if indexed:
            assert await store.check_indexes() == []


op = st.tuples(
    st.sampled_from(["put", "create", "delete"]), st.integers(0, 5), st.sampled_from("xy")
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.lists(op, max_size=6), max_size=5), st.booleans())
def test_batches_of_puts_creates_and_deletes_match_a_model_and_a_recount(
    batches: list[list[tuple[str, int, str]]], indexed: bool
) -> None:
    """A batch is refused whole exactly when a create meets a stored key or an earlier put or
    create of its batch; otherwise applied in order. Indexes equal a recount (check_indexes)."""

    async def body() -> None:
        async with open_store(indexed) as store:
            model: dict[str, Any] = {}
            for ops in batches:
                batch = Batch(store)
                written: set[str] = set()
                refused = False
                after = dict(model)
                for kind, n, tag in ops:
                    key = f"k{n}"
                    if kind == "delete":
                        batch.delete(THING, (key,))
                        after.pop(key, None)
                        continue
                    if kind == "create" and (key in model or key in written):
                        refused = True
                    getattr(batch, kind)(THING, (key,), {"tag": tag})
                    written.add(key)
                    after[key] = {"tag": tag}
                if refused:
                    with pytest.raises(RecordExistsError):
                        await store.write(batch)
                else:
                    await store.write(batch)
                    model = after
                assert await stored(store) == model
            if indexed:
                assert await store.check_indexes() == []
                for tag in "xy":
                    found = sorted([r.key.id async for r in store.index_scan("by_tag", tag)])
                    assert found == sorted(k for k, v in model.items() if v["tag"] == tag)

    run(body())


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_a_transaction_commits_only_while_no_create_holds_the_write_lock(
    indexed: bool,
) -> None:
    """Commits wait for the lock a batch's creates are checked and written under, with or
    without indexes, so none lands between a create's check and its write."""
    async with open_store(indexed) as store:
        order: list[str] = []

        async def holder() -> None:
            async with store._write_lock().held(store.where):
                await asyncio.sleep(0.05)
                order.append("released")

        async def committer() -> None:
            async with store.transaction() as tx:
                await tx.put(THING, ("t",), {"tag": "x"})
            order.append("committed")

        await asyncio.gather(holder(), committer())
        assert order == ["released", "committed"]


@pytest.mark.parametrize("indexed", [False, True])
@aio
async def test_a_batch_of_creates_reads_its_keys_once(
    indexed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexed: the check uses the values index upkeep reads (no read of its own); without
    indexes, one read of the batch's keys."""
    from opendata_kv.store import writer
    from opendata_kv.store.indexes.old_values import old_values as real

    reads: list[int] = []

    async def counted(source: Any, where: str, keys: list[bytes], **kw: Any) -> Any:
        reads.append(len(keys))
        return await real(source, where, keys, **kw)

    monkeypatch.setattr(writer, "old_values", counted)
    async with open_store(indexed) as store:
        async with store.batch() as batch:
            for n in range(20):
                batch.create(THING, (f"k{n}",), {"tag": "x"})
        assert reads == [20]
        assert len(await stored(store)) == 20
