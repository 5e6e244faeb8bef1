"""Typed collection views at run time (issue 39 point 1): `records.typed(nsid, Post)` reads
and writes one collection's records as Post on both faces, through the collection's own keys,
checks, cursors and backlinks, and leaves the collection itself untyped."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storekit import aio

from opendata_kv import Store
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    RecordCollection,
    SyncRecordCollection,
    TypedRecords,
    default_schema,
)
from opendata_kv.errors import (
    InvalidInputError,
    ReadOnlyError,
    RecordExistsError,
    ValueDecodeError,
    ValueEncodeError,
)
from opendata_kv.store import SyncStore

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
BOB = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"
POST, LIKE = "app.bsky.feed.post", "app.bsky.feed.like"


@dataclasses.dataclass
class Post:
    text: str


@dataclasses.dataclass
class Ref:
    uri: str


@aio
async def test_every_method_of_a_view_reads_and_writes_the_type(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    async with Store.open(path, default_schema(), indexes=BACKLINKS.indexes) as store:
        records = RecordCollection(store, key_types=BSKY_KEY_TYPES)
        posts = records.typed(POST, Post)
        assert isinstance(posts, TypedRecords) and "dataclass:Post" in repr(posts)
        made = await posts.create(ALICE, Post("one"))
        assert made.collection == POST and made.value == Post("one")
        with pytest.raises(RecordExistsError):
            await posts.create(ALICE, Post("again"), rkey=made.rkey)
        await posts.put(ALICE, "3kabcdefghij2", Post("two"))
        assert await posts.put_many([(ALICE, "3kabcdefghik2", Post("three"))]) == 1

        async def more() -> AsyncIterator[tuple[str, Post]]:
            yield (ALICE, Post("four"))

        assert len(await posts.create_many(more())) == 1
        assert len(await posts.create_many([(ALICE, Post("five"), "3kabcdefghil2")])) == 1
        assert await posts.count(ALICE) == 5 and await posts.exists(ALICE, "3kabcdefghij2")
        first = await posts.list(ALICE, limit=2)
        rest = await posts.list(ALICE, cursor=first.cursor)
        listed = [r.value for r in [*first, *rest]]
        assert sorted(p.text for p in listed) == ["five", "four", "one", "three", "two"]
        assert [r.value async for r in posts.scan(ALICE)] == listed
        assert await posts.get(ALICE, "3kzzzzzzzzzz2", default="none") == "none"
        await posts.delete(ALICE, "3kabcdefghij2")
        assert await posts.get(ALICE, "3kabcdefghij2") is None
        # the collection itself stays untyped: plain maps
        assert await records.get(ALICE, POST, made.rkey) == {"text": "one"}
        with pytest.raises(ValueEncodeError, match="must be a Post"):
            await posts.put(ALICE, "3kabcdefghim2", {"text": "x"})  # type: ignore[arg-type]
        await records.put(ALICE, POST, "3kabcdefghin2", {"txt": "misspelt"})
        with pytest.raises(ValueDecodeError, match=rf"at://{ALICE}/{POST}/3kabcdefghin2"):
            await posts.get(ALICE, "3kabcdefghin2")
        with pytest.raises(InvalidInputError, match=r"collection"):
            records.typed("not an nsid", Post)
        # backlink pages through a view of the linking collection
        like = {"subject": {"uri": made.uri, "cid": "bafy"}, "createdAt": "now"}
        await records.create(BOB, LIKE, like)

        @dataclasses.dataclass
        class Like:
            subject: dict[str, str]
            createdAt: str

        likes = records.typed(LIKE, Like)
        page = await likes.backlink_page(records.backlinks.likes, made.uri)
        assert [(r.repo, r.value.subject["uri"]) for r in page] == [(BOB, made.uri)]
        with pytest.raises(InvalidInputError, match=r"links 'app\.bsky\.feed\.like' records"):
            await posts.backlink_page(records.backlinks.likes, made.uri)
        await store.flush()
    async with Store.open_reader(path, default_schema()) as reader:
        view = RecordCollection(reader).typed(POST, Post)
        assert await view.get(ALICE, made.rkey) == Post("one")
        with pytest.raises(ReadOnlyError):
            await view.put(ALICE, made.rkey, Post("no"))  # type: ignore[misc]


def test_the_sync_face_has_the_same_view() -> None:
    with SyncStore.open("memory://sync-view", default_schema()) as db:
        posts = SyncRecordCollection(db).typed(POST, Post, unknown="forbid")
        made = posts.create(ALICE, Post("hi"))
        assert posts.get(ALICE, made.rkey) == Post("hi")
        assert [r.value for r in posts.scan(ALICE)] == [Post("hi")]
        assert posts.list(ALICE).records[0].value == Post("hi")
        assert posts.put_many([(ALICE, made.rkey, Post("edited"))]) == 1
        assert posts.count(ALICE) == 1 and posts.exists(ALICE, made.rkey)
        SyncRecordCollection(db).put(ALICE, POST, made.rkey, {"text": "x", "langs": []})
        with pytest.raises(ValueDecodeError, match="langs"):
            posts.get(ALICE, made.rkey)
        posts.delete(ALICE, made.rkey)
        assert posts.get(ALICE, made.rkey) is None
