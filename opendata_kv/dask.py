"""Dask DataFrames over one store (docs/scale-out.md): `read_store` pins a checkpoint, cuts the
record's range into splits and builds a `dd.from_map` collection of one partition per split,
each read by its task from a reader at that checkpoint. Needs the `dask` extra."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import RecordType
from opendata_kv.keys.fields import Desc
from opendata_kv.split_reads import (
    DEFAULT_SPLIT_BYTES,
    ReadPlan,
    SplitRead,
    missing_extra,
    plan_reads,
    projected_schema,
    read_batches,
    regroup,
)
from opendata_kv.store import KeyRange, Pinned, pinned_readers
from opendata_kv.store.arrow import key_arrow_type, key_to_arrow

try:
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa
except ImportError as error:
    raise missing_extra("dask", error) from None

__all__ = ["read_partition", "read_store"]


def read_store(
    url: str,
    record: str | RecordType,
    *,
    schema: Any,
    columns: Sequence[str] | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    pin: Pinned | None = None,
    lifetime: float = 3600.0,
    store_options: dict[str, Any] | None = None,
    reader_options: dict[str, Any] | None = None,
) -> Any:
    """A dask DataFrame of `record`'s rows at one pinned checkpoint: one partition per split
    of about `split_bytes`, the columns `to_arrow()` gives (as pandas ArrowDtype columns, so
    no type is lost), indexed by the key's first field.

    `divisions` are known where that field sorts as its column does (not `desc(...)`, not a
    `typed(...)` field, one version of the record): the splits are moved to that field's
    boundaries so that each value lies in one partition. Otherwise they are unknown.

    `pin`: a `with opendata_kv.pinned(url) as pin:` the caller holds while it computes; the
    checkpoint is deleted when that block ends. Without it a checkpoint is made here that
    slatedb removes `lifetime` seconds later (a lazy DataFrame has no end to release it at).
    `schema`: a Schema (RecordTypes with `value=` classes give their codecs), a "module:attr"
    or a function returning a Schema or Values; it is loaded again in every task.
    """
    plan = plan_reads(
        url,
        record,
        schema,
        split_bytes=split_bytes,
        pin=pin,
        lifetime=lifetime,
        store_options=dict(store_options or {}),
        reader_options=dict(reader_options or {}),
    )
    if not plan.owned:
        _close_kept_readers_at_release(plan.pin.checkpoint_id)
    index = plan.record.fields[0][0] if plan.record.fields else None
    tasks, divisions = _partitions(plan)
    meta = _frame(projected_schema(plan.arrow_schema, None).empty_table(), index)
    frame = dd.from_map(
        read_partition,
        tasks,
        meta=meta,
        divisions=divisions,
        label="opendata-kv-read",
        enforce_metadata=False,
        index=index,
    )
    if columns is not None:
        projected_schema(plan.arrow_schema, columns)  # unknown names refused now
        kept = [c for c in columns if c != index]
        frame = frame[kept]
    return frame


def _close_kept_readers_at_release(checkpoint_id: str) -> None:
    """When the caller's pin ends, close the readers the workers of the current distributed
    client kept open at its checkpoint (store/pinned_readers.py); without a client the tasks
    run here, where the pin's release closes them itself."""
    try:
        from dask.distributed import default_client

        client = default_client()
    except (ImportError, ValueError):  # no distributed, or no client
        return
    pinned_readers.on_release(
        checkpoint_id, functools.partial(client.run, pinned_readers.release, checkpoint_id)
    )


def read_partition(
    task: SplitRead, columns: Sequence[str] | None = None, index: str | None = None
) -> Any:
    """One partition (a pandas DataFrame): `task`'s rows, only `columns` when dask pushed a
    projection down (the index column is read as well)."""
    wanted = None
    if columns is not None:
        wanted = list(columns) if index is None or index in columns else [*columns, index]
    schema = projected_schema(task.arrow_schema, wanted)
    table = pa.Table.from_batches(list(read_batches(task, wanted)), schema=schema)
    return _frame(table, index)


def _frame(table: Any, index: str | None) -> Any:
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    return frame if index is None else frame.set_index(index)


def _partitions(plan: ReadPlan) -> tuple[list[SplitRead], tuple[Any, ...] | None]:
    """The tasks and their divisions: the splits re-cut at the first key field's boundaries
    when that field gives divisions (see read_store), else as they are with None."""
    tasks = plan.tasks
    record = plan.record
    if (
        len(plan.record_types) != 1
        or not record.fields
        or plan.first_row is None
        or plan.last_row is None
        or not _sorts_as_column(record)
    ):
        return tasks, None
    first, last = plan.first_row[0], plan.last_row[0]
    # cut i starts the keys whose first field is values[i]: record.prefix(values[i])
    cuts: list[tuple[Any, bytes]] = []
    for task in tasks[1:]:
        value = _first_field(record, task.ranges[0].start)
        if value is None or value <= first:  # no boundary there, or an empty first partition
            continue
        cut = record.prefix(value)
        if not cuts or cut > cuts[-1][1]:
            cuts.append((value, cut))
    ranges = [r for t in tasks for r in t.ranges]
    lows = [ranges[0].start, *(c for _, c in cuts)]
    highs: list[bytes | None] = [*(c for _, c in cuts), ranges[-1].end]
    out = [regroup(tasks[0], _cover(ranges, lo, hi)) for lo, hi in zip(lows, highs, strict=True)]
    values = [first, *(v for v, _ in cuts), max(last, cuts[-1][0]) if cuts else last]
    field = record.fields[0][1]
    divisions = tuple(key_to_arrow(field, v) for v in values)
    if any(a >= b for a, b in pairwise(divisions[:-1])) or divisions[-1] < divisions[-2]:
        return tasks, None  # values that tie as Python values (-0.0 and 0.0): no divisions
    return out, divisions


def _cover(ranges: Sequence[KeyRange], lo: bytes, hi: bytes | None) -> list[KeyRange]:
    """The parts of `ranges` (contiguous, sorted) within [lo, hi); a split's estimate goes
    with the part that holds its start (the split is the unit of the estimate)."""
    out = []
    for r in ranges:
        start = max(r.start, lo)
        end = r.end if hi is None else hi if r.end is None else min(r.end, hi)
        if end is not None and start >= end:
            continue
        out.append(KeyRange(start, end, r.estimated_bytes if start == r.start else 0))
    return out


def _sorts_as_column(record: RecordType) -> bool:
    """Whether the first key field's Arrow values sort as its encoded bytes do (not desc(),
    not a typed field held as msgpack)."""
    field = record.fields[0][1]
    if isinstance(field, Desc):
        return False
    arrow_type = key_arrow_type(field)
    return not pa.types.is_binary(arrow_type) or field.kind in (
        "bytes",
        "trailing_bytes",
        "lp_bytes",
    )


def _first_field(record: RecordType, start: bytes) -> Any:
    """The first key field's value where `start` holds it whole, else None."""
    if not record.owns(start):
        return None
    field = record.fields[0][1]
    try:
        value, _ = field.decode(start, len(record.head))
    except OpendataKvError:  # a cut inside the field: no boundary there
        return None
    if not start.startswith(record.prefix(value)):
        return None
    return value
