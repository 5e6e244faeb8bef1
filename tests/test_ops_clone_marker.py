"""Clones are complete or visibly not (issue 20.3) and checkpoints can be taken from outside a
running writer (issue 20.5), on a local directory and on S3 (moto)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import crash_writer as cw
import pytest
from storekit import SCHEMA, VALUES, aio, like
from writer_process import WriterProcess, child_env

from opendata_kv.cli.main import main
from opendata_kv.errors import IncompleteCloneError, StoreDataError, StoreError
from opendata_kv.store import Store

pytestmark = pytest.mark.hang_guard(300)


class Interrupt(BaseException):
    """Stands for Ctrl-C in the middle of a clone (raised from its progress callback)."""


def interrupt_after(batches: int) -> Any:
    seen = [0]

    def progress(records: int, phase: str) -> None:
        seen[0] += 1
        if seen[0] >= batches:
            raise Interrupt

    return progress


def test_interrupted_clone_is_marked_and_resumes(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clone stopped after 3 batches of 100: opening, dumping, stats and verify of the
    destination fail saying it is incomplete; a clone of another source there is refused;
    running the same clone again resumes it and the result holds every record once;
    --replace starts over; the CLI prints the record count."""
    dst = str(tmp_path / "clone")

    async def make() -> None:
        async with Store.open(url, SCHEMA, values=VALUES) as store:
            await store.put_many(((like, (n,), {"v": n}) for n in range(1000)), batch_size=500)
            await store.flush()
        with pytest.raises(Interrupt):
            await Store.clone(url, dst, batch_size=100, progress=interrupt_after(3))
        with pytest.raises(IncompleteCloneError, match="incomplete clone"):
            await Store.open(dst, SCHEMA, values=VALUES)
        with pytest.raises(IncompleteCloneError, match="300 records copied"):
            await Store.open_reader(dst, SCHEMA, values=VALUES)
        other = str(tmp_path / "other-src")
        async with Store.open(other, SCHEMA, values=VALUES) as store:
            await store.put(like, (1,), {"v": 1})
        with pytest.raises(StoreError, match="unfinished clone"):
            await Store.clone(other, dst)

    aio(make)()
    for command in (["stats", dst], ["dump", dst], ["verify", dst]):
        assert main(command) == 1, command
        assert "incomplete clone" in capsys.readouterr().err
    assert main(["clone", url, dst, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == 1000 and result["resumed"] is True

    async def check(path: str) -> list[int]:
        async with Store.open_reader(path, SCHEMA, values=VALUES) as reader:
            return [r.key.n async for r in reader.scan(like)]

    assert aio(check)(dst) == list(range(1000))
    # a finished clone is a database like any other: cloning onto it is refused
    assert main(["clone", url, dst]) == 1
    assert "already holds a database" in capsys.readouterr().err

    again = str(tmp_path / "again")

    async def interrupted() -> None:
        with pytest.raises(Interrupt):
            await Store.clone(url, again, batch_size=100, progress=interrupt_after(2))

    aio(interrupted)()
    assert main(["clone", url, again, "--replace"]) == 0
    out = capsys.readouterr().out
    assert "records" in out and "1000" in out and "resumed" in out
    assert aio(check)(again) == list(range(1000))


def test_checkpoint_from_outside_a_running_writer(url: str, tmp_path: Path) -> None:
    """`opendata-kv checkpoint create` while a writer process writes and acknowledges each
    batch (its `ack` lines): every batch acknowledged before the command started is in the
    clone of the checkpoint, whole. The writer's GC then runs with no minimum age: the
    checkpoint's WAL copies are kept beside it, so a later clone still holds them."""
    gc_now = {
        "garbage_collector_options": {
            group: {"interval": "1s", "min_age": "1s"}
            for group in ("manifest_options", "wal_options", "compacted_options")
        }
    }
    writer = WriterProcess(url, settings=gc_now, delay=0.02)
    try:
        writer.wait_open()
        writer.wait_acks(20)
        acked_before = len(writer.acked)
        assert main(["checkpoint", "create", url, "--name", "live", "--json"]) == 0
        writer.wait_acks(acked_before + 40)  # the writer goes on, flushing and collecting
    finally:
        writer.kill()
    clones = [str(tmp_path / "c1"), str(tmp_path / "c2")]

    async def run() -> list[cw.Check]:
        found = []
        for dst in clones:
            result = await Store.clone(url, dst, checkpoint="live")
            assert result.checkpoint is not None and result.source_cursor is not None
            async with Store.open_reader(dst, cw.SCHEMA, values=cw.VALUES) as reader:
                found.append(await cw.check_database(reader))
        return found

    first, second = aio(run)()
    wanted = set(writer.acked[:acked_before])
    assert wanted <= first.batches, sorted(wanted - first.batches)[:10]
    assert first.batches == second.batches  # pinned: the same state both times
    assert max(first.batches) < max(writer.acked)  # and not the writer's later state


def test_ctrl_c_during_a_cli_clone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction: `opendata-kv clone ./bigdb ./bigclone` stopped with SIGINT
    once it has copied some batches. `stats` of the clone then fails saying it is incomplete
    (it used to show a part with exit 0), and running the same command again finishes it
    with every record."""
    src, dst = str(tmp_path / "bigdb"), str(tmp_path / "bigclone")
    total = 100_000

    async def make() -> None:
        async with Store.open(src, SCHEMA, values=VALUES) as store:
            await store.put_many(((like, (n,), {"v": n}) for n in range(total)), batch_size=5000)
            await store.flush()

    aio(make)()
    marker = Path(dst) / "opendata-kv" / "clone.json"
    for _attempt in range(3):  # a starved poller may miss the copy's window: try again
        if interrupted_cli_clone(src, dst, marker):
            break
        shutil.rmtree(dst)
    else:
        pytest.skip("the clone finished before the signal landed, three times")
    assert marker.exists()
    assert main(["stats", dst]) == 1
    assert "incomplete clone" in capsys.readouterr().err
    assert main(["clone", src, dst, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == total and result["resumed"] is True
    assert main(["stats", dst, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["count"] == total


def interrupted_cli_clone(src: str, dst: str, marker: Path) -> bool:
    """Run the CLI clone and send SIGINT once its marker shows copied records; True when
    the clone was interrupted (non-zero exit)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "opendata_kv", "clone", src, dst],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if json.loads(marker.read_text())["records"] > 0:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return proc.returncode != 0


def test_a_checkpoint_copy_missing_a_wal_file_is_refused(
    url: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint made away from the writer is read through its copy, whose WAL files hold
    the writes no SST has yet; slatedb replays what it finds, so a copied WAL file deleted
    made the reader return the checkpoint without them (0 of 20 records, silently). The
    open now refuses it naming the file; the intact copy reads all 20."""

    client = request.getfixturevalue("moto_server").client() if url.startswith("s3://") else None

    async def run(damage: bool) -> list[int]:
        where = f"{url}-{int(damage)}"
        async with Store.open(where, SCHEMA, values=VALUES) as store:
            for n in range(20):
                await store.put(like, (n,), {"v": n})
            await store.flush()  # durable in the WAL, in no SST
            assert await asyncio.to_thread(main, ["checkpoint", "create", where, "--json"]) == 0
            made = json.loads(capsys.readouterr().out)["id"]
        copy = f"opendata-kv/checkpoints/{made}/db/wal/"
        if damage:
            newest = max(n for n in objects(where, client) if n.startswith(copy))
            delete(where, newest, client)
            with pytest.raises(StoreDataError, match="checkpoint's copy") as caught:
                await Store.open_reader(where, SCHEMA, values=VALUES, checkpoint=made)
            assert caught.value.object_name == newest
            return []
        async with Store.open_reader(where, SCHEMA, values=VALUES, checkpoint=made) as reader:
            return [r.key.n async for r in reader.scan(like)]

    assert aio(run)(False) == list(range(20))
    assert aio(run)(True) == []


def objects(where: str, client: Any) -> list[str]:
    """The names (relative to the database root) of the objects of a local or s3:// store."""
    if not where.startswith("s3://"):
        root = Path(where)
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    bucket, _, prefix = where[len("s3://") :].partition("/")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return [e["Key"][len(prefix) + 1 :] for page in pages for e in page.get("Contents", [])]


def delete(where: str, name: str, client: Any) -> None:
    if not where.startswith("s3://"):
        (Path(where) / name).unlink()
        return
    bucket, _, prefix = where[len("s3://") :].partition("/")
    client.delete_object(Bucket=bucket, Key=f"{prefix}/{name}")
