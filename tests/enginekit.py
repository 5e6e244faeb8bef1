"""What the engine tests share (tests/test_dask_reads.py, tests/test_ray_reads.py): a store of
posts cut into many small SSTs, what a plain scan of it gives, the checkpoints it holds, and
the engines started once per test session (a LocalCluster of 2 worker processes; Ray with 2
CPUs), each with the moto server's AWS_* settings and this checkout importable."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from clikit import run_in_process
from conftest import MotoServer
from engine_schema import SCHEMA, post

from opendata_kv import SyncStore

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
#: small L0 SSTs: a few thousand posts make a few dozen SSTs, so the splits are many
SMALL_SSTS = {"l0_sst_size_bytes": 4096, "flush_interval": "60s"}
REPOS = 40
#: split_bytes for the tests: several splits over a store of POSTS posts
SPLIT_BYTES = 16 << 10
POSTS = 3000


def value_of(n: int) -> dict[str, Any]:
    """Post n's value: plain msgpack maps whose fields vary (a field the first batch lacks
    goes to `_extra` in every task alike)."""
    value: dict[str, Any] = {"text": f"post {n} " + "x" * (n % 40), "n": n}
    if n % 11 == 0:
        value["tags"] = [f"t{n % 3}"]
    if n > 2000 and n % 5 == 0:
        value["late"] = n * 0.5
    return value


def key_of(n: int) -> tuple[str, int]:
    return (f"did:plc:{n % REPOS}", n)


def build_store(url: str, count: int = POSTS) -> None:
    """`count` posts, flushed in many small SSTs."""
    with SyncStore.open(url, SCHEMA, settings=SMALL_SSTS) as db:
        for start in range(0, count, 500):
            with db.batch() as batch:
                for n in range(start, min(count, start + 500)):
                    batch.put(post, key_of(n), value_of(n))
            db.flush()


def plain_rows(url: str) -> list[tuple[tuple[Any, ...], Any]]:
    """(key fields, value) of every post, from one plain scan of the latest state."""
    with SyncStore.open_reader(url, SCHEMA) as db:
        return [(tuple(r.key), r.value) for r in db.scan(post)]


def summary(rows: list[tuple[tuple[Any, ...], Any]]) -> tuple[int, list[tuple[Any, ...]], str]:
    """(count, sorted keys, a checksum of the values in key order): what a job must match."""
    ordered = sorted(rows, key=lambda row: row[0])
    digest = hashlib.sha256()
    for _, value in ordered:
        digest.update(msgpack.packb(value, use_bin_type=True))
    return len(ordered), [k for k, _ in ordered], digest.hexdigest()


def arrow_schema(url: str) -> Any:
    """The schema one to_arrow() of the posts gives (its columns' metadata say which are
    values: a table back from pandas has lost it)."""
    with SyncStore.open_reader(url, SCHEMA) as db:
        return db.scan(post).to_arrow().schema


def rows_of_table(table: Any, schema: Any = None) -> list[tuple[tuple[Any, ...], Any]]:
    """(key fields, value) of each row of a to_arrow-shaped table (values put back together
    by the column roles of `schema`, the table's own by default)."""
    from opendata_kv.store.arrow import value_columns, value_from_row

    columns = value_columns(table.schema if schema is None else schema)
    out = []
    for row in table.to_pylist():
        out.append(((row["repo"], row["n"]), value_from_row(row, columns)))
    return out


def checkpoint_ids(url: str, env: dict[str, str] | None = None) -> list[str]:
    """The ids `opendata-kv checkpoint list URL --json` prints, run in this process
    (clikit.run_in_process: what the engines left behind is read from the object store alike;
    test_ops_timeout_bound runs `checkpoint list` as a process of its own)."""
    # --timeout 120: the machine may be loaded
    result = run_in_process("checkpoint", "list", url, "--json", "--timeout", "120", env=env)
    assert result.returncode == 0, result.stderr
    ids = []
    for line in result.stdout.splitlines():
        if line.strip():
            ids.append(json.loads(line)["id"])
    return ids


def worker_env(moto: MotoServer) -> dict[str, str]:
    """What the engines' worker processes need: the checkout and tests importable, the moto
    server's AWS_* settings."""
    path = os.pathsep.join(p for p in (str(REPO), str(TESTS), os.environ.get("PYTHONPATH")) if p)
    return {**moto.env(), "PYTHONPATH": path}


@pytest.fixture(scope="session")
def dask_client(moto_server: MotoServer) -> Iterator[Any]:
    """A distributed Client on a LocalCluster of 2 worker processes, 1 thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=worker_env(moto_server),
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="session")
def ray_session(moto_server: MotoServer) -> Iterator[None]:
    """Ray started locally with 2 CPUs (no dashboard), shut down at the end."""
    import ray

    env = worker_env(moto_server)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": env},
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()
