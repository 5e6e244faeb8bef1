"""The plain "who liked X" pages of another checkout, for tools/bench_appview.py's pages part.

    PYTHONPATH=<checkout> python tools/bench_appview_base.py [LIKES [covering]]

Run by bench_appview.py (`--base <checkout>`, or OPENDATA_KV_BENCH_BASE) as a child process
whose opendata_kv is that checkout's (issue 39's "today": main at 76eed7e), so its pages are
read side by side with this branch's, rounds alternating in one session. It uses only what
76eed7e has: it builds the same likes (like_items, which bench_appview.py shares) with the
plain BACKLINKS, then reads the hot post's likes in pages of 100 to the end for each "round"
line on stdin, answering one JSON line (pages/s and CPU per page); "quit" ends it. With
`covering` after the count, it reads the covering backlinks of a checkout that has them
(bench_appview.py --base-covering: this branch's pages against an earlier one's).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

POST, LIKE = "app.bsky.feed.post", "app.bsky.feed.like"
CID = "bafyreib2rxk3rh6kzwq3xg6ahqmbt3vwmsbkfdbqs5axg4ty7qj7q6qqbe"


def hot_uri() -> str:
    """The post with half of the likes."""
    from opendata_kv.ids import tid

    return f"at://did:plc:{'a' * 24}/{POST}/{tid.encode(1 << 52)}"


def like_items(likes: int, posts: int = 2_000) -> list[tuple[str, str, str, Any]]:
    """(repo, collection, rkey, value) of `likes` likes: every other one of the hot post, the
    rest spread over `posts` posts of another DID."""
    from opendata_kv.ids import tid

    hot = hot_uri()
    rng = random.Random(1)
    other = f"did:plc:{'b' * 24}"
    items = []
    for n in range(likes):
        uri = (
            hot if n % 2 else f"at://{other}/{POST}/{tid.encode((1 << 52) + rng.randrange(posts))}"
        )
        value = {
            "$type": LIKE,
            "subject": {"uri": uri, "cid": CID},
            "createdAt": "2024-09-01T00:00:00.000Z",
        }
        items.append((f"did:plc:{n:024d}", LIKE, tid.encode((1 << 52) + n << 10), value))
    return items


async def read_pages(repo: Any, uri: str) -> tuple[int, float, float]:
    """(pages, wall seconds, CPU seconds of this process) reading every like of `uri`."""
    start, cpu = time.perf_counter(), time.process_time()
    pages, cursor = 0, None
    while True:
        page = await repo.likes(uri, limit=100, cursor=cursor)
        pages += 1
        cursor = page.cursor
        if cursor is None:
            return pages, time.perf_counter() - start, time.process_time() - cpu


async def serve(likes: int, covering: bool) -> None:
    """`covering`: read through COVERING_BACKLINKS (a checkout that has them) instead."""
    from opendata_kv import Store, collections
    from opendata_kv.collections import BACKLINKS, BSKY_KEY_TYPES, RecordCollection, default_schema

    links = collections.COVERING_BACKLINKS if covering else BACKLINKS  # type: ignore[attr-defined]
    directory = tempfile.mkdtemp(prefix="bench-appview-base-")
    try:
        async with Store.open(directory, default_schema(), indexes=links.indexes) as store:
            plain = RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=links)
            await plain.put_many(like_items(likes))
            await store.flush()
            uri = hot_uri()
            await read_pages(plain, uri)  # warm, as the branch's paths are
            import opendata_kv

            print(json.dumps({"ready": str(Path(opendata_kv.__file__).parent)}), flush=True)
            for line in sys.stdin:
                if line.strip() != "round":
                    break
                pages, wall, cpu = await read_pages(plain, uri)
                answer = {"pages_per_s": pages / wall, "cpu_ms_per_page": cpu * 1e3 / pages}
                print(json.dumps(answer), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(
        serve(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000, "covering" in sys.argv[2:])
    )
