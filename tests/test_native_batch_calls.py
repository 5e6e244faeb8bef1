"""The direct batch and seek calls of native/calls.py (batch_put_many, with or without its
expiry column, batch_delete, batch_put_expiring, seek) leave what the generated WriteBatch
and DbIterator methods leave: the same rows with the same expiry, the same iterator
position, the same refusals."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.native import calls, driver
from opendata_kv.native.binding import generated

B = generated()
EXAMPLES = int(os.environ.get("OPENDATA_KV_BATCH_CALL_EXAMPLES", "30"))
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def db() -> Iterator[Any]:
    assert calls.status().active, calls.status()
    store = B.ObjectStore.resolve("memory:///")
    builder = B.DbBuilder(f"batch-calls-{os.getpid()}-{time.time_ns()}", store)
    handle = driver.drive(calls.method(builder, "build"))
    yield handle
    driver.drive(calls.method(handle, "shutdown"))


VALUE = st.one_of(st.binary(max_size=40), st.just(b"\x01" * 70_000))  # both framings
OP = st.tuples(
    st.sampled_from(["put", "expiring", "delete"]),
    st.binary(min_size=1, max_size=12),
    VALUE,
    st.integers(-HOUR_MS, HOUR_MS),
)


def _direct(batch: Any, ops: list[tuple[str, bytes, bytes, int]], now: int) -> None:
    """The ops through the direct calls, runs of plain puts in one batch_put_many."""
    keys: list[bytes] = []
    values: list[bytes] = []
    for kind, key, value, offset in ops:
        if kind == "put":
            keys.append(key)
            values.append(value)
            continue
        calls.batch_put_many(batch, keys, values)
        keys, values = [], []
        if kind == "delete":
            calls.batch_delete(batch, key)
        else:
            calls.batch_put_expiring(batch, key, value, now + offset)
    calls.batch_put_many(batch, keys, values)


def _generated(batch: Any, ops: list[tuple[str, bytes, bytes, int]], now: int) -> None:
    for kind, key, value, offset in ops:
        if kind == "put":
            batch.put(key, value)
        elif kind == "delete":
            batch.delete(key)
        else:
            options = B.PutOptions(ttl=B.Ttl.EXPIRE_AT_MILLIS(now + offset))
            batch.put_with_options(key, value, options)


@settings(max_examples=EXAMPLES, deadline=None)
@given(ops=st.lists(OP, min_size=1, max_size=25))
def test_direct_batch_calls_write_what_the_generated_methods_write(
    db: Any, ops: list[tuple[str, bytes, bytes, int]]
) -> None:
    now = int(time.time() * 1000)
    tag = b"%d/" % time.time_ns()
    results = []
    for fill, side in ((_direct, b"d"), (_generated, b"g")):
        batch = B.WriteBatch()
        prefixed = [(kind, tag + side + key, value, at) for kind, key, value, at in ops]
        fill(batch, prefixed, now)
        driver.drive(calls.write(db, batch))
        keys = [tag + side + key for _, key, _, _ in ops]
        results.append(driver.drive(calls.get_rows(db, keys)))
    assert results[0] == results[1]


def _columns(put_many: Any, batch: Any, ops: list[tuple[str, bytes, bytes, int]], now: int) -> None:
    """The ops through put_many with an expiry column: runs of plain and expiring puts in one
    call each (as Batch sends its deferred puts), a delete between runs."""
    keys: list[bytes] = []
    values: list[bytes] = []
    expires: list[int | None] = []
    for kind, key, value, offset in ops:
        if kind == "delete":
            put_many(batch, keys, values, expires)
            keys, values, expires = [], [], []
            calls.batch_delete(batch, key)
            continue
        keys.append(key)
        values.append(value)
        expires.append(now + offset if kind == "expiring" else None)
    put_many(batch, keys, values, expires)


@pytest.mark.parametrize("path", ["calls", "pure"])
@settings(max_examples=EXAMPLES, deadline=None)
@given(ops=st.lists(OP, min_size=1, max_size=25))
def test_an_expiry_column_writes_what_the_generated_methods_write(
    db: Any, path: str, ops: list[tuple[str, bytes, bytes, int]]
) -> None:
    """batch_put_many(batch, keys, values, expires) as called (in C on the accelerator) and
    on the ctypes driver (calls.py's own functions): each put plain or expiring as its column
    says, in order."""
    with _on(path):
        _compare_columns(db, path, ops)


@contextlib.contextmanager
def _on(path: str) -> Iterator[None]:
    """calls.py's hot names as they are ("calls"), or its pure ones (the ctypes driver)."""
    with pytest.MonkeyPatch.context() as patch:
        if path == "pure":
            for name, function in calls._PURE.items():
                patch.setattr(calls, name, function)
        yield


def _compare_columns(db: Any, path: str, ops: list[tuple[str, bytes, bytes, int]]) -> None:
    put_many = calls.batch_put_many
    now = int(time.time() * 1000)
    tag = b"x%s%d/" % (path.encode(), time.time_ns())
    results = []
    for side in (b"c", b"g"):
        batch = B.WriteBatch()
        prefixed = [(kind, tag + side + key, value, at) for kind, key, value, at in ops]
        if side == b"c":
            _columns(put_many, batch, prefixed, now)
        else:
            _generated(batch, prefixed, now)
        driver.drive(calls.write(db, batch))
        results.append(driver.drive(calls.get_rows(db, [tag + side + k for _, k, _, _ in ops])))
    assert results[0] == results[1]


@pytest.mark.parametrize("path", ["calls", "pure"])
def test_an_expiry_column_is_refused_as_the_generated_converter_refuses(db: Any, path: str) -> None:
    with _on(path):
        put_many = calls.batch_put_many
        batch = B.WriteBatch()
        with pytest.raises(ValueError, match="2 keys but 1 expiries"):
            put_many(batch, [b"k", b"l"], [b"v", b"w"], [None])
        with pytest.raises(ValueError):
            put_many(batch, [b"k"], [b"v"], [1 << 63])
        put_many(batch, [b"k"], [b"v"], None)  # None: every put plain
        driver.drive(calls.write(db, batch))
    assert driver.drive(calls.get_row(db, b"k")) == (b"v", None)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    stored=st.sets(st.binary(min_size=1, max_size=6), min_size=1, max_size=30),
    probes=st.lists(st.binary(max_size=7), min_size=1, max_size=4),
)
def test_seek_lands_where_the_generated_seek_lands(
    db: Any, stored: set[bytes], probes: list[bytes]
) -> None:
    tag = b"s%d/" % time.time_ns()
    batch = B.WriteBatch()
    calls.batch_put_many(batch, [tag + key for key in stored], [key * 2 for key in stored])
    driver.drive(calls.write(db, batch))
    key_range = B.KeyRange(start=tag, start_inclusive=True, end=tag + b"\xff", end_inclusive=True)
    direct = driver.drive(calls.method(db, "scan", key_range))
    shipped = driver.drive(calls.method(db, "scan", key_range))
    for probe in probes:  # a seek behind the position is refused alike by both
        key = tag + probe
        outcomes = [
            _outcome(calls.seek, direct, key),
            _outcome(calls.method, shipped, "seek", key),
        ]
        assert outcomes[0] == outcomes[1]
        assert driver.drive(calls.next_columns(direct, 3)) == driver.drive(
            calls.next_columns(shipped, 3)
        )


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return driver.drive(call(*args))
    except Exception as exc:  # compared: the same error class and message
        return type(exc), str(exc)


def test_the_direct_calls_refuse_what_is_not_theirs(db: Any) -> None:
    """A Db handle is never taken for a WriteBatch's; keys and values must pair up; an
    expiry outside i64 is refused as the generated converter refuses it."""
    batch = B.WriteBatch()
    with pytest.raises(TypeError):
        calls.batch_put_many(db, [b"k"], [b"v"])
    with pytest.raises(TypeError):
        calls.batch_delete(db, b"k")
    with pytest.raises(TypeError):
        calls.batch_put_expiring(db, b"k", b"v", 1)
    with pytest.raises(ValueError, match="1 keys but 2 values"):
        calls.batch_put_many(batch, [b"k"], [b"v", b"w"])
    with pytest.raises(ValueError):
        calls.batch_put_expiring(batch, b"k", b"v", 1 << 63)
    with pytest.raises(TypeError):
        calls.batch_delete(batch, "text")  # type: ignore[arg-type]
