"""OpenTelemetry metrics of a store (the `metrics` extra): the one module that imports
opentelemetry, and the one place that times store operations.

Disabled (no opentelemetry-api, or no meter provider set and none given) a store is left as it
is: no wrapper, no check, so it costs nothing. Enabled, `instrument` replaces the operations
of one open store (its instance attributes: get, get_many, put, put_many, delete, scan,
scan_all, index_scan, write, transaction, flush, change_batches, and the sync face's fast
paths) with timed twins, and `bridge` exposes slatedb's own metrics recorder through the same
meter. Names and attributes: docs/operations.md ("Metrics").

An SDK `Histogram.record` costs more than a local get (29-41 µs of CPU against 24 on a loaded
machine), so an operation does not call it: it reads the clock twice and adds its duration
(integer nanoseconds) to an aggregation of its own attribute set, the histogram's bucket
counts by the same boundaries with each bucket's sum and the set's least and greatest value.
When the meter collects (the callback of `opendata_kv.measurements.pending`, which the SDK
runs before it reads its storage) each aggregation is replayed into the SDK histogram: per
bucket its extremes and the rest at the bucket's mean, so the exported counts per bucket,
count, sum, min and max are those measured. The SDK's work is done once per measurement at
the collection, off the caller's path; the caller pays the two clock reads and one
aggregation step (docs/performance.md, "Metrics"). With the C accelerator in use the per-call
operations (_IN_C) are timed by its Timed, which does both in C (native/_accel/timing.c);
the Python wrappers below time the others, and everything on the pure path.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from bisect import bisect_left
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from opendata_kv.errors import ValueDecodeError

if TYPE_CHECKING:
    from opendata_kv.store.reader import StoreReader

#: the stable OpenTelemetry database client metric (a histogram, seconds)
OPERATION_DURATION: Final = "db.client.operation.duration"
SYSTEM: Final = "slatedb"  # db.system.name: the database underneath
SCOPE: Final = "opendata_kv"  # the meter's instrumentation scope

RECORDS_WRITTEN: Final = "opendata_kv.records.written"
INDEX_ROWS_WRITTEN: Final = "opendata_kv.index_rows.written"
BYTES_WRITTEN: Final = "opendata_kv.bytes.written"
UPKEEP_READS: Final = "opendata_kv.index.upkeep_reads"
DECODE_ERRORS: Final = "opendata_kv.decode_errors"
PENDING: Final = "opendata_kv.measurements.pending"
FEED_LAG: Final = "opendata_kv.feed.lag"
FEED_LAG_SEQUENCE: Final = "opendata_kv.feed.lag.sequence"
FEED_LAG_FILES: Final = "opendata_kv.feed.lag.wal_files"

#: OpenTelemetry's advised boundaries for db.client.operation.duration, with finer ones below
#: 1 ms (a local get takes a few microseconds)
BUCKETS: Final = (
    0.00001,
    0.00005,
    0.0001,
    0.0005,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
)
#: the same boundaries in nanoseconds (each converts back to exactly its float above, so a
#: duration lands in the same bucket here as in the SDK: bisect_left, upper bound inclusive)
BOUNDS_NS: Final = tuple(round(bound * 1e9) for bound in BUCKETS)
#: an aggregation: a list of bucket counts (len(BUCKETS) + 1), then each bucket's sum of
#: nanoseconds, then the least and the greatest duration
_BUCKETS: Final = len(BUCKETS) + 1
SUM: Final = _BUCKETS
LEAST: Final = 2 * _BUCKETS
MOST: Final = LEAST + 1
_NONE_YET: Final = 1 << 62  # LEAST before a first duration
_EMPTY: Final = (0,) * (2 * _BUCKETS) + (_NONE_YET, -1)

_clock = time.perf_counter_ns
#: operations each success of which is one record written (opendata_kv.records.written), counted
#: from their durations at the collection
_ONE_RECORD: Final = frozenset({"put", "delete"})


def _provider(given: Any) -> Any:
    """The meter provider to record through: `given`, else the global one when an
    application set one; None when there is none (or no opentelemetry-api)."""
    if given is not None:
        return given
    try:
        from opentelemetry import metrics
    except ImportError:
        return None
    provider = metrics.get_meter_provider()
    # the API's default is a proxy that records nothing until an SDK provider is set
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__ in (
        "_ProxyMeterProvider",
    ):
        return None
    return provider


def replay_values(aggregation: list[int]) -> Iterable[tuple[float, int]]:
    """(seconds, times) to record so that the SDK's histogram gets exactly `aggregation`:
    per bucket the same count and sum, and the same least and greatest value. Each bucket's
    extremes go as they are, the rest at their mean, which lies in the same bucket."""
    least, most = aggregation[LEAST], aggregation[MOST]
    for i in range(_BUCKETS):
        count = aggregation[i]
        if not count:
            continue
        total = aggregation[SUM + i]
        if count == 1:
            yield total / 1e9, 1
            continue
        low = BOUNDS_NS[i - 1] if i else -1  # the bucket holds (low, high]
        high = BOUNDS_NS[i] if i < len(BOUNDS_NS) else math.inf
        extremes = [v for v in (least, most) if low < v <= high]
        for value in extremes:
            yield value / 1e9, 1
        rest = count - len(extremes)
        if rest:
            mean = (total - sum(extremes)) / rest
            yield min(max(mean, low + 1), high) / 1e9, rest


class Telemetry:
    """The instruments of one store, made from its meter provider, and the aggregations of
    what it measured since the meter last collected."""

    def __init__(self, provider: Any, namespace: str) -> None:
        meter = provider.get_meter(SCOPE)
        self.meter = meter
        self.duration = meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="Duration of database client operations.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        self.records = meter.create_counter(
            RECORDS_WRITTEN, unit="{record}", description="Record puts and deletes written."
        )
        self.index_rows = meter.create_counter(
            INDEX_ROWS_WRITTEN, unit="{row}", description="Secondary index rows written."
        )
        self.bytes = meter.create_counter(
            BYTES_WRITTEN, unit="By", description="Key and value bytes of the records written."
        )
        self.upkeep_reads = meter.create_counter(
            UPKEEP_READS, unit="{key}", description="Keys read by index upkeep before a write."
        )
        self.decode_errors = meter.create_counter(
            DECODE_ERRORS, unit="{error}", description="Stored rows that failed to decode."
        )
        self.base = {"db.system.name": SYSTEM, "db.namespace": namespace}
        self._ok: dict[str, dict[str, Any]] = {}
        #: held by every update of the aggregations and by the collection's take: an
        #: update is a few list stores, and a lost one would be a wrong count
        self.lock = threading.Lock()
        #: (operation, error type, batch size) -> its aggregation (a list, or a C Durations
        #: for what the accelerator times); those of (operation, None, None) are kept (the
        #: timed twins hold them), the others taken at each collection
        self._series: dict[tuple[str, str | None, int | None], Any] = {}
        #: (a counter's add, its attributes as items) -> what it gets at the next collection
        self._counts: dict[tuple[Callable[..., None], tuple[tuple[str, Any], ...]], int] = {}
        #: the feed's lag after the last batch it delivered (seconds, sequence numbers,
        #: WAL files); None until a feed delivered one
        self.lag: tuple[float | None, int, int] | None = None
        meter.create_observable_up_down_counter(
            PENDING,
            [self._collected],
            unit="{measurement}",
            description="Operation durations aggregated since the previous collection "
            "(recorded into the histogram then).",
        )
        meter.create_observable_gauge(
            FEED_LAG,
            [self._lag(0)],
            unit="s",
            description="Write time of the newest change the feed has read minus that of "
            "the last change it delivered.",
        )
        meter.create_observable_gauge(
            FEED_LAG_SEQUENCE,
            [self._lag(1)],
            unit="{sequence}",
            description="Newest sequence number the feed knows minus that of the last change "
            "it delivered.",
        )
        meter.create_observable_gauge(
            FEED_LAG_FILES,
            [self._lag(2)],
            unit="{file}",
            description="WAL files after the one of the last change the feed delivered, up "
            "to the newest it knows.",
        )

    def series(self, operation: str) -> Any:
        """The kept aggregation of `operation`'s successes with no further attribute: a list
        laid out as _EMPTY, or the C accelerator's Durations (the same layout) when its
        Timed records the operation (`durations`)."""
        with self.lock:
            return self._series.setdefault((operation, None, None), list(_EMPTY))

    def durations(self, operation: str, kind: Callable[[tuple[int, ...]], Any]) -> Any:
        """The kept aggregation of `operation`'s successes as a C Durations (`kind`): what
        the accelerator's Timed adds to (native/_accel/timing.c)."""
        with self.lock:
            key = (operation, None, None)
            found = self._series.get(key)
            if found is None or found.__class__ is list:
                found = self._series[key] = kind(BOUNDS_NS)
            return found

    def add(
        self,
        operation: str,
        elapsed: int,
        error: BaseException | None = None,
        size: int | None = None,
    ) -> None:
        """One operation of `operation` that took `elapsed` ns, its error if it failed and
        its db.operation.batch.size if it has one."""
        kind = None if error is None else type(error).__qualname__
        i = bisect_left(BOUNDS_NS, elapsed)
        with self.lock:
            found = self._series.get((operation, kind, size))
            if found is None:
                found = self._series[operation, kind, size] = list(_EMPTY)
            elif found.__class__ is not list:  # a C Durations (its add holds the GIL)
                found.add(elapsed)
                return
            found[i] += 1
            found[SUM + i] += elapsed
            if elapsed < found[LEAST]:
                found[LEAST] = elapsed
            if elapsed > found[MOST]:
                found[MOST] = elapsed
        if isinstance(error, ValueDecodeError):
            self.count(self.decode_errors.add, 1, self.attributes(operation))

    def count(self, add: Callable[..., None], value: int, attributes: dict[str, Any]) -> None:
        """Add `value` to what the counter method `add` gets at the next collection."""
        key = (add, tuple(attributes.items()))
        with self.lock:
            self._counts[key] = self._counts.get(key, 0) + value

    #: the name store/writer.py calls it by (index rows written)
    queue = count

    def _take(self) -> tuple[list[tuple[Any, list[int]]], dict[Any, int]]:
        """What was measured since the last take, left empty behind."""
        with self.lock:
            taken = []
            for key, found in list(self._series.items()):
                if key[1] is not None or key[2] is not None:
                    del self._series[key]
                if found.__class__ is not list:  # a C Durations: taken and emptied at once
                    found = found.take()
                    if any(found[:_BUCKETS]):
                        taken.append((key, found))
                elif any(found[:_BUCKETS]):
                    taken.append((key, found[:]))
                    found[:] = _EMPTY
            counts, self._counts = self._counts, {}
        return taken, counts

    def drain(self) -> int:
        """Record what was measured into the SDK's instruments; how many durations."""
        taken, counts = self._take()
        record = self.duration.record
        replayed = 0
        for (operation, kind, size), found in taken:
            attributes = self.attributes(operation)
            if kind is not None or size is not None:
                attributes = dict(attributes)
                if size is not None:
                    attributes["db.operation.batch.size"] = size
                if kind is not None:
                    attributes["error.type"] = kind
            for seconds, times in replay_values(found):
                for _ in range(times):
                    record(seconds, attributes)
            done = sum(found[:_BUCKETS])
            replayed += done
            if operation in _ONE_RECORD and kind is None:  # each a record written
                self.records.add(done, attributes)
        for (add, items), value in counts.items():
            add(value, dict(items))
        return replayed

    def _collected(self, _: Any) -> list[Any]:
        """The meter collects: record what was measured first, so the collection holds it."""
        from opentelemetry.metrics import Observation

        return [Observation(self.drain(), self.base)]

    def _lag(self, part: int) -> Callable[[Any], list[Any]]:
        def observe(_: Any) -> list[Any]:
            from opentelemetry.metrics import Observation

            value = None if self.lag is None else self.lag[part]
            return [] if value is None else [Observation(value, self.base)]

        return observe

    def attributes(self, operation: str) -> dict[str, Any]:
        """The attributes of a successful `operation` (built once)."""
        found = self._ok.get(operation)
        if found is None:
            found = self._ok[operation] = {**self.base, "db.operation.name": operation}
        return found

    def written(self, operation: str, records: int, size: int) -> None:
        attributes = self.attributes(operation)
        self.count(self.records.add, records, attributes)
        if size:
            self.count(self.bytes.add, size, attributes)

    def counting(self, fetch: Callable[[list[bytes]], Any]) -> Callable[[list[bytes]], Any]:
        """An index upkeep read (a Fetch) that counts the keys it reads."""

        async def counted(keys: list[bytes]) -> Any:
            self.count(self.upkeep_reads.add, len(keys), self.base)
            return await fetch(keys)

        return counted


def telemetry(meter_provider: Any, namespace: str) -> Telemetry | None:
    """The instruments for a store at `namespace`, or None: metrics are off."""
    provider = _provider(meter_provider)
    return None if provider is None else Telemetry(provider, namespace)


# --- the hook points -----------------------------------------------------------------------------


def _timed(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """An async operation, timed."""
    found, clock = t.series(name), _clock
    acquire, release = t.lock.acquire, t.lock.release

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            result = await method(*args, **kwargs)
        except BaseException as exc:
            t.add(name, clock() - start, exc)
            raise
        elapsed = clock() - start
        i = bisect_left(BOUNDS_NS, elapsed)
        acquire()  # Telemetry.add's step, inlined: the path of every single get (the lock's
        try:  # methods called as they are: ~1/3 less than `with lock`)
            found[i] += 1
            found[SUM + i] += elapsed
            if elapsed < found[LEAST]:
                found[LEAST] = elapsed
            if elapsed > found[MOST]:
                found[MOST] = elapsed
        finally:
            release()
        return result

    return timed


def _timed_now(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A plain (sync face) operation, timed."""
    found, clock = t.series(name), _clock
    acquire, release = t.lock.acquire, t.lock.release

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            result = method(*args, **kwargs)
        except BaseException as exc:
            t.add(name, clock() - start, exc)
            raise
        elapsed = clock() - start
        i = bisect_left(BOUNDS_NS, elapsed)
        acquire()  # as in _timed
        try:
            found[i] += 1
            found[SUM + i] += elapsed
            if elapsed < found[LEAST]:
                found[LEAST] = elapsed
            if elapsed > found[MOST]:
                found[MOST] = elapsed
        finally:
            release()
        return result

    return timed


def _many(t: Telemetry, name: str, method: Callable[..., Any], sync: bool) -> Callable[..., Any]:
    """get_many / put_many: one operation, its size (the results, the records put) as
    db.operation.batch.size."""

    def size(result: Any) -> int:
        return result if isinstance(result, int) else len(result)

    if sync:

        @functools.wraps(method)
        def timed_now(*args: Any, **kwargs: Any) -> Any:
            start = _clock()
            try:
                result = method(*args, **kwargs)
            except BaseException as exc:
                t.add(name, _clock() - start, exc)
                raise
            t.add(name, _clock() - start, None, size(result))
            return result

        return timed_now

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            result = await method(*args, **kwargs)
        except BaseException as exc:
            t.add(name, _clock() - start, exc)
            raise
        t.add(name, _clock() - start, None, size(result))
        return result

    return timed


def written_bytes(keys: list[bytes], values: list[bytes | None]) -> int:
    """The bytes of a batch's records: its keys' lengths and its values' (None: a delete).
    The accelerator's written_bytes does the same in one C loop."""
    return sum(map(len, keys)) + sum(map(len, filter(None, values)))


def _write(
    t: Telemetry, method: Callable[..., Any], measure: Callable[[list[Any], list[Any]], int]
) -> Callable[..., Any]:
    """Store.write: one "write" operation of len(batch) records, their bytes counted by
    `measure` (written_bytes; in C on the accelerator: a per-record Python loop here cost
    put_many ~10% with metrics on, docs/performance.md)."""

    @functools.wraps(method)
    async def write(batch: Any, *args: Any, **kwargs: Any) -> Any:
        count = len(batch)
        size = measure(batch._keys, batch._data)
        start = _clock()
        try:
            await method(batch, *args, **kwargs)
        except BaseException as exc:
            t.add("write", _clock() - start, exc, count)
            raise
        t.add("write", _clock() - start, None, count)
        if count:
            t.written("write", count, size)

    return write


def _scanning(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """scan / scan_all / index_scan: the returned scan is one operation, recorded when it
    ends (its last batch read, or an error), timed over its reads only (the time the caller
    spends between rows is not the store's), with the rows it returned."""

    @functools.wraps(method)
    def scan(*args: Any, **kwargs: Any) -> Any:
        found = method(*args, **kwargs)
        _track(t, name, found)
        return found

    return scan


def _track(t: Telemetry, name: str, scan: Any) -> None:
    fill = scan._fill
    state = [0, 0, False]  # nanoseconds spent reading, rows returned, recorded

    async def timed_fill(*args: Any, **kwargs: Any) -> bool:
        start = _clock()
        try:
            more: bool = await fill(*args, **kwargs)
        except BaseException as exc:
            state[0] += _clock() - start
            _end(exc)
            raise
        state[0] += _clock() - start
        if more:
            state[1] += len(scan._buffer)
        else:
            _end(None)
        return more

    def _end(error: BaseException | None) -> None:
        if state[2]:
            return
        state[2] = True
        failed = getattr(scan, "failed", 0)
        if failed:
            t.count(t.decode_errors.add, failed, t.attributes(name))
        t.add(name, state[0], error)

    scan._fill = timed_fill


def _transaction(t: Telemetry, method: Callable[..., Any]) -> Callable[..., Any]:
    """Store.transaction: its commit is one "commit" operation."""

    @asynccontextmanager
    async def transaction(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with method(*args, **kwargs) as tx:
            tx.commit = _timed(t, "commit", tx.commit)
            yield tx

    functools.update_wrapper(transaction, method)
    return transaction


def _feed(t: Telemetry, method: Callable[..., Any]) -> Callable[..., Any]:
    """change_batches: after each batch it delivers, the feed's lag (ChangeBatch.lag and its
    neighbours, store/ops/feed.py) becomes what the lag gauges read."""

    @functools.wraps(method)
    def change_batches(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        batches = method(*args, **kwargs)

        async def lagging() -> AsyncGenerator[Any, None]:
            try:
                async for batch in batches:
                    t.lag = (batch.lag_seconds, batch.lag, batch.lag_files)
                    yield batch
            finally:
                await batches.aclose()

        return lagging()

    return change_batches


#: async operation -> (the name it records, how it is wrapped); the sync face's fast paths
#: beside them
_ASYNC: Final = {
    "get": ("get", _timed),
    "get_many": ("get_many", lambda t, n, m: _many(t, n, m, False)),
    "put": ("put", _timed),  # each success a record written, counted at the collection
    "delete": ("delete", _timed),
    "put_many": ("put_many", lambda t, n, m: _many(t, n, m, False)),
    "flush": ("flush", _timed),
    "scan": ("scan", _scanning),
    "scan_all": ("scan", _scanning),
    "index_scan": ("index_scan", _scanning),
    "change_batches": ("", lambda t, n, m: _feed(t, m)),
}
_SYNC: Final = {
    "_get_now": ("get", _timed_now),
    "_get_many_now": ("get_many", lambda t, n, m: _many(t, n, m, True)),
}


#: the operations the C accelerator times when it is in use (native/_accel/timing.c's Timed:
#: the clock reads and the aggregation step in C, no Python wrapper), by attribute: (the name
#: it records, whether the method is a coroutine method)
_IN_C: Final = {
    "get": ("get", True),
    "put": ("put", True),
    "delete": ("delete", True),
    "flush": ("flush", True),
    "_get_now": ("get", False),
}


def _c_timing() -> Any:
    """The C accelerator's module when it is in use (it holds Durations and Timed), else
    None: the pure path (OPENDATA_KV_NO_EXTENSIONS=1, or not built) times in Python."""
    from opendata_kv.native import accel, calls

    if not calls.active():  # decides the native path (and the accelerator) once
        return None
    module = accel.active_module()
    if module is None or not hasattr(module, "Timed"):
        return None
    # a timed coroutine method's awaitable is a coroutine to asyncio (create_task takes it)
    Coroutine.register(module.TimedAwait)
    return module


def _in_c(module: Any, t: Telemetry, name: str, method: Any, coroutine: bool) -> Any:
    """`method` timed by the accelerator into the kept aggregation of `name`; a failure's
    duration goes through Telemetry.add, with its error.type."""

    def failed(elapsed: int, error: BaseException | None) -> None:
        t.add(name, elapsed, error if error is not None else RuntimeError("no exception"))

    return module.Timed(method, t.durations(name, module.Durations), failed, coroutine)


def instrument(store: StoreReader, t: Telemetry) -> None:
    """Replace the operations of one open store with timed twins (instance attributes, so
    other stores, and this one with metrics off, run the plain methods): the hot ones timed
    by the C accelerator when it is in use (_IN_C), the others, and all on the pure path,
    by the wrappers above."""
    module = _c_timing()
    wrappers: Iterable[tuple[str, tuple[str, Any]]] = (*_ASYNC.items(), *_SYNC.items())
    for attribute, (name, wrap) in wrappers:
        method = getattr(store, attribute, None)
        if method is None:
            continue
        if module is not None and attribute in _IN_C:
            name, coroutine = _IN_C[attribute]
            setattr(store, attribute, _in_c(module, t, name, method, coroutine))
        else:
            setattr(store, attribute, wrap(t, name, method))
    if not store.readonly:
        writer: Any = store
        measure = written_bytes if module is None else module.written_bytes  # an int, as here
        writer.write = _write(t, writer.write, measure)
        writer.transaction = _transaction(t, writer.transaction)
    store._telemetry = t


# --- slatedb's own metrics -----------------------------------------------------------------------


def bridge(t: Telemetry, recorder: Any, kinds: Any) -> None:
    """Expose every metric slatedb registered on `recorder` (a DefaultMetricsRecorder) as an
    observable instrument of the same name and labels, read when the meter collects:
    counters as counters, gauges as gauges, up/down counters as up/down counters, and each
    histogram as two counters, `<name>.count` and `<name>.sum`. `kinds`: what each
    MetricValue variant is (native.slatedb.metric_kind)."""
    from opentelemetry.metrics import CallbackOptions, Observation

    seen: dict[str, str] = {}
    for metric in recorder.snapshot():
        seen.setdefault(metric.name, kinds(metric.value))

    def observe(name: str, part: int | None) -> Callable[[CallbackOptions], list[Observation]]:
        def callback(_: CallbackOptions) -> list[Observation]:
            out = []
            for metric in recorder.metrics_by_name(name):
                attributes = {label.key: label.value for label in metric.labels}
                value = metric.value[0]
                if part is not None:
                    value = value.count if part == 0 else value.sum
                out.append(Observation(value, attributes))
            return out

        return callback

    meter = t.meter
    for name, kind in seen.items():
        if kind == "counter":
            meter.create_observable_counter(name, [observe(name, None)])
        elif kind == "gauge":
            meter.create_observable_gauge(name, [observe(name, None)])
        elif kind == "up_down_counter":
            meter.create_observable_up_down_counter(name, [observe(name, None)])
        elif kind == "histogram":
            meter.create_observable_counter(f"{name}.count", [observe(name, 0)])
            meter.create_observable_counter(f"{name}.sum", [observe(name, 1)])
