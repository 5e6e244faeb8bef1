"""opendata_kv.dask.read_store on a LocalCluster of 2 worker processes (issue 38, point 3):
the rows a job returns are a plain scan's, on a local directory and on moto; a writer writing
during the job changes nothing it returns; the checkpoint is gone afterwards; a worker killed
mid-read is replaced and its task retried to the same rows."""

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
    REPOS,
    SPLIT_BYTES,
    arrow_schema,
    build_store,
    checkpoint_ids,
    dask_client,
    key_of,
    plain_rows,
    rows_of_table,
    summary,
    value_of,
)

import opendata_kv
from opendata_kv import SyncStore

pytest.importorskip("dask.dataframe")  # the engine: skipped where the extra is not installed
pytest.importorskip("distributed")
import opendata_kv.dask as odask  # ours: an error here fails the tests

__all__ = ["dask_client"]  # the session's cluster, a fixture

pytestmark = [
    pytest.mark.hang_guard(600),
    # one engine per xdist worker when run with --dist loadgroup (each starts its own)
    pytest.mark.xdist_group("dask"),
]


def frame_rows(result: Any, schema: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """(key fields, value) of each row of a computed frame (`schema`: to_arrow's)."""
    table = pa.Table.from_pandas(result.reset_index(), preserve_index=False)
    assert table.schema.equals(schema, check_metadata=False)
    return rows_of_table(table, schema)


def job_rows(
    url: str, frame: Any, client: Any, **compute: Any
) -> list[tuple[tuple[Any, ...], Any]]:
    """The rows a job over `frame` returns, as (key fields, value)."""
    result = client.compute(frame, **compute).result(timeout=300)
    return frame_rows(result, arrow_schema(url))


def test_the_rows_are_a_plain_scans_local_and_s3(url: str, dask_client: Any) -> None:
    build_store(url)
    expected = summary(plain_rows(url))
    assert expected[0] == POSTS
    with opendata_kv.pinned(url) as pin:
        frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
        assert frame.npartitions > 2
        assert summary(job_rows(url, frame, dask_client)) == expected


def test_the_meta_is_to_arrows_schema_and_the_divisions_hold(
    tmp_path: Path, dask_client: Any
) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    schema = arrow_schema(url)
    with opendata_kv.pinned(url) as pin:
        frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
        meta = frame._meta
        assert meta.index.name == "repo"
        assert list(meta.columns) == [n for n in schema.names if n != "repo"]
        for name in meta.columns:
            assert meta[name].dtype.pyarrow_dtype == schema.field(name).type
        assert frame.known_divisions
        divisions = frame.divisions
        assert len(divisions) == frame.npartitions + 1 > 2
        for i in range(frame.npartitions):
            part = frame.get_partition(i).compute()
            if len(part):
                assert divisions[i] <= part.index.min()
                last = i == frame.npartitions - 1
                assert (
                    part.index.max() <= divisions[i + 1]
                    if last
                    else (part.index.max() < divisions[i + 1])
                )
        # a repo lies in one partition: loc on the index reads only its partition
        one = frame.loc["did:plc:3"].compute()
        assert sorted(one["n"]) == [n for n in range(POSTS) if n % REPOS == 3]


def test_a_projection_reaches_the_tasks(tmp_path: Path, dask_client: Any) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    with opendata_kv.pinned(url) as pin:
        frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
        projected = frame[["n"]]
        from dask.dataframe.dask_expr.io import FromMapProjectable

        (read,) = list(projected.optimize(fuse=False).expr.find_operations(FromMapProjectable))
        assert read.kwargs["columns"] == ["n"]
        result = projected.compute()
        assert list(result.columns) == ["n"] and result.index.name == "repo"
        assert sorted(result["n"]) == list(range(POSTS))
        only = odask.read_store(
            url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin, columns=["n", "text"]
        )
        assert list(only._meta.columns) == ["n", "text"]
        with pytest.raises(opendata_kv.errors.InvalidArgumentError, match="no column 'nope'"):
            odask.read_store(url, post, schema=SCHEMA, pin=pin, columns=["nope"])


def test_a_writer_writing_during_the_job_changes_nothing_and_the_checkpoint_goes(
    url: str, dask_client: Any
) -> None:
    build_store(url)
    expected = summary(plain_rows(url))
    with SyncStore.open(url, SCHEMA) as writer:
        with opendata_kv.pinned(url) as pin:
            held = pin.checkpoint_id
            assert held in checkpoint_ids(url)
            frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
            future = dask_client.compute(frame)
            for n in range(POSTS, POSTS + 400):  # new posts, rewrites and deletes meanwhile
                writer.put(post, key_of(n), value_of(n))
                writer.put(post, key_of(n - POSTS), {"text": "rewritten", "n": -1})
                writer.delete(post, key_of(n - POSTS + 1000))
            writer.flush()
            result = future.result(timeout=300)
            assert summary(frame_rows(result, arrow_schema(url))) == expected
        assert held not in checkpoint_ids(url)
    assert summary(plain_rows(url)) != expected  # the writes did land


def test_a_worker_killed_mid_read_is_retried_to_the_same_rows(
    tmp_path: Path, dask_client: Any
) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    expected = summary(plain_rows(url))
    schema = killing_values(tmp_path, at=POSTS // 2)
    with opendata_kv.pinned(url) as pin:
        frame = odask.read_store(url, post, schema=schema, split_bytes=SPLIT_BYTES, pin=pin)
        (tmp_path / "armed").touch()
        rows = job_rows(url, frame, dask_client, retries=1)
    assert (tmp_path / "killed").exists()  # a worker did die in the read
    assert summary(rows) == expected
    dask_client.wait_for_workers(2, timeout=300)  # the nanny restarts it, for the next tests


def test_without_a_pin_the_checkpoint_has_the_lifetime(tmp_path: Path, dask_client: Any) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    before = set(checkpoint_ids(url))
    frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, lifetime=600)
    (made,) = set(checkpoint_ids(url)) - before
    with SyncStore.open_reader(url, SCHEMA) as db:
        (checkpoint,) = [c for c in db.checkpoints() if c.id == made]
    assert checkpoint.expires is not None
    assert 0 < (checkpoint.expires - checkpoint.created).total_seconds() <= 600
    assert summary(job_rows(url, frame, dask_client)) == summary(plain_rows(url))


def _worker_readers() -> tuple[int, list[str]]:
    from opendata_kv.store import pinned_readers

    return pinned_readers.opened(), pinned_readers.idle_readers()


def test_each_worker_opens_one_reader_per_pin_and_closes_it_when_the_pin_ends(
    tmp_path: Path, dask_client: Any
) -> None:
    url = str(tmp_path / "db")
    build_store(url)
    expected = summary(plain_rows(url))
    before = {w: opened for w, (opened, _) in dask_client.run(_worker_readers).items()}
    with opendata_kv.pinned(url) as pin:
        frame = odask.read_store(url, post, schema=SCHEMA, split_bytes=SPLIT_BYTES, pin=pin)
        assert frame.npartitions > 2
        assert summary(job_rows(url, frame, dask_client)) == expected
        assert summary(job_rows(url, frame, dask_client)) == expected  # a second job: no open
        during = dask_client.run(_worker_readers)
        opens = [during[w][0] - before.get(w, 0) for w in during]
        assert sum(opens) <= len(during) and max(opens) <= 1, opens
        assert any(pin.checkpoint_id in kept for _, kept in during.values())
        held = pin.checkpoint_id
    after = dask_client.run(_worker_readers)
    assert not any(held in kept for _, kept in after.values())  # closed with the pin


def test_a_pin_of_another_store_and_a_values_are_refused(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    build_store(url, 10)
    with opendata_kv.pinned(url) as pin:
        with pytest.raises(opendata_kv.errors.InvalidArgumentError, match="not of"):
            odask.read_store(str(tmp_path / "other"), post, schema=SCHEMA, pin=pin)
        from opendata_kv.values import Values

        with pytest.raises(opendata_kv.errors.ArgumentTypeError, match="function returning"):
            odask.read_store(url, post, schema=Values(SCHEMA), pin=pin)


def test_a_pin_holding_a_values_ships_without_it(tmp_path: Path, dask_client: Any) -> None:
    from opendata_kv.values import Values

    url = str(tmp_path / "db")
    build_store(url, 300)
    with opendata_kv.pinned(url, schema=Values(SCHEMA)) as pin:  # a Values does not pickle
        frame = odask.read_store(url, post, schema=SCHEMA, pin=pin)
        assert len(frame.compute()) == 300


def test_a_missing_dask_is_a_missing_extra_error() -> None:
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['dask.dataframe'] = None\n"
        "from opendata_kv.errors import MissingExtraError\n"
        "try:\n    import opendata_kv.dask\nexcept MissingExtraError as e:\n"
        "    print(e.field, e.value, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("dask dask.dataframe "), out.stdout + out.stderr
    assert "pip install 'opendata-kv[dask]'" in out.stdout
