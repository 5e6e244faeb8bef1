"""The values an indexed batch replaces (store/indexes/old_values.py): walking the batch's
sorted keys with one iterator gives exactly what a point read of each key gives, for runs of
neighbouring keys (the walk) and for keys scattered among stored rows (the point reads it
falls back to), with deletes and expired rows among them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, fields
from opendata_kv.native import calls
from opendata_kv.store import Store
from opendata_kv.store.indexes import old_values as walk
from opendata_kv.store.indexes.maintain import Expired

rec = RecordType("rec", 1, [("n", fields.u32)])

STORED = st.dictionaries(st.integers(0, 400), st.binary(min_size=1, max_size=6), max_size=120)
ASKED = st.lists(st.integers(0, 420), min_size=0, max_size=90)


async def both(stored: dict[int, bytes], deleted: list[int], asked: list[int]) -> Any:
    async with Store.open("memory://", [rec]) as store:
        async with store.batch() as batch:
            for n, data in stored.items():
                batch.put_raw(rec.encode(n), data)
        async with store.batch() as batch:
            for n in deleted:
                batch.delete_raw(rec.encode(n))
        keys = [rec.encode(n) for n in asked]
        walked = await walk.old_values(store._source, "test", keys)
        rows = await calls.get_rows(store._source, keys)
        return walked, [None if row is None else row[0] for row in rows]


@settings(max_examples=60, deadline=None)
@given(stored=STORED, deleted=st.lists(st.integers(0, 400), max_size=20), asked=ASKED)
def test_the_walk_reads_what_point_reads_read(
    stored: dict[int, bytes], deleted: list[int], asked: list[int]
) -> None:
    walked, direct = asyncio.run(both(stored, deleted, asked))
    assert walked == direct


@settings(max_examples=25, deadline=None)
@given(stored=STORED, start=st.integers(0, 380), length=st.integers(16, 60))
def test_a_run_of_neighbours_is_walked_not_point_read(
    stored: dict[int, bytes], start: int, length: int
) -> None:
    asked = list(range(start, start + length))
    seen: list[int] = []
    real = calls.get_rows

    def counting(source: Any, keys: list[bytes]) -> Any:
        seen.append(len(keys))
        return real(source, keys)

    calls.get_rows = counting  # type: ignore[assignment]
    try:
        walked, direct = asyncio.run(both(stored, [], asked))
    finally:
        calls.get_rows = real  # type: ignore[assignment]
    assert walked == direct
    # the direct read made one call; the walk, over at most a few stored rows per seek,
    # needed no point reads unless the run crossed more stored rows than it has keys
    stored_in_run = sum(1 for n in stored if start <= n < start + length)
    if stored_in_run <= length // 4:
        assert seen == [length]


def test_expired_rows_count_as_absent_on_both_paths() -> None:
    """An expired record's entries expired with it (RFC 0010): the walk and the point reads
    both mark it Expired (its entries are removed, it counts and holds nothing), so no
    write treats it as live."""

    async def main() -> Any:
        async with Store.open("memory://", [rec]) as store:
            for n in range(40):
                await store.put(rec, (n,), {"n": n}, ttl=0.01 if n % 2 else None)
            time.sleep(0.05)
            keys = [rec.encode(n) for n in range(40)]
            walked = await walk.old_values(store._source, "test", keys)
            direct = await walk.point_reads(store._source, "test", keys)
            return walked, direct

    walked, direct = asyncio.run(main())
    assert walked == direct and list(map(type, walked)) == list(map(type, direct))
    assert [isinstance(value, Expired) for value in walked] == [n % 2 == 1 for n in range(40)]
    assert None not in walked


def test_a_dense_run_is_read_in_growing_reads_without_seeks() -> None:
    """Keys that are consecutive stored rows (a batch's aggregate groups) are read on from
    where the iterator stands, each read twice the last: a few reads for hundreds of keys,
    the same values as point reads, and current_values gives the live ones as plain bytes."""
    asked = list(range(3, 400))
    sizes: list[int] = []
    seeks: list[bytes] = []
    real_next, real_seek = calls.next_columns, calls.seek

    def counting_next(iterator: Any, limit: int) -> Any:
        sizes.append(limit)
        return real_next(iterator, limit)

    def counting_seek(iterator: Any, key: bytes) -> Any:
        seeks.append(key)
        return real_seek(iterator, key)

    calls.next_columns = counting_next  # type: ignore[assignment]
    calls.seek = counting_seek  # type: ignore[assignment]
    try:
        walked, direct = asyncio.run(both({n: b"v%d" % n for n in range(420)}, [], asked))
    finally:
        calls.next_columns = real_next  # type: ignore[assignment]
        calls.seek = real_seek  # type: ignore[assignment]
    assert walked == direct and None not in walked
    assert seeks == [] and sizes == [8, 16, 32, 64, 128, 256]

    async def current() -> Any:
        async with Store.open("memory://", [rec]) as store:
            for n in range(40):
                await store.put(rec, (n,), {"n": n}, ttl=0.01 if n % 2 else 60)
            time.sleep(0.05)
            keys = [rec.encode(n) for n in range(40)]
            return await walk.current_values(store._source, "test", keys)

    values = asyncio.run(current())
    assert [value is None for value in values] == [n % 2 == 1 for n in range(40)]
    assert {type(value) for value in values if value is not None} == {bytes}


def test_a_dense_run_then_a_jump_past_many_stored_rows_finds_the_next_key() -> None:
    """Issue 32: after a dense run the walk reads on without a seek; when every row of that
    read lies before the next key (the next run starts far on), it must read again (seeking)
    instead of taking the key as absent (it did: the first key of each later run was missed,
    so its replaced value kept its entries and was counted twice)."""
    stored = {n: bytes([n % 200 + 1]) for n in range(1200)}
    # runs long enough to pay a seek each (KEYS_PER_SEEK), whose last read-on ends far
    # before the next run
    asked = [n for start in range(0, 1200, 400) for n in range(start, start + 100)]
    walked, direct = asyncio.run(both(stored, [], asked))
    assert walked == direct
    assert None not in walked


@settings(max_examples=15, deadline=None)
@given(
    stored=STORED,
    batches=st.lists(st.sampled_from(["scattered", "run"]), min_size=1, max_size=20),
)
def test_after_a_walk_gives_up_the_next_reads_are_point_reads_with_the_same_values(
    stored: dict[int, bytes], batches: list[str]
) -> None:
    """A WalkHistory: a walk that gave up (scattered keys) is not tried again for
    WALK_BACKOFF reads, a walk that read every key keeps walking, and every read answers
    what point reads answer."""
    scattered = list(range(0, 420, 7))  # one key in 7: each read of rows a seek, give up
    run = list(range(100, 140))
    every = {n: stored.get(n, bytes([n % 200 + 1])) for n in range(420)}  # rows between keys
    opened: list[int] = []
    real = calls.method

    def counting(source: Any, name: str, *args: Any) -> Any:
        if name == "scan_with_options":
            opened.append(len(opened))
        return real(source, name, *args)

    async def go() -> list[bool]:
        history = walk.WalkHistory()
        walked: list[bool] = []
        async with Store.open("memory://", [rec]) as store:
            async with store.batch() as batch:
                for n, data in every.items():
                    batch.put_raw(rec.encode(n), data)
            for kind in batches:
                keys = [rec.encode(n) for n in (scattered if kind == "scattered" else run)]
                before = len(opened)
                got = await walk.old_values(store._source, "test", keys, history=history)
                rows = await calls.get_rows(store._source, keys)
                assert got == [None if row is None else row[0] for row in rows]
                walked.append(len(opened) > before)
        return walked

    calls.method = counting  # type: ignore[assignment]
    try:
        walked = asyncio.run(go())
    finally:
        calls.method = real  # type: ignore[assignment]
    skip = 0  # the model: reads left to skip the walk
    for kind, did_walk in zip(batches, walked, strict=True):
        assert did_walk == (skip == 0), (batches, walked)
        if did_walk:
            skip = walk.WALK_BACKOFF if kind == "scattered" else 0
        else:
            skip -= 1
