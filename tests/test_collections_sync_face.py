"""The collections' sync face (issue 29 point 3): SyncRecordCollection, SyncChangeLog and
SyncPageStore take a SyncStore, have their async twins' signatures, and run every method on the
calling thread through the inline driver (a wait that is not a native call would raise)."""

from __future__ import annotations

import asyncio
import datetime
import inspect
from typing import Any

import pytest
from test_store_sync_face import _public
from test_store_sync_face import _shape as _store_shape

from opendata_kv import SyncStore
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    ChangeLog,
    PageStore,
    RecordCollection,
    SyncChangeLog,
    SyncPageStore,
    SyncRecordCollection,
    default_schema,
)
from opendata_kv.collections.backlinks import LIKE
from opendata_kv.errors import ArgumentTypeError, RecordExistsError
from opendata_kv.native import calls

#: collection names in annotations (write methods take `self: RecordCollection[Store]`)
COLLECTION_RENAMES = {
    "RecordCollection[": "SyncRecordCollection[",
    "ChangeLog[": "SyncChangeLog[",
    "PageStore[": "SyncPageStore[",
}


def _shape(function: Any) -> list[tuple[str, str, str, str]]:
    """test_store_sync_face's shape, with the collections' own names mapped to sync ones."""
    out = []
    for name, kind, default, annotation in _store_shape(function):
        if annotation == "StoreT":
            annotation = "SyncStoreT"
        for old, new in COLLECTION_RENAMES.items():
            if annotation.startswith(old):
                annotation = new + annotation[len(old) :]
        out.append((name, kind, default, annotation))
    return out


PAIRS = [
    (RecordCollection, SyncRecordCollection),
    (ChangeLog, SyncChangeLog),
    (PageStore, SyncPageStore),
]
POST = "at://did:plc:aaa/app.bsky.feed.post/3kx1"


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=[p[1].__name__ for p in PAIRS])
def test_every_public_method_has_a_sync_twin_with_the_same_signature(
    async_cls: type, sync_cls: type
) -> None:
    async_members, sync_members = _public(async_cls), _public(sync_cls)
    assert set(async_members) <= set(sync_members), sorted(set(async_members) - set(sync_members))
    for name, member in async_members.items():
        if isinstance(member, property):
            assert isinstance(sync_members[name], property), name
            continue
        assert _shape(member) == _shape(sync_members[name]), f"{sync_cls.__name__}.{name}"
    # the same constructor, taking a SyncStore (or SyncStoreReader) where the async one takes
    # a Store (or StoreReader)
    assert _shape(sync_cls.__init__) == _shape(async_cls.__init__)
    assert inspect.signature(sync_cls.__init__).parameters["store"].annotation == "SyncStoreT"


def like(uri: str) -> dict[str, Any]:
    return {"$type": LIKE, "subject": {"uri": uri, "cid": "bafy"}, "createdAt": "2024"}


def test_record_collection_over_a_sync_store() -> None:
    assert calls.active()
    with SyncStore.open("memory://sync-records", default_schema(), indexes=BACKLINKS.indexes) as db:
        with pytest.raises(ArgumentTypeError, match="SyncRecordCollection"):
            RecordCollection(db)  # type: ignore[arg-type]
        repo = SyncRecordCollection(db, key_types=BSKY_KEY_TYPES)
        first = repo.create("did:plc:bbb", LIKE, like(POST))
        repo.create("did:plc:aaa", LIKE, like(POST))
        with pytest.raises(RecordExistsError):
            repo.create("did:plc:bbb", LIKE, like(POST), rkey=first.rkey)
        repo.put("did:plc:ccc", "app.bsky.feed.post", "3kaaaaaaaaa22", {"text": "hi"})
        assert repo.get("did:plc:ccc", "app.bsky.feed.post", "3kaaaaaaaaa22") == {"text": "hi"}
        assert repo.exists("did:plc:bbb", LIKE, first.rkey)
        assert repo.like_count(POST) == 2 and repo.repost_count(POST) == 0
        assert [r.repo for r in repo.likes(POST)] == ["did:plc:bbb", "did:plc:aaa"]
        page = repo.likes(POST, limit=1)
        assert page.has_more and [r.repo for r in repo.likes(POST, cursor=page.cursor)] == [
            "did:plc:aaa"
        ]
        assert repo.repos() == ["did:plc:aaa", "did:plc:bbb", "did:plc:ccc"]
        assert repo.collections("did:plc:ccc") == ["app.bsky.feed.post"]
        assert repo.count("did:plc:bbb") == 1 and len(repo.list("did:plc:bbb", LIKE)) == 1
        assert len(repo.scan().to_list()) == 3
        assert [r.repo for r in repo.scan("did:plc:aaa")] == ["did:plc:aaa"]
        repo.delete("did:plc:bbb", LIKE, first.rkey)
        assert repo.like_count(POST) == 1 and repo.follower_count("did:plc:aaa") == 0
        assert "SyncRecordCollection of <RecordCollection" in repr(repo)


def test_change_log_and_page_store_over_a_sync_store() -> None:
    assert calls.active()
    with SyncStore.open("memory://sync-log", default_schema()) as db:
        log = SyncChangeLog(db)
        with log.transaction() as tx:
            added = [tx.add({"n": n}) for n in range(3)]
        assert log.get(added[0]) == {"n": 0}
        assert log.write([(log.collection.generator.transaction().next(), "x")]) == 1
        assert log.count() == 4 and log.medallions() == [log.medallion]
        assert [c.value for c in log.scan(limit=2)] == [{"n": 0}, {"n": 1}]
        assert len(log.by_medallion(log.medallion).to_list()) == 4
        assert log.sentinels().to_list() == []
        pages = SyncPageStore(db)
        old = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
        pages.save("https://a.example/x", "https://a.example/x", "a", ttl=60, fetched_at=old)
        pages.save("https://b.example/", "https://b.example/", "b")
        fetched = pages.fetch("https://a.example/x", include_expired=True)
        assert fetched is not None and fetched.content == "a"
        assert [p.url for p in pages.expired()] == ["https://a.example/x"]
        assert pages.purge_expired() == 1 and len(pages.scan().to_list()) == 1
        assert pages.delete("https://b.example/") and pages.scan().to_list() == []


def test_the_sync_collections_work_inside_an_event_loop_thread_too() -> None:
    """Called from async code (a thread running a loop), the inline driver still runs them."""

    async def inside() -> int:
        with SyncStore.open("memory://sync-inside", default_schema()) as db:
            log = SyncChangeLog(db)
            log.put(log.collection.generator.transaction().next(), "x")
            return log.count()

    assert asyncio.run(inside()) == 1
