"""What mypy --strict sees on every typed read path: each `# R:` is in the revealed type."""

from typed_schema import (
    CountKey,
    Post,
    PostKey,
    by_lang,
    by_text,
    counter,
    likes,
    listed,
    named,
    post,
    schema,
    sizes,
)
from typing_extensions import reveal_type

from opendata_kv import Index, RecordType, Store, SyncStore

reveal_type(post)  # R: PostKey], typed_schema.Post, [repo: str, rkey: str]]
reveal_type(listed)  # R: RecordType[opendata_kv.keys.record.Key, Any,
reveal_type(post.decode(b""))  # R: fallback=typed_schema.PostKey]
reveal_type(post.key("did:plc:a", rkey="3jzfcijpj2z2a"))  # R: fallback=typed_schema.PostKey]
reveal_type(by_text)  # R: Record[tuple[str, str, fallback=typed_schema.PostKey], typed_schema.Post]
reveal_type(likes)  # R: fallback=opendata_kv.store.indexes.read.IndexEntry], Literal['count']]
reveal_type(by_text)  # R: Literal['unique']]
reveal_type(by_lang)  # R: Literal['value']]
reveal_type(sizes)  # R: Literal['sum']]
reveal_type(named)  # R: Index[Any, Literal['unique']]
annotated: RecordType[PostKey, Post] = post


async def reads(store: Store) -> None:
    reveal_type(await store.get(post, ("did:plc:a", "t")))  # R: typed_schema.Post | None
    reveal_type(await store.get(post, ("a", "t"), default=0))  # R: typed_schema.Post | int
    reveal_type(await store.get_many(post, [("a", "t")]))  # R: list[typed_schema.Post | None]
    async for record in store.scan(post, "did:plc:a"):
        reveal_type(record.key)  # R: fallback=typed_schema.PostKey]
        reveal_type(record.value)  # R: typed_schema.Post
        reveal_type(record.key.rkey)  # R: "str"
        await store.put(record.key, record.value)
    async for row in store.scan(post, on_error="raw"):
        reveal_type(row)  # R: fallback=opendata_kv.store.scan.RawRecord]
    async for other in store.scan(listed):
        reveal_type(other.key)  # R: opendata_kv.keys.record.Key
    async with store.transaction() as txn:
        reveal_type(await txn.get(post, ("a", "t")))  # R: typed_schema.Post | None
        await txn.put(post, ("a", "t"), Post("hi"))
    async with store.snapshot() as snap:
        reveal_type(await snap.get(post, ("a", "t")))  # R: typed_schema.Post | None
    async for change in store.changes():
        typed = change.of(post)
        if typed is not None:
            reveal_type(typed.value)  # R: typed_schema.Post | None
            reveal_type(typed.key)  # R: fallback=typed_schema.PostKey]
    async for hit in store.index_scan(by_text):
        reveal_type(hit.value)  # R: typed_schema.Post
    async for entry in store.index_scan(likes):
        reveal_type(entry.records)  # R: "int | None"
    reveal_type(await store.lookup(by_text, "hi"))  # R: typed_schema.Post]] | None


async def reader_reads() -> None:
    async with Store.open_reader("memory://", schema) as reader:
        reveal_type(await reader.get(post, ("a", "t")))  # R: typed_schema.Post | None
        async for record in reader.scan(post):
            reveal_type(record.value)  # R: typed_schema.Post


def sync_reads(db: SyncStore) -> None:
    reveal_type(db.get(post, ("a", "t")))  # R: typed_schema.Post | None
    reveal_type(db.get_many(post, [("a", "t")]))  # R: list[typed_schema.Post | None]
    for record in db.scan(post):
        reveal_type(record.value)  # R: typed_schema.Post
    with db.snapshot() as snap:
        reveal_type(snap.get(post, ("a", "t")))  # R: typed_schema.Post | None
    with db.transaction() as txn:
        reveal_type(txn.get(post, ("a", "t")))  # R: typed_schema.Post | None
    for hit in db.index_scan(by_text):
        reveal_type(hit.key)  # R: fallback=typed_schema.PostKey]
    db.put(post, ("a", "t"), Post("hi"))
    with db.batch() as batch:
        batch.put(post, ("a", "t"), Post("hi"))


async def halves(store: Store, db: SyncStore) -> None:
    async for key in store.scan(post).keys():
        reveal_type(key)  # R: fallback=typed_schema.PostKey]
    async for value in store.scan(post).values():
        reveal_type(value)  # R: typed_schema.Post
    sync_keys = db.scan(post).keys()
    for sync_key in sync_keys:
        reveal_type(sync_key)  # R: fallback=typed_schema.PostKey]
    for sync_value in db.scan(post).values():
        reveal_type(sync_value)  # R: typed_schema.Post


async def key_fields(store: Store, db: SyncStore, key: PostKey, bare: RecordType) -> None:
    """Issue 37: the key fields of get/put/delete are checked against the RecordType's key,
    and what is right is still accepted: a tuple of the field types, the key class itself, a
    mapping by name, a Key alone; a list-form or bare RecordType takes any tuple or list."""
    reveal_type(await store.get(post, ("did:plc:a", "t")))  # R: typed_schema.Post | None
    reveal_type(await store.get(post, key))  # R: typed_schema.Post | None
    reveal_type(await store.get(post, {"repo": "a", "rkey": "t"}))  # R: typed_schema.Post | None
    await store.put(post, ("a", "t"), Post("hi"))
    await store.put(post, key, Post("hi"))
    await store.delete(post, ("a", "t"))
    await store.delete(key)
    assert await store.exists(post, ("a", "t"))
    reveal_type(await store.get_many(post, [("a", "t"), key]))  # R: list[typed_schema.Post | None]
    await store.put(listed, ["a"], {"any": "value"})
    await store.delete(listed, ("a",))
    await store.put(bare, ["a", 1], None)
    await store.delete(bare, ("a", 1))
    reveal_type(counter.decode(b"").score)  # R: "float"
    reveal_type(counter.decode(b"").node)  # R: opendata_kv.ids.muid.Muid
    node = counter.decode(b"").node
    reveal_type(await store.get(counter, (1, 0.5, True, b"abcd", node, 3)))  # R: Any | None
    db.put(post, ("a", "t"), Post("hi"))
    db.delete(post, ("a", "t"))
    with db.batch() as batch:
        batch.put(post, ("a", "t"), Post("hi"))
        batch.delete(post, ("a", "t"))
    async with store.transaction() as txn:
        await txn.put(post, ("a", "t"), Post("hi"))
        await txn.delete(post, ("a", "t"))


async def index_kinds(store: Store, db: SyncStore, untyped: Index, name: str) -> None:
    """lookup takes a unique index, index_count/index_sum a count or sum one; a bare Index
    annotation or an index name takes either, as before."""
    reveal_type(await store.lookup(by_text, "hi"))  # R: typed_schema.Post]] | None
    reveal_type(await store.lookup(named, "hi"))  # R: Any | None
    reveal_type(await store.index_count(likes, "hi"))  # R: "int"
    reveal_type(await store.index_count(sizes, "did:plc:a"))  # R: "int"
    reveal_type(await store.index_sum(sizes, "did:plc:a"))  # R: "int | float"
    await store.lookup(untyped, "hi")
    await store.index_count(untyped, "hi")
    await store.lookup(name, "hi")
    await store.index_sum(name, "hi")
    async for record in store.index_scan(by_lang, "hi"):  # every kind scans
        reveal_type(record.value)  # R: typed_schema.Post
    reveal_type(db.index_count(likes, "hi"))  # R: "int"
    reveal_type(db.lookup(by_text, "hi"))  # R: typed_schema.Post]] | None


def count_key(key: CountKey) -> int:
    return key.seq + key.url  # ints, as decoded
