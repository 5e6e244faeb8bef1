"""The shared test support works as the other tests assume: the hang_guard marker arms the
alarm (and only where it is set), in-process CLI runs leave nothing behind, and what
collection left alive is out of the garbage collector's sight."""

from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process
from conftest import S3_BUCKET


@pytest.mark.hang_guard(30)
def test_the_hang_guard_marker_arms_the_alarm() -> None:
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < remaining <= 30


def test_unmarked_tests_run_unguarded() -> None:
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_collection_leaves_the_heap_frozen() -> None:
    """conftest froze what collection left alive (this function among it): a full
    collection, such as the benches' gc.collect() before each sample, no longer scans it,
    while what a test makes stays collectable."""
    assert gc.get_freeze_count() > 0
    assert all(o is not test_collection_leaves_the_heap_frozen for o in gc.get_objects())
    made = [object()]
    assert any(o is made for o in gc.get_objects())


def test_in_process_runs_are_independent(tmp_path: Path) -> None:
    """A --schema module written in one folder must not answer for a same-named one written
    in another; cwd, environment and sys.path come back as they were."""
    before = (os.getcwd(), dict(os.environ), list(sys.path))
    for n, folder in enumerate((tmp_path / "a", tmp_path / "b")):
        folder.mkdir()
        (folder / "same_name_schema.py").write_text(
            "from opendata_kv.keys import RecordType, Schema, fields\n"
            f"SCHEMA = Schema(RecordType('kind{n}', 1, [('n', fields.u8)]))\n"
        )
        result = run_in_process(
            "key",
            "inspect",
            "011007",
            "--schema",
            "same_name_schema:SCHEMA",
            "--json",
            cwd=folder,
            env={"OPENDATA_KV_TEST_MARK": "1"},
        )
        assert result.returncode == 0, result.stderr
        assert f'"record": "kind{n}"' in result.stdout
    assert (os.getcwd(), dict(os.environ), list(sys.path)) == before
    assert "same_name_schema" not in sys.modules


def test_waves_count_round_trips_in_sequence() -> None:
    """Requests that start before any other answered share a wave; one started after an
    answer is a wave later than the request that answered."""
    from tcp_proxy import Request, waves

    def r(start: float, end: float) -> Request:
        return Request("GET", "/", start, end, 200)

    assert waves([]) == 0
    assert waves([r(0, 1), r(0.01, 1.01), r(0.02, 1.0)]) == 1
    assert waves([r(0, 1), r(1.1, 2), r(2.1, 3)]) == 3
    # a request after the first answered, beside a slow one still running: two waves
    assert waves([r(0, 5), r(0, 1), r(1.2, 2)]) == 2


@pytest.mark.s3
def test_delay_proxy_logs_and_counts_exchanges(s3_env: Any) -> None:
    """Through a DelayProxy, boto3 requests in sequence are as many waves, requests sent
    together are one, and each exchange is logged with its method, path and status."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from tcp_proxy import DelayProxy

    with DelayProxy(("127.0.0.1", s3_env.port), delay=0.05) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.endpoint, **_credentials(s3_env))
        with proxy.measure() as seq:
            for n in range(3):
                client.put_object(Bucket=S3_BUCKET, Key=f"proxy/{n}", Body=b"x" * 100)
        assert (len(seq.requests), seq.waves()) == (3, 3), seq.describe()
        assert seq.count("PUT", "/proxy/") == 3
        clients = [
            boto3.client("s3", endpoint_url=proxy.endpoint, **_credentials(s3_env))
            for _ in range(4)
        ]
        with proxy.measure() as together, ThreadPoolExecutor(4) as pool:
            list(
                pool.map(
                    lambda c: (
                        c[1].get_object(Bucket=S3_BUCKET, Key=f"proxy/{c[0] % 3}")["Body"].read()
                    ),
                    enumerate(clients),
                )
            )
        assert len(together.requests) == 4 and together.waves() == 1, together.describe()
        assert {r.status for r in together.requests} == {200}


def _credentials(server: Any) -> dict[str, str]:
    env = server.env()
    return {
        "region_name": env["AWS_REGION"],
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
    }


def test_the_hang_guard_shows_the_await_an_event_loop_is_stuck_in(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A hang inside asyncio.run shows only the loop's select in its traceback: the guard
    prints every pending task's stack, naming the await it waits on."""
    import asyncio

    from hang_guard import HangError, hang_guard

    async def stuck_in_here() -> None:
        await asyncio.sleep(30)

    with pytest.raises(HangError), hang_guard(0.5):
        asyncio.run(stuck_in_here())
    err = capfd.readouterr().err
    assert "hang guard: pending" in err and "stuck_in_here" in err, err
