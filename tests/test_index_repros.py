"""Issue 27's reproductions (points 1-8) and its concurrency cases, each on the sync face
(SyncStore) and the async face (Store), over a store in a temporary directory (so close and
reopen keep the data). The expected results are the invariant of docs/indexes.md: every index
read equals a recount of the live records (not deleted, not expired)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from indexmodel import (
    FACES,
    SCHEMA,
    SyncFace,
    by_ratio,
    by_team,
    handle,
    team_count,
    user,
    users_cov,
)

from opendata_kv import Index, fields
from opendata_kv.errors import IndexStateError, OpendataKvError, UniqueIndexError
from opendata_kv.store import Store, SyncStore

ratio_unique = Index("ratio_u", "user", [("ratio", fields.f64)], kind="unique")
INDEXES = [by_team, handle, by_ratio, users_cov, team_count, ratio_unique]
TTL, EXPIRED = 0.02, 0.05


def bits(x: float) -> bytes:
    return struct.pack(">d", x)


@pytest.fixture(params=["sync", "async"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """open(indexes) -> a face on one store in tmp_path (closed at the end)."""
    opened: list[SyncFace] = []

    def open_(indexes: list[Index] = INDEXES) -> SyncFace:
        for face in opened:
            if not getattr(face, "closed", False):
                face.close()
                face.closed = True  # type: ignore[attr-defined]
        face = FACES[request.param](str(tmp_path / "db"), indexes)
        opened.append(face)
        return face

    yield open_
    for face in opened:
        if not getattr(face, "closed", False):
            face.close()


def ids(items: list[Any]) -> list[str]:
    return [r.key.id for r in items]


# --- 1. -0.0 and 0.0 are different index values ----------------------------------------------


@pytest.mark.parametrize(("old", "new"), [(-0.0, 0.0), (0.0, -0.0)])
def test_1_a_float_changed_to_its_other_zero_moves_its_entries(
    opener: Any, old: float, new: float
) -> None:
    db = opener()
    db.put(("user", "u0"), {"ratio": old}, None)
    db.put(("user", "u0"), {"ratio": new}, None)
    items, _, _ = db.scan(by_ratio, new)
    assert ids(items) == ["u0"]
    assert db.scan(by_ratio, old)[0] == []
    found = db.lookup(ratio_unique, new)
    assert found is not None and bits(found.value["ratio"]) == bits(new)
    assert db.lookup(ratio_unique, old) is None
    everything, _, _ = db.scan(by_ratio, records=False)
    assert [bits(e.values[0]) for e in everything] == [bits(new)]
    db.put(("user", "u1"), {"ratio": old}, None)  # the old zero is free again
    assert db.check() == []


def test_1_nan_is_a_value(opener: Any) -> None:
    db = opener()
    db.put(("user", "u0"), {"ratio": math.nan}, None)
    found = db.lookup(ratio_unique, math.nan)
    assert found is not None and found.key.id == "u0"
    assert ids(db.scan(by_ratio, math.nan)[0]) == ["u0"]
    with pytest.raises(UniqueIndexError):
        db.put(("user", "u1"), {"ratio": math.nan}, None)
    assert db.get(("user", "u1")) is None and db.check() == []


# --- 2. rebuild after an expiry, then write the expired key ------------------------------------


def test_2_rebuild_after_an_expiry_keeps_the_unique_value_with_its_holder(opener: Any) -> None:
    db = opener()
    db.put(("user", "u1"), {"handle": "alice"}, TTL)
    time.sleep(EXPIRED)
    db.build("handle", True, 1000, [])
    db.put(("user", "u2"), {"handle": "alice"}, None)
    db.delete(("user", "u1"))  # the expired record: must not free u2's value
    found = db.lookup(handle, "alice")
    assert found is not None and found.key.id == "u2"
    with pytest.raises(UniqueIndexError) as caught:
        db.put(("user", "u3"), {"handle": "alice"}, None)
    assert caught.value.key.id == "u2"
    assert db.check() == []


def test_2_an_online_build_over_an_expired_record(opener: Any) -> None:
    db = opener([by_team])
    db.put(("user", "u1"), {"handle": "alice"}, TTL)
    db.put(("user", "u9"), {"handle": "bob"}, None)
    time.sleep(EXPIRED)
    db = opener([by_team, handle])
    assert db.info()["handle"]["state"] == "write_only"
    outcomes = db.build("handle", False, 1, [("put", ("user", "u2"), {"handle": "alice"}, None)])
    assert outcomes == [None]
    db.delete(("user", "u1"))
    found = db.lookup(handle, "alice")
    assert found is not None and found.key.id == "u2"
    with pytest.raises(UniqueIndexError):
        db.put(("user", "u3"), {"handle": "alice"}, None)
    assert db.check() == []


@pytest.mark.parametrize("path", ["put", "batch", "transaction"])
def test_2_a_count_index_refuses_a_record_with_a_ttl(opener: Any, path: str) -> None:
    """The design's answer for count and sum indexes: a TTL on a counted record is refused
    and nothing is written (nor what was batched with it)."""
    db = opener()
    db.put(("post", "a", 0), {"team": "a"}, None)
    op = ("put", ("post", "a", 1), {"team": "a"}, TTL)
    company = ("put", ("user", "u1"), {"team": "a"}, None)
    with pytest.raises(IndexStateError) as caught:
        if path == "put":
            db.put(op[1], op[2], op[3])
        elif path == "batch":
            db.batch([company, op], False)
        else:
            (outcome,) = db.transaction([op], False, "serializable")
            raise outcome or AssertionError("committed")
    assert "team_count" in str(caught.value)
    assert db.get(("post", "a", 1)) is None and db.count(team_count, "a") == 1
    if path == "batch":
        assert db.get(("user", "u1")) is None
    assert db.check() == []


def test_2_a_count_index_built_over_records_with_ttls(opener: Any) -> None:
    """Declared on a store whose counted records carry TTLs: expired ones are not counted, a
    live one with a TTL stops the build (the index stays write_only, its reads refused)."""
    db = opener([])
    db.put(("post", "a", 1), {"team": "a"}, TTL)
    db.put(("post", "a", 2), {"team": "a"}, None)
    time.sleep(EXPIRED)
    db = opener([team_count])
    db.build("team_count", False, 1, [])
    assert db.count(team_count, "a") == 1
    db.put(("post", "a", 1), {"team": "b"}, None)  # the expired key written again
    assert db.count(team_count, "a") == 1 and db.count(team_count, "b") == 1
    db.drop("team_count")
    db = opener([])
    db.put(("post", "a", 3), {"team": "a"}, 3600)
    db = opener([team_count])
    with pytest.raises(IndexStateError) as caught:
        db.build("team_count", False, 1, [])
    assert "team_count" in str(caught.value)
    assert db.info()["team_count"]["state"] == "write_only"
    with pytest.raises(IndexStateError):
        db.count(team_count, "a")


@pytest.mark.parametrize("how", ["rebuild", "declared later"])
def test_a_unique_value_stays_unique_while_its_index_builds(opener: Any, how: str) -> None:
    """A write during a (re)build of a unique index that takes a value a live record holds is
    either refused (the build had passed the holder) or, when the build had not reached the
    holder yet (a check of the unbuilt records would be a scan per write), let through, and
    then the build refuses to finish naming both holders: the index stays write_only, every
    read of it raises, and once one holder changes the build finishes right (RFC 0010; found
    by the state machine)."""
    db = opener([by_team] if how == "declared later" else INDEXES)
    db.put(("user", "u0"), {}, None)
    db.put(("user", "u1"), {"handle": "h3"}, None)
    if how == "declared later":
        db = opener([by_team, handle])
    write = ("put", ("user", "u0"), {"handle": "h3"}, None)
    try:
        (outcome,) = db.build("handle", how == "rebuild", 1, [write])
    except UniqueIndexError as clash:  # the write went in before the build reached u1
        assert "the build found 'h3' held by both" in str(clash), clash
        assert "id='u0'" in str(clash) and "id='u1'" in str(clash)
        assert db.get(("user", "u0")) == {"handle": "h3"}
        assert db.info()["handle"]["state"] == "write_only"
        with pytest.raises(IndexStateError):
            db.lookup(handle, "h3")
        db.put(("user", "u0"), {}, None)
        assert db.build("handle", False, 1, []) == []
    else:  # refused, naming the holder the build had already indexed
        assert isinstance(outcome, UniqueIndexError) and outcome.key.id == "u1", outcome
        assert db.get(("user", "u0")) == {}
    found = db.lookup(handle, "h3")
    assert found is not None and found.key.id == "u1"
    assert db.check() == []


# --- 3. an expired row flushed away leaves no entry behind --------------------------------------


@pytest.mark.parametrize("path", ["put", "batch", "put_many", "transaction"])
def test_3_rewriting_a_key_whose_expired_row_was_flushed(opener: Any, path: str) -> None:
    db = opener()
    db.put(("user", "u1"), {"team": "a", "handle": "h"}, TTL)
    time.sleep(EXPIRED)
    db.put(("post", "a", 1), {}, None)
    db.flush()
    db = opener()  # close and reopen
    k, value = ("user", "u1"), {"team": None}
    if path == "put":
        db.put(k, value, None)
    elif path == "batch":
        db.batch([("put", k, value, None)], False)
    elif path == "put_many":
        db.put_many([(k, value)], 10)
    else:
        assert db.transaction([("put", k, value, None)], False, "serializable") == [None]
    assert db.scan(by_team, "a")[0] == [] and db.scan(users_cov, "a")[0] == []
    assert db.lookup(handle, "h") is None
    assert db.check() == []


# --- 4. an expired record frees its unique value ------------------------------------------------


def test_4_an_expired_holder_frees_its_value_and_is_not_damage(opener: Any) -> None:
    db = opener()
    db.put(("user", "u1"), {"handle": "alice"}, TTL)
    time.sleep(EXPIRED)
    assert db.get(("user", "u1")) is None and db.lookup(handle, "alice") is None
    assert db.check() == []  # an expiry is not damage
    db.put(("user", "u3"), {"handle": "alice"}, None)
    found = db.lookup(handle, "alice")
    assert found is not None and found.key.id == "u3"
    assert db.check() == []


# --- 5. expired entries do not count towards limit ---------------------------------------------


@pytest.mark.parametrize("records", [True, False])
def test_5_expired_entries_do_not_count_towards_limit(opener: Any, records: bool) -> None:
    db = opener()
    db.put(("user", "u1"), {"team": "a", "handle": "h1"}, TTL)
    db.put(("user", "u2"), {"team": "a", "handle": "h2"}, TTL)
    db.put(("user", "u3"), {"team": "a", "handle": "h3"}, None)
    time.sleep(EXPIRED)
    for index in (by_team, users_cov, handle):
        items, more, _ = db.scan(index, limit=2, records=records)
        assert [i.key.id for i in items] == ["u3"] and not more, index.name
        items, more, _ = db.scan(index, reverse=True, limit=1, records=records)
        assert [i.key.id for i in items] == ["u3"] and not more, index.name
        items, more, cursor = db.scan(index, limit=1, records=records)
        assert [i.key.id for i in items] == ["u3"] and not more, index.name
        assert db.scan(index, after=cursor, records=records)[0] == []


# --- 6. delete_range counts live records only ---------------------------------------------------


@pytest.mark.parametrize("indexed", [True, False])
def test_6_delete_range_counts_only_live_keys(opener: Any, indexed: bool) -> None:
    db = opener(INDEXES if indexed else [])
    db.put(("user", "u1"), {"team": "a"}, TTL)
    time.sleep(EXPIRED)
    assert db.delete_range("user") == 0
    db.put(("user", "u2"), {"team": "a"}, None)
    db.put(("user", "u3"), {"team": "a"}, TTL)
    time.sleep(EXPIRED)
    assert db.delete_range("user") == 1
    if indexed:
        assert db.scan(by_team)[0] == [] and db.check() == []


# --- 8. wrong arity names the index --------------------------------------------------------------


def test_8_wrong_arity_is_an_opendata_kv_error_naming_the_index(opener: Any) -> None:
    """Not zip()'s bare ValueError: the index, its fields and the values given, in the message
    and as attributes."""
    db = opener()
    for call, name, field, given in [
        (lambda: db.count(team_count), "team_count", "team", ()),
        (lambda: db.lookup(handle), "handle", "handle", ()),
        (lambda: db.count(team_count, 1.0, 2.0), "team_count", "team", (1.0, 2.0)),
    ]:
        with pytest.raises(OpendataKvError) as caught:
            call()
        error: Any = caught.value
        assert name in str(error) and field in str(error) and repr(given) in str(error)
        assert error.index == name and tuple(error.fields) == (field,)
        assert tuple(error.value) == given
        assert "zip()" not in str(error)


# --- 7 and the races: reads under concurrent writers ------------------------------------------

WRITERS, READ_FOR = 4, 1.0


def _write_round(n: int, round_: int) -> tuple[tuple[str], dict[str, Any]]:
    """Writer n moves its record between the contested handle h1 (team a) and a handle of
    its own (team b), so h1 keeps changing holders."""
    if round_ % 2:
        return (f"w{n}",), {"handle": f"own{n}", "team": "b"}
    return (f"w{n}",), {"handle": "h1", "team": "a"}


def _judge_reads(found: Any, team_a: list[Any]) -> list[str]:
    wrong = []
    if found is not None and found.value.get("handle") != "h1":
        wrong.append(f"lookup('h1') returned {found.key} holding {found.value}")
    wrong += [
        f"team 'a' scan yielded {r.key} holding {r.value}"
        for r in team_a
        if r.value.get("team") != "a"
    ]
    return wrong


def test_7_lookups_under_concurrent_writers_sync(tmp_path: Path) -> None:
    with SyncStore.open(str(tmp_path / "db"), SCHEMA, indexes=INDEXES) as db:
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            round_ = 0
            while not stop.is_set():
                key, value = _write_round(n, round_)
                try:
                    db.put(user, key, value)
                except UniqueIndexError:
                    pass
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)
                    return
                round_ += 1

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        wrong: list[str] = []
        rounds = 0
        deadline = time.monotonic() + READ_FOR
        try:
            while time.monotonic() < deadline:
                found = db.lookup(handle, "h1")
                wrong += _judge_reads(found, db.index_scan(by_team, "a").to_list())
                wrong += _judge_reads(None, db.index_scan(users_cov, "a").to_list())
                rounds += 1
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert not errors, errors
        assert wrong == [], f"{len(wrong)} wrong reads in {rounds} rounds: {wrong[:3]}"
        assert rounds > 10 and db.check_indexes() == []


def test_7_lookups_under_concurrent_writers_async(tmp_path: Path) -> None:
    async def main() -> None:
        async with Store.open(str(tmp_path / "db"), SCHEMA, indexes=INDEXES) as store:
            stop = asyncio.Event()

            async def writer(n: int) -> None:
                round_ = 0
                while not stop.is_set():
                    key, value = _write_round(n, round_)
                    with contextlib.suppress(UniqueIndexError):
                        await store.put(user, key, value)
                    round_ += 1
                    await asyncio.sleep(0)

            tasks = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
            wrong: list[str] = []
            rounds = 0
            deadline = time.monotonic() + READ_FOR
            try:
                while time.monotonic() < deadline:
                    found = await store.lookup(handle, "h1")
                    team_a = await store.index_scan(by_team, "a").to_list()
                    wrong += _judge_reads(found, team_a)
                    rounds += 1
                    await asyncio.sleep(0)
            finally:
                stop.set()
                await asyncio.gather(*tasks)
            assert wrong == [], f"{len(wrong)} wrong reads in {rounds} rounds: {wrong[:3]}"
            assert rounds > 10 and await store.check_indexes() == []

    asyncio.run(main())


def test_threads_racing_for_a_value_an_expired_record_held(tmp_path: Path) -> None:
    """The value of an expired holder is free: exactly one of the racers gets it."""
    with SyncStore.open(str(tmp_path / "db"), SCHEMA, indexes=INDEXES) as db:
        db.put(user, ("old",), {"handle": "alice"}, ttl=TTL)
        time.sleep(EXPIRED)
        won: list[int] = []
        barrier = threading.Barrier(6)

        def claim(n: int) -> None:
            barrier.wait()
            try:
                db.put(user, (f"r{n}",), {"handle": "alice"})
                won.append(n)
            except UniqueIndexError as exc:
                assert exc.index == "handle"

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1
        found = db.lookup(handle, "alice")
        assert found is not None and found.key.id == f"r{won[0]}"
        assert db.check_indexes() == []


def test_tasks_racing_for_a_value_an_expired_record_held(tmp_path: Path) -> None:
    async def main() -> None:
        async with Store.open(str(tmp_path / "db"), SCHEMA, indexes=INDEXES) as store:
            await store.put(user, ("old",), {"handle": "alice"}, ttl=TTL)
            await asyncio.sleep(EXPIRED)

            async def claim(n: int) -> bool:
                try:
                    await store.put(user, (f"r{n}",), {"handle": "alice"})
                except UniqueIndexError:
                    return False
                return True

            won = await asyncio.gather(*(claim(n) for n in range(12)))
            assert sum(won) == 1
            found = await store.lookup(handle, "alice")
            assert found is not None and found.key.id == f"r{won.index(True)}"
            assert await store.check_indexes() == []

    asyncio.run(main())
