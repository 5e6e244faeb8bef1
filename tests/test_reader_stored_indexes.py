"""A read-only reader and the indexes it was not given (issue 39 point 5): it reads the stored
indexes whose definitions rebuild them (the backlinks, every field-only index) from the
catalog, with answers equal to a recount and nothing written; an index whose definition names
a function of the application needs its declaration, and the error names
`Store.open_reader(..., indexes=[...])`, as a writer's names `Store.open`."""

from __future__ import annotations

from pathlib import Path

import indexkit as ik
import pytest
from storekit import aio

from opendata_kv import Store
from opendata_kv.collections import BACKLINKS, RecordCollection, default_schema
from opendata_kv.errors import IndexStateError

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
POST = f"at://{ALICE}/app.bsky.feed.post/3kabcdefghij2"
LIKERS = [f"did:plc:{n:024d}" for n in range(5)]


def like(uri: str) -> dict[str, object]:
    return {"$type": "app.bsky.feed.like", "subject": {"uri": uri, "cid": "bafy"}}


@aio
async def test_reader_reads_the_stored_backlinks_it_was_not_given(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    async with Store.open(path, default_schema(), indexes=BACKLINKS.indexes) as store:
        repo = RecordCollection(store)
        for liker in LIKERS:
            await repo.create(liker, "app.bsky.feed.like", like(POST))
        await store.flush()
    async with Store.open_reader(path, default_schema()) as reader:
        before = [row.raw_key async for row in reader.scan_all(on_unknown="raw")]
        records = RecordCollection(reader)
        recount = 0
        for liker in LIKERS:
            recount += sum([r.value["subject"]["uri"] == POST async for r in records.scan(liker)])
        assert await records.like_count(POST) == recount == len(LIKERS)
        page = await records.likes(POST)
        assert sorted(r.repo for r in page) == LIKERS
        after = [row.raw_key async for row in reader.scan_all(on_unknown="raw")]
        assert after == before  # the reader wrote nothing


@aio
async def test_an_index_with_an_application_function_needs_its_declaration(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "db")
    async with Store.open(path, ik.SCHEMA, indexes=ik.ALL) as store:
        await store.put(ik.post, ("ann", 1), {"tag": "x", "tags": ["a", "b"], "likes": 3})
        await store.flush()
    async with Store.open_reader(path, ik.SCHEMA) as reader:
        assert await reader.index_count(ik.per_tag.name, "x") == 1  # field-only: read as stored
        assert [r.key.author async for r in reader.index_scan("by_tag", "x")] == ["ann"]
        with pytest.raises(IndexStateError, match=r"Store\.open_reader\(\.\.\., indexes=") as no:
            await reader.index_scan("tags", "a").to_list()  # `using=each_tag`: not stored
        assert no.value.index == "tags"
        assert "Store.open(" not in str(no.value)
    async with Store.open_reader(path, ik.SCHEMA, indexes=[ik.tags]) as reader:
        assert [r.key.author async for r in reader.index_scan(ik.tags, "a")] == ["ann"]
    async with Store.open(path, ik.SCHEMA, indexes=ik.ALL) as store:
        with pytest.raises(IndexStateError, match=r"declared \(Store\.open\(\.\.\., indexes="):
            await store.index_scan("nope", "a").to_list()
