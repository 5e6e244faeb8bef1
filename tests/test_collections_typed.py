"""RecordCollection with typed values (value_types): dataclass, TypedDict and msgspec.Struct
records written with their codec's checks, stored as plain msgpack maps (backlinks index them
as any record), read back as their type by get, list, scan and the backlink pages."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pytest
from storekit import aio

from opendata_kv import Store
from opendata_kv.collections import (
    BACKLINKS,
    CHANGELOG,
    ChangeLog,
    PageStore,
    RecordCollection,
    default_schema,
)
from opendata_kv.errors import InvalidInputError, ValueDecodeError, ValueEncodeError
from opendata_kv.values import Values

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
POST = "app.bsky.feed.post"
LIKE = "app.bsky.feed.like"
FOLLOW = "app.bsky.graph.follow"
SUBJECT = f"at://{ALICE}/{POST}/3kabcdefghij2"


@dataclasses.dataclass
class Post:
    text: str
    langs: list[str] | None = None


class Ref(TypedDict):
    uri: str
    cid: str


Like = TypedDict("Like", {"$type": str, "subject": Ref, "createdAt": str})


class Follow(msgspec.Struct, forbid_unknown_fields=True, rename={"type_": "$type"}):
    type_: str
    subject: str
    createdAt: str


def like(at: str) -> Like:
    return {"$type": LIKE, "subject": {"uri": SUBJECT, "cid": "bafy"}, "createdAt": at}


TYPES = {POST: Post, LIKE: Like, FOLLOW: Follow}


@aio
async def test_typed_records_round_trip_and_keep_backlinks() -> None:
    url = f"memory://typed-{uuid.uuid4().hex}"
    async with Store.open(url, default_schema(), indexes=BACKLINKS.indexes) as store:
        repo = RecordCollection(store, value_types=TYPES)
        plain = RecordCollection(store)
        post = await repo.create(ALICE, POST, Post("hi", ["en"]), rkey="3kabcdefghij2")
        assert post.value == Post("hi", ["en"])
        await repo.put_many([(ALICE, LIKE, "3kabcdefghik2", like("1"))])
        await repo.create_many(
            [(ALICE, LIKE, like("2")), (ALICE, FOLLOW, Follow(FOLLOW, ALICE, "3"))]
        )
        assert await repo.get(ALICE, POST, post.rkey) == Post("hi", ["en"])
        assert await plain.get(ALICE, POST, post.rkey) == {"text": "hi", "langs": ["en"]}
        assert await plain.get(ALICE, FOLLOW, (await repo.list(ALICE, FOLLOW)).records[0].rkey) == {
            "$type": FOLLOW,
            "subject": ALICE,
            "createdAt": "3",
        }
        assert await repo.like_count(SUBJECT) == 2
        assert [r.value for r in await repo.likes(SUBJECT)] == [like("1"), like("2")]
        assert [type(r.value) for r in await repo.scan(ALICE).to_list()] == [
            dict,  # likes: TypedDicts are dicts
            dict,
            Post,
            Follow,
        ]
        assert await repo.follower_count(ALICE) == 1
        assert [r.value for r in await repo.followers(ALICE)] == [Follow(FOLLOW, ALICE, "3")]


@aio
async def test_typed_records_are_checked_on_write_and_read() -> None:
    url = f"memory://typed-{uuid.uuid4().hex}"
    async with Store.open(url, default_schema()) as store:
        repo = RecordCollection(store, value_types=TYPES)
        with pytest.raises(ValueEncodeError, match=r"feed\.post: .*must be a Post") as bad:
            await repo.put(ALICE, POST, "3kabcdefghij2", {"text": "x"})
        assert bad.value.record == "atproto_record"
        with pytest.raises(ValueEncodeError, match="missing keys") as missing:
            await repo.put_many([(ALICE, LIKE, "3kabcdefghij2", {"$type": LIKE})])
        assert missing.value.field == "createdAt"
        with pytest.raises(InvalidInputError, match="does not match its collection"):
            await repo.create_many([(ALICE, FOLLOW, Follow(LIKE, ALICE, "1"))])
        assert await repo.count(ALICE) == 0
        await RecordCollection(store).put(ALICE, POST, "3kabcdefghij2", {"text": 1})
        with pytest.raises(ValueDecodeError, match=f"at://{ALICE}/{POST}/3kabcdefghij2: .*text"):
            await repo.get(ALICE, POST, "3kabcdefghij2")
        with pytest.raises(ValueDecodeError):
            await repo.list(ALICE, POST)


def test_value_types_must_name_collections_and_types() -> None:
    async def body(**kw: Any) -> None:
        async with Store.open(f"memory://typed-{uuid.uuid4().hex}", default_schema()) as store:
            RecordCollection(store, **kw)

    from storekit import run

    with pytest.raises(Exception, match="collection"):
        run(body(value_types={"not an nsid": Post}))
    with pytest.raises(Exception, match="not a value codec"):
        run(body(value_types={POST: 3}))


class Edit(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    size: int


@dataclasses.dataclass
class Article:
    title: str
    words: int


@aio
async def test_changelog_and_pagestore_hold_typed_values(tmp_path: Path) -> None:
    values = Values(default_schema()).register(CHANGELOG.change, Edit)
    async with Store.open(str(tmp_path / "db"), values) as store:
        log = ChangeLog(store)
        async with log.transaction() as tx:
            first = tx.add(Edit("/a", 1))
        assert await log.get(first) == Edit("/a", 1)
        assert [c.value for c in await log.scan().to_list()] == [Edit("/a", 1)]
        with pytest.raises(ValueEncodeError, match="must be a Edit"):
            await log.put(first, {"path": "/b", "size": 2})
        pages = PageStore(store, content_type=Article)
        saved = await pages.save("https://example.com/a", "https://example.com/a", Article("A", 3))
        assert saved.content == Article("A", 3)
        fetched = await pages.fetch("https://example.com/a")
        assert fetched is not None and fetched.content == Article("A", 3)
        plain = await PageStore(store).fetch("https://example.com/a")
        assert plain is not None and plain.content == {"title": "A", "words": 3}
        with pytest.raises(ValueEncodeError, match=r"content: .*must be a Article"):
            await pages.save("https://example.com/b", "https://example.com/b", {"title": "B"})
        assert await PageStore(store).fetch("https://example.com/b") is None
        await PageStore(store).save("https://example.com/c", "https://example.com/c", {"x": 1})
        with pytest.raises(ValueDecodeError, match=r"content: .*missing fields"):
            await pages.fetch("https://example.com/c")  # kept unknown, but no title nor words
