"""The slatedb types the store builds and matches on, re-exported: every module outside
this layer reaches slatedb through here, so one place knows what the store uses of it."""

from typing import Any

from slatedb.uniffi import (
    AdminBuilder,
    CacheTarget,
    CheckpointOptions,
    CloneSourceSpec,
    CloseReason,
    DbBuilder,
    DbCache,
    DbReaderBuilder,
    DefaultMetricsRecorder,
    DurabilityLevel,
    Error,
    FlushOptions,
    FlushType,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
    IsolationLevel,
    IterationOrder,
    KeyRange,
    MergeOperator,
    MokaCacheOptions,
    ObjectStore,
    ObjectStoreBuilder,
    ObjectStoreType,
    PrefixExtractor,
    PutOptions,
    ReaderMode,
    ReaderOptions,
    RowEntryKind,
    ScanOptions,
    Settings,
    SlateDbWalReader,
    SlateDbWalReaderOptions,
    SsTableId,
    Ttl,
    WriteBatch,
    WriteOptions,
)

__all__ = [
    "AdminBuilder",
    "CacheTarget",
    "CheckpointOptions",
    "CloneSourceSpec",
    "CloseReason",
    "DbBuilder",
    "DbCache",
    "DbReaderBuilder",
    "DefaultMetricsRecorder",
    "DurabilityLevel",
    "Error",
    "FlushOptions",
    "FlushType",
    "GarbageCollectorDirectoryOptions",
    "GarbageCollectorOptions",
    "GarbageCollectorScheduleOptions",
    "IsolationLevel",
    "IterationOrder",
    "KeyRange",
    "MergeOperator",
    "MokaCacheOptions",
    "ObjectStore",
    "ObjectStoreBuilder",
    "ObjectStoreType",
    "PrefixExtractor",
    "PutOptions",
    "ReaderMode",
    "ReaderOptions",
    "RowEntryKind",
    "ScanOptions",
    "Settings",
    "SlateDbWalReader",
    "SlateDbWalReaderOptions",
    "SsTableId",
    "Ttl",
    "WriteBatch",
    "WriteOptions",
    "metric_kind",
]


def metric_kind(value: Any) -> str:
    """What a DefaultMetricsRecorder snapshot's MetricValue is: "counter", "gauge",
    "up_down_counter" or "histogram" ("" for a kind this binding does not have)."""
    for kind in ("COUNTER", "GAUGE", "UP_DOWN_COUNTER", "HISTOGRAM"):
        if getattr(value, f"is_{kind}", lambda: False)():
            return kind.lower()
    return ""
