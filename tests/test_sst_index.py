"""SST index blocks for splits (RFC 0014; store/ops/sst_index.py, sst_blocks.py): the
flatbuffer of block first keys and offsets decodes exactly, malformed bytes are refused (never
half-decoded), LZ4 decodes as Arrow's does, and splits cut by those blocks are balanced by rows
on a store whose SSTs overlap and whose keys cluster far from where an even spread puts them."""

from __future__ import annotations

import asyncio
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, Store, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import StoreDataError
from opendata_kv.store.ops import sst_blocks
from opendata_kv.store.ops.manifest_pieces import manifest_views
from opendata_kv.store.ops.sst_index import block_entries, lz4_block, lz4_python, unwrap

post = RecordType("post", 2, [("repo", F.string), ("n", F.u32)])
SCHEMA = Schema(post)


def index_flatbuffer(entries: list[tuple[int, bytes]]) -> bytes:
    """An SsTableIndex flatbuffer of `entries` (offset, first key), laid out plainly."""
    out = bytearray(struct.pack("<I", 0))  # the root offset, patched below
    index_vtable = len(out)
    out += struct.pack("<HHH", 6, 8, 4)  # vtable: size, table size, block_meta at +4
    index_table = len(out)
    out += struct.pack("<iI", index_table - index_vtable, 0)  # vector offset patched below
    struct.pack_into("<I", out, 0, index_table)
    vector = len(out)
    struct.pack_into("<I", out, index_table + 4, vector - (index_table + 4))
    out += struct.pack("<I", len(entries)) + b"\0" * (4 * len(entries))
    meta_vtable = len(out)
    out += struct.pack("<HHHH", 8, 16, 8, 4)  # offset at +8, first_key at +4
    for i, (offset, key) in enumerate(entries):
        table = len(out)
        slot = vector + 4 + 4 * i
        struct.pack_into("<I", out, slot, table - slot)
        out += struct.pack("<iIQ", table - meta_vtable, 0, offset)
        key_at = len(out)
        struct.pack_into("<I", out, table + 4, key_at - (table + 4))
        out += struct.pack("<I", len(key)) + key
    return bytes(out)


def stored(body: bytes) -> bytes:
    """A region as an SST stores it without compression: the bytes, then their CRC-32."""
    return body + struct.pack(">I", zlib.crc32(body))


entries_st = st.lists(
    st.tuples(st.integers(0, 2**40), st.binary(max_size=40)), min_size=1, max_size=60
).map(
    # offsets and keys each in order, as an SST's blocks are
    lambda found: list(zip(sorted(o for o, _ in found), sorted(k for _, k in found), strict=True))
)


@settings(max_examples=200, deadline=None)
@given(entries_st, st.integers(2, 80))
def test_block_entries_round_trip_and_sample_evenly(
    entries: list[tuple[int, bytes]], limit: int
) -> None:
    body = unwrap(stored(index_flatbuffer(entries)), None, "sst")
    assert body is not None
    assert block_entries(body, "sst", limit=10_000) == entries
    sampled = block_entries(body, "sst", limit=limit)
    assert len(sampled) == min(len(entries), limit)
    assert sampled[0] == entries[0] and sampled[-1] == entries[-1]
    assert all(entry in entries for entry in sampled)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_malformed_index_bytes_are_refused_never_half_decoded(data: bytes) -> None:
    try:
        found = block_entries(data, "sst")
    except StoreDataError as error:
        assert error.value == "sst" and "index block" in str(error)
    else:  # bytes that happen to parse: a well-formed, ordered index
        assert found == sorted(found)


@settings(max_examples=200, deadline=None)
@given(entries_st, st.data())
def test_a_damaged_region_fails_its_checksum(entries: list[tuple[int, bytes]], data: Any) -> None:
    region = bytearray(stored(index_flatbuffer(entries)))
    at = data.draw(st.integers(0, len(region) - 1))
    region[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(StoreDataError, match="checksum"):
        unwrap(bytes(region), None, "sst")


payload_st = st.one_of(
    st.binary(max_size=2000),
    st.lists(
        st.sampled_from([b"did:plc:", b"app.bsky.feed.post", b"\x00", b"3k"]), max_size=300
    ).map(b"".join),
)


@settings(max_examples=200, deadline=None)
@given(payload_st)
def test_lz4_in_python_decodes_as_arrow_compresses(payload: bytes) -> None:
    packed = pa.compress(payload, codec="lz4_raw", asbytes=True)
    assert lz4_python(packed, len(payload), "sst") == payload
    assert lz4_block(packed, len(payload), "sst") == payload


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 400))
def test_malformed_lz4_is_refused_by_both_decoders(data: bytes, size: int) -> None:
    for decode in (lz4_python, lz4_block):
        try:
            out = decode(data, size, "sst")
        except StoreDataError:
            continue
        assert len(out) == size


# --- on a store -----------------------------------------------------------------------------------


def clustered_store(url: str, rounds: int = 4, per_round: int = 3000) -> None:
    """Posts of repos in two clusters ('b...' and 'y...', far apart on the key line), each
    writer (its close flushes an L0 SST) a shuffled share of all of them: SSTs that overlap,
    each spanning the whole range."""
    rng = random.Random(11)
    keys = [(f"did:plc:{c}{i:05d}", n) for c in "by" for i in range(150) for n in range(40)]
    rng.shuffle(keys)
    for r in range(rounds):
        with SyncStore.open(url, SCHEMA) as db, db.batch() as batch:
            for key in keys[r * per_round : (r + 1) * per_round]:
                batch.put(post, key, {"text": "x" * rng.randrange(60, 100)})


def overlapping(url: str) -> int:
    """How many pairs of the latest manifest's SSTs overlap in key span."""

    async def spans() -> list[tuple[bytes, bytes]]:
        async with Store.open_reader(url, SCHEMA) as reader:
            from opendata_kv.store.ops.feed import admin as admin_of

            admin = admin_of(reader.location.db_path, reader._object_store, reader.where)
            manifest = await admin.read_manifest(None)
            return [
                (bytes(v.sst.info.first_entry), bytes(v.sst.info.last_entry))
                for v in manifest_views(manifest)
            ]

    found = asyncio.run(spans())
    return sum(
        1 for i, a in enumerate(found) for b in found[i + 1 :] if a[0] <= b[1] and b[0] <= a[1]
    )


def test_splits_of_overlapping_ssts_are_balanced_by_rows(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    clustered_store(url)
    assert overlapping(url) >= 3
    with SyncStore.open_reader(url, SCHEMA) as reader:
        total = reader.count(post)
        assert total == 12_000
        for n in (2, 4, 8):
            ranges = reader.splits(post, n=n)
            rows = [reader.count(post, range=r) for r in ranges]
            assert sum(rows) == total  # exactly once
            assert len(ranges) >= n // 2, (n, rows)
            assert max(rows) <= 2 * min(rows), (n, rows)


def test_without_the_index_the_same_splits_are_unbalanced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the index fixes: with no index bytes read, the manifest's spans put most cuts
    between the clusters, where no key lies."""
    url = str(tmp_path / "db")
    clustered_store(url, rounds=2, per_round=6000)
    monkeypatch.setattr(sst_blocks, "INDEX_READ_BYTES", 0)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        ranges = reader.splits(post, n=8)
        rows = [reader.count(post, range=r) for r in ranges]
    assert sum(rows) == 12_000
    assert min(rows) * 2 < max(rows), rows


def test_the_index_is_read_on_a_directory_and_on_s3(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One range read of each SST's index (a pread, or an S3 ranged GET on moto), each giving
    the region whole; the splits it places hold rows within 2x."""
    clustered_store(url, rounds=2, per_round=6000)
    reads: list[tuple[str, int, bool]] = []
    real = sst_blocks.read_region

    def counted(location: Any, store: Any, db_path: str, ulid: str, at: int, size: int) -> Any:
        found = real(location, store, db_path, ulid, at, size)
        reads.append((ulid, size, found is not None and len(found) == size))
        return found

    monkeypatch.setattr(sst_blocks, "read_region", counted)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        ranges = reader.splits(post, n=4)
        rows = [reader.count(post, range=r) for r in ranges]
    assert len(reads) >= 2 and all(whole for _, _, whole in reads), reads
    assert len({ulid for ulid, _, _ in reads}) == len(reads)  # one read per SST
    assert sum(rows) == 12_000 and max(rows) <= 2 * min(rows), rows
