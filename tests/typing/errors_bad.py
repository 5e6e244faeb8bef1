"""What mypy --strict refuses: each `# E:` line has an error of that code, and only they do."""

from typed_schema import post, schema

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
