"""The C accelerator (native/_accel via native/accel.py): the path it reports, answers equal
to the ctypes driver's for every hot call and source, and its waits: Ctrl-C cancels a pending
sync read, a wait_for timeout cancels a pending async one, and the store answers afterwards.
Skipped where the extension is not built (the ctypes tests cover that path)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.native import accel, calls, driver
from opendata_kv.native.binding import generated

B = generated()
REPO = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("OPENDATA_KV_ACCEL_EXAMPLES", "30"))

pytestmark = pytest.mark.skipif(
    os.environ.get(accel.ENV_DISABLE) or accel._import()[0] is None,
    reason="the C accelerator is off or not built",
)


def _version(**env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "opendata_kv", "--version"],
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split("; ", 1)[1]


def test_version_names_the_active_path() -> None:
    assert _version() == "native: C accelerator"
    assert _version(OPENDATA_KV_NO_EXTENSIONS="1") == (
        "native: ctypes driver (OPENDATA_KV_NO_EXTENSIONS=1)"
    )
    assert _version(OPENDATA_KV_NO_NATIVE="1") == (
        "native: generated binding (turned off by OPENDATA_KV_NO_NATIVE)"
    )


def test_the_hot_names_are_rebound_and_switch_back_with_the_driver() -> None:
    assert calls.status().active and accel.reason() == "C accelerator"
    module = accel._import()[0]
    assert calls.get_row_now is module.get_row_now  # type: ignore[union-attr]
    try:
        calls.set_active(False)
        assert calls.get_row_now is calls._PURE["get_row_now"]
    finally:
        calls.set_active(True)
    assert calls.get_row_now is module.get_row_now  # type: ignore[union-attr]


@contextlib.contextmanager
def _memory_db() -> Iterator[Any]:
    store = B.ObjectStore.resolve("memory:///")
    builder = B.DbBuilder(f"accel-{os.getpid()}-{time.time_ns()}", store)
    handle = driver.drive(calls.method(builder, "build"))
    try:
        yield handle
    finally:
        driver.drive(calls.method(handle, "shutdown"))


@pytest.fixture
def db() -> Iterator[Any]:
    with _memory_db() as handle:
        yield handle


PURE = calls._PURE


def _outcome(function: Any, *args: Any) -> tuple[str, Any]:
    """What a call returned, or the type and text of what it raised."""
    try:
        return "returned", function(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


ROWS = st.dictionaries(st.binary(min_size=1, max_size=20), st.binary(max_size=200), max_size=20)


@settings(max_examples=EXAMPLES, deadline=None)
@given(rows=ROWS, probes=st.lists(st.binary(max_size=6), max_size=5))
def test_every_hot_call_answers_as_the_ctypes_driver(
    rows: dict[bytes, bytes], probes: list[bytes]
) -> None:
    with _memory_db() as db:
        _compare(db, rows, probes)


def _compare(db: Any, rows: dict[bytes, bytes], probes: list[bytes]) -> None:
    batch = B.WriteBatch()
    for key, value in rows.items():
        calls.batch_put(batch, key, value)
    expiring = b"\xffttl"
    batch.put_with_options(expiring, b"x", B.PutOptions(ttl=B.Ttl.EXPIRE_AFTER_MILLIS(600_000)))
    driver.drive(calls.write(db, batch))
    if rows:
        first = next(iter(rows))
        driver.drive(calls.delete(db, first))
        driver.drive(calls.put(db, first + b"\x00", b"put"))
    keys = [*rows, expiring, *probes, b"absent"]
    snapshot = driver.drive(calls.method(db, "snapshot"))
    for source in (db, snapshot):
        for key in keys:  # an empty key is slatedb's Error.Invalid, on both paths
            for name in ("get_now", "get_row_now"):
                assert _outcome(getattr(calls, name), source, key) == _outcome(
                    PURE[name], source, key
                )
            assert _outcome(lambda s, k: driver.drive(calls.read_row(s, k)), source, key) == (
                _outcome(PURE["get_row_now"], source, key)
            )
        for name in ("get_values_now", "get_rows_now"):
            assert _outcome(getattr(calls, name), source, keys) == _outcome(
                PURE[name], source, keys
            )
        for name in ("get_values", "get_rows"):
            assert _outcome(
                lambda s, k, n=name: asyncio.run(_awaited(getattr(calls, n)(s, k))), source, keys
            ) == (_outcome(lambda s, k, n=name: driver.drive(PURE[n](s, k)), source, keys))
    full = B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    c_iter = driver.drive(calls.method(db, "scan", full))
    pure_iter = driver.drive(calls.method(db, "scan", full))
    while True:
        got = driver.drive(calls.next_columns(c_iter, 7))
        assert got == driver.drive(PURE["next_columns"](pure_iter, 7))
        if not got[0]:
            break


def test_non_bytes_and_unknown_sources_take_the_pure_path(db: Any) -> None:
    driver.drive(calls.put(db, b"k", b"v"))
    assert calls.get_now(db, bytearray(b"k")) == b"v"  # type: ignore[arg-type]
    assert calls.get_values_now(db, [b"k", bytearray(b"k")]) == [b"v", b"v"]  # type: ignore[list-item]
    with pytest.raises(ValueError, match="u32"):
        calls.next_columns(
            driver.drive(
                calls.method(
                    db,
                    "scan",
                    B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False),
                )
            ),
            -1,
        )


def test_an_awaited_call_completes_inline_and_threads_share_the_store(db: Any) -> None:
    errors: list[str] = []

    def work(worker: int) -> None:
        for n in range(200):
            key = b"w%d-%d" % (worker, n)
            driver.drive(calls.put(db, key, key))
            if calls.get_now(db, key) != key:
                errors.append(repr(key))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors

    async def reads() -> list[Any]:
        keys = [b"w0-%d" % n for n in range(200)]
        return await asyncio.gather(*(calls.read_value(db, key) for key in keys))

    assert asyncio.run(reads()) == [b"w0-%d" % n for n in range(200)]


def _sst_store(s3_url: str, proxy: Any) -> Any:
    """A SyncStore on s3 (through `proxy`) whose rows are in an SST and not in any cache."""
    from opendata_kv import RecordType, Schema
    from opendata_kv import fields as F
    from opendata_kv.store.sync import SyncStore

    item = RecordType("item", 1, [("n", F.u64)])
    options = {"endpoint": proxy.endpoint, "timeout": "60s", "connect_timeout": "60s"}
    store = SyncStore.open(s3_url, Schema(item), object_store_options=options, cache_bytes=0)
    for n in range(20):
        store.put(item, (n,), f"v{n}")
    store.checkpoint()  # flushes the memtable into an SST
    store.close()
    return SyncStore.open(s3_url, Schema(item), object_store_options=options, cache_bytes=0), item


@pytest.mark.s3
def test_ctrl_c_cancels_a_pending_c_read_in_a_process_of_its_own() -> None:
    """The Ctrl-C test below, in a fresh pytest process: in a shared worker another test's
    leftover state once kept SIGINT from reaching a pending C read, and the run hung; a child
    with a deadline fails instead of hanging."""
    if os.environ.get(_CTRL_C_CHILD):
        pytest.skip("this is the child's own run")
    test = f"{__file__}::test_ctrl_c_cancels_a_pending_c_read_and_the_store_answers_after"
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", test],
        env={**os.environ, _CTRL_C_CHILD: "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert "1 passed" in child.stdout, child.stdout[-3000:]


_CTRL_C_CHILD = "OPENDATA_KV_CTRL_C_CHILD"


@pytest.mark.s3
def test_ctrl_c_cancels_a_pending_c_read_and_the_store_answers_after(
    s3_url: str, moto_server: Any
) -> None:
    """Run only inside the child process of the test above."""
    if not os.environ.get(_CTRL_C_CHILD):
        pytest.skip("runs in a process of its own (the test above)")
    from tcp_proxy import TcpProxy

    with TcpProxy(("127.0.0.1", moto_server.port)) as proxy:
        store, item = _sst_store(s3_url, proxy)
        try:
            proxy.cut("blackhole")
            main = threading.main_thread().ident
            assert main is not None
            for read in (lambda: store.get(item, (3,)), lambda: store.get_many(item, [(5,), (6,)])):
                done = threading.Event()

                started = time.monotonic()

                def interrupt(done: threading.Event, started: float) -> None:
                    # Ctrl-C every 0.3 s until the read gives up, for at most 10 s: one SIGINT
                    # handled before the read blocks (seen once under xdist) would hang the test
                    while not done.wait(0.3) and time.monotonic() - started < 10:
                        signal.pthread_kill(main, signal.SIGINT)

                timer = threading.Thread(target=interrupt, args=(done, started))
                timer.start()
                try:
                    with pytest.raises(KeyboardInterrupt):
                        read()
                finally:
                    done.set()
                    timer.join()
                assert time.monotonic() - started < 10
            proxy.restore()
            assert store.get(item, (3,)) == "v3"
            assert store.get_many(item, [(1,), (2,), (99,)]) == ["v1", "v2", None]
        finally:
            proxy.restore()
            store.close()


@pytest.mark.s3
def test_wait_for_cancels_a_pending_async_c_read(s3_url: str, moto_server: Any) -> None:
    from tcp_proxy import TcpProxy

    with TcpProxy(("127.0.0.1", moto_server.port)) as proxy:
        store, item = _sst_store(s3_url, proxy)
        try:
            proxy.cut("blackhole")

            async def pending() -> None:  # the async Store's get: calls.read_row in C
                await asyncio.wait_for(store.store.get(item, (3,)), 0.3)

            started = time.monotonic()
            with pytest.raises((asyncio.TimeoutError, TimeoutError)):
                asyncio.run(pending())
            assert time.monotonic() - started < 10
            proxy.restore()
            assert store.get(item, (4,)) == "v4"
        finally:
            proxy.restore()
            store.close()


def test_seek_and_the_batch_calls_do_what_the_generated_methods_do(db: Any) -> None:
    """seek, batch_delete, batch_put_expiring and batch_put_many in C (calls.py rebinds them
    when it has the pure versions) against the generated methods on a second batch."""
    module = accel._import()[0]
    assert module is not None
    expire_at = int(time.time() * 1000) + 3_600_000
    ours, theirs = B.WriteBatch(), B.WriteBatch()
    keys = [b"m%03d" % n for n in range(40)]
    module.batch_put_many(ours, keys, [key * 2 for key in keys])
    for key in keys:
        theirs.put(key, key * 2)
    module.batch_delete(ours, b"m001")
    theirs.delete(b"m001")
    module.batch_put_expiring(ours, b"ttl", b"x", expire_at)
    theirs.put_with_options(b"ttl", b"x", B.PutOptions(ttl=B.Ttl.EXPIRE_AT_MILLIS(expire_at)))
    # lengths that differ go to the pure function, which raises ValueError (TypeError where
    # calls.py has no batch_put_many to fall back on)
    with pytest.raises((TypeError, ValueError)):
        module.batch_put_many(ours, keys, keys[:-1])
    with _memory_db() as other:
        driver.drive(calls.write(db, ours))
        driver.drive(calls.write(other, theirs))
        full = B.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        for handle in (db, other):
            assert driver.drive(calls.get_row(handle, b"ttl")) == (b"x", expire_at)
        scans = [driver.drive(calls.method(h, "scan", full)) for h in (db, other)]
        everything = [driver.drive(calls.next_columns(it, 100)) for it in scans]
        assert everything[0] == everything[1] and len(everything[0][0]) == 40
        first, second = (driver.drive(calls.method(h, "scan", full)) for h in (db, other))
        driver.drive(module.seek(first, b"m020"))
        driver.drive(calls.method(second, "seek", b"m020"))
        assert driver.drive(calls.next_columns(first, 5)) == driver.drive(
            calls.next_columns(second, 5)
        )

        async def seek_async() -> Any:
            iterator = await calls.method(db, "scan", full)
            await module.seek(iterator, b"m030")
            return await calls.next_columns(iterator, 2)

        assert asyncio.run(seek_async())[0] == [b"m030", b"m031"]


def test_an_awaited_read_that_is_ready_at_once_never_touches_the_loop(db: Any) -> None:
    """Memtable reads are READY when first polled: the awaited C call returns inline, with no
    asyncio future made (the loop is looked at only when a native future pends)."""
    keys = [b"inline%03d" % n for n in range(100)]
    batch = B.WriteBatch()
    for key in keys:
        calls.batch_put(batch, key, key)
    driver.drive(calls.write(db, batch))
    made: list[int] = []
    loop = asyncio.new_event_loop()
    create_future = loop.create_future

    def counted() -> Any:
        made.append(1)
        return create_future()

    loop.create_future = counted  # type: ignore[method-assign]

    async def reads() -> list[Any]:
        single = [await calls.read_value(db, key) for key in keys]
        return [single, await calls.get_rows(db, keys)]

    try:
        single, rows = loop.run_until_complete(reads())
    finally:
        loop.close()
    assert single == keys and rows == [(key, None) for key in keys]
    assert made == []
