"""Spark DataFrames over one store (docs/scale-out.md), through Spark 4's Python data source
API: `register(spark, schema=schema)` adds the `opendata_kv` format, then

    spark.read.format("opendata_kv").option("url", url).option("record", "post").load()

plans on Spark's side (pins a checkpoint, cuts splits, fixes the Arrow schema), gives one
input partition per split and reads each in an executor's Python worker as Arrow record
batches from a reader at that checkpoint. Needs the `spark` extra (and a Java runtime)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from opendata_kv.errors import InvalidArgumentError
from opendata_kv.split_reads import (
    DEFAULT_SPLIT_BYTES,
    ReadPlan,
    SplitRead,
    missing_extra,
    plan_reads,
    read_batches,
    shippable_schema,
)
from opendata_kv.store import Pinned

try:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema
except ImportError as error:
    raise missing_extra("spark", error) from None

__all__ = ["FORMAT", "SplitPartition", "StoreDataSource", "register", "spark_arrow_schema"]

#: the name `spark.read.format(...)` takes once `register(spark)` ran
FORMAT = "opendata_kv"
#: the options the format reads; `url`, `record` and (unless register() was given one)
#: `schema` are required
OPTIONS = ("url", "record", "schema", "split_bytes", "checkpoint", "lifetime")


def spark_arrow_type(arrow_type: Any) -> Any:
    """The Arrow type a column of `arrow_type` is given to Spark as: Spark has no unsigned
    integers (each goes to the next wider signed type; uint64 to decimal(20, 0), which holds
    every value), no fixed-size binary (binary) and microsecond timestamps."""
    types = pa.types
    wider = {8: pa.int16(), 16: pa.int32(), 32: pa.int64(), 64: pa.decimal128(20, 0)}
    if types.is_unsigned_integer(arrow_type):
        return wider[arrow_type.bit_width]
    if types.is_fixed_size_binary(arrow_type):
        return pa.binary()
    if types.is_timestamp(arrow_type):
        return pa.timestamp("us", tz=arrow_type.tz)
    if types.is_list(arrow_type):
        return pa.list_(spark_arrow_type(arrow_type.value_type))
    if types.is_struct(arrow_type):
        return pa.struct([f.with_type(spark_arrow_type(f.type)) for f in arrow_type])
    return arrow_type


def spark_arrow_schema(arrow_schema: Any) -> Any:
    """`arrow_schema` in the types Spark takes (spark_arrow_type), its metadata kept."""
    return pa.schema([f.with_type(spark_arrow_type(f.type)) for f in arrow_schema])


class SplitPartition(InputPartition):
    """One split as Spark's input partition: what one task reads."""

    def __init__(self, task: SplitRead) -> None:
        super().__init__(task)
        self.task = task


def _option(options: Mapping[str, str], name: str, required: bool) -> str | None:
    value = options.get(name)
    if value is None and required:
        raise InvalidArgumentError(
            f"spark.read.format({FORMAT!r}): the option {name!r} is required (options: "
            f"{', '.join(OPTIONS)})",
            field=name,
        )
    return value


def _number(options: Mapping[str, str], name: str, default: float, kind: type) -> Any:
    text = options.get(name)
    if text is None:
        return kind(default)
    try:
        value = kind(text)
    except ValueError:
        raise InvalidArgumentError(
            f"spark.read.format({FORMAT!r}): option {name}={text!r} is not a number",
            field=name,
            value=text,
        ) from None
    if value <= 0:
        raise InvalidArgumentError(
            f"spark.read.format({FORMAT!r}): option {name} must be positive, got {text!r}",
            field=name,
            value=text,
        )
    return value


def plan(options: Mapping[str, str], schema: Any = None) -> ReadPlan:
    """The read the options describe (`schema`: register()'s, when the options name none):
    pinned at `checkpoint` (an id the caller holds, e.g.
    `pin.checkpoint_id` inside `with opendata_kv.pinned(url)`), or at a checkpoint made here
    that expires `lifetime` seconds later (Spark gives a source no end to release it at)."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidArgumentError(
            f"spark.read.format({FORMAT!r}): unknown option {unknown[0]!r} (options: "
            f"{', '.join(OPTIONS)})",
            field=unknown[0],
        )
    url = _option(options, "url", True)
    record = _option(options, "record", True)
    if schema is None or "schema" in options:
        schema = _option(options, "schema", True)
    assert url is not None and record is not None and schema is not None
    lifetime = _number(options, "lifetime", 3600.0, float)
    checkpoint = options.get("checkpoint")
    pin = None if checkpoint is None else Pinned.at(url, checkpoint, lifetime)
    return plan_reads(
        url,
        record,
        schema,
        split_bytes=_number(options, "split_bytes", DEFAULT_SPLIT_BYTES, int),
        pin=pin,
        lifetime=lifetime,
        store_options={},
        reader_options={},
    )


class StoreDataSource(DataSource):
    """The `opendata_kv` format: a record's rows at one pinned checkpoint, in the columns
    `to_arrow()` gives (as Spark types: docs/scale-out.md)."""

    #: the schema source register(spark, schema=...) gave, for reads naming none
    default_schema: Any = None

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Spark hands a case-insensitive map: the option names are ours, lowercase
        self.options = {str(k).lower(): str(v) for k, v in dict(options).items()}
        self._plan: ReadPlan | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def read_plan(self) -> ReadPlan:
        if self._plan is None:
            self._plan = plan(self.options, self.default_schema)
        return self._plan

    def schema(self) -> Any:
        return from_arrow_schema(spark_arrow_schema(self.read_plan().arrow_schema))

    def reader(self, schema: Any) -> StoreReader:
        return StoreReader(self.read_plan())


class StoreReader(DataSourceReader):
    """One input partition per split; each read as Arrow record batches of the plan's
    schema (Spark checks them against the schema the source declared)."""

    def __init__(self, read_plan: ReadPlan) -> None:
        self.tasks = list(read_plan.tasks)
        self.arrow_schema = spark_arrow_schema(read_plan.arrow_schema)

    def partitions(self) -> list[SplitPartition]:
        return [SplitPartition(task) for task in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SplitPartition), partition
        for batch in read_batches(partition.task):
            yield batch.cast(self.arrow_schema)


def register(spark: Any, schema: Any = None) -> None:
    """Add the `opendata_kv` format to a SparkSession (`spark.read.format("opendata_kv")`).
    `schema`: what reads use when they give no `schema` option (a Schema, RecordTypes, or a
    function returning a Schema or Values: anything read_store takes that pickles); Spark
    ships the source to its Python workers by value, with it."""
    if schema is None:
        spark.dataSource.register(StoreDataSource)
        return
    source = shippable_schema(schema)
    # a class made here (not importable by name) travels to Spark's workers by value
    registered = type("StoreDataSource", (StoreDataSource,), {"default_schema": source})
    spark.dataSource.register(registered)
