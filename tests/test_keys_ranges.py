"""keys/ranges.py: the ranges of a prefix, a version and a record type, and intersections,
checked against parse_prefix and plain byte comparison on arbitrary keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import KeyDecodeError, SchemaError
from opendata_kv.keys import (
    Bounds,
    intersect,
    is_empty,
    parse_prefix,
    prefix_range,
    record_type_range,
    version_range,
)

keys = st.binary(max_size=6)
keyspaces = st.sampled_from([b"", b"\x07", b"\xff", b"ab\xff"])
bounds = st.tuples(st.none() | keys, st.none() | keys)


def inside(key: bytes, span: Bounds) -> bool:
    lo, hi = span
    return (lo is None or key >= lo) and (hi is None or key < hi)


@given(prefix=keys, key=keys)
def test_prefix_range_holds_exactly_the_keys_with_the_prefix(prefix: bytes, key: bytes) -> None:
    assert inside(key, prefix_range(prefix)) == key.startswith(prefix)


@given(
    keyspace=keyspaces,
    version=st.integers(1, 255),
    record_type=st.integers(1, 15),
    tail=keys,
    head=st.binary(min_size=2, max_size=2),
)
def test_version_and_type_ranges_agree_with_parse_prefix(
    keyspace: bytes, version: int, record_type: int, tail: bytes, head: bytes
) -> None:
    key = keyspace + head + tail
    try:
        prefix = parse_prefix(key, keyspace)
    except KeyDecodeError:
        prefix = None
    in_version = prefix is not None and prefix.version == version
    in_type = in_version and prefix is not None and prefix.record_type == record_type
    if prefix is not None:  # version 0 / type 0 keys are in neither range either way
        assert inside(key, version_range(version, keyspace)) == in_version
        assert inside(key, record_type_range(version, record_type, keyspace)) == in_type


@given(a=bounds, b=bounds, key=keys)
def test_intersect_holds_the_keys_in_both(a: Bounds, b: Bounds, key: bytes) -> None:
    both = intersect(a, b)
    assert inside(key, both) == (inside(key, a) and inside(key, b))
    if is_empty(both):
        assert not inside(key, both)


@pytest.mark.parametrize("version", [0, 256, -1])
def test_version_range_refuses_reserved_or_out_of_range_versions(version: int) -> None:
    with pytest.raises(SchemaError):
        version_range(version)


def test_record_type_range_refuses_type_zero() -> None:
    with pytest.raises(SchemaError):
        record_type_range(1, 0)
