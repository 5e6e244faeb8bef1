"""Splits (RFC 0014): a key range cut into KeyRanges from the manifest, that cover it exactly
once and read, one after another, what one scan reads; KeyRange as `range=` of every scan form.
"""

from __future__ import annotations

import itertools
import pickle
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendata_kv import KeyRange, RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError
from opendata_kv.keys import prefix_range
from opendata_kv.store import ScanRange, Store, SyncStore, SyncStoreReader
from opendata_kv.store.split_points import Piece, clip, cut, how_many

post = RecordType("post", 2, [("repo", F.string), ("n", F.u32)])
like = RecordType("like", 3, [("n", F.u32)])
SCHEMA = Schema(post, like)
#: small L0 SSTs: a few KB of writes make several
SMALL_SSTS = {"l0_sst_size_bytes": 4096, "flush_interval": "60s"}


# --- the cut, on its own -------------------------------------------------------------------------


def check_cover(ranges: list[KeyRange], lo: bytes, hi: bytes | None) -> None:
    """Contiguous, sorted, non-empty, from lo to hi."""
    assert ranges, "no ranges"
    assert ranges[0].start == lo
    assert ranges[-1].end == hi
    for left, right in itertools.pairwise(ranges):
        assert left.end == right.start
    for r in ranges:
        assert r.end is None or r.start < r.end


def check_balance(ranges: list[KeyRange]) -> None:
    sizes = [r.estimated_bytes for r in ranges]
    if len(sizes) > 1:
        assert max(sizes) <= 2 * min(sizes), sizes


keys = st.binary(min_size=0, max_size=6)


@st.composite
def pieces_and_range(draw: st.DrawFn) -> tuple[list[Piece], bytes, bytes | None]:
    pieces = []
    for _ in range(draw(st.integers(0, 12))):
        a, b = sorted((draw(keys), draw(keys)))
        pieces.append(Piece(a, b, draw(st.integers(0, 10_000))))
    lo, hi = sorted((draw(keys), draw(keys)))
    if hi == lo or draw(st.booleans()):
        return pieces, lo, None
    return pieces, lo, hi


@settings(max_examples=400, deadline=None)
@given(pieces_and_range(), st.integers(1, 20))
def test_cut_covers_the_range_once_and_balances(
    case: tuple[list[Piece], bytes, bytes | None], n: int
) -> None:
    pieces, lo, hi = case
    inside = clip(pieces, lo, hi)
    for piece in inside:
        assert lo <= piece.first <= piece.last
        assert hi is None or piece.last < hi
    ranges = cut(inside, lo, hi, n)
    check_cover(ranges, lo, hi)
    assert len(ranges) <= n
    assert sum(r.estimated_bytes for r in ranges) == sum(p.size for p in inside)
    check_balance(ranges)


def test_cut_of_disjoint_pieces_lands_on_their_first_keys() -> None:
    """SSTs of a sorted run: the cuts are SST first keys, so each estimate is exact."""
    pieces = [Piece(bytes([i, 0]), bytes([i, 200]), 1000) for i in range(1, 17)]
    ranges = cut(pieces, b"", None, 4)
    assert [r.start for r in ranges] == [b"", bytes([5, 0]), bytes([9, 0]), bytes([13, 0])]
    assert [r.estimated_bytes for r in ranges] == [4000] * 4


def test_cut_inside_one_piece_interpolates() -> None:
    ranges = cut([Piece(b"a\x00", b"a\xff", 4000)], b"a", b"b", 4)
    check_cover(ranges, b"a", b"b")
    assert len(ranges) == 4
    assert [r.estimated_bytes for r in ranges] == [1000] * 4


def test_a_dense_piece_inside_a_wide_one_does_not_erase_it() -> None:
    """L0 SSTs spanning every record type, and one record's SST a millionth of their width:
    the wide ones' bytes still count after the dense one ends (a running float sum lost
    them, and the range came back uncut)."""
    wide = [Piece(b"\x01\x10did:0\x00r", b"\x02\x10did:4\x00s", 7000) for _ in range(6)]
    dense = Piece(b"\x01 " + bytes(8), b"\x01 " + bytes(7) + b"'", 685)
    ranges = cut([dense, *wide], b"", None, 2)
    assert len(ranges) == 2
    check_balance(ranges)


def test_no_data_is_one_range() -> None:
    assert cut([], b"x", b"y", 8) == [KeyRange(b"x", b"y", 0)]


def test_a_point_too_big_to_cut_makes_fewer_ranges() -> None:
    """One key holds most bytes: the cut cannot divide it, and the rest is merged to stay
    within 2x."""
    pieces = [Piece(b"m", b"m", 10_000), Piece(b"a", b"z", 100)]
    ranges = cut(pieces, b"", None, 8)
    check_cover(ranges, b"", None)
    check_balance(ranges)
    assert len(ranges) < 8


def test_how_many() -> None:
    assert how_many(0, None, None) == 1
    assert how_many(200 << 20, None, None) == 4  # one per 64 MiB
    assert how_many(1000, None, 100) == 10
    assert how_many(1000, 3, 100) == 3
    assert how_many(1000, 30, None) == 30
    for bad in ({"n": 0}, {"n": True}, {"target_bytes": -1}, {"n": 1.5}):
        with pytest.raises(InvalidArgumentError) as info:
            how_many(10, bad.get("n"), bad.get("target_bytes"))  # type: ignore[arg-type]
        assert info.value.field in bad


def test_key_range_is_a_checked_picklable_value() -> None:
    split = KeyRange(b"a", b"b", 10)
    assert pickle.loads(pickle.dumps(split)) == split
    assert split.contains(b"a") and split.contains(b"az") and not split.contains(b"b")
    assert KeyRange(b"a", None, 0).contains(b"\xff" * 9)
    with pytest.raises(ArgumentTypeError):
        KeyRange(b"b", b"a", 0)
    with pytest.raises(ArgumentTypeError):
        KeyRange("a", None, 0)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError):
        KeyRange(b"a", None, -1)


# --- splits of real stores -----------------------------------------------------------------------


def write_posts(
    db: SyncStore, batches: list[list[tuple[str, int, int]]], flush: list[bool]
) -> None:
    """Each batch in one write; a flush after those `flush` marks (the last ones may stay in
    the WAL only)."""
    rng = random.Random(len(batches))
    for batch, flushed in zip(batches, flush, strict=False):
        with db.batch() as b:
            for repo, n, size in batch:
                b.put(post, (repo, n), rng.randbytes(size))
        if flushed:
            db.flush()


def rows(view: Any, record: Any, *leading: Any) -> list[tuple[bytes, bytes]]:
    return [(r.raw_key, r.value) for r in view.scan(record, *leading)]


def check_splits_read_as_one_scan(
    view: SyncStore | SyncStoreReader, record: Any, *leading: Any, n: int
) -> list[KeyRange]:
    """The splits of a record range cover it, and their scans, in order, are the one scan."""
    ranges = view.splits(record, *leading, n=n)
    lo, hi = record.range(*leading)
    check_cover(ranges, lo, hi)
    assert len(ranges) <= n
    check_balance(ranges)
    whole = rows(view, record, *leading)
    pieces = []
    for split in ranges:
        pieces += [(r.raw_key, r.value) for r in view.scan(record, *leading, range=split)]
    assert pieces == whole
    assert sum(view.count(record, *leading, range=s) for s in ranges) == len(whole)
    return ranges


batches_st = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "did:plc:x"]), st.integers(0, 500), st.integers(1, 300)
        ),
        min_size=1,
        max_size=60,
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batches_st, st.data())
def test_splits_of_random_stores(
    batches: list[list[tuple[str, int, int]]], data: st.DataObject
) -> None:
    """Random stores of several SSTs (and WAL-only writes): splits of a record, of a repo in
    it, of a random raw range, of a range inside one SST and of an empty record each cover
    their range once, and the split scans read what one scan reads."""
    flush = data.draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    n = data.draw(st.integers(1, 9))
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "db")
        with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
            write_posts(db, batches, flush)
            check_splits_read_as_one_scan(db, post, n=n)
            check_splits_read_as_one_scan(db, post, "b", n=n)
            empty = db.splits(like, n=n)
            assert empty == [KeyRange(*like.range(), 0)]  # type: ignore[arg-type]
            everything = [(r.raw_key, r.value) for r in db.scan_all()]
            raw_lo, raw_hi = sorted(
                data.draw(st.lists(st.binary(max_size=4), min_size=2, max_size=2))
            )
            if raw_hi > raw_lo:
                target = KeyRange(raw_lo, raw_hi)
                ranges = db.splits(target, n=n)
                check_cover(ranges, raw_lo, raw_hi)
                got = [(r.raw_key, r.value) for s in ranges for r in db.scan_all(range=s)]
                assert got == [kv for kv in everything if raw_lo <= kv[0] < raw_hi]
            # a range inside one SST: strictly between the first and last key of the
            # manifest's largest SST (the splits flushed the memtable: there is one)
            ssts = manifest_ssts(url)
            assert ssts  # every write is in an SST once the writer's splits flushed it
            sst = max(ssts, key=lambda p: p.size)
            keys_in_one = [k for k, _ in everything if sst.first <= k <= sst.last]
            if len(keys_in_one) >= 3:
                target = KeyRange(keys_in_one[1], keys_in_one[-1])
                ranges = db.splits(target, n=n)
                check_cover(ranges, target.start, target.end)
                got = [(r.raw_key, r.value) for s in ranges for r in db.scan_all(range=s)]
                assert got == [kv for kv in everything if target.contains(kv[0])]
        with SyncStore.open_reader(url, SCHEMA) as reader:
            check_splits_read_as_one_scan(reader, post, n=n)


def manifest_ssts(url: str) -> list[Piece]:
    """The SSTs the latest manifest names, as pieces (no WAL)."""
    from opendata_kv.store.ops.manifest_pieces import data_pieces

    async def read() -> list[Piece]:
        async with Store.open_reader(url, SCHEMA) as reader:
            return await data_pieces(
                reader.location, reader._object_store, reader.where, None, with_wal=False
            )

    import asyncio

    return asyncio.run(read())


def sequential_store(url: str, ssts: int = 24, per_sst: int = 40) -> None:
    """Posts in key order, one flush per ~SST of incompressible values: disjoint SSTs."""
    rng = random.Random(7)
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
        for s in range(ssts):
            with db.batch() as b:
                for i in range(per_sst):
                    b.put(post, ("repo", s * per_sst + i), rng.randbytes(100))
            db.flush()


def test_balance_by_bytes_read_with_two_ssts_per_split(tmp_path: Path) -> None:
    """With at least two SSTs of data per split, the bytes each split's scan reads are
    within 2x of each other (not only the estimates)."""
    url = str(tmp_path / "db")
    sequential_store(url)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        for n in (2, 3, 5, 8):
            ranges = check_splits_read_as_one_scan(reader, post, n=n)
            read = [
                sum(len(r.raw_key) + len(r.value) for r in reader.scan(post, range=s))
                for s in ranges
            ]
            assert max(read) <= 2 * min(read), (n, read)
            assert len(ranges) >= min(n, 2)


def test_target_forms_and_keyrange_in_every_scan_form(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    sequential_store(url, ssts=6)
    with SyncStore.open(url, SCHEMA) as db:
        db.put(like, (1,), b"")
        prefix = post.prefix("repo")
        by_prefix = db.splits(prefix, n=3)
        check_cover(by_prefix, *prefix_range(prefix))  # type: ignore[arg-type]
        by_range = db.splits(ScanRange(prefix=prefix), n=3)
        assert by_range == by_prefix
        assert db.splits("post", "repo", n=3) == db.splits(post, "repo", n=3)
        bounded = db.splits(post, start=("repo", 50), end=("repo", 150), n=4)
        check_cover(bounded, post.prefix("repo", 50), post.prefix("repo", 150))
        # a KeyRange is itself a target, and a narrowing of a typed scan
        split = bounded[1]
        (again,) = db.splits(split, n=1)
        assert (again.start, again.end) == (split.start, split.end)
        assert abs(again.estimated_bytes - split.estimated_bytes) <= 2  # rounding
        typed = [r.key.n for r in db.scan(post, range=split)]
        assert typed == sorted(typed) and all(split.contains(post.encode("repo", n)) for n in typed)
        assert [r.raw_key for r in db.scan_all(range=split)] == [
            r.raw_key for r in db.scan(post, range=split)
        ]
        assert list(db.scan(post, range=split).keys()) == [
            r.key for r in db.scan(post, range=split)
        ]
        assert db.count(post, range=split) == len(typed)
        assert db.count(range=split) == len(typed)
        assert db.count(like, range=split) == 0  # no like key lies in it
        assert db.count(post, "repo", range=split) == len(typed)
        table = db.scan(post, range=split).to_arrow(raw_key=True).read_all()
        assert table.column("_key").to_pylist() == [post.encode("repo", n) for n in typed]
        with pytest.raises(ArgumentTypeError) as info:
            db.scan(post, range=split, start=("repo", 1))
        assert info.value.field == "start"
        with pytest.raises(ArgumentTypeError):
            db.splits(split, start=b"x")
        with pytest.raises(ArgumentTypeError):
            db.splits(3)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            db.splits(post, n=0)


def test_splits_async(tmp_path: Path) -> None:
    import asyncio

    url = str(tmp_path / "db")
    sequential_store(url, ssts=4)

    async def main() -> list[KeyRange]:
        async with Store.open_reader(url, SCHEMA) as reader:
            return await reader.splits(post, target_bytes=1000)

    ranges = asyncio.run(main())
    check_cover(ranges, *post.range())  # type: ignore[arg-type]
    assert len(ranges) > 1


def test_a_reader_estimates_writes_only_in_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the writer open and its writes only in WAL files (no L0 flush yet), a reader's
    splits count them from the WAL rows: all files read, or some read and the rest counted by
    their sizes, or (a store that cannot be listed) by their number."""
    from opendata_kv.store.ops import manifest_pieces

    url = str(tmp_path / "db")
    rng = random.Random(3)
    with SyncStore.open(url, SCHEMA, settings={"flush_interval": "60s"}) as db:
        for batch in range(20):
            with db.batch() as b:
                for i in range(50):
                    b.put(post, ("repo", batch * 50 + i), rng.randbytes(rng.randrange(50, 150)))
            db.flush()  # one WAL file per batch
        with SyncStore.open_reader(url, SCHEMA) as reader:
            whole_scan = rows(reader, post)

            def check(expect_splits: int | None = None) -> int:
                ranges = reader.splits(post, n=4)
                check_cover(ranges, *post.range())  # type: ignore[arg-type]
                check_balance(ranges)
                if expect_splits is not None:
                    assert len(ranges) == expect_splits
                assert [kv for s in ranges for kv in rows_in(reader, s)] == whole_scan
                return sum(r.estimated_bytes for r in ranges)

            whole = check(4)  # every file read (under WAL_READ_BYTES)
            assert whole >= 1000 * 50  # at least every value's bytes
            monkeypatch.setattr(manifest_pieces, "WAL_READ_BYTES", 15_000)  # 2 files of 20
            assert abs(check() - whole) <= 300  # the rest counted by their file sizes (rounding)
            monkeypatch.setattr(manifest_pieces, "wal_sizes", lambda *a: None)  # not listable
            monkeypatch.setattr(manifest_pieces, "WAL_SAMPLE_ROWS", 120)  # 3 files of 20
            estimate = check()
            assert whole / 2 <= estimate <= whole * 2  # raw row bytes x 20/3 files


def rows_in(view: Any, split: KeyRange) -> list[tuple[bytes, bytes]]:
    return [(r.raw_key, r.value) for r in view.scan(post, range=split)]


def test_a_key_range_narrows_an_index_scan(tmp_path: Path) -> None:
    """Splits of the index key space read, split after split through index_scan, what one
    index_scan reads."""
    from opendata_kv import Index
    from opendata_kv.store.indexes.layout import ROOT

    by_repo = Index("by_text", "post", [("text", F.string)])
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS, indexes=[by_repo]) as db:
        for start in range(0, 400, 100):
            with db.batch() as b:
                for n in range(start, start + 100):
                    b.put(post, ("r", n), {"text": f"text {n % 37:03d}"})
            db.flush()
        whole = [e.key for e in db.index_scan(by_repo, records=False)]
        ranges = db.splits(ScanRange(prefix=ROOT), n=4)
        check_cover(ranges, *prefix_range(ROOT))  # type: ignore[arg-type]
        pieces = [e.key for s in ranges for e in db.index_scan(by_repo, range=s, records=False)]
        assert pieces == whole and len(whole) == 400
