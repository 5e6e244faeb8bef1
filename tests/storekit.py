"""Shared schema, value codecs and helpers for the store tests (not a test module)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.store import Store
from opendata_kv.values import Values

T = TypeVar("T")

post1 = RecordType("post", 2, [("repo", F.string), ("rkey", F.string)], version=1)
post2 = RecordType("post", 2, [("repo", F.string), ("rkey", F.string)], version=2)
like = RecordType("like", 3, [("n", F.u64)])
blob = RecordType("blob", 4, [("id", F.u32)])
event = RecordType("event", 5, [("stream", F.string), ("seq", F.desc(F.u64))])

SCHEMA = Schema(post1, post2, like, blob, event)


@dataclasses.dataclass
class Post:
    text: str
    lang: str = "en"


def upgrade_post(old: dict[str, Any]) -> Post:
    """v1 posts were {"t": text} dicts."""
    return Post(old["t"], old.get("l", "en"))


def make_values(schema: Schema = SCHEMA) -> Values:
    return (
        Values(schema)
        .register(post1, dict, upgrade=upgrade_post)
        .register(post2, Post)
        .register(blob, bytes)
    )


VALUES = make_values()


def aio(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """Run an async test function on a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        return asyncio.run(fn(*args, **kwargs))

    return run


def run(coro: Awaitable[T]) -> T:
    """asyncio.run for any awaitable (e.g. Store.open's opening object)."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())


def with_store(url: str, schema: Schema, body: Callable[[Store], Awaitable[None]]) -> None:
    """Open `url` as the writer with `schema`, run `body(store)`, close it; on a fresh loop."""

    async def main() -> None:
        async with Store.open(url, schema) as store:
            await body(store)

    asyncio.run(main())


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 5.0, interval: float = 0.05
) -> float:
    """Poll `check` until it is true; the seconds it took. AssertionError on timeout."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
    return time.monotonic() - start
