"""Splits from sampled index blocks (RFC 0014, store/ops/sst_blocks.py): one splits call takes
at most INDEX_ENTRIES block entries over all its SSTs, shared by their sizes, so a store of
many blocks (10M records: ~250,000) is cut from a bounded picture. Over random stores of
overlapping SSTs and clustered keys, whatever the budget, the splits cover the range exactly
once with estimates within 2x; with 8 or more entries a split, the rows too are within 2x."""

from __future__ import annotations

import itertools
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.store.ops import sst_blocks, sst_index
from opendata_kv.store.ops.manifest_pieces import WalRead, wal_share
from opendata_kv.store.split_points import Piece

post = RecordType("post", 2, [("repo", F.string), ("n", F.u32)])
SCHEMA = Schema(post)


def fake_view(ulid: str, size: int) -> Any:
    """What entry_limits reads of an SST view: its SST id and estimated bytes."""
    return SimpleNamespace(
        sst=SimpleNamespace(id=SimpleNamespace(value=ulid)), estimated_size_bytes=size
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1 << 30), min_size=1, max_size=300), st.integers(1, 1 << 16))
def test_entry_limits_share_the_budget_by_size(sizes: list[int], budget: int) -> None:
    views = [fake_view(f"sst{i}", size) for i, size in enumerate(sizes)]
    limits = sst_blocks.entry_limits(views, list(range(len(views))), budget)
    assert set(limits) == {f"sst{i}" for i in range(len(sizes))}
    assert all(2 <= limit <= sst_index.MAX_ENTRIES for limit in limits.values())
    assert sum(limits.values()) <= budget + 2 * len(sizes)  # the budget, plus the floors
    for i, a in enumerate(sizes):  # a larger SST never gets fewer entries
        for j, b in enumerate(sizes):
            if a > b:
                assert limits[f"sst{i}"] >= limits[f"sst{j}"]


def test_an_sst_shown_twice_is_counted_once_with_both_views_bytes() -> None:
    views = [fake_view("a", 100), fake_view("a", 100), fake_view("b", 200)]
    assert sst_blocks.entry_limits(views, [0, 1, 2], 400) == {"a": 200, "b": 200}


def clustered(url: str, seed: int, clusters: int, writers: int, rows: int) -> None:
    """`rows` posts of repos in `clusters` clusters far apart on the key line, written by
    `writers` writers in turn (each close flushes an L0 SST), a shuffled share each: SSTs
    that overlap, each spanning the whole range."""
    rng = random.Random(seed)
    heads = rng.sample("bcdjkqxy", clusters)
    keys = [
        (f"did:plc:{rng.choice(heads)}{i:05d}", n) for i in range(rows // 20) for n in range(20)
    ]
    rng.shuffle(keys)
    share = -(-len(keys) // writers)
    for w in range(writers):
        with SyncStore.open(url, SCHEMA) as db, db.batch() as batch:
            for key in keys[w * share : (w + 1) * share]:
                batch.put(post, key, {"text": "x" * rng.randrange(60, 100)})


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.integers(0, 2**32),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(3000, 8000),
    st.lists(st.tuples(st.integers(2, 4096), st.integers(1, 12)), min_size=1, max_size=6),
)
def test_sampled_splits_of_random_stores_cover_once_and_balance(
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    clusters: int,
    writers: int,
    rows: int,
    cases: list[tuple[int, int]],
) -> None:
    """For any INDEX_ENTRIES budget and n: contiguous splits from the record's start to its
    end, each row in exactly one, estimates within 2x; rows within 2x where the budget gives
    each split 8 entries of each SST."""
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "db")
        clustered(url, seed, clusters, writers, rows)
        with SyncStore.open_reader(url, SCHEMA) as reader:
            total = reader.count(post)
            lo, hi = post.range()
            for budget, n in cases:
                monkeypatch.setattr(sst_blocks, "INDEX_ENTRIES", budget)
                ranges = reader.splits(post, n=n)
                assert ranges[0].start == lo and ranges[-1].end == hi
                assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
                assert all(r.end is None or r.start < r.end for r in ranges)
                assert 1 <= len(ranges) <= n
                held = [reader.count(post, range=r) for r in ranges]
                assert sum(held) == total, (budget, n, held)  # every row exactly once
                estimates = [r.estimated_bytes for r in ranges]
                assert max(estimates) <= 2 * min(estimates), (budget, n, estimates)
                if budget >= 8 * n * writers:
                    assert len(ranges) >= n // 2, (budget, n, held)
                    assert max(held) <= 2 * min(held), (budget, n, held)


def test_a_splits_call_takes_at_most_the_budget_of_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many blocks the SSTs hold, the entries decoded stay within INDEX_ENTRIES (plus
    2 an SST), and each SST's share follows its size."""
    url = str(tmp_path / "db")
    clustered(url, seed=3, clusters=2, writers=4, rows=12_000)
    taken: dict[str, tuple[int, int]] = {}
    real = sst_blocks.block_entries

    def counted(body: bytes, sst: str, limit: int = sst_index.MAX_ENTRIES) -> Any:
        found = real(body, sst, limit)
        taken[sst] = (limit, len(real(body, sst, 1 << 30)))
        return found

    monkeypatch.setattr(sst_blocks, "block_entries", counted)
    monkeypatch.setattr(sst_blocks, "INDEX_ENTRIES", 40)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        reader.splits(post, n=2)
    assert len(taken) >= 3, taken
    assert all(blocks > 40 for _, blocks in taken.values()), taken  # more than the budget
    assert sum(limit for limit, _ in taken.values()) <= 40 + 2 * len(taken), taken


def test_unread_wal_bytes_grow_the_pieces_not_their_count() -> None:
    """WAL bytes counted but not read are spread over the SSTs' pieces in place: the cut's
    cost is by piece, and a copy of each would double it."""
    pieces = [Piece(b"a", b"c", 100), Piece(b"d", b"f", 300)]
    grown = wal_share(pieces, WalRead(total=400))
    assert grown == [Piece(b"a", b"c", 200), Piece(b"d", b"f", 600)]
    read = WalRead(rows=[(b"b", 10), (b"e", 30)], total=80)
    assert wal_share(pieces, read) == [*pieces, Piece(b"b", b"b", 20), Piece(b"e", b"e", 60)]
    assert wal_share(pieces, WalRead()) == pieces


def test_without_pyarrow_lz4_index_bytes_stay_within_their_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Python decodes LZ4 (~3.6 MB/s), the LZ4 index bytes one call reads stay within
    PURE_LZ4_READ_BYTES, largest SSTs first; the SSTs not read keep the manifest's picture,
    and the splits still cover the record once."""
    url = str(tmp_path / "db")
    clustered(url, seed=5, clusters=2, writers=4, rows=12_000)
    reads: list[int] = []
    real = sst_blocks.read_region

    def counted(location: Any, store: Any, db_path: str, ulid: str, at: int, size: int) -> Any:
        reads.append(size)
        return real(location, store, db_path, ulid, at, size)

    monkeypatch.setattr(sst_blocks, "read_region", counted)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        total = reader.count(post)
        reader.splits(post, n=4)
        everything = list(reads)
        assert len(everything) >= 3 and all(size > 0 for size in everything), everything
        monkeypatch.setattr(sst_blocks, "arrow_lz4", lambda: False)
        budget = sorted(everything)[-2] + 1  # room for one index only, not the two largest
        monkeypatch.setattr(sst_blocks, "PURE_LZ4_READ_BYTES", budget)
        reads.clear()
        ranges = reader.splits(post, n=4)
        assert 1 <= len(reads) < len(everything) and sum(reads) <= budget, (reads, budget)
        assert sum(reader.count(post, range=r) for r in ranges) == total
