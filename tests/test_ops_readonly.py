"""Readers never write: every object of the store is hashed before and after each read-only
call and command, on a local directory and on S3 (moto); and dump, stats and changes run
against S3 through a proxy that refuses every write (issue 12, item 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from opskit import WriteRefusingProxy, fingerprint
from slatedb.uniffi import DbReaderBuilder, Error, ReaderOptions
from storekit import SCHEMA, VALUES, Post, aio, like, post2

from opendata_kv.cli.main import main
from opendata_kv.objstore.location import parse_location
from opendata_kv.store import Store


async def _populate(url: str) -> str:
    """A closed store with records, a deletion, one checkpoint; its checkpoint id."""
    async with Store.open(url, SCHEMA, values=VALUES) as store:
        for n in range(20):
            await store.put(like, (n,), {"n": n})
        await store.put(post2, ("did:plc:a", "3k"), Post("hi"))
        await store.delete(like, (3,))
        await store.flush()
        checkpoint = await store.checkpoint("before-readers")
        await store.put(like, (99,), {"n": 99})
        await store.flush()
    return checkpoint.id


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Done:
    """Run one opendata-kv command in this process (a subprocess costs ~1.5 s of imports)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return Done(code, out, err)


@aio
async def test_reader_calls_write_nothing(url: str) -> None:
    checkpoint = await _populate(url)
    before = fingerprint(url)
    assert any(name.endswith(".manifest") for name in before)
    async with Store.open_reader(url, SCHEMA, values=VALUES) as reader:
        assert await reader.get(like, (99,)) == {"n": 99}
        assert len([r async for r in reader.scan("like")]) == 20
        assert len([c async for c in reader.changes()]) == 23
        assert [c.id for c in await reader.checkpoints()] == [checkpoint]
    assert fingerprint(url) == before
    async with Store.open_reader(url, SCHEMA, values=VALUES, checkpoint=checkpoint) as pinned:
        assert await pinned.get(like, (99,)) is None
        assert len([r async for r in pinned.scan("like")]) == 19
    assert fingerprint(url) == before


def test_commands_write_nothing(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = aio(_populate)(url)
    before = fingerprint(url)
    for args in (
        ["dump", url, "--json", "--values"],
        ["dump", url, "--checkpoint", checkpoint],
        ["stats", url, "--json"],
        ["stats", url, "--checkpoint", checkpoint],
        ["changes", url, "--json"],
        ["checkpoint", "list", url, "--json"],
    ):
        done = cli(capsys, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert fingerprint(url) == before, args


def test_readers_work_with_writes_refused(
    s3_url: str, s3_env: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """dump, stats and changes against S3 through a proxy that refuses every write: they
    succeed and never even try to write. The default slatedb reader mode, which writes
    manifests, is refused by the same proxy (so the proxy does refuse)."""
    aio(_populate)(s3_url)
    with WriteRefusingProxy(s3_env.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        dump = cli(capsys, "dump", s3_url, "--json")
        stats = cli(capsys, "stats", s3_url, "--json")
        changes = cli(capsys, "changes", s3_url, "--json")
        for done in (dump, stats, changes):
            assert done.returncode == 0, done.stderr
        assert len(dump.stdout.splitlines()) == 21
        assert '"count": 21' in stats.stdout
        assert len(changes.stdout.splitlines()) == 23
        assert proxy.refused == []
        assert proxy.forwarded > 0

        async def default_mode_reader() -> None:
            location = parse_location(s3_url)
            store = location.object_store({"endpoint": proxy.endpoint})
            builder = DbReaderBuilder(location.db_path, store)
            builder.with_options(  # fail instead of retrying the refused writes forever
                ReaderOptions(
                    manifest_poll_interval_ms=1000,
                    checkpoint_lifetime_ms=10_000,
                    max_memtable_bytes=1 << 20,
                    skip_wal_replay=False,
                    object_store_max_retries=0,
                )
            )
            reader = await builder.build()
            await reader.shutdown()

        with pytest.raises(Error):
            aio(default_mode_reader)()
        assert any(line.startswith("PUT") for line in proxy.refused)
