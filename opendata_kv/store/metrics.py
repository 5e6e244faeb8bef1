"""OpenTelemetry metrics of a store (the `metrics` extra): the one module that imports
opentelemetry, and the one place that times store operations.

Disabled (no opentelemetry-api, or no meter provider set and none given) a store is left as it
is: no wrapper, no check, so it costs nothing. Enabled, `instrument` replaces the operations
of one open store (its instance attributes: get, get_many, put, put_many, delete, scan,
scan_all, index_scan, write, transaction, flush, and the sync face's fast paths) with timed
twins, and `bridge` exposes slatedb's own metrics recorder through the same meter. Names
and attributes: docs/operations.md ("Metrics").

An SDK `record`/`add` call costs about three local gets, so an operation only appends its
measurement to a queue; the queue is handed to the instruments when the meter collects (the
callback of `opendata_kv.measurements.pending`, which the SDK runs before it reads its
storage) or once it holds PENDING_LIMIT measurements. Each value is recorded exactly as
measured; the work moves off the caller's path (to the reader's collection) but is not
saved (docs/performance.md, "Metrics").
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterable
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
#: measurements queued before they are handed to the instruments without waiting for a
#: collection (a bound on the queue's memory: ~100 bytes each)
PENDING_LIMIT: Final = 4096

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

_now = time.perf_counter


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


class Telemetry:
    """The instruments of one store, made from its meter provider."""

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
        # (instrument method, value, attributes); deque: appends and pops are atomic
        self._pending: collections.deque[tuple[Callable[..., None], float, dict[str, Any]]]
        self._pending = collections.deque()
        meter.create_observable_up_down_counter(
            PENDING,
            [self._collected],
            unit="{measurement}",
            description="Measurements queued when the meter collected (then recorded).",
        )

    def queue(self, method: Callable[..., None], value: float, attributes: dict[str, Any]) -> None:
        """Record `value` through `method` (an instrument's record or add) later."""
        pending = self._pending
        pending.append((method, value, attributes))
        if len(pending) >= PENDING_LIMIT:
            self.drain()

    def drain(self) -> int:
        """Hand every queued measurement to its instrument; how many there were."""
        pending = self._pending
        count = len(pending)  # what others append meanwhile waits for the next drain
        for _ in range(count):
            method, value, attributes = pending.popleft()
            method(value, attributes)
        return count

    def _collected(self, _: Any) -> list[Any]:
        """The meter collects: record what is queued first, so the collection holds it."""
        from opentelemetry.metrics import Observation

        return [Observation(self.drain(), self.base)]

    def attributes(self, operation: str) -> dict[str, Any]:
        """The attributes of a successful `operation` (built once)."""
        found = self._ok.get(operation)
        if found is None:
            found = self._ok[operation] = {**self.base, "db.operation.name": operation}
        return found

    def record(
        self, operation: str, start: float, error: BaseException | None, **extra: Any
    ) -> None:
        """One operation of `operation` that started at `start` (perf_counter)."""
        attributes = self.attributes(operation)
        if error is not None or extra:
            attributes = {**attributes, **extra}
            if error is not None:
                attributes["error.type"] = type(error).__qualname__
                if isinstance(error, ValueDecodeError):
                    self.queue(self.decode_errors.add, 1, self.attributes(operation))
        self.queue(self.duration.record, _now() - start, attributes)

    def written(self, operation: str, records: int, size: int) -> None:
        attributes = self.attributes(operation)
        self.queue(self.records.add, records, attributes)
        if size:
            self.queue(self.bytes.add, size, attributes)

    def counting(self, fetch: Callable[[list[bytes]], Any]) -> Callable[[list[bytes]], Any]:
        """An index upkeep read (a Fetch) that counts the keys it reads."""

        async def counted(keys: list[bytes]) -> Any:
            self.queue(self.upkeep_reads.add, len(keys), self.base)
            return await fetch(keys)

        return counted


def telemetry(meter_provider: Any, namespace: str) -> Telemetry | None:
    """The instruments for a store at `namespace`, or None: metrics are off."""
    provider = _provider(meter_provider)
    return None if provider is None else Telemetry(provider, namespace)


# --- the hook points -----------------------------------------------------------------------------


def _timed(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """An async operation, timed."""

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        try:
            result = await method(*args, **kwargs)
        except BaseException as exc:
            t.record(name, start, exc)
            raise
        t.record(name, start, None)
        return result

    return timed


def _timed_now(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A plain (sync face) operation, timed."""

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        try:
            result = method(*args, **kwargs)
        except BaseException as exc:
            t.record(name, start, exc)
            raise
        t.record(name, start, None)
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
            start = _now()
            try:
                result = method(*args, **kwargs)
            except BaseException as exc:
                t.record(name, start, exc)
                raise
            t.record(name, start, None, **{"db.operation.batch.size": size(result)})
            return result

        return timed_now

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        try:
            result = await method(*args, **kwargs)
        except BaseException as exc:
            t.record(name, start, exc)
            raise
        t.record(name, start, None, **{"db.operation.batch.size": size(result)})
        return result

    return timed


def _write(t: Telemetry, method: Callable[..., Any]) -> Callable[..., Any]:
    """Store.write: one "write" operation of len(batch) records."""

    @functools.wraps(method)
    async def write(batch: Any, *args: Any, **kwargs: Any) -> Any:
        count = len(batch)
        size = sum(map(len, batch._keys)) + sum(len(data) for data in batch._data if data)
        start = _now()
        try:
            await method(batch, *args, **kwargs)
        except BaseException as exc:
            t.record("write", start, exc, **{"db.operation.batch.size": count})
            raise
        t.record("write", start, None, **{"db.operation.batch.size": count})
        if count:
            t.written("write", count, size)

    return write


def _single(t: Telemetry, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """put / delete: one operation, one record written."""
    timed = _timed(t, name, method)

    @functools.wraps(method)
    async def counted(*args: Any, **kwargs: Any) -> Any:
        await timed(*args, **kwargs)
        t.written(name, 1, 0)

    return counted


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
    state = [0.0, 0, False]  # seconds spent reading, rows returned, recorded

    async def timed_fill(*args: Any, **kwargs: Any) -> bool:
        start = _now()
        try:
            more: bool = await fill(*args, **kwargs)
        except BaseException as exc:
            state[0] += _now() - start
            _end(exc)
            raise
        state[0] += _now() - start
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
            t.queue(t.decode_errors.add, failed, t.attributes(name))
        # the start is chosen so that the recorded duration is the reading time
        t.record(name, _now() - state[0], error)

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


#: async operation -> (the name it records, how it is wrapped); the sync face's fast paths
#: beside them
_ASYNC: Final = {
    "get": ("get", _timed),
    "get_many": ("get_many", lambda t, n, m: _many(t, n, m, False)),
    "put": ("put", _single),
    "delete": ("delete", _single),
    "put_many": ("put_many", lambda t, n, m: _many(t, n, m, False)),
    "flush": ("flush", _timed),
    "scan": ("scan", _scanning),
    "scan_all": ("scan", _scanning),
    "index_scan": ("index_scan", _scanning),
}
_SYNC: Final = {
    "_get_now": ("get", _timed_now),
    "_get_many_now": ("get_many", lambda t, n, m: _many(t, n, m, True)),
}


def instrument(store: StoreReader, t: Telemetry) -> None:
    """Replace the operations of one open store with timed twins (instance attributes, so
    other stores, and this one with metrics off, run the plain methods)."""
    wrappers: Iterable[tuple[str, tuple[str, Any]]] = (*_ASYNC.items(), *_SYNC.items())
    for attribute, (name, wrap) in wrappers:
        method = getattr(store, attribute, None)
        if method is not None:
            setattr(store, attribute, wrap(t, name, method))
    if not store.readonly:
        writer: Any = store
        writer.write = _write(t, writer.write)
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
