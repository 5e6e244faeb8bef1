"""Ray Datasets over one store (docs/scale-out.md): `read_store` pins a checkpoint and reads it
through `StoreDatasource`, one read task per group of splits, each from a reader at that
checkpoint. Needs the `ray` extra."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from opendata_kv.errors import InvalidArgumentError
from opendata_kv.keys import RecordType
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
from opendata_kv.store import Pinned

try:
    import pyarrow as pa
    import ray.data as ray_data
    from ray.data.block import BlockMetadata
except ImportError as error:
    raise missing_extra("ray", error) from None

__all__ = ["StoreDatasource", "read_store"]


class StoreDatasource(ray_data.Datasource):
    """The splits of a ReadPlan as Ray read tasks (`get_read_tasks`), sized from the
    splits' estimates (`estimate_inmemory_data_size`)."""

    def __init__(self, plan: ReadPlan, columns: Sequence[str] | None = None) -> None:
        # super() calls are not covered by untyped_calls_exclude
        super().__init__()  # type: ignore[no-untyped-call]
        self.plan = plan
        self.columns = None if columns is None else list(columns)
        self.schema = projected_schema(plan.arrow_schema, self.columns)

    def get_name(self) -> str:
        return f"OpendataKv({self.plan.record.name})"

    def estimate_inmemory_data_size(self) -> int | None:
        return self.plan.estimated_bytes

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[Any]:
        """At most `parallelism` tasks, each a run of neighbouring splits of about equal
        estimated bytes (one per split when there are no more splits than that)."""
        groups = _group(self.plan.tasks, max(1, parallelism))
        columns = self.columns
        out = []
        for task in groups:
            metadata = BlockMetadata(
                num_rows=None,
                size_bytes=task.estimated_bytes,
                input_files=None,
                exec_stats=None,
            )
            out.append(
                ray_data.ReadTask(
                    _reader(task, columns),
                    metadata,
                    schema=self.schema,
                    per_task_row_limit=per_task_row_limit,
                )
            )
        return out


def _reader(task: SplitRead, columns: list[str] | None) -> Any:
    def read() -> Iterator[Any]:
        for batch in read_batches(task, columns):
            yield pa.Table.from_batches([batch])

    return read


def _group(tasks: list[SplitRead], parallelism: int) -> list[SplitRead]:
    """`tasks` merged into at most `parallelism` runs of neighbours, cut where the running
    total of estimated bytes passes each equal share."""
    if len(tasks) <= parallelism:
        return tasks
    total = sum(t.estimated_bytes for t in tasks) or len(tasks)
    runs: list[list[SplitRead]] = [[]]
    done = 0
    for i, task in enumerate(tasks):
        left = len(tasks) - i
        if runs[-1] and (
            done >= total * len(runs) / parallelism or left <= parallelism - len(runs)
        ):
            runs.append([])
        runs[-1].append(task)
        done += task.estimated_bytes or (total // len(tasks))
    return [regroup(run[0], [r for t in run for r in t.ranges]) for run in runs]


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
    override_num_blocks: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> Any:
    """A ray.data.Dataset of `record`'s rows at one pinned checkpoint, in the columns
    `to_arrow()` gives (only `columns` when given), read by tasks of about `split_bytes`.

    `pin`, `lifetime`, `schema`: as for opendata_kv.dask.read_store (the caller's `with
    pinned(url) as pin:` deletes the checkpoint at its end; without one it expires after
    `lifetime` seconds). `override_num_blocks` and `ray_remote_args` (e.g. `max_retries`)
    go to ray.data.read_datasource.
    """
    if isinstance(columns, str):
        raise InvalidArgumentError("columns must be a list of column names", field="columns")
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
    source = StoreDatasource(plan, columns)
    options: dict[str, Any] = {}
    if override_num_blocks is not None:
        options["override_num_blocks"] = override_num_blocks
    if ray_remote_args is not None:
        options["ray_remote_args"] = ray_remote_args
    return ray_data.read_datasource(source, **options)
