"""Answers from the index alone (issue 39): covering backlink pages equal the pages read
through the records, in both orders and across cursors; top() equals a recount of the count
index's groups; distinct linking DIDs equal a recount; all under random likes, unlikes,
re-likes by the same DID and follows moved between subjects."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendata_kv import Store
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RecordCollection,
    default_schema,
)
from opendata_kv.errors import IndexStateError
from opendata_kv.ids import tid

LIKE = "app.bsky.feed.like"
FOLLOW = "app.bsky.graph.follow"
DIDS = [f"did:plc:{c * 24}" for c in "abcde"]
POSTS = [
    f"at://{DIDS[n % 2]}/app.bsky.feed.post/{tid.from_parts(1_700_000_000_000_000 + n, 0)}"
    for n in range(4)
]
#: both entry index forms over one store (the count indexes are shared)
INDEXES = (*BACKLINKS.indexes, *(link.entries for link in COVERING_BACKLINKS))


def like(uri: str) -> dict[str, Any]:
    return {"$type": LIKE, "subject": {"uri": uri, "cid": "bafy"}, "createdAt": "2024-01-01Z"}


#: (operation, liker or follower, subject number, record number)
ops = st.lists(
    st.tuples(
        st.sampled_from(["like", "unlike", "follow"]),
        st.integers(0, len(DIDS) - 1),
        st.integers(0, len(POSTS) - 1),
        st.integers(0, 6),
    ),
    max_size=40,
)


async def pages(records: RecordCollection, uri: str, size: int, reverse: bool) -> list[Any]:
    page = await records.likes(uri, limit=size, reverse=reverse)
    found = list(page)
    while page.cursor is not None:
        page = await records.likes(uri, limit=size, reverse=reverse, cursor=page.cursor)
        found += list(page)
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, size=st.integers(1, 5), n=st.integers(0, 5))
def test_covering_pages_top_and_distinct_equal_a_recount(
    ops: list[tuple[str, int, int, int]], size: int, n: int
) -> None:
    async def main() -> None:
        async with Store.open("memory://appview-reads", default_schema(), indexes=INDEXES) as store:
            plain = RecordCollection(store, key_types=BSKY_KEY_TYPES)
            covering = RecordCollection(
                store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS
            )
            live: dict[tuple[str, str, str], dict[str, Any]] = {}
            for op, who, subject, number in ops:
                did = DIDS[who]
                rkey = tid.from_parts(1_700_000_000_000_000 + number, who)
                if op == "like":
                    key = (did, LIKE, rkey)
                    live[key] = like(POSTS[subject])
                    await plain.put(*key, live[key])
                elif op == "unlike":
                    live.pop((did, LIKE, rkey), None)
                    await plain.delete(did, LIKE, rkey)
                else:
                    key = (did, FOLLOW, rkey)
                    live[key] = {"$type": FOLLOW, "subject": DIDS[subject], "createdAt": "t"}
                    await plain.put(*key, live[key])
            for uri in POSTS:
                for reverse in (False, True):
                    assert await pages(covering, uri, size, reverse) == await pages(
                        plain, uri, size, reverse
                    )
                likers = [
                    k[0] for k, v in live.items() if k[1] == LIKE and v["subject"]["uri"] == uri
                ]
                assert await covering.distinct_likers(uri) == len(set(likers))
                assert await plain.distinct_likers(uri) == len(set(likers))
            for did in DIDS:
                assert list(await covering.followers(did)) == list(await plain.followers(did))
            recount = Counter(v["subject"]["uri"] for k, v in live.items() if k[1] == LIKE)
            want = sorted(recount.items(), key=lambda item: (-item[1], item[0]))[:n]
            assert await covering.top(n) == want
            author = f"at://{DIDS[0]}/"
            mine = sorted(
                ((u, c) for u, c in recount.items() if u.startswith(author)),
                key=lambda item: (-item[1], item[0]),
            )[:n]
            assert await covering.top(n, partial=author) == mine
            follows = Counter(v["subject"] for k, v in live.items() if k[1] == FOLLOW)
            assert (
                await covering.top(2, link=covering.backlinks.follows)
                == sorted(follows.items(), key=lambda item: (-item[1], item[0]))[:2]
            )
            assert await store.check_indexes() == []

    asyncio.run(main())


def test_a_covering_page_of_an_index_being_built_is_refused(tmp_path: Any) -> None:
    async def main() -> None:
        path = str(tmp_path)
        async with Store.open(path, default_schema(), indexes=BACKLINKS.indexes) as store:
            await RecordCollection(store).put(DIDS[1], LIKE, tid.from_parts(1, 0), like(POSTS[0]))
        async with Store.open(
            path, default_schema(), indexes=COVERING_BACKLINKS.indexes
        ) as store:  # the _links indexes start write_only over a store holding records
            covering = RecordCollection(store, backlinks=COVERING_BACKLINKS)
            with pytest.raises(IndexStateError):
                await covering.likes(POSTS[0])
            with pytest.raises(IndexStateError):
                await covering.distinct_likers(POSTS[0])
            await store.build_index(COVERING_BACKLINKS.likes.entries.name)
            assert [r.repo for r in await covering.likes(POSTS[0])] == [DIDS[1]]

    asyncio.run(main())
