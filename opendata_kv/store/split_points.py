"""Where a key range is cut into splits of about equal bytes (RFC 0014), from pieces of data
whose key span and size are known: the manifest's SSTs, and the rows of WAL files no SST holds
yet. Pure: no I/O, no slatedb.

Keys are placed on a line by number: the 16 bytes after the prefix every key shares, read as a
big-endian integer (monotonic in key order). A piece spreads its bytes evenly over its span on
that line (a point when its first and last key are one number); the cuts are where the running
total crosses each multiple of total / n, moved to the first key of a piece when one lies close
enough (within BALANCE_SLACK of a split's bytes: there the estimate is exact for disjoint
SSTs). Splits whose estimates differ by more than 2x are merged with a neighbour until none do.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opendata_kv.errors import InvalidArgumentError
from opendata_kv.store.ranges import KeyRange

#: key bytes read as a number after the shared prefix
WIDTH = 16
#: how far (as a share of one split's bytes) a cut moves to land on a piece's first key
BALANCE_SLACK = 0.125
#: one split per this many bytes when neither n nor target_bytes is given
DEFAULT_SPLIT_BYTES = 64 << 20


@dataclass(frozen=True)
class Piece:
    """Data on [first, last] (inclusive raw keys) of `size` bytes: an SST (or the part of it
    inside the range being split), or a run of WAL rows."""

    first: bytes
    last: bytes
    size: int


def shared_prefix(keys: Iterable[bytes]) -> bytes:
    """The longest prefix every key in `keys` starts with."""
    low = high = None
    for key in keys:
        if low is None or high is None:
            low = high = key
        elif key < low:
            low = key
        elif key > high:
            high = key
    if low is None or high is None:
        return b""
    size = 0
    for a, b in zip(low, high, strict=False):
        if a != b:
            break
        size += 1
    return low[:size]


def position(key: bytes, prefix: bytes) -> int:
    """`key`'s place on the line of keys starting with `prefix` (keys below the prefix 0,
    keys above every key with it the line's end)."""
    if not key.startswith(prefix):
        return 0 if key < prefix else 1 << (8 * WIDTH)
    tail = key[len(prefix) : len(prefix) + WIDTH]
    return int.from_bytes(tail.ljust(WIDTH, b"\0"), "big")


def key_at(place: int, prefix: bytes) -> bytes:
    """The shortest key at `place` on the line of `prefix` (the inverse of position)."""
    return prefix + place.to_bytes(WIDTH, "big").rstrip(b"\0")


def share_inside(first: bytes, last: bytes, lo: bytes, hi: bytes | None) -> float:
    """The share of a piece spread over [first, last] that lies in [lo, hi), by position."""
    if last < lo or (hi is not None and first >= hi):
        return 0.0
    if first == last:
        return 1.0
    prefix = shared_prefix((first, last))
    a, b = position(first, prefix), position(last, prefix)
    if b <= a:
        return 1.0
    start = max(a, position(lo, prefix)) if lo > first else a
    end = min(b, position(hi, prefix)) if hi is not None and hi <= last else b
    return max(0.0, min(1.0, (end - start) / (b - a)))


def clip(pieces: Iterable[Piece], lo: bytes, hi: bytes | None) -> list[Piece]:
    """The parts of `pieces` inside [lo, hi), each size scaled by the share inside."""
    out = []
    for piece in pieces:
        if piece.first >= lo and (hi is None or piece.last < hi):
            if piece.size > 0:  # wholly inside: as it is (most pieces, with no arithmetic)
                out.append(piece)
            continue
        share = share_inside(piece.first, piece.last, lo, hi)
        if share <= 0.0 or piece.size <= 0:
            continue
        first = max(piece.first, lo)
        last = piece.last if hi is None or piece.last < hi else _below(hi, first)
        if last < first:
            continue
        out.append(Piece(first, last, max(1, round(piece.size * share))))
    return out


def _below(hi: bytes, floor: bytes) -> bytes:
    """A key just under `hi` but not under `floor` (the last key a piece clipped at hi has)."""
    lower = hi[:-1] + bytes([hi[-1] - 1]) + b"\xff" * 8 if hi and hi[-1] > 0 else b""
    candidate = lower or hi[:-1]
    return max(candidate, floor) if candidate < hi else floor


def how_many(total: int, n: int | None, target_bytes: int | None) -> int:
    """How many splits to aim for: `n` (at most), one per `target_bytes`, or one per
    DEFAULT_SPLIT_BYTES; both given: the fewer."""
    for name, value in (("n", n), ("target_bytes", target_bytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidArgumentError(
                f"splits: {name} must be a positive int, got {value!r}", field=name, value=value
            )
        if value is not None and value < 1:
            raise InvalidArgumentError(
                f"splits: {name} must be 1 or more, got {value!r}", field=name, value=value
            )
    by_bytes = None
    if target_bytes is not None or n is None:
        per = target_bytes or DEFAULT_SPLIT_BYTES
        by_bytes = max(1, -(-total // per))
    if n is None:
        assert by_bytes is not None
        return by_bytes
    return n if by_bytes is None else min(n, by_bytes)


def cut(pieces: Sequence[Piece], lo: bytes, hi: bytes | None, n: int) -> list[KeyRange]:
    """[lo, hi) cut into at most `n` contiguous KeyRanges of about equal estimated bytes from
    `pieces` (already clipped to [lo, hi)); one range when there is no data or n is 1."""
    total = sum(piece.size for piece in pieces)
    if n <= 1 or total <= 0:
        return [KeyRange(lo, hi, total)]
    prefix = shared_prefix([lo, *(p.first for p in pieces), *(p.last for p in pieces)])
    cuts = _places(pieces, prefix, total, n)
    bounds: list[tuple[bytes, float]] = []
    for key, mass in cuts:
        if key <= lo or (hi is not None and key >= hi):
            continue
        if bounds and key <= bounds[-1][0]:
            continue
        bounds.append((key, mass))
    starts = [lo, *(key for key, _ in bounds)]
    masses = [0.0, *(mass for _, mass in bounds), float(total)]
    sizes = [max(0.0, masses[i + 1] - masses[i]) for i in range(len(starts))]
    starts, estimates = _balanced(starts, _whole(sizes, total))
    ends: list[bytes | None] = [*starts[1:], hi]
    return [KeyRange(s, e, b) for s, e, b in zip(starts, ends, estimates, strict=True)]


def _places(
    pieces: Sequence[Piece], prefix: bytes, total: int, n: int
) -> list[tuple[bytes, float]]:
    """(cut key, bytes before it) for each multiple of total / n, in order."""
    starts: dict[int, list[int]] = {}  # place -> pieces starting there (their index)
    ends: dict[int, list[int]] = {}
    densities: list[float] = []
    points: dict[int, float] = {}
    firsts: dict[int, bytes] = {}
    for piece in pieces:
        a, b = position(piece.first, prefix), position(piece.last, prefix)
        if b > a:
            starts.setdefault(a, []).append(len(densities))
            ends.setdefault(b, []).append(len(densities))
            densities.append(piece.size / (b - a))
        else:
            points[a] = points.get(a, 0.0) + piece.size
        if a not in firsts or piece.first < firsts[a]:
            firsts[a] = piece.first
    xs = sorted({*starts, *ends, *points})
    share = total / n
    targets = [share * i for i in range(1, n)]
    ideal: list[tuple[int, float]] = []  # (place, bytes before it)
    before: dict[int, float] = {}  # bytes before each place, point masses at it excluded
    cum = density = 0.0
    active: set[int] = set()
    prev = xs[0]
    i = 0
    for x in xs:
        seg = density * (x - prev)
        while i < len(targets) and cum + seg >= targets[i]:
            t = targets[i]
            place = prev + int((x - prev) * ((t - cum) / seg)) if seg > 0 else prev
            ideal.append((place, t))
            i += 1
        cum += seg
        before[x] = cum
        mass = points.get(x, 0.0)
        while i < len(targets) and mass > 0 and cum + mass >= targets[i]:
            # a point cannot be cut: the cut goes before or after it, whichever is nearer
            ideal.append((x, cum) if targets[i] - cum < mass / 2 else (x + 1, cum + mass))
            i += 1
        cum += mass
        if x in starts or x in ends:
            # summed afresh: a running sum would lose a small density to a large one's
            # subtraction (a piece a million times denser comes and goes)
            active.difference_update(ends.get(x, ()))
            active.update(starts.get(x, ()))
            density = math.fsum(densities[j] for j in active)
        prev = x
    snaps = sorted(firsts)
    out = []
    for place, mass in ideal:
        snapped = _snapped(place, mass, snaps, before, share * BALANCE_SLACK)
        if snapped is None:
            out.append((key_at(place, prefix), mass))
        else:
            out.append((firsts[snapped], before[snapped]))
    return out


def _snapped(
    place: int, mass: float, snaps: list[int], before: dict[int, float], slack: float
) -> int | None:
    """The place of the piece first key nearest `place` whose bytes-before lie within
    `slack` of `mass`, or None when none does."""
    j = bisect.bisect_left(snaps, place)
    best: tuple[float, int] | None = None
    for k in (j - 1, j):
        if 0 <= k < len(snaps):
            off = abs(before[snaps[k]] - mass)
            if off <= slack and (best is None or off < best[0]):
                best = (off, snaps[k])
    return None if best is None else best[1]


def _balanced(starts: list[bytes], sizes: list[int]) -> tuple[list[bytes], list[int]]:
    """Merge the smallest split into its smaller neighbour until the largest estimate is at
    most twice the smallest (points of data too big to cut leave splits uneven)."""
    starts, sizes = list(starts), list(sizes)
    while len(sizes) > 1 and max(sizes) > 2 * min(sizes):
        i = sizes.index(min(sizes))
        if i == 0:
            j = 1
        elif i == len(sizes) - 1:
            j = i - 1
        else:
            j = i - 1 if sizes[i - 1] <= sizes[i + 1] else i + 1
        low, high = min(i, j), max(i, j)
        sizes[low] += sizes[high]
        del sizes[high]
        del starts[high]
    return starts, sizes


def _whole(sizes: list[float], total: int) -> list[int]:
    """Estimates as whole bytes summing to `total`."""
    out, running, given = [], 0.0, 0
    for size in sizes:
        running += size
        upto = min(total, round(running))
        out.append(max(0, upto - given))
        given = max(given, upto)
    out[-1] += total - sum(out)
    return out
