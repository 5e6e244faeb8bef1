"""RecordCollection.put_many / create_many: every check `put` / `create` makes, with the same
errors, atomic batches (nothing of a refused batch written), backlinks kept as by `put`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio, run

from opendata_kv import Store, SyncStore
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    RecordCollection,
    SyncRecordCollection,
    default_schema,
)
from opendata_kv.errors import (
    IdError,
    InvalidInputError,
    OpendataKvError,
    RecordExistsError,
    RkeyError,
)
from opendata_kv.ids import tid

EXAMPLES = int(os.environ.get("OPENDATA_KV_BULK_EXAMPLES", "25"))
ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
POST = "app.bsky.feed.post"
LIKE = "app.bsky.feed.like"
PROFILE = "app.bsky.actor.profile"
SUBJECT = f"at://{ALICE}/{POST}/3kabcdefghij2"
KEY_TYPES = {**BSKY_KEY_TYPES, "com.example.byNsid": "nsid"}


def open_store() -> Any:
    return Store.open(
        f"memory://bulk-{uuid.uuid4().hex}", default_schema(), indexes=BACKLINKS.indexes
    )


def like(i: int) -> dict[str, Any]:
    return {"$type": LIKE, "subject": {"uri": SUBJECT, "cid": "bafy"}, "createdAt": str(i)}


def tid_of(i: int) -> str:
    return tid.encode((1_700_000_000_000_000 + i) << 10)


async def error_of(call: Any) -> tuple[type[BaseException], str] | None:
    try:
        await call
    except OpendataKvError as exc:
        return type(exc), str(exc)
    return None


BAD_RECORDS = [
    ("not-a-did", POST, "3kabcdefghij2", {"text": "x"}),
    (ALICE, "not an nsid", "3kabcdefghij2", {"text": "x"}),
    (ALICE, POST, "3kabcdefghij2", {"$type": LIKE, "text": "x"}),
    (ALICE, POST, "not-a-tid", {"text": "x"}),
    (ALICE, PROFILE, "other", {"displayName": "x"}),
]


@pytest.mark.parametrize("bad", BAD_RECORDS)
@aio
async def test_put_many_refuses_what_put_refuses_and_writes_nothing_of_its_batch(
    bad: tuple[str, str, str, Any],
) -> None:
    async with open_store() as store:
        repo = RecordCollection(store, key_types=KEY_TYPES)
        expected = await error_of(repo.put(*bad))
        assert expected is not None
        first = [(ALICE, LIKE, tid_of(i), like(i)) for i in range(4)]
        second = [(ALICE, LIKE, tid_of(i), like(i)) for i in range(4, 6)]
        assert await error_of(repo.put_many([*first, *second, bad], batch_size=4)) == expected
        assert await repo.count(ALICE) == 4  # the first batch only
        assert await repo.like_count(SUBJECT) == 4


@aio
async def test_put_many_keeps_backlinks_as_put_does() -> None:
    async with open_store() as store:
        repo = RecordCollection(store, key_types=KEY_TYPES)

        async def stream() -> AsyncIterator[tuple[str, str, str, Any]]:
            for i in range(25):
                yield (ALICE, LIKE, tid_of(i), like(i))

        seen: list[int] = []
        assert await repo.put_many(stream(), batch_size=10, progress=seen.append) == 25
        assert seen == [10, 20, 25]
        assert await repo.like_count(SUBJECT) == 25
        assert len(await repo.likes(SUBJECT)) == 25
        with pytest.raises(InvalidInputError, match=r"tuple \(repo, collection, rkey, value\)"):
            await repo.put_many([(ALICE, LIKE, like(0))])  # type: ignore[list-item]


@aio
async def test_create_many_makes_keys_as_create_does_and_never_overwrites() -> None:
    async with open_store() as store:
        repo = RecordCollection(store, key_types=KEY_TYPES)
        made = await repo.create_many(
            [
                (ALICE, LIKE, like(0)),
                (ALICE, PROFILE, {"displayName": "A"}),
                (ALICE, POST, {"text": "t"}, "3kabcdefghij2"),
                (ALICE, "com.example.byNsid", {"n": 1}, "com.example.x"),
            ]
        )
        assert [r.rkey for r in made[1:]] == ["self", "3kabcdefghij2", "com.example.x"]
        assert await repo.get(ALICE, LIKE, made[0].rkey) == like(0)
        assert await repo.like_count(SUBJECT) == 1
        for batch, words in (
            ([(ALICE, LIKE, like(1)), (ALICE, PROFILE, {"displayName": "B"})], "already exists"),
            ([(ALICE, POST, {}, "3kaaaaaaaaaa2"), (ALICE, POST, {}, "3kaaaaaaaaaa2")], "twice"),
        ):
            with pytest.raises(RecordExistsError, match=words):
                await repo.create_many(batch)
            assert await repo.count(ALICE) == 4
        assert await repo.get(ALICE, PROFILE, "self") == {"displayName": "A"}
        assert await repo.like_count(SUBJECT) == 1
        for bad, error in (
            ((ALICE, "com.example.byNsid", {}), InvalidInputError),
            ((ALICE, POST, {}, "not-a-tid"), RkeyError),
            (("not-a-did", POST, {}), IdError),
            ((ALICE, POST, {"$type": LIKE}), InvalidInputError),
        ):
            create = repo.create(*bad[:3], rkey=bad[3] if len(bad) > 3 else None)  # type: ignore[misc]
            expected = await error_of(create)
            assert expected is not None and expected[0] is error
            assert await error_of(repo.create_many([(ALICE, LIKE, like(2)), bad])) == expected
            assert await repo.count(ALICE) == 4


def test_the_sync_face_has_both() -> None:
    with SyncStore.open("memory://bulk-sync", default_schema()) as db:
        repo = SyncRecordCollection(db, key_types=KEY_TYPES)
        assert repo.put_many([(ALICE, LIKE, tid_of(i), like(i)) for i in range(3)]) == 3
        made = repo.create_many([(ALICE, POST, {"text": "x"})] * 3)
        assert len({r.rkey for r in made}) == 3
        assert repo.count(ALICE) == 6


good = st.builds(lambda i: (ALICE, LIKE, tid_of(i), like(i)), st.integers(0, 50))
bad = st.sampled_from(BAD_RECORDS)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.one_of(good, good, good, bad), max_size=30), st.integers(1, 8))
def test_put_many_writes_exactly_the_batches_before_the_first_refusal(
    records: list[tuple[str, str, str, Any]], batch_size: int
) -> None:
    async def body() -> None:
        async with open_store() as store:
            repo = RecordCollection(store, key_types=KEY_TYPES)
            refused = next((i for i, r in enumerate(records) if r in BAD_RECORDS), None)
            written = records if refused is None else records[: refused - refused % batch_size]
            try:
                await repo.put_many(records, batch_size=batch_size)
            except OpendataKvError:
                assert refused is not None
            else:
                assert refused is None
            expected = {r[2]: r[3] for r in written}
            stored = {r.rkey: r.value async for r in repo.scan(ALICE)}
            assert stored == expected
            assert await repo.like_count(SUBJECT) == len(expected)

    run(body())


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(st.integers(0, 12), max_size=6),
    st.lists(st.integers(0, 24), max_size=30),
    st.integers(1, 8),
)
def test_create_many_writes_the_batches_before_the_first_existing_key_and_indexes_recount(
    stored: list[int], creates: list[int], batch_size: int
) -> None:
    """Keys already stored, or named twice in one batch, refuse their batch; the batches
    before it are written; the backlink indexes equal a recount of the records."""

    async def body() -> None:
        async with open_store() as store:
            repo = RecordCollection(store, key_types=KEY_TYPES)
            await repo.put_many((ALICE, LIKE, tid_of(i), like(i)) for i in stored)
            expected = {tid_of(i): like(i) for i in stored}
            batches = [creates[at : at + batch_size] for at in range(0, len(creates), batch_size)]
            refused = None
            for n, batch in enumerate(batches):
                keys = [tid_of(i) for i in batch]
                if len(set(keys)) != len(keys) or set(keys) & set(expected):
                    refused = n
                    break
                expected.update((tid_of(i), like(i)) for i in batch)
            items = [(ALICE, LIKE, like(i), tid_of(i)) for i in creates]
            if refused is None:
                assert len(await repo.create_many(items, batch_size=batch_size)) == len(creates)
            else:
                with pytest.raises(RecordExistsError, match=r"at://.* (already exists|twice)"):
                    await repo.create_many(items, batch_size=batch_size)
            assert {r.rkey: r.value async for r in repo.scan(ALICE)} == expected
            assert await repo.like_count(SUBJECT) == len(expected)
            assert sorted(r.rkey for r in await repo.likes(SUBJECT)) == sorted(expected)
            assert await store.check_indexes() == []

    run(body())


def test_the_sync_face_refuses_an_existing_record_writing_nothing_of_its_batch() -> None:
    with SyncStore.open(
        f"memory://bulk-sync-{uuid.uuid4().hex}", default_schema(), indexes=BACKLINKS.indexes
    ) as db:
        repo = SyncRecordCollection(db, key_types=KEY_TYPES)
        repo.create_many([(ALICE, LIKE, like(0), tid_of(0))])
        with pytest.raises(RecordExistsError, match="already exists") as info:
            repo.create_many([(ALICE, LIKE, like(1), tid_of(1)), (ALICE, LIKE, like(2), tid_of(0))])
        assert info.value.value == f"at://{ALICE}/{LIKE}/{tid_of(0)}"
        assert [r.rkey for r in repo.scan(ALICE)] == [tid_of(0)]
        assert repo.like_count(SUBJECT) == 1
        assert db.check_indexes() == []
