"""Writers that do not declare the stored indexes (issue 27 point 9, RFC 0010 "Writers that do
not declare an index"): every stored index whose definition needs no function, or only the
library's own (collections.backlinks), is maintained as if declared; one that needs another
function refuses the open, unless marked `rebuild_later=`, which makes it write_only until
built. Readers and writers whose schema lacks the index's records are unaffected."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import indexkit as K
import pytest
from clikit import CHILD_ENV
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import RecordType, Store, SyncStore, fields
from opendata_kv.collections import (
    BACKLINKS,
    RECORDS,
    RecordCollection,
    default_schema,
    default_values,
)
from opendata_kv.collections.backlinks import LIKE
from opendata_kv.errors import IndexStateError
from opendata_kv.keys import Schema
from opendata_kv.store.indexes.library import library_function
from opendata_kv.store.indexes.stored import index_from_definition

POST = "at://did:plc:aaa/app.bsky.feed.post/3kx1"
PLAIN = [K.by_tag, K.by_handle, K.per_tag, K.likes]
LIKE_GROUPS = "opendata_kv.collections.backlinks.like_groups"


def like(n: int) -> tuple[dict[str, str], dict[str, Any]]:
    key = {"repo": f"did:plc:u{n}", "collection": LIKE, "rkey": f"3kaaaaaaa{n:02d}22"}
    return key, {"$type": LIKE, "subject": {"uri": POST, "cid": "bafy"}, "createdAt": "2024"}


def backlinks_store(path: Path, **options: Any) -> SyncStore:
    schema = default_schema()
    return SyncStore.open(path, schema, values=default_values(schema), **options)


def test_backlinks_store_written_without_indexes_keeps_like_count(tmp_path: Path) -> None:
    """The issue's scenario: a script opens the backlinks store without indexes= and adds a
    like; the library's own functions are found, so the like is counted."""
    with backlinks_store(tmp_path, indexes=BACKLINKS.indexes) as db:
        for n in range(3):
            db.put(RECORDS.record, *like(n))
        assert db.index_count(BACKLINKS.likes.counts, POST) == 3
    with backlinks_store(tmp_path) as db:
        db.put(RECORDS.record, *like(3))
        db.delete(RECORDS.record, like(0)[0])
        db.put(RECORDS.record, *like(4))
        assert db.index_count(BACKLINKS.likes.counts.name, POST) == 4
        assert db.check_indexes() == []
    with backlinks_store(tmp_path, indexes=BACKLINKS.indexes) as db:
        assert db.index_count(BACKLINKS.likes.counts, POST) == 4
        assert len(list(db.index_scan(BACKLINKS.likes.entries, POST))) == 4
        assert db.check_indexes() == []


@aio
async def test_backlinks_async_face(tmp_path: Path) -> None:
    schema = default_schema()
    async with Store.open(tmp_path, schema, indexes=BACKLINKS.indexes) as store:
        await store.put(RECORDS.record, *like(1))
    async with Store.open(tmp_path, schema, values=default_values(schema)) as store:
        await store.put(RECORDS.record, *like(2))
        assert await store.index_count(BACKLINKS.likes.counts.name, POST) == 2
        assert await store.check_indexes() == []


def _seed(path: Path, indexes: list[Any]) -> None:
    with SyncStore.open(path, K.SCHEMA, indexes=indexes) as db:
        db.put(K.post, {"author": "a", "rkey": 1}, {"tag": "x", "likes": 2, "handle": "h1"})
        db.put(K.post, {"author": "b", "rkey": 2}, {"tag": "y", "likes": 5, "tags": ["t"]})


def test_plain_definitions_are_maintained(tmp_path: Path) -> None:
    _seed(tmp_path, PLAIN)
    with SyncStore.open(tmp_path, K.SCHEMA) as db:  # no indexes=
        db.put(K.post, {"author": "a", "rkey": 1}, {"tag": "y", "likes": 1, "handle": "h2"})
        db.put(K.post, {"author": "c", "rkey": 3}, {"tag": "y", "likes": 7, "handle": "h1"})
        assert db.index_count("per_tag", "y") == 3 and db.index_count("per_tag", "x") == 0
        assert db.lookup("by_handle", "h1") is not None
        assert db.check_indexes() == []
    with SyncStore.open(tmp_path, K.SCHEMA, indexes=PLAIN) as db:
        assert db.index_sum(K.likes, "a") == 1 and db.index_sum(K.likes, "c") == 7
        assert db.lookup(K.by_handle, "h2").key.author == "a"  # type: ignore[union-attr]
        assert db.check_indexes() == []


def test_an_undeclared_function_index_refuses_the_open(tmp_path: Path) -> None:
    _seed(tmp_path, [*PLAIN, K.tags])
    with pytest.raises(IndexStateError) as caught:
        SyncStore.open(tmp_path, K.SCHEMA, indexes=PLAIN)
    message = str(caught.value)
    assert "tags (using=indexkit.each_tag)" in message and "indexes=" in message
    assert "rebuild_later=('tags',)" in message and caught.value.index == "tags"
    # a refused open writes nothing: no new index registered, no rebuild mark
    with pytest.raises(IndexStateError, match="tags"):
        SyncStore.open(tmp_path, K.SCHEMA, indexes=[K.covered], rebuild_later=["by_tag"])
    with SyncStore.open(tmp_path, K.SCHEMA, indexes=[*PLAIN, K.tags]) as db:
        info = db.index_info()
        assert "covered" not in info and info["by_tag"]["state"] == "readable"
        assert info["tags"]["state"] == "readable"
        assert db.check_indexes() == []


@aio
async def test_refused_on_the_async_face_too(tmp_path: Path) -> None:
    _seed(tmp_path, [K.tags])
    with pytest.raises(IndexStateError, match="tags"):
        await Store.open(tmp_path, K.SCHEMA)


def test_readers_and_writers_of_other_records_are_unaffected(tmp_path: Path) -> None:
    _seed(tmp_path, [*PLAIN, K.tags])
    with SyncStore.open_reader(tmp_path, K.SCHEMA) as reader:  # a reader never writes
        assert reader.get(K.post, {"author": "a", "rkey": 1}) is not None
    # a writer whose schema defines none of the indexes' records cannot write them
    other = RecordType("other", 3, [("id", fields.u32)])
    with SyncStore.open(tmp_path, Schema(other)) as db:
        db.put(other, {"id": 1}, {"tags": ["n"]})
    with pytest.raises(IndexStateError, match="tags"):  # `tags` covers notes too
        SyncStore.open(tmp_path, Schema(K.note))


@pytest.mark.parametrize("face", ["sync", "async"])
def test_rebuild_later_marks_the_index_until_built(tmp_path: Path, face: str) -> None:
    _seed(tmp_path, [*PLAIN, K.tags])
    if face == "sync":
        with SyncStore.open(tmp_path, K.SCHEMA, rebuild_later=("tags",)) as db:
            db.put(K.post, {"author": "c", "rkey": 3}, {"tag": "z", "tags": ["u", "t"]})
            assert db.index_count("per_tag", "z") == 1  # plain ones are still maintained
            assert db.index_info()["tags"]["state"] == "write_only"
    else:

        async def write() -> None:
            async with Store.open(tmp_path, K.SCHEMA, rebuild_later=["tags"]) as store:
                await store.put(K.post, {"author": "c", "rkey": 3}, {"tags": ["u", "t"]})

        asyncio.run(write())
    with SyncStore.open(tmp_path, K.SCHEMA) as db:  # no entry is kept: nothing to refuse
        db.put(K.post, {"author": "d", "rkey": 4}, {"tags": ["t"]})
    reader = SyncStore.open_reader(tmp_path, K.SCHEMA, indexes=[K.tags])
    with reader, pytest.raises(IndexStateError, match="write_only"):
        list(reader.index_scan(K.tags, "t"))
    with SyncStore.open(tmp_path, K.SCHEMA, indexes=[K.tags]) as db:
        with pytest.raises(IndexStateError, match="write_only"):
            db.index_scan(K.tags, "t")
        assert db.build_index("tags") == 4
        keys = [(r.key.author, r.key.rkey) for r in db.index_scan(K.tags, "t")]
        assert keys == [("b", 2), ("c", 3), ("d", 4)]
        assert db.check_indexes() == []


def test_rebuild_later_names_must_be_stored_and_undeclared(tmp_path: Path) -> None:
    _seed(tmp_path, [K.tags])
    with pytest.raises(IndexStateError, match="not stored"):
        SyncStore.open(tmp_path, K.SCHEMA, indexes=[K.tags], rebuild_later=["nope"])
    with pytest.raises(IndexStateError, match="both declared"):
        SyncStore.open(tmp_path, K.SCHEMA, indexes=[K.tags], rebuild_later=["tags"])


OPS = st.lists(
    st.tuples(
        st.booleans(),  # declared by this writer?
        st.lists(
            st.tuples(st.integers(0, 4), st.sampled_from(["x", "y", None]), st.integers(0, 9)),
            min_size=1,
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=4,
)


# each example opens a store up to 5 times: 12 examples by default, 250 with OPENDATA_KV_FUZZ=long
@settings(
    max_examples=max(12, settings.default.max_examples // 8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(sessions=OPS)
def test_declared_or_not_every_session_keeps_the_indexes(
    tmp_path_factory: Any, sessions: Any
) -> None:
    """Writers that do and do not declare the indexes take turns; after each, every index
    equals a recount of the records (check_indexes) and the counts are what the records say."""
    path = tmp_path_factory.mktemp("undeclared")
    live: dict[int, tuple[str | None, int]] = {}
    for declared, writes in [(True, []), *sessions]:
        with SyncStore.open(path, K.SCHEMA, indexes=PLAIN if declared else ()) as db:
            for n, tag, amount in writes:
                key = {"author": f"a{n % 2}", "rkey": n}
                if tag is None:
                    db.delete(K.post, key)
                    live.pop(n, None)
                else:
                    db.put(K.post, key, {"tag": tag, "likes": amount})
                    live[n] = (tag, amount)
            assert db.check_indexes() == []
            for tag in ("x", "y"):
                want = sum(1 for t, _ in live.values() if t == tag)
                assert db.index_count("per_tag", tag) == want
            for author in ("a0", "a1"):
                want = sum(a for n, (_, a) in live.items() if f"a{n % 2}" == author)
                assert db.index_sum("likes", author) == want


@aio
async def test_record_collection_reads_on_a_writer_that_did_not_declare(tmp_path: Path) -> None:
    schema = default_schema()
    async with Store.open(tmp_path, schema, indexes=BACKLINKS.indexes) as store:
        await store.put(RECORDS.record, *like(1))
    async with Store.open(tmp_path, schema) as store:
        repo = RecordCollection(store)
        await repo.create("did:plc:zz", LIKE, like(2)[1])
        assert await repo.like_count(POST) == 2
        assert len((await repo.likes(POST)).records) == 2
        # the library's Index objects are accepted for the indexes taken up
        assert await store.index_count(BACKLINKS.likes.counts, POST) == 2


def _definition(using: str) -> dict[str, Any]:
    return {**BACKLINKS.likes.counts.describe(), "using": using}


@pytest.mark.parametrize(
    "name",
    [
        "os.system",  # outside the library: never imported
        "opendata_kv.cli.main.main",  # the library's, but not an index function
        "opendata_kv.collections.backlinks.strong_ref_uri",  # a helper, not marked
        "opendata_kv.collections.backlinks.nope",
        "opendata_kv.no_such_module.f",
        "opendata_kv.__main__.f",  # importing it would run the command line (and exit)
        "opendata_kv.cli.demo.f",  # a library module, but none that defines index functions
    ],
)
def test_only_marked_library_functions_are_found(name: str) -> None:
    with pytest.raises(IndexStateError, match="declared with a function"):
        index_from_definition(_definition(name))
    assert library_function(name) is None


def test_a_library_function_is_found_in_a_fresh_process() -> None:
    """The stored name alone imports the library module that defines it."""
    code = (
        "import sys\n"
        "from opendata_kv.store.indexes.stored import index_from_definition\n"
        "assert 'opendata_kv.collections' not in sys.modules\n"
        f"index = index_from_definition({_definition(LIKE_GROUPS)!r})\n"
        "print(index.using.__module__, index.using.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=CHILD_ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["opendata_kv.collections.backlinks", "like_groups"]
