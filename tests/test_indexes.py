"""Secondary indexes (issue 23, RFC 0010): every write path keeps every index equal to a
recount from the records (a hypothesis state machine), unique indexes refuse a second holder
under concurrent writers, reads (index_scan, lookup, index_count, index_sum) on both faces,
check_indexes finding planted damage, and S3."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from indexkit import ALL, SCHEMA, by_handle, by_tag, covered, likes, note, per_tag, post, tags

from opendata_kv import Index, RecordType, fields
from opendata_kv.errors import IndexStateError, SchemaError, UniqueIndexError
from opendata_kv.store import Store, SyncStore
from opendata_kv.store.indexes.layout import ROOT, entry_prefix

AUTHORS = st.sampled_from(["a", "b", "c"])
RKEYS = st.integers(0, 5)
VALUES = st.fixed_dictionaries(
    {},
    optional={
        "tag": st.sampled_from(["x", "y", "z"]),
        "handle": st.sampled_from(["h1", "h2", "h3", "h4"]),
        "likes": st.integers(-3, 10),
        "tags": st.lists(st.sampled_from(["p", "q", "r"]), max_size=3),
    },
)


def recount(db: SyncStore) -> dict[str, Any]:
    """What every index must hold, from the records alone."""
    rows = [(r.key, r.value) for name in ("post", "note") for r in db.scan(name)]
    posts = [(k, v) for k, v in rows if k.record_type is post]
    return {
        "by_tag": sorted((v["tag"], k.author, k.rkey) for k, v in posts if "tag" in v),
        "per_tag": Counter(v["tag"] for _, v in posts if "tag" in v),
        "likes": Counter(
            {
                a: sum(v.get("likes", 0) for k, v in posts if k.author == a)
                for a in {k.author for k, v in posts}
            }
        ),
        "tags": sorted(
            (t, k.record_type.name, k.author, k.rkey)
            for k, v in rows
            for t in set(v.get("tags", []))
        ),
    }


def assert_indexes_match(db: SyncStore) -> None:
    assert db.check_indexes() == []
    want = recount(db)
    got = [(r.value["tag"], r.key.author, r.key.rkey) for r in db.index_scan(by_tag)]
    assert got == want["by_tag"]
    for tag in ("x", "y", "z"):
        assert db.index_count(per_tag, tag) == want["per_tag"][tag]
    for author in ("a", "b", "c"):
        assert db.index_sum(likes, author) == want["likes"][author]
    got_tags = sorted(
        (e.values[0], e.key.record_type.name, e.key.author, e.key.rkey)
        for e in db.index_scan(tags, records=False)
    )
    assert got_tags == want["tags"]
    if covered.name in db.index_info():  # copies equal the records, read without a get
        rows = [(r.key, r.value) for r in db.scan(post) if "tag" in r.value]
        want_copies = sorted(rows, key=lambda kv: (kv[1]["tag"], kv[0].encode()))
        assert [(r.key, r.value) for r in db.index_scan(covered)] == want_copies


class IndexedWrites(RuleBasedStateMachine):
    """Random puts, deletes, range deletes, batches and transactions; every step checks every
    index against a recount."""

    def __init__(self) -> None:
        super().__init__()
        self.db = SyncStore.open("memory://", SCHEMA, indexes=[*ALL, covered])

    def teardown(self) -> None:
        self.db.close()

    def _put(self, target: Any, record: Any, author: str, rkey: int, value: dict[str, Any]) -> None:
        try:
            target.put(record, (author, rkey), value)
        except UniqueIndexError as exc:
            holder = self.db.lookup(by_handle, value["handle"])
            assert holder is not None and holder.key == exc.key
            assert exc.index == "by_handle" and exc.value == value["handle"]
            raise

    @rule(author=AUTHORS, rkey=RKEYS, value=VALUES, kind=st.sampled_from([post, note]))
    def put(self, author: str, rkey: int, value: dict[str, Any], kind: Any) -> None:
        before = self.db.get(kind, (author, rkey))
        try:
            self._put(self.db, kind, author, rkey, value)
        except UniqueIndexError:
            assert self.db.get(kind, (author, rkey)) == before  # nothing written

    @rule(author=AUTHORS, rkey=RKEYS)
    def delete(self, author: str, rkey: int) -> None:
        self.db.delete(post, (author, rkey))

    @rule(author=AUTHORS)
    def delete_range(self, author: str) -> None:
        self.db.delete_range("post", author)

    @rule(writes=st.lists(st.tuples(AUTHORS, RKEYS, st.none() | VALUES), max_size=6))
    def batch(self, writes: list[Any]) -> None:
        try:
            with self.db.batch() as batch:
                for author, rkey, value in writes:
                    if value is None:
                        batch.delete(post, (author, rkey))
                    else:
                        batch.put(post, (author, rkey), value)
        except UniqueIndexError:
            pass

    @rule(
        writes=st.lists(st.tuples(AUTHORS, RKEYS, st.none() | VALUES), max_size=4),
        isolation=st.sampled_from(["serializable", "snapshot"]),
    )
    def transaction(self, writes: list[Any], isolation: str) -> None:
        try:
            with self.db.transaction(isolation) as tx:
                for author, rkey, value in writes:
                    if value is None:
                        tx.delete(post, (author, rkey))
                    else:
                        tx.put(post, (author, rkey), value)
        except UniqueIndexError:
            pass

    @rule(items=st.lists(st.tuples(AUTHORS, RKEYS, VALUES), max_size=8))
    def put_many(self, items: list[Any]) -> None:
        with contextlib.suppress(UniqueIndexError):
            self.db.put_many(((post, (a, r), v) for a, r, v in items), batch_size=3)

    @invariant()
    def indexes_match_a_recount(self) -> None:
        assert_indexes_match(self.db)


IndexedWrites.TestCase.settings = settings(max_examples=40, stateful_step_count=12)
test_indexed_writes = IndexedWrites.TestCase


def test_unique_index_under_concurrent_tasks() -> None:
    async def main() -> None:
        async with Store.open("memory://", SCHEMA, indexes=ALL) as store:

            async def claim(n: int) -> bool:
                try:
                    await store.put(post, ("a", n), {"handle": "alice"})
                except UniqueIndexError as exc:
                    assert exc.index == "by_handle" and exc.value == "alice"
                    return False
                return True

            won = await asyncio.gather(*(claim(n) for n in range(20)))
            assert sum(won) == 1
            holder = await store.lookup(by_handle, "alice")
            assert holder is not None and holder.key.rkey == won.index(True)
            assert await store.check_indexes() == []

    asyncio.run(main())


def test_unique_index_under_concurrent_threads() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=ALL) as db:
        won: list[int] = []

        def claim(n: int) -> None:
            for round_ in range(10):
                try:
                    db.put(post, ("t", n * 100 + round_), {"handle": f"h{round_}", "tag": "x"})
                    won.append(round_)
                except UniqueIndexError:
                    pass

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(won) == list(range(10))
        assert db.index_count(per_tag, "x") == 10
        assert db.check_indexes() == []


def test_reads_cursor_limit_reverse_and_has_more() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=ALL) as db:
        for n in range(10):
            db.put(post, ("a", n), {"tag": "x" if n % 2 else "y", "handle": f"h{n}"})
        scan = db.index_scan(by_tag, "x", limit=2)
        first = scan.to_list()
        assert [r.key.rkey for r in first] == [1, 3] and scan.has_more()
        rest = db.index_scan(by_tag, "x", after=scan.cursor).to_list()
        assert [r.key.rkey for r in rest] == [5, 7, 9]
        assert [r.key.rkey for r in db.index_scan(by_tag, "y", reverse=True, limit=2)] == [8, 6]
        assert [r.key.rkey for r in db.index_scan(by_tag, partial="")][:2] == [1, 3]
        assert next(r.key.rkey for r in db.index_scan(by_tag, start=("y",))) == 0
        assert [e.values for e in db.index_scan(by_handle, records=False, limit=1)] == [("h0",)]
        found = db.lookup(by_handle, "h4")
        assert found is not None and found.key.rkey == 4 and found.value["tag"] == "y"
        assert db.lookup(by_handle, "nobody") is None
        assert db.index_count(per_tag, "x") == 5
        assert [(e.values, e.records) for e in db.index_scan(per_tag)] == [(("x",), 5), (("y",), 5)]
        with pytest.raises(IndexStateError, match="unique"):
            db.lookup(by_tag, "x")
        with pytest.raises(IndexStateError, match="not a count or sum"):
            db.index_count(by_tag, "x")
        # scan_all never sees index keys
        assert len(db.scan_all().to_list()) == 10


def test_check_indexes_finds_each_kind_of_planted_damage() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=ALL) as db:
        for n in range(4):
            db.put(post, ("a", n), {"tag": "x", "handle": f"h{n}", "likes": 2})
        assert db.check_indexes() == []
        key = post.encode("a", 1)
        # an entry without a record, a record without its entry, a wrong aggregate,
        # a unique entry pointing elsewhere
        db.put_raw(entry_prefix("by_tag") + b"q\x00a\x00" + post.encode("a", 9), b"")
        db.store  # noqa: B018
        with db.batch() as batch:
            batch.delete_raw(entry_prefix("by_tag") + b"x\x00a\x00" + key)
        db.put_raw(entry_prefix("per_tag") + b"x\x00", b"\x92\x07\x00")
        db.put_raw(entry_prefix("by_handle") + b"h2\x00", post.encode("a", 3))
        problems = [str(p) for p in db.check_indexes()]
        assert any("by_tag" in p and "no matching record" in p for p in problems)
        assert any("by_tag" in p and "is missing" in p for p in problems)
        assert any("per_tag" in p and "recount gives (4, 0)" in p for p in problems)
        assert any("by_handle" in p and "points to" in p for p in problems)
        assert len(problems) == 4
        db.rebuild_index("by_tag")
        db.rebuild_index("per_tag")
        db.rebuild_index("by_handle")
        assert db.check_indexes() == []


def test_raw_deletes_are_tracked_but_raw_puts_of_other_keys_are_not() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=ALL) as db:
        db.put(post, ("a", 1), {"tag": "x"})
        with db.batch() as batch:
            batch.delete_raw(post.encode("a", 1))
        assert db.index_count(per_tag, "x") == 0 and db.check_indexes() == []


def test_declarations_are_checked() -> None:
    with pytest.raises(SchemaError):
        type(by_tag)("Bad Name", "post", [("tag", __import__("opendata_kv").fields.string)])
    with pytest.raises(SchemaError, match="amount"):
        type(by_tag)("s", "post", [], kind="sum")
    with pytest.raises(SchemaError, match="only end a key"):
        type(by_tag)("t", "post", [("tag", __import__("opendata_kv").fields.trailing_string)])
    with pytest.raises(AttributeError):
        by_tag.kind = "unique"  # type: ignore[misc]


def test_a_changed_declaration_is_refused(tmp_path: Path) -> None:
    from opendata_kv import Index, fields

    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, indexes=[by_tag]) as db:
        db.put(post, ("a", 1), {"tag": "x"})
    other = Index("by_tag", "post", [("tag", fields.string)])
    with pytest.raises(IndexStateError, match="declared as"):
        SyncStore.open(url, SCHEMA, indexes=[other])


def test_a_schema_overlapping_the_index_space_is_refused() -> None:
    from opendata_kv import RecordType, fields

    clash = RecordType("clash", 1, [("k", fields.string)], keyspace=ROOT)
    with pytest.raises(SchemaError, match="overlaps the index key space"):
        SyncStore.open("memory://", [clash], indexes=[])


def test_a_reader_reads_the_writers_indexes(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
        db.put(post, ("a", 1), {"tag": "x", "handle": "al"})
        db.put(note, ("a", 1), {"tags": ["p"]})
        db.flush()
        with SyncStore.open_reader(url, SCHEMA, indexes=ALL) as reader:
            assert reader.index_count(per_tag, "x") == 1
            found = reader.lookup(by_handle, "al")
            assert found is not None and found.key == post.key("a", 1)
            assert sorted(reader.index_info()) == sorted(i.name for i in ALL)
            assert reader.check_indexes() == []


def test_s3(s3_env: Any) -> None:
    from conftest import S3_BUCKET

    url = f"s3://{S3_BUCKET}/indexes-{threading.get_ident()}"
    with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
        for n in range(5):
            db.put(post, ("s", n), {"tag": "x", "likes": n, "handle": f"s{n}"})
        db.delete(post, ("s", 0))
        assert_indexes_match(db)
        assert db.index_sum(likes, "s") == 10


def test_a_covering_index_reads_no_record_and_its_copies_follow_every_write() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[covered]) as db:
        db.put(post, ("a", 1), {"tag": "x", "likes": 1})
        db.put(post, ("a", 2), {"tag": "x", "likes": 2})
        db.put(post, ("a", 1), {"tag": "x", "likes": 5})  # same entry, new copy
        with db.batch() as batch:
            batch.put(post, ("a", 3), {"tag": "y"})
            batch.delete(post, ("a", 2))
        with db.transaction() as tx:
            tx.put(post, ("a", 4), {"tag": "x", "likes": 7})
        got = [(r.key.rkey, r.value) for r in db.index_scan(covered, "x")]
        assert got == [(1, {"tag": "x", "likes": 5}), (4, {"tag": "x", "likes": 7})]
        assert db.check_indexes() == []
        (entry,) = db.index_scan(covered, "y", records=False)
        # the records are not read: a record removed behind the index's back (an untracked
        # raw write of the index key space cannot do that, so drop the copy's record with the
        # store opened without the index) still comes back from its copy
        db.put_raw(entry.raw_key, msgpack.packb({"tag": "y", "old": 1}))  # not tracked
        (problem,) = db.check_indexes()
        assert "stale copy" in problem.message and "covered" in problem.object_name
        assert [r.value for r in db.index_scan(covered, "y")] == [{"tag": "y", "old": 1}]
        db.delete(post, ("a", 3))  # its entry goes, stale copy and all
        assert db.index_scan(covered, "y").to_list() == [] and db.check_indexes() == []


def test_a_covering_copy_expires_with_its_record() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[covered]) as db:
        db.put(post, ("a", 1), {"tag": "x"}, ttl=0.05)
        db.put(post, ("a", 2), {"tag": "x"})
        assert [r.key.rkey for r in db.index_scan(covered, "x")] == [1, 2]
        time.sleep(0.2)
        assert db.get(post, ("a", 1)) is None
        assert [r.key.rkey for r in db.index_scan(covered, "x")] == [2]


def test_covering_only_for_value_indexes() -> None:
    with pytest.raises(SchemaError, match="covering"):
        Index("c", "post", [("tag", fields.string)], kind="unique", covering=True)
    assert covered.describe()["covering"] is True and "covering" not in by_tag.describe()


def test_a_write_replacing_an_expired_record_finds_no_entry_to_remove() -> None:
    """Entries expire with their record: whatever path writes the key again (a batch and a
    transaction alike) finds nothing to remove, and every read equals a recount."""
    value_indexes = [by_tag, by_handle, tags]
    with SyncStore.open("memory://", SCHEMA, indexes=value_indexes) as db:
        db.put(post, ("a", 1), {"tag": "x", "handle": "h"}, ttl=0.05)
        db.put(post, ("a", 2), {"tag": "x", "tags": ["p"]}, ttl=0.05)
        time.sleep(0.2)
        assert db.index_scan(by_tag, "x").to_list() == [] and db.lookup(by_handle, "h") is None
        with db.transaction() as tx:
            tx.put(post, ("a", 1), {"tag": "y"})
        db.put(post, ("a", 2), {"tag": "y"})
        assert [r.key.rkey for r in db.index_scan(by_tag, "y")] == [1, 2]
        assert db.index_scan(tags, "p").to_list() == [] and db.check_indexes() == []


def test_floats_that_compare_equal_but_encode_apart_get_their_own_entries() -> None:
    rec = RecordType("m", 3, [("id", fields.u32)])
    by_x = Index("by_x", "m", [("x", fields.f64)])
    with SyncStore.open("memory://", [rec], indexes=[by_x]) as db:
        with db.batch() as batch:
            batch.put(rec, (1,), {"x": 0.0})
            batch.put(rec, (2,), {"x": -0.0})
        assert [r.key.id for r in db.index_scan(by_x, 0.0)] == [1]
        assert [r.key.id for r in db.index_scan(by_x, -0.0)] == [2]
        assert db.check_indexes() == []


def test_store_put_raw_of_an_indexed_record_is_indexed() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[covered, per_tag]) as db:
        db.put(post, ("a", 1), {"tag": "x", "t": 1})
        db.put_raw(post.encode("a", 1), msgpack.packb({"tag": "y", "t": 2}))
        assert [r.value for r in db.index_scan(covered, "y")] == [{"tag": "y", "t": 2}]
        assert db.index_count(per_tag, "x") == 0 and db.check_indexes() == []


def test_a_copy_holding_nan_is_not_called_stale() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[covered]) as db:
        db.put(post, ("a", 1), {"tag": "x", "score": float("nan")})
        assert db.check_indexes() == []
