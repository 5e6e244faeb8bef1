"""opendata_kv.ray.read_store on Ray started locally with 2 CPUs (issue 38, point 4): the rows
a Dataset gives are a plain scan's, on a local directory and on moto; a writer writing during
the job changes nothing it returns; the checkpoint is gone afterwards; a worker killed mid-read
is retried (max_retries) to the same rows; the Datasource's tasks and size come from the
splits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from engine_schema import SCHEMA, killing_values, post
from enginekit import (
    POSTS,
    SPLIT_BYTES,
    build_store,
    checkpoint_ids,
    key_of,
    plain_rows,
    ray_session,
    rows_of_table,
    summary,
    value_of,
)

import opendata_kv
from opendata_kv import SyncStore
from opendata_kv.split_reads import plan_reads

pytest.importorskip("ray.data")  # the engine: skipped where the extra is not installed
import opendata_kv.ray as oray  # ours: an error here fails the tests

__all__ = ["ray_session"]  # the session's Ray, a fixture

pytestmark = [
    pytest.mark.hang_guard(600),
    # one engine per xdist worker when run with --dist loadgroup (each starts its own)
    pytest.mark.xdist_group("ray"),
    pytest.mark.usefixtures("ray_session"),
]


def dataset_rows(dataset: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """The rows a Dataset gives, as (key fields, value)."""
    blocks = [b for b in dataset.iter_batches(batch_format="pyarrow", batch_size=None)]
    return rows_of_table(pa.concat_tables(blocks)) if blocks else []


def test_the_rows_are_a_plain_scans_local_and_s3(url: str) -> None:
    build_store(url)
    expected = summary(plain_rows(url))
    with opendata_kv.pinned(url) as pin:
        dataset = oray.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
        assert summary(dataset_rows(dataset)) == expected
        assert dataset.count() == POSTS


def test_the_datasource_sizes_its_tasks_from_the_splits(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    with opendata_kv.pinned(url) as pin:
        with pin.open_reader(schema=SCHEMA) as reader:
            splits = reader.splits(post, target_bytes=SPLIT_BYTES)
        assert len(splits) > 3
        plan = plan_reads(
            url,
            post,
            SCHEMA,
            split_bytes=SPLIT_BYTES,
            pin=pin,
            lifetime=60,
            store_options={},
            reader_options={},
        )
        source = oray.StoreDatasource(plan)
        total = sum(s.estimated_bytes for s in splits)
        assert source.estimate_inmemory_data_size() == total
        assert len(source.get_read_tasks(len(splits) + 10)) == len(splits)
        two = source.get_read_tasks(2)
        assert len(two) == 2
        assert sum(t.metadata.size_bytes for t in two) == total
        ranges = [r for t in plan.tasks for r in t.ranges]
        assert ranges == splits  # every split read once, in order
        # each task reads its own share: together, the rows once
        rows = []
        for task in two:
            for block in task():
                rows += rows_of_table(block)
        assert summary(rows) == summary(plain_rows(url))
        with SyncStore.open_reader(url, SCHEMA) as db:
            assert two[0].schema == db.scan(post).to_arrow().schema


def test_a_writer_writing_during_the_job_changes_nothing_and_the_checkpoint_goes(
    url: str,
) -> None:
    build_store(url)
    expected = summary(plain_rows(url))
    with SyncStore.open(url, SCHEMA) as writer:
        with opendata_kv.pinned(url) as pin:
            held = pin.checkpoint_id
            assert held in checkpoint_ids(url)
            dataset = oray.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
            batches = iter(dataset.iter_batches(batch_format="pyarrow", batch_size=None))
            blocks = [next(batches)]  # the job is under way
            for n in range(POSTS, POSTS + 400):
                writer.put(post, key_of(n), value_of(n))
                writer.put(post, key_of(n - POSTS), {"text": "rewritten", "n": -1})
                writer.delete(post, key_of(n - POSTS + 1000))
            writer.flush()
            blocks += list(batches)
            assert summary(rows_of_table(pa.concat_tables(blocks))) == expected
        assert held not in checkpoint_ids(url)
    assert summary(plain_rows(url)) != expected


def test_a_worker_killed_mid_read_is_retried_to_the_same_rows(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    expected = summary(plain_rows(url))
    schema = killing_values(tmp_path, at=POSTS // 2)
    with opendata_kv.pinned(url) as pin:
        dataset = oray.read_store(
            url,
            post,
            schema=schema,
            split_bytes=SPLIT_BYTES,
            pin=pin,
            ray_remote_args={"max_retries": 2},
        )
        (tmp_path / "armed").touch()
        rows = dataset_rows(dataset)
    assert (tmp_path / "killed").exists()
    assert summary(rows) == expected


def test_a_missing_ray_is_a_missing_extra_error() -> None:
    code = (
        "import sys; sys.modules['ray'] = None; sys.modules['ray.data'] = None\n"
        "from opendata_kv.errors import MissingExtraError\n"
        "try:\n    import opendata_kv.ray\nexcept MissingExtraError as e:\n"
        "    print(e.field, e.value, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("ray ray"), out.stdout + out.stderr
    assert "pip install 'opendata-kv[ray]'" in out.stdout
