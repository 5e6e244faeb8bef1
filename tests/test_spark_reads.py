"""opendata_kv.spark on a local[2] SparkSession (issue 38, point 6): a local-directory store
pinned to a checkpoint reads through `spark.read.format("opendata_kv")` to the rows a plain
scan gives (count, sorted keys, a checksum of the values), one input partition per split.
Skipped where pyspark or a Java runtime is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from engine_schema import SCHEMA, post
from enginekit import (
    POSTS,
    REPO,
    SPLIT_BYTES,
    TESTS,
    arrow_schema,
    build_store,
    checkpoint_ids,
    key_of,
    plain_rows,
    rows_of_table,
    summary,
    value_of,
)

import opendata_kv
from opendata_kv import SyncStore
from opendata_kv.errors import InvalidArgumentError

pytest.importorskip("pyspark.sql.datasource")  # the engine: skipped without the extra
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime", allow_module_level=True)
import opendata_kv.spark as ospark  # ours: an error here fails the tests

pytestmark = [pytest.mark.hang_guard(600), pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession whose Python workers import this checkout and tests/."""
    from pyspark.sql import SparkSession

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYSPARK_PYTHON")}
    path = [str(REPO), str(TESTS), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("opendata_kv tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        ospark.register(session)
        yield session
    finally:
        session.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def spark_rows(url: str, frame: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """(key fields, value) of each row of a Spark DataFrame read in the `opendata_kv` format."""
    table = frame.toArrow()
    schema = arrow_schema(url)
    # Spark's types (uint32 as int64): back to to_arrow's, which put values together
    return rows_of_table(table.cast(schema), schema)


def test_the_rows_are_a_plain_scans_at_the_pinned_checkpoint(tmp_path: Path, spark: Any) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    expected = summary(plain_rows(url))
    assert expected[0] == POSTS
    with opendata_kv.pinned(url) as pin, SyncStore.open(url, SCHEMA) as db:
        db.put(post, key_of(POSTS), value_of(POSTS))  # after the pin: not read
        db.flush()
        frame = (
            spark.read.format(ospark.FORMAT)
            .option("url", url)
            .option("record", "post")
            .option("schema", "engine_schema:SCHEMA")
            .option("checkpoint", pin.checkpoint_id)
            .option("split_bytes", str(SPLIT_BYTES))
            .load()
        )
        assert frame.rdd.getNumPartitions() > 2  # one per split
        assert dict(frame.dtypes)["n"] == "bigint"  # u32 widened: Spark has no unsigned
        assert summary(spark_rows(url, frame)) == expected
        assert frame.filter(frame.repo == "did:plc:3").count() == POSTS // 40


def test_a_schema_given_at_registration_and_a_pin_made_by_the_read(
    tmp_path: Path, spark: Any
) -> None:
    """register(spark, schema=...) ships the Schema to Spark's workers by value; a read with
    no checkpoint option pins one itself, which expires after its lifetime."""
    url = str(tmp_path / "db")
    build_store(url, count=600)
    expected = summary(plain_rows(url))
    ospark.register(spark, schema=SCHEMA)
    try:
        frame = (
            spark.read.format("opendata_kv")
            .option("url", url)
            .option("record", "post")
            .option("lifetime", "600")
            .load()
        )
        assert summary(spark_rows(url, frame)) == expected
        assert len(checkpoint_ids(url)) == 1  # the read's own pin, until its lifetime ends
    finally:
        ospark.register(spark)


def test_spark_types_hold_every_value() -> None:
    arrow = pa.schema(
        [
            ("a", pa.uint64()),
            ("b", pa.uint8()),
            ("c", pa.binary(16)),
            ("d", pa.list_(pa.uint16())),
            ("e", pa.timestamp("ms", tz="UTC")),
        ]
    )
    spark_schema = ospark.spark_arrow_schema(arrow)
    batch = pa.record_batch(
        [
            pa.array([0, 2**64 - 1], pa.uint64()),
            pa.array([0, 255], pa.uint8()),
            pa.array([b"\0" * 16, b"\xff" * 16], pa.binary(16)),
            pa.array([[1], [65535]], pa.list_(pa.uint16())),
            pa.array([0, 1_700_000_000_000], pa.timestamp("ms", tz="UTC")),
        ],
        schema=arrow,
    )
    widened = batch.cast(spark_schema)
    assert widened.column(0).to_pylist()[1] == 2**64 - 1
    assert widened.cast(arrow).equals(batch)


def test_missing_and_unknown_options_name_themselves(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    with pytest.raises(InvalidArgumentError, match="'schema' is required") as info:
        ospark.plan({"url": url, "record": "post"})
    assert info.value.field == "schema"
    with pytest.raises(InvalidArgumentError, match="unknown option 'colums'"):
        ospark.plan({"url": url, "record": "post", "schema": "x:y", "colums": "n"})
    with pytest.raises(InvalidArgumentError, match="split_bytes='big' is not a number"):
        ospark.plan({"url": url, "record": "post", "schema": "x:y", "split_bytes": "big"})


def test_a_missing_pyspark_is_a_missing_extra_error() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "from opendata_kv.errors import MissingExtraError\n"
        "try:\n    import opendata_kv.spark\nexcept MissingExtraError as e:\n"
        "    print(e.field, e.value, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("spark pyspark"), out.stdout + out.stderr
    assert "pip install 'opendata-kv[spark]'" in out.stdout
