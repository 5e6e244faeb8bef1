"""Index reads equal a recount of the live records (issue 27 points 1-8, RFC 0010): entries
expire with their records, writes replace only live values, entry changes are judged on
encoded bytes (-0.0 / 0.0 / NaN), count and sum indexes refuse TTLs, index_scan's limit and
has_more count only what it yields, lookups never return a record that does not hold the
value under concurrent writers, delete_range counts live records, wrong arity is an
OpendataKvError. Sync face first; the async face for the same cases below."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import Index, RecordType, fields
from opendata_kv.errors import (
    IndexArgumentError,
    IndexStateError,
    IndexTtlError,
    OpendataKvError,
    UniqueIndexError,
)
from opendata_kv.store import Store, SyncStore

user = RecordType("user", 1, [("id", fields.string)])
post = RecordType("post", 2, [("id", fields.u32)])
handle = Index("handle", "user", [("handle", fields.string)], kind="unique")
by_team = Index("by_team", "user", [("team", fields.string)])
team_count = Index("team_count", "user", [("team", fields.string)], kind="count")
by_ratio = Index("by_ratio", "user", [("ratio", fields.f64)])
ratio_unique = Index("ratio_unique", "user", [("ratio", fields.f64)], kind="unique")
ratio_copy = Index("ratio_copy", "user", [("ratio", fields.f64)], covering=True)
SCHEMA = [user, post]
VALUE_INDEXES = [handle, by_team, by_ratio, ratio_unique, ratio_copy]
SHORT = 0.02


def ids(records: Any) -> list[str]:
    return [r.key.id for r in records]


def expire() -> None:
    time.sleep(SHORT * 3)


# --- point 1: -0.0 and 0.0, NaN -------------------------------------------------------------


@pytest.mark.parametrize("first, second", [(-0.0, 0.0), (0.0, -0.0), (math.nan, 1.0)])
def test_a_float_change_that_compares_equal_is_a_change(first: float, second: float) -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[by_ratio, ratio_unique, ratio_copy]) as db:
        db.put(user, ("u0",), {"ratio": first})
        db.put(user, ("u0",), {"ratio": second})
        assert ids(db.index_scan(by_ratio, second)) == ["u0"]
        assert [r.value for r in db.index_scan(ratio_copy)] == [{"ratio": second}]
        assert db.lookup(ratio_unique, second) is not None
        if not math.isnan(first):
            assert db.index_scan(by_ratio, first).to_list() == []
            assert db.lookup(ratio_unique, first) is None
        assert db.check_indexes() == []


def test_nan_rewritten_keeps_one_entry() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[by_ratio, ratio_unique]) as db:
        db.put(user, ("u0",), {"ratio": math.nan})
        db.put(user, ("u0",), {"ratio": math.nan})
        assert ids(db.index_scan(by_ratio)) == ["u0"] and db.check_indexes() == []
        db.delete(user, ("u0",))
        assert db.index_scan(by_ratio).to_list() == [] and db.check_indexes() == []


# --- points 2 and 4: a unique value is free as soon as its holder expires --------------------


def test_rebuild_after_an_expiry_then_write_the_expired_key() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle]) as db:
        db.put(user, ("u1",), {"handle": "alice"}, ttl=SHORT)
        expire()
        db.rebuild_index("handle")
        db.put(user, ("u2",), {"handle": "alice"})
        db.delete(user, ("u1",))
        found = db.lookup(handle, "alice")
        assert found is not None and found.key.id == "u2"
        with pytest.raises(UniqueIndexError) as caught:
            db.put(user, ("u3",), {"handle": "alice"})
        assert caught.value.key.id == "u2"
        assert db.check_indexes() == []


def test_online_build_skips_expired_records_and_gives_entries_their_expiry(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA) as db:
        db.put(user, ("u1",), {"handle": "alice", "team": "a"}, ttl=SHORT)
        db.put(user, ("u2",), {"handle": "bob", "team": "a"}, ttl=3)  # outlives the build
    expire()
    with SyncStore.open(url, SCHEMA, indexes=[handle, by_team]) as db:
        assert db.build_index("handle") == 1 and db.build_index("by_team") == 1
        db.put(user, ("u3",), {"handle": "alice"})  # u1 expired: its value is free
        db.delete(user, ("u1",))
        assert db.lookup(handle, "alice").key.id == "u3"  # type: ignore[union-attr]
        assert ids(db.index_scan(by_team, "a")) == ["u2"]
        u2 = db.get_with_expiry(user, ("u2",))
        assert u2 is not None and u2.expires_at is not None
        time.sleep(max(0.0, u2.expires_at.timestamp() - time.time()) + 0.05)  # u2 expires...
        # ...and its built entries with it
        assert db.lookup(handle, "bob") is None and db.index_scan(by_team).to_list() == []
        db.put(user, ("u4",), {"handle": "bob"})
        assert db.check_indexes() == []


def test_an_expired_holder_frees_its_unique_value_and_check_finds_nothing() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle, by_team]) as db:
        db.put(user, ("u1",), {"handle": "alice", "team": "a"}, ttl=SHORT)
        expire()
        assert db.get(user, ("u1",)) is None and db.lookup(handle, "alice") is None
        assert db.check_indexes() == []
        db.put(user, ("u3",), {"handle": "alice"})
        db.put(user, ("u1",), {"handle": "carol"})  # u1 again: never touches u3's entry
        assert db.lookup(handle, "alice").key.id == "u3"  # type: ignore[union-attr]
        assert db.check_indexes() == []


def test_a_unique_entry_is_removed_only_by_its_holder() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle]) as db:
        db.put(user, ("u1",), {"handle": "alice"}, ttl=SHORT)
        expire()
        db.put(user, ("u2",), {"handle": "alice"})
        with db.transaction() as tx:
            tx.put(user, ("u1",), {"handle": "bob"})
        with db.batch() as batch:
            batch.delete(user, ("u1",))
        assert db.lookup(handle, "alice").key.id == "u2"  # type: ignore[union-attr]
        assert db.check_indexes() == []


def test_a_value_swapped_between_two_records_in_one_batch() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle]) as db:
        db.put(user, ("u1",), {"handle": "x"})
        db.put(user, ("u2",), {"handle": "y"})
        with db.batch() as batch:
            batch.put(user, ("u1",), {"handle": "y"})
            batch.put(user, ("u2",), {"handle": "x"})
        assert db.lookup(handle, "x").key.id == "u2"  # type: ignore[union-attr]
        assert db.lookup(handle, "y").key.id == "u1"  # type: ignore[union-attr]
        assert db.check_indexes() == []


def test_a_kept_value_takes_the_new_expiry() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle, by_team]) as db:
        db.put(user, ("u1",), {"handle": "alice", "team": "a"}, ttl=SHORT)
        db.put(user, ("u1",), {"handle": "alice", "team": "a"})  # no TTL any more
        expire()
        assert db.lookup(handle, "alice") is not None
        assert ids(db.index_scan(by_team, "a")) == ["u1"] and db.check_indexes() == []


# --- point 3: an expired row dropped by a flush ----------------------------------------------


def _write(db: SyncStore, how: str, value: dict[str, Any]) -> None:
    if how == "put":
        db.put(user, ("u1",), value)
    elif how == "batch":
        with db.batch() as batch:
            batch.put(user, ("u1",), value)
    elif how == "put_many":
        db.put_many([(user, ("u1",), value)])
    else:
        with db.transaction() as tx:
            tx.put(user, ("u1",), value)


@pytest.mark.parametrize("how", ["put", "batch", "put_many", "transaction"])
def test_an_expired_row_flushed_away_leaves_no_entry(tmp_path: Path, how: str) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, indexes=[by_team, handle]) as db:
        db.put(user, ("u1",), {"team": "a", "handle": "h"}, ttl=SHORT)
        expire()
        db.put(post, (1,), {})
        db.flush()
    with SyncStore.open(url, SCHEMA, indexes=[by_team, handle]) as db:
        _write(db, how, {"team": None})
        assert db.index_scan(by_team, "a").to_list() == [] and db.lookup(handle, "h") is None
        assert db.check_indexes() == []


# --- count and sum refuse TTLs -------------------------------------------------------------------


def test_a_ttl_on_a_record_a_count_index_covers_is_refused() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[team_count, by_team]) as db:
        with pytest.raises(IndexTtlError) as caught:
            db.put(user, ("u1",), {"team": "a"}, ttl=5)
        assert (caught.value.index, caught.value.record) == ("team_count", "user")
        assert caught.value.key.id == "u1" and "team_count" in str(caught.value)
        with pytest.raises(IndexTtlError), db.batch() as batch:
            batch.put(post, (1,), {})
            batch.put_raw(user.encode("u2"), b"\x80", expire_at=time.time_ns() // 10**6 + 5000)
        with pytest.raises(IndexTtlError), db.transaction() as tx:
            tx.put(user, ("u3",), {"team": "b"}, ttl=5)
        # nothing of the refused writes was written
        assert db.count(user) == 0 and db.count(post) == 0
        assert db.index_count(team_count, "a") == 0 and db.check_indexes() == []
        db.put(post, (2,), {}, ttl=5)  # a record type no aggregate covers takes a TTL


def test_a_count_rebuilt_after_an_expiry_then_the_expired_key_written(tmp_path: Path) -> None:
    """Issue 27 point 2's count case: the expired record is not counted by the build, and
    writing its key again does not take it out of the group it no longer counts in."""
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA) as db:  # written before the count index existed
        db.put(user, ("u1",), {"team": "a"})
        db.put(user, ("u2",), {"team": "a"}, ttl=SHORT)
    expire()
    with SyncStore.open(url, SCHEMA, indexes=[team_count]) as db:
        db.build_index("team_count")
        assert db.index_count(team_count, "a") == 1
        db.rebuild_index("team_count")
        db.put(user, ("u2",), {"team": "b"})
        assert (db.index_count(team_count, "a"), db.index_count(team_count, "b")) == (1, 1)
        assert db.check_indexes() == []


def test_a_build_meeting_a_live_record_with_a_ttl_refuses(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA) as db:
        db.put(user, ("u1",), {"team": "a"})
        db.put(user, ("u2",), {"team": "a"}, ttl=60)
    with SyncStore.open(url, SCHEMA, indexes=[team_count]) as db:
        with pytest.raises(IndexTtlError) as caught:
            db.build_index("team_count")
        assert caught.value.key.id == "u2"


# --- point 5: limit and has_more count only what is yielded --------------------------------------


def test_expired_entries_do_not_count_toward_limit() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[by_team]) as db:
        db.put(user, ("u1",), {"team": "a"}, ttl=SHORT)
        db.put(user, ("u2",), {"team": "a"}, ttl=SHORT)
        db.put(user, ("u3",), {"team": "a"})
        expire()
        scan = db.index_scan(by_team, limit=2)
        assert ids(scan) == ["u3"] and not scan.has_more()
        scan = db.index_scan(by_team, reverse=True, limit=1)
        assert ids(scan) == ["u3"] and not scan.has_more()
        db.put(user, ("u4",), {"team": "a"})
        scan = db.index_scan(by_team, limit=1)
        assert ids(scan) == ["u3"] and scan.has_more()
        assert ids(db.index_scan(by_team, after=scan.cursor)) == ["u4"]
        entries = db.index_scan(by_team, limit=1, records=False)
        assert [e.key.id for e in entries] == ["u3"] and entries.has_more()


# --- point 6: delete_range counts live records ---------------------------------------------------


@pytest.mark.parametrize("indexes", [[], [by_team]])
def test_delete_range_counts_only_live_records(indexes: list[Index]) -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=indexes) as db:
        db.put(user, ("u1",), {"team": "a"}, ttl=SHORT)
        db.put(user, ("u2",), {"team": "a"})
        expire()
        assert db.count(user) == 1
        assert db.delete_range(user) == 1
        assert db.delete_range(user) == 0 and db.count(user) == 0
        assert db.check_indexes() == []


# --- point 7: a read following an entry returns only a record that holds it ---------------------


def test_lookups_and_scans_under_concurrent_writers_never_return_a_stranger() -> None:
    seconds = 1.5
    with SyncStore.open("memory://", SCHEMA, indexes=[handle, by_team]) as db:
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            i = 0
            try:
                while not stop.is_set():
                    i += 1
                    key = (f"w{n}",)
                    db.delete(user, key)
                    name, team = ("h1", "a") if (i + n) % 2 else ("h2", "b")
                    try:
                        db.put(user, key, {"handle": name, "team": team})
                    except UniqueIndexError:
                        db.put(user, key, {"team": team})
            except BaseException as exc:
                errors.append(exc)

        wrong: list[Any] = []
        rounds = 0
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                rounds += 1
                for name in ("h1", "h2"):
                    found = db.lookup(handle, name)
                    if found is not None and found.value.get("handle") != name:
                        wrong.append(found)
                for team in ("a", "b"):
                    wrong += [r for r in db.index_scan(by_team, team) if r.value["team"] != team]
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert not errors and rounds > 10
        assert wrong == []
        assert db.check_indexes() == []


# --- point 8: wrong arity -------------------------------------------------------------------------


def test_wrong_arity_names_the_index_its_fields_and_the_values() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[handle, team_count, by_team]) as db:
        for call, index in (
            (lambda: db.index_count(team_count), "team_count"),
            (lambda: db.index_count(team_count, 1.0, 2.0), "team_count"),
            (lambda: db.lookup(handle), "handle"),
            (lambda: db.lookup(handle, "a", "b"), "handle"),
            (lambda: db.index_sum(team_count, "a", "b"), "team_count"),
            (lambda: db.index_scan(by_team, "a", "b"), "by_team"),
            (lambda: db.index_scan(by_team, "a", partial="b"), "by_team"),
        ):
            with pytest.raises(IndexArgumentError) as caught:
                call()
            error = caught.value
            assert isinstance(error, OpendataKvError) and isinstance(error, ValueError)
            assert error.index == index
            assert error.fields == (("handle",) if index == "handle" else ("team",))
            assert index in str(error) and repr(error.value) in str(error)


# --- the async face ---------------------------------------------------------------------------


def test_the_async_face() -> None:
    async def main() -> None:
        async with Store.open("memory://", SCHEMA, indexes=VALUE_INDEXES) as db:
            await db.put(user, ("u0",), {"ratio": -0.0})
            await db.put(user, ("u0",), {"ratio": 0.0})
            assert [r.key.id async for r in db.index_scan(by_ratio, 0.0)] == ["u0"]
            assert await db.lookup(ratio_unique, -0.0) is None
            await db.put(user, ("u1",), {"handle": "alice", "team": "a"}, ttl=SHORT)
            await db.put(user, ("u2",), {"team": "a"}, ttl=SHORT)
            await db.put(user, ("u3",), {"team": "a"})
            await asyncio.sleep(SHORT * 3)
            await db.put(user, ("u4",), {"handle": "alice"})
            await db.delete(user, ("u1",))
            assert (await db.lookup(handle, "alice")).key.id == "u4"  # type: ignore[union-attr]
            scan = db.index_scan(by_team, limit=1)
            assert [r.key.id async for r in scan] == ["u3"] and not await scan.has_more()
            assert await db.delete_range(user, "u2") == 0
            with pytest.raises(IndexArgumentError):
                await db.lookup(handle)
            assert await db.check_indexes() == []
        async with Store.open("memory://", SCHEMA, indexes=[team_count]) as db:
            with pytest.raises(IndexTtlError):
                await db.put(user, ("u1",), {"team": "a"}, ttl=5)
            assert await db.count(user) == 0

    asyncio.run(main())


def test_async_lookups_under_concurrent_writer_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The async face: a record read waits (as on an object store) before it reads, so writer
    tasks run between a reader's entry read and its record read."""
    from opendata_kv.store.views import ReadView

    fetch, fetch_many = ReadView._fetch, ReadView._fetch_many

    async def slow_fetch(self: ReadView, key: bytes) -> bytes | None:
        if user.owns(key):
            await asyncio.sleep(0.002)
        return await fetch(self, key)

    async def slow_fetch_many(self: ReadView, keys: list[bytes]) -> list[bytes | None]:
        if keys and user.owns(keys[0]):
            await asyncio.sleep(0.002)
        return await fetch_many(self, keys)

    monkeypatch.setattr(ReadView, "_fetch", slow_fetch)
    monkeypatch.setattr(ReadView, "_fetch_many", slow_fetch_many)

    async def main() -> tuple[list[Any], int]:
        async with Store.open("memory://", SCHEMA, indexes=[handle, by_team]) as db:
            stop = asyncio.Event()
            writes = 0

            async def writer(n: int) -> None:
                nonlocal writes
                i = 0
                while not stop.is_set():
                    i += 1
                    name, team = ("h1", "a") if (i + n) % 2 else ("h2", "b")
                    await db.delete(user, (f"w{n}",))
                    try:
                        await db.put(user, (f"w{n}",), {"handle": name, "team": team})
                    except UniqueIndexError:
                        await db.put(user, (f"w{n}",), {"team": team})
                    writes += 1

            wrong: list[Any] = []
            tasks = [asyncio.create_task(writer(n)) for n in range(4)]
            # a second of reads, and on past it until the writers made 50 writes (a loaded
            # machine made 34 in the second): the count of interleavings, not the time, is
            # what the test needs; 120 s bounds it
            started = time.monotonic()
            while (writes <= 50 or time.monotonic() < started + 1.0) and (
                time.monotonic() < started + 120
            ):
                await asyncio.sleep(0)  # the writers' turn
                for name in ("h1", "h2"):
                    found = await db.lookup(handle, name)
                    if found is not None and found.value.get("handle") != name:
                        wrong.append(found)
                async for r in db.index_scan(by_team, "a"):
                    if r.value["team"] != "a":
                        wrong.append(r)
            stop.set()
            await asyncio.gather(*tasks)
            assert await db.check_indexes() == []
            return wrong, writes

    wrong, writes = asyncio.run(main())
    assert writes > 50 and wrong == []


def test_lookup_reads_through_a_snapshot_after_its_tries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from opendata_kv.store.indexes import read

    monkeypatch.setattr(read, "LOOKUP_TRIES", 0)  # straight to the snapshot read
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, indexes=[handle]) as db:
        db.put(user, ("u1",), {"handle": "alice"})
        db.put(user, ("u2",), {"handle": "bob"}, ttl=SHORT)
        assert db.lookup(handle, "alice").key.id == "u1"  # type: ignore[union-attr]
        expire()
        assert db.lookup(handle, "bob") is None and db.lookup(handle, "carol") is None
        db.flush()
        with SyncStore.open_reader(url, SCHEMA, indexes=[handle]) as reader:
            assert reader.lookup(handle, "alice") is None  # a reader has no snapshot to read


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from("ab"), st.booleans()), max_size=12),
    limit=st.integers(1, 4),
    reverse=st.booleans(),
    team=st.sampled_from([None, "a"]),
)
def test_pages_hold_exactly_the_live_entries(
    rows: list[tuple[str, bool]], limit: int, reverse: bool, team: str | None
) -> None:
    """Paging with limit/after over entries of live and expired records yields every live one
    once, in order, and has_more() is True exactly when a live one follows."""
    past = time.time_ns() // 1_000_000 - 1000
    with SyncStore.open("memory://", SCHEMA, indexes=[by_team]) as db:
        with db.batch() as batch:
            for n, (group, expired) in enumerate(rows):
                key = user.encode(f"u{n:02}")
                data = db.store.values.encode(user, {"team": group}, key)
                batch.put_raw(key, data, expire_at=past if expired else None)
        live = sorted((group, f"u{n:02}") for n, (group, expired) in enumerate(rows) if not expired)
        want = [k for g, k in live if team is None or g == team]
        want = want[::-1] if reverse else want
        leading = () if team is None else (team,)
        got: list[str] = []
        after = None
        while True:
            page = db.index_scan(by_team, *leading, limit=limit, reverse=reverse, after=after)
            items = ids(page)
            got += items
            assert len(items) == min(limit, len(want) - len(got) + len(items))
            assert page.has_more() == (len(got) < len(want))
            if not page.has_more():
                break
            after = page.cursor
        assert got == want


def test_check_skips_records_the_schema_lacks(tmp_path: Path) -> None:
    """A stored index picked up by a writer whose schema lacks some of its records: check
    reports nothing for what it cannot recount, and still finds real damage in the rest."""
    from opendata_kv.errors import show_bytes
    from opendata_kv.store.indexes.check import check_index
    from opendata_kv.store.indexes.layout import encode_fields

    both = Index("both_team", ["user", "post"], [("team", fields.string)])
    unique = Index("both_handle", ["user", "post"], [("handle", fields.string)], kind="unique")
    count = Index("both_count", ["user", "post"], [("team", fields.string)], kind="count")
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, indexes=[both, unique, count]) as db:
        db.put(user, ("u1",), {"team": "a", "handle": "x"})
        db.put(post, (1,), {"team": "a", "handle": "y"})
        db.put(post, (2,), {"team": "b"})
        assert db.check_indexes() == []
        stray = encode_fields("both_team", both.fields, ("z",)) + user.encode("u9")
        with db.batch() as batch:  # damage among the records the reader knows
            batch.put_raw(stray, b"")

    async def main() -> list[list[Any]]:
        async with Store.open_reader(url, [user]) as reader:
            return [await check_index(reader, index) for index in (both, unique, count)]

    value_problems, unique_problems, count_problems = asyncio.run(main())
    (problem,) = value_problems  # the planted entry; post's entries are not called stray
    assert problem.message == f"entry {show_bytes(stray)} has no matching record"
    assert unique_problems == [] and count_problems == []


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_build_meeting_two_holders_of_a_unique_value_names_both(
    face: str, tmp_path: Path
) -> None:
    """A write during a unique index's build is checked only against what the build passed:
    the build then refuses to finish, naming both holders; reads stay refused until one
    holder changes and the build runs again."""
    names: list[str] = []

    def clash(db: Any) -> None:
        if not names:
            names.append("u0")
            db.put(user, ("u0",), {"handle": "h3"})  # u1, not built yet, holds h3

    def check_error(error: UniqueIndexError) -> None:
        assert "the build found 'h3' held by both" in str(error)
        assert "UserKey(id='u0')" in str(error) and "UserKey(id='u1')" in str(error)

    if face == "sync":
        with SyncStore.open("memory://", SCHEMA, indexes=[handle]) as db:
            db.put(user, ("u0",), {})
            db.put(user, ("u1",), {"handle": "h3"})
            with pytest.raises(UniqueIndexError) as raised:
                db.rebuild_index("handle", batch_size=1, progress=lambda *_: clash(db))
            check_error(raised.value)
            with pytest.raises(IndexStateError):
                db.lookup(handle, "h3")
            db.put(user, ("u0",), {"handle": "h4"})
            db.build_index("handle")
            found = db.lookup(handle, "h3")
            assert found is not None and found.key.id == "u1"
            assert db.check_indexes() == []
        return

    async def run() -> None:  # duplicates written before the index existed
        path = str(tmp_path)
        async with Store.open(path, SCHEMA) as db:
            await db.put(user, ("u0",), {"handle": "h3"})
            await db.put(user, ("u1",), {"handle": "h3"})
        async with Store.open(path, SCHEMA, indexes=[handle]) as db:
            with pytest.raises(UniqueIndexError) as raised:
                await db.build_index("handle")
            check_error(raised.value)
            with pytest.raises(IndexStateError):
                await db.lookup(handle, "h3")
            await db.put(user, ("u0",), {"handle": "h4"})
            await db.build_index("handle")
            found = await db.lookup(handle, "h3")
            assert found is not None and found.key.id == "u1"
            assert await db.check_indexes() == []

    asyncio.run(run())


@pytest.mark.parametrize("how", ["put", "batch", "put_many", "transaction", "walk"])
@pytest.mark.parametrize("first, second", [(SHORT, None), (None, SHORT), (None, None)])
def test_kept_entries_follow_the_expiry_of_every_write(
    how: str, first: float | None, second: float | None
) -> None:
    """A write keeping an indexed value rewrites the kept entries when either it or the value
    it replaces has a TTL (so they expire with the record), and may leave them when neither
    has: the index reads equal the records either way, on every write path."""
    with SyncStore.open("memory://", SCHEMA, indexes=[handle, by_team]) as db:
        value = {"handle": "alice", "team": "a"}
        db.put(user, ("u1",), value, ttl=first)
        others = [(user, (f"w{i:02}",), {"team": "b"}) for i in range(20)]
        if how == "put":
            db.put(user, ("u1",), value, ttl=second)
        elif how == "batch":
            with db.batch() as batch:
                batch.put(user, ("u1",), value, ttl=second)
        elif how == "walk":  # enough keys for the batch to walk them with an iterator
            with db.batch() as batch:
                for target, fields_, other in others:
                    batch.put(target, fields_, other)
                batch.put(user, ("u1",), value, ttl=second)
        elif how == "put_many":
            db.put_many([(user, ("u1",), value)])  # put_many takes no TTL
        else:
            with db.transaction() as tx:
                tx.put(user, ("u1",), value, ttl=second)
        expire()
        live = second is None or how == "put_many"
        assert (db.lookup(handle, "alice") is not None) is live
        assert ids(db.index_scan(by_team, "a")) == (["u1"] if live else [])
        assert db.check_indexes() == []
