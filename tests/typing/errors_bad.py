"""What mypy --strict refuses: each `# E:` line has an error of that code, and only they do."""

from typed_schema import Post, by_lang, by_text, likes, post, schema

from opendata_kv import Store, SyncStore


async def mistakes(store: Store) -> None:
    async for record in store.scan(post):
        print(record.key.ownr)  # E: attr-defined
        print(record.value.txt)  # E: attr-defined
    await store.put(post, ("did:plc:a", "t"), {"text": 1})  # E: misc
    post.key(repo="did:plc:a", rkye="t")  # E: call-arg
    post.encode("did:plc:a", 3)  # E: arg-type
    async with store.transaction() as txn:
        await txn.put(post, ("a", "t"), "text")  # E: misc


async def through_a_reader() -> None:
    async with Store.open_reader("memory://", schema) as reader:
        await reader.put(post, ("a", "t"), None)  # E: attr-defined


def sync_mistakes(db: SyncStore) -> None:
    db.put(post, ("a", "t"), {"text": "hi"})  # E: misc
    for record in db.scan(post):
        print(record.key.ownr)  # E: attr-defined


async def key_fields(store: Store) -> None:
    """Issue 37: field tuples of the wrong types or length (they failed only at run time)."""
    await store.get(post, (1, 2, 3))  # E: misc
    await store.get(post, ("did:plc:a",))  # E: misc
    await store.put(post, ("a", 2), Post("hi"))  # E: misc
    await store.delete(post, ("a", "t", "x"))  # E: misc
    await store.exists(post, (1, "t"))  # E: misc
    await store.get_many(post, [("a", "t"), (1, 2)])  # E: misc
    await store.get(post, ["a", "t"])  # E: arg-type
    async with store.transaction() as txn:
        await txn.get(post, (1, 2, 3))  # E: misc
        await txn.delete(post, (1, 2))  # E: misc
    async with store.snapshot() as snap:
        await snap.get(post, ("a", 2))  # E: misc


def sync_key_fields(db: SyncStore) -> None:
    db.get(post, (1, 2, 3))  # E: misc
    db.put(post, ("a",), Post("hi"))  # E: misc
    db.delete(post, (1, 2))  # E: misc
    with db.batch() as batch:
        batch.put(post, (1, "t"), Post("hi"))  # E: misc
        batch.delete(post, ("a", 1))  # E: misc


async def index_kinds(store: Store, db: SyncStore) -> None:
    """Issue 37: lookup on a non-unique index, index_count/index_sum on a non-aggregate."""
    await store.lookup(by_lang, "hi")  # E: arg-type
    await store.lookup(likes, "hi")  # E: arg-type
    await store.index_count(by_lang, "hi")  # E: arg-type
    await store.index_count(by_text, "hi")  # E: arg-type
    await store.index_sum(by_text, "hi")  # E: arg-type
    db.lookup(by_lang, "hi")  # E: arg-type
    db.index_count(by_lang, "hi")  # E: arg-type
    db.index_sum(by_text, "hi")  # E: arg-type
