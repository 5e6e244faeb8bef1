"""The direct scan call of native/calls.py (calls.scan: the range framed in one piece, the
options lowered once per options object) opens the iterator the generated
scan_with_options opens: the same rows, in the same order, for any bounds, inclusiveness
and order, on a writer, a snapshot and a reader; options changed after their first use are
lowered again."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.native import calls, driver
from opendata_kv.native.binding import generated
from opendata_kv.store.scan import native_scan_options

B = generated()
KEYS = [bytes([a, b]) for a in (0, 1, 2, 0xFF) for b in (0, 1, 0x7F, 0xFF)] + [b"", b"\x01"]


@pytest.fixture(scope="module")
def sources() -> Iterator[dict[str, Any]]:
    assert calls.status().active, calls.status()
    store = B.ObjectStore.resolve("memory:///")
    path = f"scan-call-{os.getpid()}-{time.time_ns()}"
    db = driver.drive(calls.method(B.DbBuilder(path, store), "build"))
    for key in KEYS:
        if key:
            driver.drive(calls.put(db, key, key * 2))
    driver.drive(calls.method(db, "flush"))
    snapshot = driver.drive(calls.method(db, "snapshot"))
    reader = driver.drive(calls.method(B.DbReaderBuilder(path, store), "build"))
    yield {"db": db, "snapshot": snapshot, "reader": reader}
    driver.drive(calls.method(reader, "shutdown"))
    driver.drive(calls.method(db, "shutdown"))


async def _rows(iterator: Any) -> list[tuple[bytes, bytes]]:
    keys, values, _ = await calls.next_columns(iterator, 1000)
    return list(zip(keys, values, strict=True))


async def _outcome(opening: Any) -> Any:
    """The rows of the iterator `opening` gives, or its refusal (type and message)."""
    try:
        iterator = await opening
    except Exception as exc:  # slatedb refuses an empty range: both must, alike
        return type(exc), str(exc)
    return await _rows(iterator)


async def _both(source: Any, bounds: tuple[Any, bool, Any, bool], options: Any) -> Any:
    start, start_inclusive, end, end_inclusive = bounds
    key_range = B.KeyRange(
        start=start, start_inclusive=start_inclusive, end=end, end_inclusive=end_inclusive
    )
    return (
        await _outcome(calls.scan(source, start, start_inclusive, end, end_inclusive, options)),
        await _outcome(calls.method(source, "scan_with_options", key_range, options)),
    )


BOUND = st.one_of(st.none(), st.sampled_from([k for k in KEYS if k]), st.binary(max_size=3))


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["db", "snapshot", "reader"]),
    start=BOUND,
    end=BOUND,
    start_inclusive=st.booleans(),
    end_inclusive=st.booleans(),
    reverse=st.booleans(),
    short=st.booleans(),
)
def test_the_direct_scan_opens_what_the_generated_one_opens(
    sources: dict[str, Any],
    name: str,
    start: bytes | None,
    end: bytes | None,
    start_inclusive: bool,
    end_inclusive: bool,
    reverse: bool,
    short: bool,
) -> None:
    if start is not None and end is not None and start > end:
        start, end = end, start
    options = native_scan_options(reverse, short=short)
    bounds = (start, start_inclusive, end, end_inclusive)
    direct, generated_ = driver.drive(_both(sources[name], bounds, options))
    assert direct == generated_
    if isinstance(direct, tuple):  # refused: an empty range
        assert "range must be non-empty" in direct[1]
        return
    expected = sorted(
        (k, k * 2)
        for k in KEYS
        if k
        and (start is None or k > start or (start_inclusive and k == start))
        and (end is None or k < end or (end_inclusive and k == end))
    )
    assert direct == (expected[::-1] if reverse else expected)


def test_options_changed_after_use_are_lowered_again(sources: dict[str, Any]) -> None:
    options = native_scan_options(False)
    first = driver.drive(_both(sources["db"], (None, True, None, False), options))
    options.order = B.IterationOrder.DESCENDING  # the same object, other fields
    second = driver.drive(_both(sources["db"], (None, True, None, False), options))
    assert first[0] == first[1]
    assert second[0] == second[1] == first[0][::-1]
