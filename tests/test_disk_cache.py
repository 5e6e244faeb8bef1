"""The writer's local disk cache (OpenOptions.cache_dir, `import --cache-dir`): on S3, a second
scan of the same range reads the SST parts from the cache directory and sends no GET for them,
counted through a DelayProxy in front of moto (requests, never times)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import S3_BUCKET, MotoServer
from tcp_proxy import DelayProxy

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError
from opendata_kv.store import OpenOptions

ITEM = RecordType("item", 1, [("id", F.u64)])
SCHEMA = Schema(ITEM)
ROWS = 3000


@pytest.fixture
def proxy(s3_env: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[DelayProxy]:
    """The session's moto server behind a DelayProxy (no delay: only counts matter)."""
    with DelayProxy(("127.0.0.1", s3_env.port), delay=0.0) as p:
        monkeypatch.setenv("AWS_ENDPOINT_URL", p.endpoint)
        yield p


async def _load(url: str) -> None:
    async with Store.open(url, SCHEMA) as store:
        await store.put_many((ITEM, (i,), {"n": i, "pad": "x" * 200}) for i in range(ROWS))
        await store.flush()


async def _open(opening: Awaitable[Any]) -> None:
    await (await opening).close()


async def _scan(store: Store) -> int:
    return sum([1 async for _ in store.scan(ITEM, fill_cache=False)])


async def _sst_gets_of_second_scan(url: str, proxy: DelayProxy, cache_dir: Path | None) -> int:
    # cache_bytes=0: no in-memory block cache, so only the disk cache can spare a GET
    options = OpenOptions(cache_dir=cache_dir, cache_bytes=0)
    async with Store.open(url, SCHEMA, options=options) as store:
        with proxy.measure() as first:
            assert await _scan(store) == ROWS
        assert first.count("GET", ".sst") >= 1, first.describe()
        with proxy.measure() as second:
            assert await _scan(store) == ROWS
        return second.count("GET", ".sst")


@pytest.mark.s3
def test_second_scan_of_a_range_makes_no_get_with_a_cache_dir(
    proxy: DelayProxy, tmp_path: Path
) -> None:
    url = f"s3://{S3_BUCKET}/t/{uuid.uuid4().hex[:12]}"
    asyncio.run(_load(url))
    # without a disk cache every scan fetches the SST again
    assert asyncio.run(_sst_gets_of_second_scan(url, proxy, None)) >= 1
    cache = tmp_path / "cache"
    assert asyncio.run(_sst_gets_of_second_scan(url, proxy, cache)) == 0
    assert any(p.is_file() for p in cache.rglob("*"))  # the parts are on the local disk


def test_cache_dir_is_checked_and_a_writer_setting() -> None:
    with pytest.raises(ArgumentTypeError, match="cache_dir must be a local directory"):
        OpenOptions(cache_dir=3)  # type: ignore[arg-type]
    assert OpenOptions(cache_dir="rel").cache_dir == str(Path("rel").resolve())


def test_a_reader_refuses_a_cache_dir() -> None:
    options = OpenOptions(cache_dir="/tmp/c")
    with pytest.raises(InvalidArgumentError, match=r"cache_dir=.*Store\.open only"):
        asyncio.run(_open(Store.open_reader("memory://x", SCHEMA, options=options)))


def test_cache_dir_conflicting_with_settings_root_folder(tmp_path: Path) -> None:
    settings: dict[str, Any] = {"object_store_cache_options": {"root_folder": "/elsewhere"}}
    options = OpenOptions(cache_dir=tmp_path / "cache", settings=settings)
    with pytest.raises(InvalidArgumentError, match="conflicts with settings"):
        asyncio.run(_open(Store.open(str(tmp_path / "db"), SCHEMA, options=options)))


def test_import_cache_dir_opens_the_writer_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`opendata-kv import --cache-dir DIR` opens its writer with OpenOptions(cache_dir=DIR)."""
    from opendata_kv.cli import import_cmds
    from opendata_kv.cli.main import main

    seen: list[OpenOptions] = []
    real = import_cmds.Store.open

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["options"])
        return real(*args, **kwargs)

    monkeypatch.setattr(import_cmds.Store, "open", spy)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"key": "0a01", "value": "01"}\n')
    cache = tmp_path / "cache"
    status = main(["import", str(tmp_path / "db"), str(rows), "--cache-dir", str(cache)])
    assert [o.cache_dir for o in seen] == [str(cache)], status
