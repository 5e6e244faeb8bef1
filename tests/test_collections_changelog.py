"""ChangeLog: atomic transactions with offsets 1..n, the medallion index kept consistent,
time-range scans, -1 sentinels, and scan order equal to Muid order."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import run, with_store

from opendata_kv import Store
from opendata_kv.collections import CHANGELOG, ChangeLog, default_schema
from opendata_kv.errors import (
    InvalidInputError,
    MuidError,
    StoreClosedError,
    ValueEncodeError,
)
from opendata_kv.ids.muid import MAX_OFFSET, MIN_OFFSET, Muid, MuidGenerator

T = TypeVar("T")
UTC = datetime.timezone.utc
T0 = 1_700_000_000_000_000  # µs
MED = 0x1ABCDEF0123
MAX44 = (1 << 44) - 1
MAX52 = (1 << 52) - 1


def stepping_clock(start_us: int = T0, step_us: int = 1000) -> Callable[[], int]:
    """A clock at start_us that advances step_us per reading."""
    state = [start_us - step_us]

    def time_ns() -> int:
        state[0] += step_us
        return state[0] * 1000

    return time_ns


def with_log(db_url: str, body: Callable[[ChangeLog], Awaitable[None]]) -> None:
    generator = MuidGenerator(MED, time_ns=stepping_clock())
    with_store(db_url, default_schema(), lambda store: body(ChangeLog(store, generator=generator)))


async def stored(log: ChangeLog) -> tuple[list[Muid], list[tuple[int, Muid]]]:
    """Every change muid, and every (medallion field, muid) index entry, as stored."""
    changes = [r.key.muid async for r in log.store.scan(log.change)]  # type: ignore[union-attr]
    index = [
        (r.key.medallion, r.key.muid)  # type: ignore[union-attr]
        async for r in log.store.scan(log.index)
    ]
    return changes, index


def index_matches(changes: list[Muid], index: list[tuple[int, Muid]]) -> bool:
    return sorted(index) == sorted((m.medallion & MAX44, m) for m in changes)


# --- transactions --------------------------------------------------------------------------------


def test_transaction_offsets_share_timestamp_and_medallion(db_url: str) -> None:
    async def body(log: ChangeLog) -> None:
        async with log.transaction() as tx:
            muids = [tx.add({"i": i}) for i in range(5)]
            assert tx.muid == Muid(T0, MED, 0)
            assert len(tx) == 5
            assert await log.get(muids[0]) is None  # nothing visible before the block ends
        assert [m.offset for m in muids] == [1, 2, 3, 4, 5]
        assert {m.timestamp for m in muids} == {T0}
        assert {m.medallion for m in muids} == {MED}
        assert tx.changes == muids
        for i, muid in enumerate(muids):
            assert await log.get(muid) == {"i": i}
            assert await log.get(str(muid)) == {"i": i}
        with pytest.raises(StoreClosedError):
            tx.add("late")
        async with log.transaction() as tx2:
            later = tx2.add("next")
        assert later.timestamp > T0 and later.offset == 1
        assert later > muids[-1]

    with_log(db_url, body)


def test_a_failing_block_writes_nothing(db_url: str) -> None:
    async def body(log: ChangeLog) -> None:
        with pytest.raises(RuntimeError):
            async with log.transaction() as tx:
                first = tx.add("a")
                tx.add("b")
                raise RuntimeError("boom")
        assert await log.get(first) is None
        with pytest.raises(ValueEncodeError):
            async with log.transaction() as tx:
                kept_out = tx.add("fine")
                tx.add(object())  # not msgpack: raises at the add, the block fails
        assert await log.get(kept_out) is None
        assert await stored(log) == ([], [])
        async with log.transaction():
            pass  # an empty transaction writes nothing and is fine
        assert await log.count() == 0

    with_log(db_url, body)


def test_index_always_matches_the_log(db_url: str) -> None:
    async def body(log: ChangeLog) -> None:
        for n in (3, 1, 4):
            async with log.transaction() as tx:
                for i in range(n):
                    tx.add(i)
        other = ChangeLog(log.store, generator=MuidGenerator(0x10000000001))
        async with other.transaction() as tx:
            tx.add("other writer")
        await log.write([(Muid(T0 + 5, 77, 1), "replicated"), (Muid(-1, -1, 4), "root")])
        await log.put(Muid(T0 + 9, -1, 2), "medallion sentinel")
        changes, index = await stored(log)
        assert len(changes) == 8 + 1 + 3
        assert index_matches(changes, index)
        mine = await log.by_medallion(MED).to_list()
        assert [c.muid for c in mine] == sorted(m for m in changes if m.medallion == MED)
        assert [c.value for c in mine[:3]] == [0, 1, 2]
        assert [c.value async for c in log.by_medallion(77)] == ["replicated"]
        assert [c.value async for c in log.by_medallion(-1)] == ["medallion sentinel", "root"]
        assert await log.medallions() == [77, 0x10000000001, MED, -1]
        assert await log.count() == 12
        assert await log.count(MED) == 8
        assert await log.count(-1) == 2

    with_log(db_url, body)


def test_write_is_all_or_nothing() -> None:
    async def body(log: ChangeLog) -> None:
        with pytest.raises(MuidError):
            await log.write([(Muid(T0, 1, 1), "ok"), ("not a muid", "bad")])
        with pytest.raises(ValueEncodeError):
            await log.write([(Muid(T0, 1, 1), "ok"), (Muid(T0, 1, 2), object())])
        assert await stored(log) == ([], [])
        with pytest.raises(InvalidInputError):
            await log.get(12345)  # type: ignore[arg-type]

    with_log("memory://", body)


# --- time ranges ---------------------------------------------------------------------------------


async def _three_transactions(log: ChangeLog) -> list[list[Muid]]:
    """Transactions at T0, T0+1000 and T0+2000 µs (2, 1 and 3 changes)."""
    made = []
    for n in (2, 1, 3):
        async with log.transaction() as tx:
            made.append([tx.add(f"{tx.timestamp}/{i}") for i in range(n)])
    return made


def test_time_range_scans(db_url: str) -> None:
    async def body(log: ChangeLog) -> None:
        made = await _three_transactions(log)
        await log.put(Muid(-1, -1, 4), "root")
        await log.put(Muid(-1, MED, 1), "sentinel ts")
        flat = [m for tx in made for m in tx]
        everything = [c.muid async for c in log.scan()]
        assert everything == [*flat, Muid(-1, MED, 1), Muid(-1, -1, 4)]

        async def muids(**kw: Any) -> list[Muid]:
            return [c.muid for c in await log.scan(**kw).to_list()]

        assert await muids(since=T0 + 1000) == made[1] + made[2]  # sentinels left out
        assert await muids(until=T0 + 1000) == made[0]  # until is exclusive
        assert await muids(since=T0 + 1, until=T0 + 2000) == made[1]
        assert await muids(since=T0 + 2001) == []
        assert await muids(since=0, until=MAX52 + 10) == flat
        as_dt = datetime.datetime(2023, 11, 14, 22, 13, 20, 1000, tzinfo=UTC)
        assert as_dt.timestamp() * 1_000_000 == T0 + 1000
        assert await muids(since=as_dt) == made[1] + made[2]
        local = as_dt.astimezone(datetime.timezone(datetime.timedelta(hours=5)))
        assert await muids(since=local, until=T0 + 2000) == made[1]
        assert await muids(since=T0, reverse=True) == flat[::-1]
        assert await muids(since=T0, limit=2) == made[0]
        assert await muids(since=T0, after=made[0][1]) == made[1] + made[2]
        assert await muids(since=T0, reverse=True, after=made[2][0]) == (made[0] + made[1])[::-1]
        assert await muids(after=flat[-1]) == [Muid(-1, MED, 1), Muid(-1, -1, 4)]
        with pytest.raises(InvalidInputError, match="naive"):
            await muids(since=datetime.datetime(2024, 1, 1))
        with pytest.raises(InvalidInputError):
            await muids(since="yesterday")
        by_med = [c.muid async for c in log.by_medallion(MED, since=T0 + 1000, until=T0 + 2000)]
        assert by_med == made[1]
        newest = await log.by_medallion(MED, reverse=True, limit=2).to_list()
        assert [c.muid for c in newest] == [Muid(-1, MED, 1), made[2][2]]

    with_log(db_url, body)


# --- sentinels and order -------------------------------------------------------------------------


def test_sentinel_containers_are_storable_and_listable(db_url: str) -> None:
    sentinels = [
        Muid(-1, -1, 0),
        Muid(-1, -1, 4),
        Muid(-1, -1, -1),
        Muid(-1, 0, 1),
        Muid(-1, MED, 7),
    ]
    medallion_sentinels = [Muid(T0, -1, 1), Muid(0, -1, 0)]

    async def body(log: ChangeLog) -> None:
        for i, muid in enumerate(sentinels + medallion_sentinels):
            await log.put(muid, {"i": i})
        for i, muid in enumerate(sentinels + medallion_sentinels):
            assert await log.get(muid) == {"i": i}
        listed = [c.muid async for c in log.sentinels()]
        assert listed == sorted(sentinels)
        assert all(m.timestamp == -1 for m in listed)
        # documented order: -1 sorts last (all ones), negative offsets after positive ones
        assert listed == [
            Muid(-1, 0, 1),
            Muid(-1, MED, 7),
            Muid(-1, -1, 0),
            Muid(-1, -1, 4),
            Muid(-1, -1, -1),
        ]
        assert [c.muid async for c in log.sentinels(reverse=True, limit=1)] == [Muid(-1, -1, -1)]
        by_minus_one = [c.muid async for c in log.by_medallion(-1)]
        assert by_minus_one == [
            Muid(0, -1, 0),
            Muid(T0, -1, 1),
            Muid(-1, -1, 0),
            Muid(-1, -1, 4),
            Muid(-1, -1, -1),
        ]
        assert (await log.medallions())[-1] == -1
        changes, index = await stored(log)
        assert index_matches(changes, index)

    with_log(db_url, body)


muid_values = st.builds(
    Muid,
    st.one_of(st.just(-1), st.integers(0, MAX52 - 1), st.sampled_from([0, 1, MAX52 - 1])),
    st.one_of(st.just(-1), st.integers(0, MAX44 - 1), st.sampled_from([0, 1, MAX44 - 1])),
    st.one_of(st.integers(MIN_OFFSET, MAX_OFFSET), st.sampled_from([MIN_OFFSET, -1, 0, 1])),
)


def natural_key(m: Muid) -> tuple[int, int, int]:
    """The order muid bytes give: each field as its unsigned residue (-1 -> all ones)."""
    return (m.timestamp & MAX52, m.medallion & MAX44, m.offset & 0xFFFFFFFF)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(muid_values, min_size=1, max_size=40, unique=True))
def test_scan_order_is_muid_order(muids: list[Muid]) -> None:
    async def main() -> None:
        async with Store.open("memory://", default_schema()) as store:
            log = ChangeLog(store)
            await log.write((m, str(m)) for m in muids)
            scanned = [c.muid async for c in log.scan()]
            assert scanned == sorted(muids)
            assert scanned == sorted(muids, key=bytes)
            assert scanned == sorted(muids, key=natural_key)
            assert [c.value async for c in log.scan()] == [str(m) for m in scanned]
            assert [c.muid async for c in log.scan(reverse=True)] == scanned[::-1]
            changes, index = await stored(log)
            assert index_matches(changes, index)
            for medallion in {m.medallion for m in muids}:
                group = [c.muid async for c in log.by_medallion(medallion)]
                assert group == sorted(m for m in muids if m.medallion == medallion)

    run(main())


def test_layout_record_types() -> None:
    assert [t.record_type for t in CHANGELOG.record_types] == [0xB, 0xC]
    assert CHANGELOG.change.field_names == ("muid",)
    assert CHANGELOG.by_medallion.field_names == ("medallion", "muid")


def test_log_entry_is_the_one_name_and_change_is_its_deprecated_alias() -> None:
    """The log's entry class is LogEntry (the change feed's Change is another thing); the old
    name still resolves from both modules, with a DeprecationWarning."""
    import opendata_kv.collections as collections
    from opendata_kv.collections import LogEntry, changelog
    from opendata_kv.store import Change as FeedChange

    assert "Change" not in collections.__all__
    for module in (collections, changelog):
        with pytest.warns(DeprecationWarning, match="LogEntry"):
            assert module.Change is LogEntry
    assert FeedChange is not LogEntry
    with pytest.raises(AttributeError):
        _ = collections.NoSuchName
