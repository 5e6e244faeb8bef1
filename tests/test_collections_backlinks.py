"""RecordCollection's AT Protocol backlinks (issue 23 point 6): likes and reposts by subject
URI, follows by subject DID, as secondary indexes kept with every write. A hypothesis run of
random creates, updates and deletes checks after every step that each backlink listing and
count equals a recount from the records, and that paging with the Index's cursor loses and
repeats nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import Store
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    RECORDS,
    Backlinks,
    RecordCollection,
    RecordsLayout,
    default_schema,
)
from opendata_kv.collections.backlinks import FOLLOW, LIKE, REPOST
from opendata_kv.errors import CursorError, IdError, IndexStateError, InvalidInputError
from opendata_kv.keys import Schema

REPOS = ["did:plc:aaa", "did:plc:bbb", "did:web:c.example"]
POSTS = ["at://did:plc:aaa/app.bsky.feed.post/3kx1", "at://did:plc:bbb/app.bsky.feed.post/3kx2"]
RKEYS = ["3kaaaaaaaaa22", "3kbbbbbbbbb22", "3kccccccccc22"]
POST = "app.bsky.feed.post"


def like_value(uri: str, kind: str = LIKE) -> dict[str, Any]:
    return {"$type": kind, "subject": {"uri": uri, "cid": "bafy"}, "createdAt": "2024"}


def follow_value(did: str) -> dict[str, Any]:
    return {"$type": FOLLOW, "subject": did, "createdAt": "2024"}


async def opened() -> Store:
    return await Store.open(
        f"memory://backlinks-{uuid.uuid4().hex}", default_schema(), indexes=BACKLINKS.indexes
    )


@aio
async def test_likes_reposts_follows_and_counts() -> None:
    store = await opened()
    try:
        repo = RecordCollection(store, key_types=BSKY_KEY_TYPES)
        post = POSTS[0]
        first = await repo.create("did:plc:bbb", LIKE, like_value(post))
        await repo.create("did:plc:aaa", LIKE, like_value(post))
        await repo.create("did:plc:ccc", REPOST, like_value(post, REPOST))
        await repo.create("did:plc:bbb", FOLLOW, follow_value("did:plc:aaa"))
        await repo.create("did:plc:bbb", POST, {"text": "not a backlink", "subject": "x"})
        likers = await repo.likes(post)
        assert [r.repo for r in likers] == ["did:plc:bbb", "did:plc:aaa"]  # by TID: oldest first
        assert [r.repo for r in await repo.likes(post, reverse=True)] == [
            "did:plc:aaa",
            "did:plc:bbb",
        ]
        assert likers.cursor is None and not likers.has_more
        assert await repo.like_count(post) == 2 and await repo.repost_count(post) == 1
        assert [r.repo for r in await repo.reposts(post)] == ["did:plc:ccc"]
        assert [r.repo for r in await repo.followers("did:plc:aaa")] == ["did:plc:bbb"]
        assert await repo.follower_count("did:plc:aaa") == 1
        assert await repo.like_count(POSTS[1]) == 0 and len(await repo.likes(POSTS[1])) == 0
        # pages with the index's cursor
        page = await repo.likes(post, limit=1)
        assert len(page) == 1 and page.has_more and isinstance(page.cursor, str)
        rest = await repo.likes(post, limit=1, cursor=page.cursor)
        assert [r.repo for r in [*page, *rest]] == ["did:plc:bbb", "did:plc:aaa"]
        assert rest.cursor is None
        # an update that moves a like to another post moves its entry and both counts
        await repo.put("did:plc:bbb", LIKE, first.rkey, like_value(POSTS[1]))
        assert await repo.like_count(post) == 1 and await repo.like_count(POSTS[1]) == 1
        await repo.delete("did:plc:aaa", LIKE, (await repo.likes(post)).records[0].rkey)
        assert await repo.like_count(post) == 0
        assert await store.check_indexes() == []
        # arguments are checked
        with pytest.raises(InvalidInputError):
            await repo.likes("")
        with pytest.raises(IdError):
            await repo.followers("not a did")
        with pytest.raises(InvalidInputError):
            await repo.likes(post, cursor="abc")  # type: ignore[arg-type]
        with pytest.raises(CursorError):
            await repo.likes(POSTS[1], cursor=page.cursor)  # another subject's cursor
    finally:
        await store.close()


@aio
async def test_a_store_without_the_indexes_says_which_to_declare() -> None:
    async with Store.open("memory://no-backlinks", default_schema()) as store:
        repo = RecordCollection(store)
        with pytest.raises(IndexStateError, match=r"atproto_record\.likes_by_subject"):
            await repo.likes(POSTS[0])


@aio
async def test_a_second_layout_has_its_own_backlinks() -> None:
    other = RecordsLayout(0x5, name="mirror_record")
    links = Backlinks(other)
    assert {i.name.split(".")[0] for i in links.indexes} == {"mirror_record"}
    schema = Schema(*RECORDS.record_types, *other.record_types)
    async with Store.open(
        "memory://two-layouts", schema, indexes=[*BACKLINKS.indexes, *links.indexes]
    ) as store:
        main, mirror = RecordCollection(store), RecordCollection(store, layout=other)
        await main.put("did:plc:aaa", LIKE, RKEYS[0], like_value(POSTS[0]))
        await mirror.put("did:plc:bbb", LIKE, RKEYS[0], like_value(POSTS[0]))
        assert [r.repo for r in await main.likes(POSTS[0])] == ["did:plc:aaa"]
        assert [r.repo for r in await mirror.likes(POSTS[0])] == ["did:plc:bbb"]


# --- random histories against a recount -----------------------------------------------------------

COLLECTIONS = [LIKE, REPOST, FOLLOW, POST]
subjects = st.one_of(
    st.sampled_from(POSTS).map(lambda uri: ("uri", uri)),
    st.sampled_from(REPOS).map(lambda did: ("did", did)),
    st.just(("none", None)),  # a record without a usable subject: no entry
)
write = st.tuples(
    st.just("put"),
    st.sampled_from(REPOS),
    st.sampled_from(COLLECTIONS),
    st.sampled_from(RKEYS),
    subjects,
)
delete = st.tuples(
    st.just("delete"), st.sampled_from(REPOS), st.sampled_from(COLLECTIONS), st.sampled_from(RKEYS)
)


def value_of(collection: str, subject: tuple[str, Any]) -> dict[str, Any]:
    shape, target = subject
    if shape == "uri":
        return {"subject": {"uri": target, "cid": "bafy"}}
    if shape == "did":
        return {"subject": target}
    return {"text": "no subject"}


def recount(
    model: dict[tuple[str, str, str], dict[str, Any]], collection: str, subject: str
) -> list[tuple[str, str]]:
    """(rkey, repo) of the records of `collection` pointing at `subject`, in index order."""
    found = []
    for (repo, coll, rkey), value in model.items():
        if coll != collection:
            continue
        linked = value.get("subject")
        target = linked.get("uri") if isinstance(linked, dict) else linked
        if collection == FOLLOW and not isinstance(linked, str):
            continue
        if collection != FOLLOW and not isinstance(linked, dict):
            continue
        if target == subject:
            found.append((rkey, repo))
    return sorted(found)


async def check(repo: RecordCollection, model: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    for collection, subjects_, listing, count in (
        (LIKE, POSTS + REPOS, repo.likes, repo.like_count),
        (REPOST, POSTS + REPOS, repo.reposts, repo.repost_count),
        (FOLLOW, REPOS, repo.followers, repo.follower_count),
    ):
        for subject in subjects_:
            expected = recount(model, collection, subject)
            page = await listing(subject)
            assert [(r.rkey, r.repo) for r in page] == expected, (collection, subject)
            assert all(r.collection == collection for r in page)
            assert await count(subject) == len(expected), (collection, subject)
            backwards = await listing(subject, reverse=True)
            assert [(r.rkey, r.repo) for r in backwards] == expected[::-1]
            paged: list[tuple[str, str]] = []
            cursor = None
            while True:
                part = await listing(subject, limit=2, cursor=cursor)
                paged += [(r.rkey, r.repo) for r in part]
                if part.cursor is None:
                    break
                cursor = part.cursor
            assert paged == expected


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(st.one_of(write, delete), min_size=1, max_size=14))
def test_backlinks_equal_a_recount_after_every_step(steps: list[tuple[Any, ...]]) -> None:
    async def run() -> None:
        store = await opened()
        try:
            repo = RecordCollection(store, key_types=BSKY_KEY_TYPES)
            model: dict[tuple[str, str, str], dict[str, Any]] = {}
            for step in steps:
                if step[0] == "put":
                    _, who, collection, rkey, subject = step
                    value = value_of(collection, subject)
                    await repo.put(who, collection, rkey, value)
                    model[(who, collection, rkey)] = value
                else:
                    _, who, collection, rkey = step
                    await repo.delete(who, collection, rkey)
                    model.pop((who, collection, rkey), None)
                await check(repo, model)
            assert await store.check_indexes() == []
        finally:
            await store.close()

    aio(run)()
