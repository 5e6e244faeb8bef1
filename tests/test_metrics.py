"""Store metrics through OpenTelemetry (store/metrics.py): an in-memory reader sees each
operation with its attributes and counts, slatedb's own metrics beside them, and a store
with metrics off is left untouched."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from opendata_kv import Index, RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.errors import ValueDecodeError
from opendata_kv.store import OpenOptions, Store, SyncStore
from opendata_kv.store import metrics as store_metrics
from opendata_kv.values import Values
from tests.storekit import aio

item = RecordType("item", 7, [("n", F.u32)])
like = RecordType("like", 8, [("did", F.string), ("rkey", F.string)])
by_subject = Index("by_subject", "like", [("subject", F.string)])
SCHEMA = Schema(item, like)
DURATION = "db.client.operation.duration"


def reader_and_options() -> tuple[InMemoryMetricReader, OpenOptions]:
    reader = InMemoryMetricReader()
    return reader, OpenOptions(meter_provider=MeterProvider(metric_readers=[reader]))


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Every data point collected, by metric name."""
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def by_operation(found: dict[str, list[Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for point in found.get(DURATION, []):
        out.setdefault(point.attributes["db.operation.name"], []).append(point)
    return out


@aio
async def test_each_operation_is_one_duration_with_the_stable_attributes(tmp_path: Path) -> None:
    reader, options = reader_and_options()
    async with Store.open(tmp_path / "db", SCHEMA, options=options) as store:
        await store.put(item, (1,), {"a": 1})
        assert await store.get(item, (1,)) == {"a": 1}
        assert await store.get_many(item, [(1,), (2,)]) == [{"a": 1}, None]
        async with store.batch() as batch:
            batch.put(item, (2,), {"a": 2})
            batch.put(item, (3,), {"a": 3})
        assert await store.put_many([(item, (n,), {"a": n}) for n in range(10, 15)]) == 5
        await store.delete(item, (3,))
        assert len([r async for r in store.scan(item)]) == 7
        assert len([r async for r in store.scan_all()]) == 7
        async with store.transaction() as tx:
            await tx.put(item, (20,), {"a": 20})
        await store.flush()
        namespace = str(tmp_path / "db")
    found = points(reader)
    ops = by_operation(found)
    assert sorted(ops) == sorted(
        ["get", "get_many", "put", "put_many", "write", "delete", "scan", "commit", "flush"]
    )
    for point in found[DURATION]:
        assert point.attributes["db.system.name"] == "slatedb"
        assert point.attributes["db.namespace"] == namespace
        assert "error.type" not in point.attributes
        assert point.sum >= 0
    assert sum(p.count for p in ops["scan"]) == 2  # scan and scan_all, each one operation
    assert [p.count for p in ops["get"]] == [1]
    assert [p.attributes["db.operation.batch.size"] for p in ops["get_many"]] == [2]
    assert [p.attributes["db.operation.batch.size"] for p in ops["put_many"]] == [5]
    # the batch() block and put_many's one batch: each a write of its size
    assert sorted(p.attributes["db.operation.batch.size"] for p in ops["write"]) == [2, 5]
    written = {
        p.attributes["db.operation.name"]: p.value for p in found[store_metrics.RECORDS_WRITTEN]
    }
    assert written == {"put": 1, "write": 7, "delete": 1}
    (size,) = found[store_metrics.BYTES_WRITTEN]
    assert size.value > 7 * 5  # 7 keys of 5 bytes and their values
    # slatedb's own recorder, through the same meter
    assert found["slatedb.db.write_ops"][0].value >= 1
    assert "slatedb.db.sorted_run_count" in found


def test_the_sync_face_records_too(tmp_path: Path) -> None:
    reader, options = reader_and_options()
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        store.put(item, (1,), {"a": 1})
        assert store.get(item, (1,)) == {"a": 1}
        assert store.get_many(item, [(1,)]) == [{"a": 1}]
        assert len(list(store.scan(item))) == 1
        with store.transaction() as tx:
            tx.put(item, (2,), {"a": 2})
        with store.batch() as batch:
            batch.put(item, (3,), {"a": 3})
    ops = by_operation(points(reader))
    assert {"put", "get", "get_many", "scan", "commit", "write"} <= set(ops)
    assert [p.count for p in ops["get"]] == [1]


def test_the_sync_face_calls_the_timed_reads_straight(tmp_path: Path) -> None:
    # with metrics on, the sync face's get and get_many are the view's timed twins (no frame of
    # its own around them); defaults, absent keys and errors are those of the generated methods
    values = Values(SCHEMA).register(item, dict)
    reader, options = reader_and_options()
    with SyncStore.open(tmp_path / "db", values, options=options) as store:
        assert vars(store)["get"] == store._view._get_now
        assert vars(store)["get_many"] == store._view._get_many_now
        store.put(item, (1,), {"a": 1})
        store.put_raw(item.encode(2), b"\xc1")  # not msgpack
        assert store.get(item, (9,), default="none") == "none"
        assert store.get(item.key(1)) == {"a": 1}
        assert store.get_many(item, [(1,), (9,)], default=0) == [{"a": 1}, 0]
        assert store[item, (1,)] == {"a": 1} and (item, (9,)) not in store
        with pytest.raises(ValueDecodeError):
            store.get(item, (2,))
    ops = by_operation(points(reader))
    ok = [p for p in ops["get"] if "error.type" not in p.attributes]
    failed = [p for p in ops["get"] if "error.type" in p.attributes]
    assert sum(p.count for p in ok) == 3 and [p.count for p in failed] == [1]
    assert [p.count for p in ops["get_many"]] == [1]
    with SyncStore.open(tmp_path / "db", values) as store:  # metrics off: the class's methods
        assert "get" not in vars(store) and "get_many" not in vars(store)


@aio
async def test_errors_carry_error_type_and_decode_errors_count(tmp_path: Path) -> None:
    values = Values(SCHEMA).register(item, dict)
    reader, options = reader_and_options()
    async with Store.open(tmp_path / "db", values, options=options) as store:
        await store.put_raw(item.encode(1), b"\xc1")  # not msgpack
        with pytest.raises(ValueDecodeError):
            await store.get(item, (1,))
        scan = store.scan(item, on_error="skip")
        assert [r async for r in scan] == []
    found = points(reader)
    (failed,) = [p for p in found[DURATION] if "error.type" in p.attributes]
    assert failed.attributes["db.operation.name"] == "get"
    assert failed.attributes["error.type"] in {
        cls.__qualname__
        for cls in ValueDecodeError.__mro__ + tuple(ValueDecodeError.__subclasses__())
    }
    errors = {
        p.attributes["db.operation.name"]: p.value for p in found[store_metrics.DECODE_ERRORS]
    }
    assert errors == {"get": 1, "scan": 1}


@aio
async def test_index_rows_and_upkeep_reads_are_counted(tmp_path: Path) -> None:
    reader, options = reader_and_options()
    opened = Store.open(tmp_path / "db", SCHEMA, options=options.but(indexes=[by_subject]))
    async with opened as store:
        await store.put(like, ("did:a", "1"), {"subject": "s1"})
        await store.put(like, ("did:a", "1"), {"subject": "s2"})  # moves its entry
        assert [r.key.rkey async for r in store.index_scan(by_subject, "s2")] == ["1"]
    found = points(reader)
    # one entry put, then one deleted and one put
    assert sum(p.value for p in found[store_metrics.INDEX_ROWS_WRITTEN]) == 3
    assert sum(p.value for p in found[store_metrics.UPKEEP_READS]) >= 2
    assert "index_scan" in by_operation(found)


@aio
async def test_metrics_off_leaves_the_store_as_it_is(tmp_path: Path) -> None:
    # no provider given and none set globally: no instrument, no wrapper
    async with Store.open(tmp_path / "db", SCHEMA) as store:
        assert store._telemetry is None
        for name in ("get", "_get_now", "put", "write", "scan", "flush", "transaction"):
            assert name not in vars(store), name
        await store.put(item, (1,), {"a": 1})
    _, options = reader_and_options()
    async with Store.open(tmp_path / "db", SCHEMA, options=options) as store:
        assert "get" in vars(store) and store._telemetry is not None


def test_a_reader_records_reads(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        store.put(item, (1,), {"a": 1})
    reader, options = reader_and_options()
    with SyncStore.open_reader(tmp_path / "db", SCHEMA, options=options) as view:
        assert view.get(item, (1,)) == {"a": 1}
    found = points(reader)
    assert [p.count for p in by_operation(found)["get"]] == [1]
    assert "slatedb.db.request_count" in found


def test_without_the_extra_there_is_nothing_to_record(monkeypatch: pytest.MonkeyPatch) -> None:
    # opentelemetry-api not installed (an import of it fails): no provider, no instruments
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    assert store_metrics.telemetry(None, "/db") is None


def test_durations_wait_in_the_aggregation_for_the_collection(tmp_path: Path) -> None:
    # an operation adds to its aggregation; the SDK sees nothing until the meter collects,
    # then every duration exactly once (a second collection replays nothing again)
    reader, options = reader_and_options()
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        store.put(item, (1,), {"a": 1})
        for _ in range(5):
            assert store.get(item, (1,)) == {"a": 1}
        telemetry = store.store._telemetry
        assert telemetry is not None
        assert telemetry.series("get")[: store_metrics.SUM] != [0] * store_metrics.SUM
        found = points(reader)
        assert [p.count for p in by_operation(found)["get"]] == [5]
        assert [p.value for p in found[store_metrics.PENDING]] == [6]  # the put and 5 gets
        assert telemetry.series("get")[: store_metrics.SUM] == [0] * store_metrics.SUM
        again = points(reader)
        assert [p.count for p in by_operation(again)["get"]] == [5]  # cumulative, not 10
        assert [p.value for p in again[store_metrics.PENDING]] == [0]


#: durations in ns: every boundary, a nanosecond either side, and anything up to 20 s
_BOUNDARY_NS = [b + d for b in store_metrics.BOUNDS_NS for d in (-1, 0, 1)]
durations = st.lists(
    st.one_of(st.sampled_from(_BOUNDARY_NS), st.integers(0, 20 * 10**9)), min_size=1, max_size=60
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "scan"]), durations), min_size=1, max_size=3))
def test_the_replayed_histogram_is_the_one_recorded_directly(
    runs: list[tuple[str, list[int]]],
) -> None:
    """Aggregated here and replayed at the collection, the histogram the SDK exports has the
    counts per bucket, count, min and max of recording every duration directly, and its sum."""
    reader, options = reader_and_options()
    assert options.meter_provider is not None
    telemetry = store_metrics.telemetry(options.meter_provider, "/db")
    assert telemetry is not None
    direct = InMemoryMetricReader()
    histogram = (
        MeterProvider(metric_readers=[direct])
        .get_meter("direct")
        .create_histogram(
            DURATION, unit="s", explicit_bucket_boundaries_advisory=store_metrics.BUCKETS
        )
    )
    for operation, measured in runs:
        for elapsed in measured:
            telemetry.add(operation, elapsed)
            histogram.record(elapsed / 1e9, {"db.operation.name": operation})
    ours = {p.attributes["db.operation.name"]: p for p in points(reader)[DURATION]}
    theirs = {p.attributes["db.operation.name"]: p for p in points(direct)[DURATION]}
    assert sorted(ours) == sorted(theirs)
    for operation, want in theirs.items():
        got = ours[operation]
        assert list(got.explicit_bounds) == list(want.explicit_bounds)
        assert list(got.bucket_counts) == list(want.bucket_counts), operation
        assert (got.count, got.min, got.max) == (want.count, want.min, want.max)
        assert got.sum == pytest.approx(want.sum, rel=1e-12, abs=1e-15)


def test_errors_and_batch_sizes_are_series_of_their_own(tmp_path: Path) -> None:
    reader, options = reader_and_options()
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        for size in (1, 2, 2):
            store.put_many([(item, (n,), {"a": n}) for n in range(size)])
        telemetry = store.store._telemetry
        assert telemetry is not None
        found = by_operation(points(reader))
        sizes = sorted(
            (p.attributes["db.operation.batch.size"], p.count) for p in found["put_many"]
        )
        assert sizes == [(1, 1), (2, 2)]
        # taken at the collection: the series of a size or an error do not pile up
        assert all(key[1] is None and key[2] is None for key in telemetry._series)


def test_bytes_written_are_the_keys_and_values_of_each_batch(tmp_path: Path) -> None:
    # a batch's bytes (its keys, its values; a delete has no value) and records, counted once
    # per write on both paths (the accelerator sums them in C: written_bytes)
    reader, options = reader_and_options()
    with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
        with store.batch() as batch:
            batch.put(item, (1,), {"a": 1})
            batch.put(item, (2,), {"a": "x" * 300}, ttl=60)
            batch.delete(item, (7,))
            batch.put_raw(item.encode(3), b"")
            queued = batch.batch.columns()
            want = sum(map(len, queued[0])) + sum(len(data or b"") for data in queued[1])
        items = [(item, (n,), {"a": "y" * n}) for n in range(10, 40)]
        assert store.put_many(items, batch_size=7) == 30
        values = store.store.values
        want += sum(len(item.encode(n)) + len(values.encode(item, v)) for _, (n,), v in items)
    found = points(reader)
    assert [p.value for p in found[store_metrics.BYTES_WRITTEN]] == [want]
    written = {
        p.attributes["db.operation.name"]: p.value for p in found[store_metrics.RECORDS_WRITTEN]
    }
    assert written == {"write": 34}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.binary(max_size=40)), st.lists(st.one_of(st.none(), st.binary(max_size=40))))
def test_written_bytes_sums_keys_and_the_values_present(
    keys: list[bytes], values: list[bytes | None]
) -> None:
    want = sum(map(len, keys)) + sum(len(v) for v in values if v is not None)
    assert store_metrics.written_bytes(keys, values) == want


@aio
async def test_the_feed_lag_is_what_it_has_seen_and_not_delivered(tmp_path: Path) -> None:
    reader, options = reader_and_options()
    async with Store.open(tmp_path / "db", SCHEMA, options=options) as store:
        assert store_metrics.FEED_LAG_SEQUENCE not in points(reader)  # no feed read yet
        for n in range(4):  # four WAL files, a sequence number each
            await store.put(item, (n,), {"a": n})
            await store.flush()
        batches = store.change_batches()
        first = await batches.__anext__()
        # the first file delivered, the other three read ahead
        assert (first.lag, first.lag_files) == (3, 3)
        assert first.lag_seconds is not None and first.lag_seconds >= 0
        found = points(reader)
        assert [p.value for p in found[store_metrics.FEED_LAG_SEQUENCE]] == [3]
        assert [p.value for p in found[store_metrics.FEED_LAG_FILES]] == [3]
        assert [p.value for p in found[store_metrics.FEED_LAG]] == [first.lag_seconds]
        rest = [batch async for batch in batches]
        assert [(b.lag, b.lag_files) for b in rest] == [(2, 2), (1, 1), (0, 0)]
        found = points(reader)
        assert [p.value for p in found[store_metrics.FEED_LAG_SEQUENCE]] == [0]
        assert [p.value for p in found[store_metrics.FEED_LAG]] == [0]
        (point,) = found[store_metrics.FEED_LAG_FILES]
        assert point.value == 0 and point.attributes["db.system.name"] == "slatedb"


def test_slatedb_metrics_off_leaves_ours_and_bridges_none(tmp_path: Path) -> None:
    # OpenOptions(slatedb_metrics=False): our operations still recorded, no slatedb.* metric
    # (its recorder not installed on the writer nor on a reader)
    for open_reader in (False, True):
        reader = InMemoryMetricReader()
        options = OpenOptions(
            meter_provider=MeterProvider(metric_readers=[reader]), slatedb_metrics=False
        )
        if open_reader:
            with SyncStore.open_reader(tmp_path / "db", SCHEMA, options=options) as view:
                assert view.get(item, (1,)) == {"a": 1}
        else:
            with SyncStore.open(tmp_path / "db", SCHEMA, options=options) as store:
                store.put(item, (1,), {"a": 1})
                assert store.get(item, (1,)) == {"a": 1}
                store.flush()
        found = points(reader)
        assert [p.count for p in by_operation(found)["get"]] == [1]
        assert not [name for name in found if name.startswith("slatedb.")], sorted(found)
