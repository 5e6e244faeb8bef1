"""Key codec: a compiled RecordType vs FoundationDB's tuple layer, on the same five values.

    python tools/bench.py codec [--quick]

The key is (kind u8, repo string, collection string, seq u64, tid u64), as an AT Protocol
record index would store it. Both codecs run on the same rows, interleaved: every round times
each operation once, in a rotating order, so drift in machine load (the box is shared) hits
both sides alike. Reported: the median per-op time of each side, and the median over rounds
of fdb/ours (the ratio within one round is the figure that counts; absolute times vary).

Then the scale bench's event key (string, desc(tid)) decoded in chunks of 128 as a scan does:
RecordType.decode_many (columnar) vs decode per key vs hand decoding with the TID left an int.
"""

from __future__ import annotations

import random
import statistics
import struct
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_timing import interleaved, loop, ratio

try:
    from opendata_kv.ids import tid
    from opendata_kv.keys import RecordType, Schema, fields
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv.ids import tid
    from opendata_kv.keys import RecordType, Schema, fields

BENCH = RecordType(
    "bench",
    1,
    [
        ("kind", fields.u8),
        ("repo", fields.string),
        ("collection", fields.string),
        ("seq", fields.u64),
        ("tid", fields.u64),
    ],
)
COLLECTIONS = (
    "app.bsky.feed.post",
    "app.bsky.feed.like",
    "app.bsky.graph.follow",
    "app.bsky.feed.repost",
)
B32 = "234567abcdefghijklmnopqrstuvwxyz"


def make_rows(count: int, seed: int = 7) -> list[tuple[Any, ...]]:
    """Realistic rows: did:plc ids (8 + 24 chars), NSIDs, a sequence, TID-shaped integers."""
    rng = random.Random(seed)
    repos = ["did:plc:" + "".join(rng.choice(B32) for _ in range(24)) for _ in range(64)]
    now_us = 1_750_000_000_000_000
    rows = []
    for seq in range(count):
        tid = (now_us + seq * 1_000 + rng.randrange(1_000)) << 10 | rng.randrange(1024)
        rows.append((1, rng.choice(repos), rng.choice(COLLECTIONS), 10_000_000 + seq, tid))
    return rows


def _loop_encode(encode: Callable[..., bytes], rows: Sequence[tuple[Any, ...]]) -> None:
    for row in rows:
        encode(*row)


def _loop_pack(pack: Callable[[tuple[Any, ...]], bytes], rows: Sequence[tuple[Any, ...]]) -> None:
    for row in rows:
        pack(row)


def run(quick: bool) -> None:
    try:
        import fdb.tuple as fdb_tuple
    except ImportError:
        print(
            "codec: the 'foundationdb' package is not installed, so there is nothing to compare "
            "with.\n       Install the bench extra: pip install 'opendata-kv[bench]'"
        )
        scan_keys(quick)
        return

    count, rounds, repeat = (500, 5, 3) if quick else (2000, 15, 5)
    rows = make_rows(count)
    ours = [BENCH.encode(*row) for row in rows]
    theirs = [fdb_tuple.pack(row) for row in rows]
    # Both sides must really do the work they are timed on.
    for row, key, packed in zip(rows, ours, theirs, strict=True):
        assert tuple(BENCH.decode(key)) == row and fdb_tuple.unpack(packed) == row
    schema = Schema(BENCH)

    cases: dict[str, Callable[[], None]] = {
        "ours encode": lambda: _loop_encode(BENCH.encode, rows),
        "fdb  pack": lambda: _loop_pack(fdb_tuple.pack, rows),
        "ours decode": lambda: loop(BENCH.decode, ours),
        "fdb  unpack": lambda: loop(fdb_tuple.unpack, theirs),
        "ours Schema.decode": lambda: loop(schema.decode, ours),
    }
    names = list(cases)
    samples = interleaved(cases, count, rounds, repeat)

    print(
        f"5-field key (u8, string, string, u64, u64), {count} rows, {rounds} interleaved rounds, "
        f"best of {repeat} per round; key size ours {sum(map(len, ours)) / count:.1f} B, "
        f"fdb {sum(map(len, theirs)) / count:.1f} B"
    )
    for name in names:
        values = samples[name]
        print(
            f"  {name:<20} {statistics.median(values):7.3f} us/op  "
            f"(min {min(values):.3f}, max {max(values):.3f})"
        )
    for label, mine, other in (
        ("encode", "ours encode", "fdb  pack"),
        ("decode", "ours decode", "fdb  unpack"),
    ):
        median, low, high = ratio(samples, other, mine)
        print(
            f"  {label}: fdb/ours = {median:.2f}x "
            f"(median of per-round ratios; range {low:.2f}-{high:.2f})"
        )
    scan_keys(quick)


# The scale bench's event key: newest first per actor, as a typed scan decodes it.
EVENT = RecordType("event", 2, [("actor", fields.string), ("at", fields.desc(fields.tid))])
_U64 = struct.Struct(">Q")
_MASK = (1 << 64) - 1
SCAN_CHUNK = 128  # keys per decode_many call in a scan (store.scan.DECODE_CHUNK)


def _hand_event(key: bytes) -> tuple[str, int]:
    """struct + split by hand, the TID left an int: the raw side of the scale bench."""
    actor, _, rest = key[2:].partition(b"\x00")
    return actor.decode(), _MASK - _U64.unpack(rest)[0]


def scan_keys(quick: bool) -> None:
    """(string, desc(tid)) keys decoded in chunks, as a scan does: decode_many vs decode per
    key vs hand decoding (which skips the TID string)."""
    count, rounds, repeat = (1024, 5, 3) if quick else (4096, 15, 5)
    now_us = 1_750_000_000_000_000
    keys = [
        EVENT.encode(f"did:plc:{i % 7:024d}", tid.encode((now_us + i) << 10 | 7))
        for i in range(count)
    ]
    chunks = [keys[at : at + SCAN_CHUNK] for at in range(0, count, SCAN_CHUNK)]
    assert [k for c in chunks for k in EVENT.decode_many(c, prefixed=True)] == list(
        map(EVENT.decode, keys)
    )
    cases: dict[str, Callable[[], None]] = {
        "decode_many": lambda: loop(lambda c: EVENT.decode_many(c, prefixed=True), chunks),
        "decode per key": lambda: loop(EVENT.decode, keys),
        "hand (TID int)": lambda: loop(_hand_event, keys),
    }
    samples = interleaved(cases, count, rounds, repeat)
    print(
        f"(string, desc(tid)) keys, {count} in chunks of {SCAN_CHUNK}, {rounds} interleaved "
        f"rounds, best of {repeat} per round"
    )
    for name, values in samples.items():
        print(f"  {name:<20} {statistics.median(values):7.3f} us/key")
    for label, num, den in (
        ("decode per key / decode_many", "decode per key", "decode_many"),
        ("decode_many / hand", "decode_many", "hand (TID int)"),
    ):
        median, low, high = ratio(samples, num, den)
        print(f"  {label}: {median:.2f}x (range {low:.2f}-{high:.2f})")


if __name__ == "__main__":
    run("--quick" in sys.argv)
