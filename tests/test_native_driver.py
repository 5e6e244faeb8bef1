"""The native layer (opendata_kv.native): the driver's calls agree with the generated
binding, raise the same errors, run without an event loop, survive Ctrl-C and many threads,
and hold memory flat; the guard stands aside for a binding it does not know."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.native import binding, calls, driver, wire
from opendata_kv.native.binding import generated

B = generated()


def _open_db() -> Any:
    store = B.ObjectStore.resolve("memory:///")
    builder = B.DbBuilder(f"native-{os.getpid()}-{time.time_ns()}", store)
    return driver.drive(calls.method(builder, "build"))


@pytest.fixture
def db() -> Iterator[Any]:
    assert calls.status().active, calls.status()
    handle = _open_db()
    yield handle
    driver.drive(calls.method(handle, "shutdown"))


def _generated(awaitable: Any) -> Any:
    """Run a generated binding coroutine the way the generated code expects (asyncio)."""

    async def main() -> Any:
        return await awaitable

    return asyncio.run(main())


ROW = st.tuples(
    st.binary(min_size=1, max_size=40),
    st.binary(max_size=300),
    st.sampled_from(["plain", "expired", "expires later", "deleted"]),
)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(ROW, max_size=30, unique_by=lambda row: row[0]), probe=st.binary(max_size=8))
def test_native_calls_return_what_the_generated_binding_returns(
    rows: list[tuple[bytes, bytes, str]], probe: bytes
) -> None:
    """Present, missing, expired and deleted keys: get, get_key_value and next_batch through
    the driver (sync and async) equal the generated methods' answers."""
    db = _open_db()
    now = time.time_ns() // 1_000_000
    try:
        for key, value, kind in rows:
            if kind == "plain" or kind == "deleted":
                driver.drive(calls.put(db, key, value))
            else:
                at = now - 60_000 if kind == "expired" else now + 3_600_000
                options = B.PutOptions(ttl=B.Ttl.EXPIRE_AT_MILLIS(at))
                driver.drive(
                    calls.method(db, "put_with_options", key, value, options, B.WriteOptions())
                )
            if kind == "deleted":
                driver.drive(calls.delete(db, key))
        probes = [key for key, _, _ in rows] + [probe or b"\x00", b"\xff" * 9]
        for key in probes:
            expected_value = _generated(db.get(key))
            expected_row = _generated(db.get_key_value(key))
            expected = (
                None if expected_row is None else (expected_row.value, expected_row.expire_ts)
            )
            assert driver.drive(calls.get(db, key)) == expected_value
            assert driver.drive(calls.get_row(db, key)) == expected
            assert calls.get_now(db, key) == expected_value  # the sync face's fused reads
            assert calls.get_row_now(db, key) == expected

            async def both(key: bytes = key) -> tuple[Any, Any]:
                return await calls.get(db, key), await calls.get_row(db, key)

            assert asyncio.run(both()) == (expected_value, expected)

            async def fused(key: bytes = key) -> tuple[Any, Any]:
                return await calls.read_value(db, key), await calls.read_row(db, key)

            assert asyncio.run(fused()) == (expected_value, expected)
            assert driver.drive(calls.read_row(db, key)) == expected
        assert driver.drive(calls.many([calls.get(db, key) for key in probes])) == [
            _generated(db.get(key)) for key in probes
        ]
        assert calls.get_values_now(db, probes) == [_generated(db.get(key)) for key in probes]
        rows = [_generated(db.get_key_value(key)) for key in probes]
        assert calls.get_rows_now(db, probes) == [
            None if row is None else (row.value, row.expire_ts) for row in rows
        ]
        full = B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        theirs = _generated(_generated(db.scan(full)).next_batch(1000))
        ours = driver.drive(calls.next_columns(driver.drive(calls.method(db, "scan", full)), 1000))
        assert ours == calls._columns(theirs)
    finally:
        driver.drive(calls.method(db, "shutdown"))


def test_errors_raise_the_same_classes_as_the_generated_binding() -> None:
    """A closed database: the driver's calls raise the binding's own exception classes."""
    db = _open_db()
    driver.drive(calls.method(db, "shutdown"))
    for ours, theirs in (
        (lambda: driver.drive(calls.get(db, b"k")), lambda: _generated(db.get(b"k"))),
        (lambda: driver.drive(calls.get_row(db, b"k")), lambda: _generated(db.get_key_value(b"k"))),
        (lambda: driver.drive(calls.put(db, b"k", b"v")), lambda: _generated(db.put(b"k", b"v"))),
    ):
        with pytest.raises(Exception) as expected:
            theirs()
        with pytest.raises(Exception) as got:
            ours()
        assert type(got.value) is type(expected.value)
    with pytest.raises(Exception) as empty_key:
        driver.drive(calls.put(_open_db(), b"", b"v"))
    assert isinstance(empty_key.value, B.Error)


def test_sync_calls_need_no_event_loop_and_work_inside_one(db: Any) -> None:
    """drive() runs on the calling thread: in a plain thread, and from async code (a sync
    API used inside a running loop) without touching that loop."""
    driver.drive(calls.put(db, b"a", b"1"))
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(driver.drive(calls.get(db, b"a"))))
    worker.start()
    worker.join()
    assert box == [b"1"]

    async def inside() -> Any:
        return driver.drive(calls.get(db, b"a"))

    assert asyncio.run(inside()) == b"1"


def test_drive_refuses_an_await_that_is_not_native() -> None:
    async def sleeps() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="not a native call"):
        driver.drive(sleeps())


def test_run_uses_a_private_loop_or_a_thread_inside_a_running_loop() -> None:
    async def sleeps() -> str:
        await asyncio.sleep(0)
        return "slept"

    assert driver.run(sleeps()) == "slept"

    async def nested() -> str:
        return driver.run(sleeps())

    assert asyncio.run(nested()) == "slept"


@pytest.mark.s3
def test_ctrl_c_during_a_pending_write_leaves_the_next_call_working(
    s3_url: str, moto_server: Any
) -> None:
    """A flush to an object store that stopped answering pends; Ctrl-C while the sync caller
    is blocked on it raises KeyboardInterrupt at once, frees (cancels) the Rust future, and
    once the store answers again the next calls work and the write is durable."""
    from tcp_proxy import TcpProxy

    from opendata_kv import RecordType, Schema
    from opendata_kv import fields as F
    from opendata_kv.store import Store

    item = RecordType("item", 1, [("n", F.u64)])
    with TcpProxy(("127.0.0.1", moto_server.port)) as proxy:
        options = {"endpoint": proxy.endpoint, "timeout": "60s", "connect_timeout": "60s"}
        store = driver.run(Store.open(s3_url, Schema(item), object_store_options=options))
        try:
            driver.drive(store.put(item, (1,), "before"))
            driver.drive(store.flush())
            proxy.cut("blackhole")
            driver.drive(store.put(item, (2,), "pending"))
            main = threading.main_thread().ident
            assert main is not None
            # a real SIGINT to the main thread: it interrupts a blocking lock wait, as Ctrl-C
            # does (_thread.interrupt_main only sets the flag)
            timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
            started = time.monotonic()
            timer.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    driver.drive(store.flush())
            finally:
                timer.join()
            assert time.monotonic() - started < 10
            assert not driver._waiters, [
                (w.kind.name, w.code, w.lock, w.future) for w in driver._waiters.values()
            ]
            # a Ctrl-C that a continuation swallowed (noted by driver._note_lost) is raised
            # by the poller instead of waiting for a wake-up that will not come
            driver._local.lost = True
            with pytest.raises(KeyboardInterrupt):
                driver.drive(store.flush())
            assert not driver._local.lost and not driver._waiters
            proxy.restore()
            driver.drive(store.put(item, (3,), "after"))
            driver.drive(store.flush())
            got = driver.drive(store.get_many(item, [(1,), (2,), (3,)]))
            assert got == ["before", "pending", "after"]
        finally:
            proxy.restore()
            driver.run(store.close())


def test_a_ctrl_c_swallowed_in_a_continuation_is_noted() -> None:
    """ctypes cannot raise out of a callback: the driver's unraisable hook notes a
    KeyboardInterrupt raised in the continuation and leaves anything else to the hook
    before it."""
    seen: list[Any] = []
    previous = driver._previous_hook
    driver._previous_hook = seen.append
    try:
        other = types.SimpleNamespace(object=len, exc_type=KeyboardInterrupt)
        driver._note_lost(other)
        assert seen == [other] and not driver._local.lost
        ours = types.SimpleNamespace(object=driver._on_continue, exc_type=KeyboardInterrupt)
        driver._note_lost(ours)
        assert driver._local.lost and seen == [other]
    finally:
        driver._previous_hook = previous
        driver._local.lost = False


def test_many_threads_on_one_database_read_what_they_wrote(db: Any) -> None:
    errors: list[str] = []

    def work(worker: int) -> None:
        for n in range(300):
            key = b"t%d-%d" % (worker, n)
            driver.drive(calls.put(db, key, key * 3))
            got = driver.drive(calls.get(db, key))
            if got != key * 3:
                errors.append(f"{key!r}: {got!r}")
            if n % 50 == 0:
                keys = [b"t%d-%d" % (worker, m) for m in range(n + 1)]
                found = driver.drive(calls.many([calls.get(db, k) for k in keys]))
                if found != [k * 3 for k in keys]:
                    errors.append(f"many at {n}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def _rss_kib() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_a_million_gets_leave_rss_flat(db: Any) -> None:
    """No buffer, handle, waiter or future is leaked per call: RSS after 250k more gets is
    within 4 MiB of RSS after the first 50k (a leak of 17 bytes a call or more fails: any
    leaked object, buffer or handle is larger; 1M gets took 87 s on the ctypes driver)."""
    keys = [b"r%05d" % n for n in range(1000)]
    batch = B.WriteBatch()
    for key in keys:
        calls.batch_put(batch, key, key * 10)
    driver.drive(calls.write(db, batch))
    get, drive = calls.get_row, driver.drive
    for n in range(50_000):
        drive(get(db, keys[n % 1000]))
    before = _rss_kib()
    for n in range(250_000):
        drive(get(db, keys[n % 1000]))
    growth = _rss_kib() - before
    assert growth < 4 * 1024, f"RSS grew {growth} KiB over 250k gets"
    assert not driver._waiters


def test_the_guard_stands_aside_for_an_unknown_binding(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another generated text: the driver is off, with one warning naming the version and
    the cost; OPENDATA_KV_NO_NATIVE=1 turns it off without a warning."""
    monkeypatch.setattr(binding, "KNOWN_SHA256", "0" * 64)
    with caplog.at_level(logging.WARNING, logger="opendata_kv.native"):
        status = binding.decide()
    assert not status.active and "sha256" in status.reason
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert status.version is not None and status.version in message and "generated" in message
    monkeypatch.setattr(binding, "KNOWN_SHA256", binding.source_sha256(B))
    caplog.clear()
    monkeypatch.setenv(binding.ENV_DISABLE, "1")
    status = binding.decide()
    assert not status.active and binding.ENV_DISABLE in status.reason and not caplog.records


def test_the_generated_path_serves_sync_callers_when_the_driver_is_off(db: Any) -> None:
    driver.drive(calls.put(db, b"g", b"generated"))
    try:
        assert not calls.set_active(False).active
        assert calls.sync(calls.get(db, b"g")) == b"generated"
        assert calls.sync(calls.get_row(db, b"g")) == (b"generated", None)
        assert calls.sync(calls.many([calls.get(db, b"g"), calls.get(db, b"x")])) == [
            b"generated",
            None,
        ]
        assert calls.get_row_now(db, b"g") == (b"generated", None)
        assert calls.get_values_now(db, [b"x", b"g"]) == [None, b"generated"]
    finally:
        assert calls.set_active(True).active


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=200), cut=st.integers(0, 250), flag=st.integers(0, 255))
def test_wire_readers_reject_malformed_buffers(data: bytes, cut: int, flag: int) -> None:
    """A truncated or mangled optional-bytes buffer is an InternalError, never a short or
    padded value (the generated readers' strictness)."""
    framed = bytes([flag]) + len(data).to_bytes(4, "big", signed=True) + data
    mangled = framed[: min(cut, len(framed))]
    ok = (flag == 0 and len(mangled) == 1) or (flag == 1 and mangled == framed)
    reader_input = B._UniffiRustBuffer.alloc(len(mangled))
    ctypes_memmove(reader_input, mangled)
    if ok:
        expected = None if flag == 0 else data
        assert wire.read_optional_bytes(reader_input) == expected
    else:
        with pytest.raises((B.InternalError, RuntimeError)):
            wire.read_optional_bytes(reader_input)


def ctypes_memmove(buffer: Any, data: bytes) -> None:
    import ctypes

    if data:
        ctypes.memmove(buffer.data, data, len(data))
    buffer.len = len(data)


def test_batch_put_frames_small_and_large_values_alike(db: Any) -> None:
    """Values framed inline by batch_put (up to 64 KiB) and through wire.lower_bytes (larger)
    read back byte for byte through the generated get."""
    values = [
        b"",
        b"\x00",
        b"\xff" * 3,
        os.urandom(65_536 - 4),
        os.urandom(65_537),
        os.urandom(200_000),
    ]
    batch = B.WriteBatch()
    for n, value in enumerate(values):
        calls.batch_put(batch, b"big%d" % n, value)
    driver.drive(calls.write(db, batch))
    assert [_generated(db.get(b"big%d" % n)) for n in range(len(values))] == values
    with pytest.raises(TypeError):
        calls.batch_put(db, b"k", b"v")  # a Db's handle is never taken for a WriteBatch's
