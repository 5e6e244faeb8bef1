"""Collections over a reader (issue 30): RecordCollection, ChangeLog and PageStore take a
StoreReader (SyncStoreReader on the sync face) for their read methods; mypy allows that and
flags a write through it, and at run time such a write is a ReadOnlyError writing nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypykit import mypy_strict
from storekit import run

from opendata_kv import Store, SyncStore
from opendata_kv.collections import (
    BACKLINKS,
    ChangeLog,
    PageStore,
    RecordCollection,
    SyncChangeLog,
    SyncPageStore,
    SyncRecordCollection,
    default_schema,
)
from opendata_kv.errors import ReadOnlyError

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
LIKE = "app.bsky.feed.like"
SUBJECT = f"at://{ALICE}/app.bsky.feed.post/3kabcdefghij2"
LIKED = {"$type": LIKE, "subject": {"uri": SUBJECT, "cid": "bafy"}, "createdAt": "2024"}


async def _write_then_read(url: str) -> None:
    async with Store.open(url, default_schema(), indexes=BACKLINKS.indexes) as store:
        made = await RecordCollection(store).create(ALICE, LIKE, LIKED)
        muid = await ChangeLog(store).put("0000000000001-00000000001-00000001", {"n": 1})
        await PageStore(store).save("https://example.com/a", "https://example.com/a", "x")
        await store.flush()
    async with Store.open_reader(url, default_schema(), indexes=BACKLINKS.indexes) as reader:
        records, log, pages = RecordCollection(reader), ChangeLog(reader), PageStore(reader)
        assert await records.get(ALICE, LIKE, made.rkey) == LIKED
        assert [r.rkey for r in await records.list(ALICE, LIKE)] == [made.rkey]
        assert await records.like_count(SUBJECT) == 1
        assert await log.get(muid) == {"n": 1}
        assert [c.muid for c in await log.scan().to_list()] == [muid]
        page = await pages.fetch("https://example.com/a")
        assert page is not None and page.content == "x"
        writes = (
            records.put(ALICE, LIKE, made.rkey, {}),  # type: ignore[misc]
            records.create_many([(ALICE, LIKE, LIKED)]),  # type: ignore[misc]
            log.put(muid, {"n": 2}),  # type: ignore[misc]
            pages.delete("https://example.com/a"),  # type: ignore[misc]
        )
        for write in writes:
            with pytest.raises(ReadOnlyError, match="given a StoreReader: it reads only"):
                await write
        assert await records.get(ALICE, LIKE, made.rkey) == LIKED
        assert await log.get(muid) == {"n": 1}


def test_async_collections_read_through_a_reader_and_refuse_writes(tmp_path: Path) -> None:
    run(_write_then_read(str(tmp_path / "db")))


def test_sync_collections_read_through_a_sync_reader(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, default_schema()) as db:
        made = SyncRecordCollection(db).create(ALICE, LIKE, LIKED)
        db.flush()
    with SyncStore.open_reader(url, default_schema()) as reader:
        records = SyncRecordCollection(reader)
        assert records.get(ALICE, LIKE, made.rkey) == LIKED
        assert records.count(ALICE) == 1
        assert SyncChangeLog(reader).count() == 0
        assert SyncPageStore(reader).fetch("https://example.com/none") is None
        with pytest.raises(ReadOnlyError):
            records.delete(ALICE, LIKE, made.rkey)  # type: ignore[misc]
        assert records.count(ALICE) == 1


def test_mypy_allows_reads_through_a_reader_and_flags_writes(
    tmp_path: Path, mypy_cache: Path
) -> None:
    source = tmp_path / "replica.py"
    source.write_text(
        textwrap.dedent(
            """
            from opendata_kv.store import Store, StoreReader, SyncStore, SyncStoreReader
            from opendata_kv.collections import (
                ChangeLog, PageStore, RecordCollection, SyncPageStore, SyncRecordCollection,
            )

            async def replica(reader: StoreReader, store: Store) -> None:
                records = RecordCollection(reader)
                await records.get("did:plc:a", "app.bsky.feed.post", "3k")
                await records.like_count("at://x")
                await ChangeLog(reader).count()
                await PageStore(reader).fetch("https://example.com")
                await records.put("did:plc:a", "app.bsky.feed.post", "3k", {})  # E1
                await records.create_many([])  # E2
                await ChangeLog(reader).write([])  # E3
                await PageStore(reader).purge_expired()  # E4
                writer: RecordCollection = RecordCollection(store)  # bare: over a Store
                await writer.put("did:plc:a", "app.bsky.feed.post", "3k", {})
                await ChangeLog(store).write([])

            def sync_replica(reader: SyncStoreReader, db: SyncStore) -> None:
                records = SyncRecordCollection(reader)
                records.count("did:plc:a")
                records.put("did:plc:a", "app.bsky.feed.post", "3k", {})  # E5
                SyncPageStore(reader).save("u", "u", "x")  # E6
                SyncRecordCollection(db).put("did:plc:a", "app.bsky.feed.post", "3k", {})
            """
        )
    )
    status, out = mypy_strict(tmp_path, [source.name], mypy_cache)
    flagged = {line.split(":")[1] for line in out.splitlines() if ": error:" in line}
    expected = {
        str(i + 1) for i, text in enumerate(source.read_text().splitlines()) if "# E" in text
    }
    assert flagged == expected, out
    assert "Invalid self argument" in out
    assert status == 1
