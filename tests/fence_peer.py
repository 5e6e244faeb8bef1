"""A second writer for the fencing tests, run as a process of its own: it opens the database
(fencing whoever wrote it before), puts `post` records of author "b" with the given rkeys
through the indexkit indexes, flushes, closes, and prints `acked <rkeys>` once all of that
returned:

    python tests/fence_peer.py URL RKEY [RKEY ...]
"""

from __future__ import annotations

import asyncio
import sys

import indexkit as ik

from opendata_kv.store import Store


def value(author: str, rkey: int) -> dict[str, object]:
    """The value both writers put for (author, rkey): indexed by every indexkit index."""
    return {
        "tag": f"t{rkey % 3}",
        "likes": rkey,
        "handle": f"{author}-{rkey}",
        "tags": [f"t{rkey % 2}"],
    }


async def main(url: str, rkeys: list[int]) -> None:
    async with Store.open(url, ik.SCHEMA, indexes=ik.ALL) as store:
        for rkey in rkeys:
            await store.put(ik.post, ("b", rkey), value("b", rkey))
        await store.flush()
    print("acked " + " ".join(map(str, rkeys)), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [int(arg) for arg in sys.argv[2:]]))
