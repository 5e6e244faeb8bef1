"""Store metrics timed by the C accelerator (native/_accel/timing.c, used by store/metrics.py
when the accelerator is in use): the hot methods are its Timed, not Python wrappers; a Timed
measures the call it wraps (a coroutine method from its first send to its end), sends errors
with their duration to the error series, loses no count across threads, and its Durations
replays into the histogram an SDK records directly."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_metrics import durations  # the same durations as the Python aggregation's test

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.errors import OpendataKvError
from opendata_kv.native import accel, calls
from opendata_kv.store import OpenOptions, Store, SyncStore
from opendata_kv.store import metrics as store_metrics

item = RecordType("item", 7, [("n", F.u32)])
SCHEMA = Schema(item)
DURATION = "db.client.operation.duration"


def _module() -> Any:
    calls.active()
    return accel.active_module()


pytestmark = pytest.mark.skipif(_module() is None, reason="the C accelerator is not in use")


def _telemetry() -> tuple[InMemoryMetricReader, store_metrics.Telemetry]:
    reader = InMemoryMetricReader()
    t = store_metrics.telemetry(MeterProvider(metric_readers=[reader]), "/db")
    assert t is not None
    return reader, t


def _durations(reader: InMemoryMetricReader) -> dict[tuple[str, str | None], Any]:
    data = reader.get_metrics_data()
    assert data is not None
    out = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == DURATION:
                    for p in metric.data.data_points:
                        key = (p.attributes["db.operation.name"], p.attributes.get("error.type"))
                        out[key] = p
    return out


def test_the_hot_methods_are_timed_in_c(tmp_path: Path) -> None:
    module = _module()
    reader = InMemoryMetricReader()
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[reader]))
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        inner = vars(store.store)
        for name in ("get", "_get_now", "put", "delete", "flush"):
            assert type(inner[name]) is module.Timed, name
        store.put(item, (1,), {"a": 1})
        assert store.get(item, (1,)) == {"a": 1}
        # the method's name and doc, as functools.wraps gives a Python wrapper
        assert store.store.get.__name__ == "get"
        assert store.store.get.__doc__ == Store.get.__doc__
    found = _durations(reader)
    assert found["get", None].count == 1 and found["put", None].count == 1


def test_a_timed_call_measures_the_call_and_passes_arguments_on() -> None:
    module = _module()
    reader, t = _telemetry()
    spans: list[tuple[int, int]] = []

    def method(a: int, b: int = 0, *, c: int = 0) -> int:
        start = time.perf_counter_ns()
        while time.perf_counter_ns() - start < 20_000:  # a span the clock can see
            pass
        spans.append((start, time.perf_counter_ns()))
        return a + b + c

    timed = module.Timed(method, t.durations("get", module.Durations), lambda *a: None, False)
    outer = []
    for n in range(5):
        before = time.perf_counter_ns()
        assert timed(n, 2, c=3) == n + 5
        outer.append(time.perf_counter_ns() - before)
    got = t.series("get").snapshot()
    assert sum(got[: store_metrics.SUM]) == 5
    inner = [end - start for start, end in spans]
    # each duration lies between the method's own span and the caller's
    assert min(inner) <= got[store_metrics.LEAST] <= min(outer)
    assert max(inner) <= got[store_metrics.MOST] <= max(outer)
    assert sum(inner) <= sum(got[store_metrics.SUM : store_metrics.LEAST]) <= sum(outer)
    assert _durations(reader)["get", None].count == 5


def test_errors_go_to_their_series_with_error_type() -> None:
    module = _module()
    reader, t = _telemetry()
    failures: list[tuple[int, BaseException]] = []

    def on_error(elapsed: int, exc: BaseException) -> None:
        failures.append((elapsed, exc))
        t.add("get", elapsed, exc)

    def method() -> None:
        raise KeyError("k")

    timed = module.Timed(method, t.durations("get", module.Durations), on_error, False)
    with pytest.raises(KeyError) as raised:
        timed()
    assert failures[0][1] is raised.value and failures[0][0] >= 0
    assert sum(t.series("get").snapshot()[: store_metrics.SUM]) == 0  # not a success
    found = _durations(reader)
    assert found["get", "KeyError"].count == 1 and ("get", None) not in found


def test_a_timed_coroutine_is_timed_from_its_first_send_to_its_end() -> None:
    module = _module()
    _, t = _telemetry()
    errors: list[BaseException] = []
    gate: list[asyncio.Future[None]] = []

    async def method(x: int) -> tuple[int, int]:
        if x < 0:
            raise ValueError(x)
        if x == 1:  # suspends until released
            future = asyncio.get_running_loop().create_future()
            gate.append(future)
            await future
        return (x, x)

    timed = module.Timed(method, t.durations("get", module.Durations), _collect(errors), True)

    async def main() -> None:
        assert await timed(0) == (0, 0)  # a tuple result stays one value
        task = asyncio.create_task(timed(1))  # a coroutine to asyncio
        await asyncio.sleep(0)
        gate[0].set_result(None)
        assert await task == (1, 1)
        with pytest.raises(ValueError):
            await timed(-1)
        cancelled = asyncio.create_task(timed(1))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        never = timed(5)  # created, never awaited: no operation
        never.close()

    asyncio.run(main())
    assert sum(t.series("get").snapshot()[: store_metrics.SUM]) == 2
    assert [type(e) for e in errors] == [ValueError, asyncio.CancelledError]


def test_a_closed_timed_coroutine_ends_with_generator_exit() -> None:
    module = _module()
    _, t = _telemetry()
    errors: list[BaseException] = []

    class Pending:
        def __await__(self) -> Any:
            yield "waiting"

    async def method() -> None:
        await Pending()

    timed = module.Timed(method, t.durations("get", module.Durations), _collect(errors), True)
    steps = timed().__await__()
    assert steps.send(None) == "waiting"
    steps.close()
    assert [type(e) for e in errors] == [GeneratorExit]
    with pytest.raises(RuntimeError):
        steps.send(None)


class _Holder:
    """A bound method's instance: the Timed calls its function with the instance first."""

    def __init__(self) -> None:
        self.tag = "holder"

    def nine(self, a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int) -> Any:
        return (self.tag, a + b + c + d + e + f + g + h + i)

    def pair(self, a: int, b: int = 0) -> Any:
        return (self.tag, a, b)

    async def later(self, x: int) -> Any:
        await asyncio.sleep(0)
        return (self.tag, x)


def test_a_bound_method_gets_its_instance_however_it_is_called() -> None:
    """The Timed calls a bound method's function itself, the instance put before the
    arguments: in the caller's spare slot (a call from Python code) or in a copy (a call
    through tp_call, and past 7 arguments a copy on the heap)."""
    module = _module()
    _, t = _telemetry()
    holder = _Holder()
    found = t.durations("get", module.Durations)
    pair = module.Timed(holder.pair, found, print, False)
    nine = module.Timed(holder.nine, found, print, False)
    assert pair(1) == ("holder", 1, 0)
    assert pair(1, b=2) == ("holder", 1, 2)
    assert pair(*[3], **{"b": 4}) == ("holder", 3, 4)  # CALL_FUNCTION_EX: no spare slot
    assert list(map(pair, [5, 6])) == [("holder", 5, 0), ("holder", 6, 0)]
    assert nine(*range(9)) == ("holder", 36)  # ten with the instance: the heap copy
    assert nine(0, 1, 2, 3, 4, 5, 6, 7, i=8) == ("holder", 36)
    with pytest.raises(TypeError):
        pair()
    assert sum(found.snapshot()[: store_metrics.SUM]) == 7


def test_an_ended_awaitable_is_reused_and_a_live_one_never() -> None:
    """A timed coroutine's awaitable, once ended and dropped, serves the next call (no
    allocation a get); while one is alive the next call gets its own, and every operation
    is counted once."""
    module = _module()
    _, t = _telemetry()
    errors: list[BaseException] = []
    holder = _Holder()
    timed = module.Timed(holder.later, t.durations("get", module.Durations), _collect(errors), True)

    async def main() -> None:
        first = timed(1)
        second = timed(2)  # the first is alive: not reused
        assert first is not second
        assert await second == ("holder", 2)
        assert await first == ("holder", 1)
        kept = id(first)
        del first, second
        again = timed(3)
        assert id(again) == kept  # a dropped one taken back
        assert await again == ("holder", 3)
        with pytest.raises(RuntimeError):  # ended: not awaited twice
            await again
        del again
        running = timed(4).__await__()
        running.send(None)  # suspended at the sleep
        del running  # dropped while running: GeneratorExit, and not kept
        results = await asyncio.gather(*(timed(n) for n in range(5, 9)))
        assert results == [("holder", n) for n in range(5, 9)]

    asyncio.run(main())
    assert sum(t.series("get").snapshot()[: store_metrics.SUM]) == 7
    assert [type(e) for e in errors] == [GeneratorExit]


def _collect(errors: list[BaseException]) -> Any:
    return lambda elapsed, exc: errors.append(exc)


def test_no_count_is_lost_across_threads() -> None:
    module = _module()
    _, t = _telemetry()
    timed = module.Timed(lambda: None, t.durations("get", module.Durations), print, False)
    threads, calls_each = 4, 20_000

    def run() -> None:
        for _ in range(calls_each):
            timed()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    taken = []
    while any(w.is_alive() for w in workers):  # collections while they add
        taken.append(t.series("get").take())
    for w in workers:
        w.join()
    taken.append(t.series("get").take())
    assert sum(sum(found[: store_metrics.SUM]) for found in taken) == threads * calls_each


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "put"]), durations), min_size=1, max_size=3))
def test_the_c_aggregation_replays_the_histogram_recorded_directly(
    runs: list[tuple[str, list[int]]],
) -> None:
    """Added to a C Durations and replayed at the collection, the exported histogram has the
    bucket counts, count, min and max of recording each duration directly, and its sum."""
    module = _module()
    reader, t = _telemetry()
    direct = InMemoryMetricReader()
    histogram = (
        MeterProvider(metric_readers=[direct])
        .get_meter("direct")
        .create_histogram(
            DURATION, unit="s", explicit_bucket_boundaries_advisory=store_metrics.BUCKETS
        )
    )
    for operation, measured in runs:
        found = t.durations(operation, module.Durations)
        for elapsed in measured:
            found.add(elapsed)
            histogram.record(elapsed / 1e9, {"db.operation.name": operation})
    ours = _durations(reader)
    theirs = _durations(direct)
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        got = ours[key]
        assert list(got.bucket_counts) == list(want.bucket_counts), key
        assert (got.count, got.min, got.max) == (want.count, want.min, want.max)
        assert got.sum == pytest.approx(want.sum, rel=1e-12, abs=1e-15)


def test_puts_and_deletes_count_records_written_from_their_durations(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[reader]))

    async def main() -> None:
        async with Store.open(tmp_path / "db", SCHEMA, options=options) as store:
            for n in range(3):
                await store.put(item, (n,), {"a": n})
            await store.delete(item, (0,))
            with pytest.raises(OpendataKvError):  # a field that is not a u32: nothing written
                await store.put(item, ("x",), {"a": 0})

    asyncio.run(main())
    data = reader.get_metrics_data()
    assert data is not None
    written = {
        p.attributes["db.operation.name"]: p.value
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == store_metrics.RECORDS_WRITTEN
        for p in m.data.data_points
    }
    assert written == {"put": 3, "delete": 1}


def test_the_sync_face_steps_timed_and_plain_puts_without_stop_iteration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """driver.drive hands a coroutine, or a timed method's TimedAwait, to the accelerator's
    send_to_end, which takes the result through am_send (no __await__ call, no StopIteration
    raised and caught): the sync face's put with metrics on costs little more than without
    (issue 42's 3%), and each put is still timed once, errors in their series."""
    from opendata_kv.native import driver

    module = _module()
    stepped: list[str] = []
    send = driver._send_to_end
    assert send is module.send_to_end

    def counted(awaitable: Any, sentinel: Any) -> Any:
        stepped.append(type(awaitable).__name__)
        return send(awaitable, sentinel)

    monkeypatch.setattr(driver, "_send_to_end", counted)
    reader = InMemoryMetricReader()
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[reader]))
    with SyncStore.open(tmp_path / "on", SCHEMA, options=options) as store:
        for n in range(3):
            store.put(item, (n,), {"a": n})
        with pytest.raises(OpendataKvError):
            store.put(item, ("x",), {"a": 0})
        assert store.get(item, (2,)) == {"a": 2}
        assert stepped == ["TimedAwait"] * 4  # the puts (a get takes the sync fast path)
    found = _durations(reader)
    assert found["put", None].count == 3
    assert sum(p.count for (name, error), p in found.items() if name == "put" and error) == 1
    stepped.clear()
    with SyncStore.open(tmp_path / "off", SCHEMA) as store:
        store.put(item, (1,), {"a": 1})
        assert store.get(item, (1,)) == {"a": 1}
    assert stepped[-1:] == ["coroutine"]


def test_drive_refuses_an_operation_that_awaits_something_else() -> None:
    closed: list[bool] = []

    async def awaits_asyncio() -> None:
        try:
            await asyncio.sleep(0)
        finally:
            closed.append(True)

    from opendata_kv.native import driver

    with pytest.raises(RuntimeError, match="not a native call"):
        driver.drive(awaits_asyncio())
    assert closed == [True]
    assert driver._local.sync is False


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.binary(max_size=40)),
    st.lists(st.one_of(st.none(), st.binary(max_size=40), st.binary(max_size=9).map(bytearray))),
)
def test_written_bytes_in_c_is_the_python_sum(keys: list[bytes], values: list[Any]) -> None:
    # the bytes-written counter's per-batch sum: the C loop and the pure path's agree
    assert _module().written_bytes(keys, values) == store_metrics.written_bytes(keys, values)


def test_a_writer_counts_its_bytes_in_c(tmp_path: Path) -> None:
    # the write wrapper measures a batch with the accelerator's written_bytes, not a Python
    # loop over its records
    module = _module()
    options = OpenOptions(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        write = vars(store.store)["write"]
        cells = [c.cell_contents for c in write.__closure__ or ()]
        assert module.written_bytes in cells
        with pytest.raises(TypeError):
            module.written_bytes((), [])
