"""Which keys a scan reads, as one frozen value: `ScanRange`, accepted as `range=` by every scan
form (scan, scan_all, index_scan), count, delete_range and Batch.delete_range, beside its
fields as keywords, which override it (as `ScanOptions` is for how a scan reads).

The bounds are declared here once: the dataclass, the TypedDict that types them as keywords,
and `scan_range`, which lays keywords over a range. A new bound is a field here plus the line
that applies it where ranges are resolved (ReadView._resolve, and IndexReads.index_scan when
it applies to index entries); no scan signature repeats it (RFC 0012, "One range value").
A range holds plain values (bytes, tuples of field values, ints, strings), so it pickles:
a split of a scan handed to another process is a ScanRange.
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
    range: ScanRange | None,
    leading: tuple[Any, ...],
    keywords: Mapping[str, Any],
    what: str = "scan",
) -> tuple[ScanRange, dict[str, Any]]:
    """(the scan's range, the keywords left for ScanOptions): `range` (default: everything)
    with positional `leading` values and the bound keywords laid over it. Leading values given
    both positionally and in `range` are an ArgumentTypeError."""
    if range is None:
        found = EVERYTHING
    elif isinstance(range, ScanRange):
        found = range
    else:
        raise ArgumentTypeError(
            f"{what}: range must be a ScanRange, got {type(range).__name__} {range!r}",
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
