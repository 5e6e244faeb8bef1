"""Which keys a scan reads, as one frozen value: `ScanRange`, accepted as `range=` by every scan
form (scan, scan_all, index_scan), count, delete_range and Batch.delete_range, beside its
fields as keywords, which override it (as `ScanOptions` is for how a scan reads).

The bounds are declared here once: the dataclass, the TypedDict that types them as keywords,
and `scan_range`, which lays keywords over a range. A new bound is a field here plus the line
that applies it where ranges are resolved (ReadView._resolve, and IndexReads.index_scan when
it applies to index entries); no scan signature repeats it (RFC 0012, "One range value").
A range holds plain values (bytes, tuples of field values, ints, strings), so it pickles.

`KeyRange` is a split (Store.splits, RFC 0014): [start, end) in raw key bytes with the bytes
it is estimated to hold. Given as `range=`, it is a ScanRange of those start/end bytes, so a
typed scan reads its record's keys within it (the record's range intersected with the split).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from opendata_kv.errors import ArgumentTypeError
from opendata_kv.keys import Key
from opendata_kv.store.options import ScanKeywords

#: a scan bound: raw key bytes, a Key, or a tuple of leading field values (typed scans)
Bound = bytes | Key | tuple[Any, ...] | None
#: a scan's cursor: a cursor string, a raw key or a Key
After = str | bytes | Key | None


@dataclass(frozen=True)
class ScanRange:
    """Which keys a scan reads (everything but how it reads them: see ScanOptions).

    `leading`: values of the first key fields. `partial`: the next field starts with it (a
    string or bytes). `version`: one version of a record name (default: every version).
    `prefix`: raw key bytes every key starts with. `start`/`end`: [start, end), each key
    bytes, a Key, or a tuple of leading field values (compared as field tuples). `after`: a
    cursor (or raw key, or Key) to resume after. An empty range is every key of the record.
    """

    leading: tuple[Any, ...] = ()
    partial: Any = None
    version: int | None = None
    prefix: bytes | None = None
    start: Bound = None
    end: Bound = None
    after: After = None

    def __post_init__(self) -> None:
        if not isinstance(self.leading, tuple):
            raise ArgumentTypeError(
                f"ScanRange(leading={self.leading!r}): leading field values are a tuple",
                field="leading",
                value=self.leading,
            )

    def but(self, **changes: Any) -> ScanRange:
        """A copy with some bounds changed: `rng.but(after=scan.cursor)`."""
        return dataclasses.replace(self, **changes)

    @property
    def narrows_keys(self) -> bool:
        """True when the range narrows the raw keys (a prefix, or any bound but the record's
        fields): what delete_range with no record needs, so it never deletes every key."""
        keys = dataclasses.replace(self, leading=(), partial=None, version=None, prefix=None)
        return bool(self.prefix) or keys != EVERYTHING


EVERYTHING = ScanRange()


@dataclass(frozen=True)
class KeyRange:
    """One split of a key range (Store.splits): raw keys in [start, end), end None for no
    upper bound, and the bytes the manifest says it holds (an estimate). Picklable, so a task
    in another process reads it: `store.scan(post, range=split)`."""

    start: bytes
    end: bytes | None
    estimated_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, bytes) and not (name == "end" and value is None):
                raise ArgumentTypeError(
                    f"KeyRange({name}={value!r}): key bounds are bytes"
                    + (" (end None: no upper bound)" if name == "end" else ""),
                    field=name,
                    value=value,
                )
        if self.end is not None and self.end <= self.start:
            raise ArgumentTypeError(
                f"KeyRange(start={self.start!r}, end={self.end!r}): end must be above start",
                field="end",
                value=self.end,
            )
        estimate = self.estimated_bytes
        if isinstance(estimate, bool) or not isinstance(estimate, int) or estimate < 0:
            raise ArgumentTypeError(
                f"KeyRange(estimated_bytes={estimate!r}): a count of bytes, 0 or more",
                field="estimated_bytes",
                value=estimate,
            )

    def contains(self, key: bytes) -> bool:
        """True when raw key `key` lies in [start, end)."""
        return self.start <= key and (self.end is None or key < self.end)

    def as_scan_range(self) -> ScanRange:
        """The ScanRange of the same keys (what a scan given this split reads)."""
        return ScanRange(start=self.start, end=self.end)


#: what `range=` takes: a ScanRange, or a split (KeyRange) read as its start/end
RangeArg = ScanRange | KeyRange | None


class RangeKeywords(TypedDict, total=False):
    """ScanRange's bounds as keywords (leading fields are given positionally)."""

    partial: Any
    version: int | None
    prefix: bytes | None
    start: Bound
    end: Bound
    after: After


class ScanArgs(RangeKeywords, ScanKeywords, total=False):
    """What a scan takes as keywords: its range's bounds and its options' settings."""


_BOUNDS = frozenset(RangeKeywords.__annotations__)


def scan_range(
    range: RangeArg,
    leading: tuple[Any, ...],
    keywords: Mapping[str, Any],
    what: str = "scan",
) -> tuple[ScanRange, dict[str, Any]]:
    """(the scan's range, the keywords left for ScanOptions): `range` (default: everything;
    a KeyRange: its start/end) with positional `leading` values and the bound keywords laid
    over it. Leading values given both positionally and in `range`, and start/end given both
    by a KeyRange and as keywords, are ArgumentTypeErrors."""
    if range is None:
        found = EVERYTHING
    elif isinstance(range, ScanRange):
        found = range
    elif isinstance(range, KeyRange):
        both = sorted({"start", "end"}.intersection(keywords))
        if both:
            raise ArgumentTypeError(
                f"{what}: {'/'.join(both)} given both as keywords and by range={range!r}; a "
                "split is its own start and end (narrow it with leading fields, partial or "
                "prefix instead)",
                field=both[0],
                value=keywords[both[0]],
            )
        found = range.as_scan_range()
    else:
        raise ArgumentTypeError(
            f"{what}: range must be a ScanRange or a KeyRange, got {type(range).__name__} "
            f"{range!r}",
            field="range",
            value=range,
        )
    if leading:
        if found.leading:
            raise ArgumentTypeError(
                f"{what}: leading field values {leading!r} given both positionally and in "
                f"range={found!r}; give them once",
                field="leading",
                value=leading,
            )
        found = dataclasses.replace(found, leading=tuple(leading))
    bounds = {name: keywords[name] for name in _BOUNDS.intersection(keywords)}
    if bounds:
        found = dataclasses.replace(found, **bounds)
        rest = {name: value for name, value in keywords.items() if name not in bounds}
        return found, rest
    return found, dict(keywords)
