"""Key ranges `[start, end)` as `(bytes | None, bytes | None)`, None meaning unbounded: the
range of a byte prefix, of one key version, of one record type, and their intersection."""

from __future__ import annotations

from opendata_kv.keys.prefix import build_prefix, check_prefix, prefix_successor

Bounds = tuple[bytes | None, bytes | None]

UNBOUNDED: Bounds = (None, None)


def prefix_range(prefix: bytes) -> Bounds:
    """Every key starting with `prefix` (the empty prefix: every key)."""
    return (prefix or None), prefix_successor(prefix)


def version_range(version: int, keyspace: bytes = b"") -> Bounds:
    """Every key of key version `version` (1..255) in `keyspace`."""
    check_prefix(version, 1, 0)
    return prefix_range(keyspace + bytes((version,)))


def record_type_range(version: int, record_type: int, keyspace: bytes = b"") -> Bounds:
    """Every key of `record_type` under `version`, whatever its reserved bits."""
    first = build_prefix(version, record_type, 0, keyspace)
    last = build_prefix(version, record_type, 0xF, keyspace)
    return first, prefix_successor(last)


def intersect(a: Bounds, b: Bounds) -> Bounds:
    """The keys in both ranges (possibly empty: see is_empty)."""
    lo = a[0] if b[0] is None else b[0] if a[0] is None else max(a[0], b[0])
    hi = a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])
    return lo, hi


def is_empty(bounds: Bounds) -> bool:
    """True when no key lies in `bounds`."""
    lo, hi = bounds
    return lo is not None and hi is not None and lo >= hi
