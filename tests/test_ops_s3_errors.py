"""An S3 answer is not an outage (issue 20.2, 21.4): a missing bucket, a bad key or a
refused write fails at once with the bucket and the S3 error code, in the library and in
every command, where slatedb would retry it forever; --timeout bounds every command."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import S3_BUCKET, MotoServer
from opskit import WriteRefusingProxy
from storekit import SCHEMA, VALUES, aio, like

from opendata_kv.cli.main import main
from opendata_kv.errors import StoreNotFoundError, StorePermissionError
from opendata_kv.store import Store

pytestmark = pytest.mark.hang_guard(120)


def test_missing_bucket_fails_at_once_in_the_library(s3_env: MotoServer) -> None:
    """Store.open without timeout= used to wait forever; open_reader said 'no answer within
    5 s' although the server answered 404 at once."""

    async def run() -> None:
        with pytest.raises(StoreNotFoundError, match="404 NoSuchBucket") as info:
            await Store.open("s3://nobucket/x", SCHEMA, values=VALUES)
        assert "bucket nobucket" in str(info.value) and info.value.value == "nobucket"
        with pytest.raises(StoreNotFoundError, match="NoSuchBucket"):
            await Store.open_reader("s3://nobucket/x", SCHEMA, timeout=5)
        with pytest.raises(StoreNotFoundError, match="NoSuchBucket"):
            await Store.clone("s3://nobucket/x", "s3://nobucket/y")

    aio(run)()


def test_bad_credentials_fail_at_once(s3_env: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused credential is an answer: StorePermissionError naming the bucket and code.
    (moto checks signatures only with its IAM mode, so a wrong secret is refused by a proxy
    that forwards nothing but errors: the write-refusing proxy's 403 for every write.)"""
    with WriteRefusingProxy(s3_env.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)

        async def run() -> None:
            with pytest.raises(StorePermissionError, match="403 AccessDenied"):
                await Store.open(f"s3://{S3_BUCKET}/fresh", SCHEMA, values=VALUES)

        aio(run)()


def test_clone_into_a_missing_bucket_cli(
    s3_env: MotoServer, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`opendata-kv clone ./db s3://nobucket/x` hung forever (--timeout 3 included)."""
    src = str(tmp_path / "db")

    async def make() -> None:
        async with Store.open(src, SCHEMA, values=VALUES) as store:
            await store.put(like, (1,), {"v": 1})

    aio(make)()
    for argv in (
        ["clone", src, "s3://nobucket/x"],
        ["clone", src, "s3://nobucket/x", "--timeout", "3"],
        ["stats", "s3://nobucket/x"],
        ["dump", "s3://nobucket/x"],
        ["changes", "s3://nobucket/x"],
        ["checkpoint", "list", "s3://nobucket/x"],
        ["verify", "s3://nobucket/x"],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "NoSuchBucket" in err and "nobucket" in err, (argv, err)


def test_checkpoint_create_and_delete_with_read_only_credentials(
    s3_env: MotoServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21.4: through a proxy that answers 403 to every write, `checkpoint create` and
    `checkpoint delete` were killed after 120 s; now StorePermissionError at once, and the
    checkpoint the writer made is still there."""
    url = f"s3://{S3_BUCKET}/ro-{time.monotonic_ns()}"

    async def make() -> str:
        async with Store.open(url, SCHEMA, values=VALUES) as store:
            await store.put(like, (1,), {"v": 1})
            return (await store.checkpoint("kept")).id

    made = aio(make)()
    with WriteRefusingProxy(s3_env.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        for argv in (
            ["checkpoint", "create", url, "--name", "new"],
            ["checkpoint", "delete", url, made],
        ):
            assert main(argv) == 1, argv
            err = capsys.readouterr().err
            assert "AccessDenied" in err and S3_BUCKET in err, err

        async def library() -> None:
            async with Store.open_reader(url, SCHEMA, values=VALUES) as reader:
                with pytest.raises(StorePermissionError, match="AccessDenied"):
                    await reader.checkpoint("new")
                with pytest.raises(StorePermissionError, match="AccessDenied"):
                    await reader.delete_checkpoint(made)
                assert [c.id for c in await reader.checkpoints()] == [made]

        aio(library)()
        assert len(proxy.refused) <= 8, proxy.refused  # a probe each, not a retry loop
