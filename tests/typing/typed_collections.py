"""Typed collection views (issue 39 point 1): what mypy --strict sees and refuses."""

from dataclasses import dataclass

from typing_extensions import reveal_type

from opendata_kv.collections import RecordCollection, SyncRecordCollection
from opendata_kv.store import Store, StoreReader, SyncStore


@dataclass
class Post:
    text: str


async def views(store: Store, reader: StoreReader) -> None:
    records = RecordCollection(store)
    posts = records.typed("app.bsky.feed.post", Post)
    reveal_type(posts)  # R: TypedRecords[typed_collections.Post, opendata_kv.store.writer.Store]
    reveal_type(await posts.get("did:plc:a", "3k"))  # R: typed_collections.Post | None
    reveal_type(await posts.get("did:plc:a", "3k", default=0))  # R: typed_collections.Post | int
    page = await posts.list("did:plc:a", reverse=True, limit=10)
    reveal_type(page)  # R: RecordList[typed_collections.Post]
    texts: list[str] = [r.value.text for r in page]
    mine: list[Post] = [r.value for r in page]
    async for record in posts.scan("did:plc:a"):
        reveal_type(record)  # R: RepoRecord[typed_collections.Post]
        print(record.value.txt)  # E: attr-defined
    made = await posts.create("did:plc:a", Post("hi"))
    reveal_type(made.value)  # R: typed_collections.Post
    await posts.put("did:plc:a", "3k", {"text": "hi"})  # E: arg-type
    await posts.put_many([("did:plc:a", "3k", Post("x"))])
    await posts.put_many([("did:plc:a", "3k", "x")])  # E: list-item
    untyped = await records.get("did:plc:a", "app.bsky.feed.post", "3k")
    reveal_type(untyped)  # R: Any
    reveal_type(await records.list("did:plc:a", "app.bsky.feed.post"))  # R: RecordList[Any]
    read_only = RecordCollection(reader).typed("app.bsky.feed.post", Post)
    reveal_type(await read_only.get("did:plc:a", "3k"))  # R: typed_collections.Post | None
    await read_only.put("did:plc:a", "3k", Post("x"))  # E: misc
    del texts, mine


def sync_views(db: SyncStore) -> None:
    posts = SyncRecordCollection(db).typed("app.bsky.feed.post", Post)
    reveal_type(posts.get("did:plc:a", "3k"))  # R: typed_collections.Post | None
    for record in posts.scan("did:plc:a"):
        reveal_type(record.value)  # R: typed_collections.Post
    posts.put("did:plc:a", "3k", Post("hi"))
    posts.put("did:plc:a", "3k", 1)  # E: arg-type
