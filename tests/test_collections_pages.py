"""PageStore: save/fetch through cleaned URLs and the id_map, URL-key collisions, delete of
both records, expiry in the value (expired(), purge) apart from SlateDB's TTL."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from storekit import run, with_store

from opendata_kv import Store
from opendata_kv.collections import PAGES, PageStore, default_schema, default_values
from opendata_kv.errors import SchemaError, UrlCollisionError
from opendata_kv.ids.urlkey import clean_url, url_key
from opendata_kv.values import Values

T = TypeVar("T")
UTC = datetime.timezone.utc
NOW = datetime.datetime.now(UTC)

REQUESTED = "https://Example.com/blog/post?utm_source=feed&b=2&a=1#comments"
CANONICAL = "https://example.com/blog/the-post"


def with_pages(db_url: str, body: Callable[[PageStore], Awaitable[None]], **kw: Any) -> None:
    with_store(db_url, default_schema(), lambda store: body(PageStore(store, **kw)))


async def raw_records(pages: PageStore) -> tuple[list[Any], list[Any]]:
    page_rows = await pages.store.scan(pages.page).to_list()
    id_rows = await pages.store.scan(pages.page_id).to_list()
    return page_rows, id_rows


# --- save and fetch ------------------------------------------------------------------------------


def test_save_then_fetch_by_requested_and_canonical_urls(db_url: str) -> None:
    async def body(pages: PageStore) -> None:
        saved = await pages.save(
            REQUESTED, CANONICAL, "<p>hi</p>", ttl=3600, metadata={"title": "T"}
        )
        assert saved.key == url_key(CANONICAL)
        assert saved.url == CANONICAL
        assert saved.requested == clean_url(REQUESTED)
        assert saved.requested == "https://Example.com/blog/post?a=1&b=2"
        assert saved.expires_at is not None
        assert (saved.expires_at - saved.fetched_at) == datetime.timedelta(hours=1)
        for url in (
            REQUESTED,
            "https://Example.com/blog/post?a=1&b=2",
            "https://Example.com/blog/post?b=2&utm_medium=x&a=1",
            "https://Example.com/blog/post?a=1&b=2#other-fragment",
            CANONICAL,
            "https://example.com/blog/the-post?utm_campaign=c",
        ):
            page = await pages.fetch(url)
            assert page is not None, url
            assert page.content == "<p>hi</p>"
            assert page.metadata == {"title": "T"}
            assert page.url == CANONICAL
        assert await pages.fetch("https://example.com/blog/other") is None
        assert await pages.fetch("https://Example.com/blog/post?a=1") is None
        page_rows, id_rows = await raw_records(pages)
        assert [r.key.url_key for r in page_rows] == [url_key(CANONICAL)]
        assert [r.key.url_key for r in id_rows] == [url_key(clean_url(REQUESTED))]
        assert id_rows[0].value == {
            "requested": clean_url(REQUESTED),
            "url": CANONICAL,
            "key": url_key(CANONICAL),
        }

    with_pages(db_url, body)


def test_same_requested_and_canonical_still_maps(db_url: str) -> None:
    async def body(pages: PageStore) -> None:
        await pages.save("https://example.org/", "https://example.org/", b"\x00bytes")
        page = await pages.fetch("https://example.org/?utm_source=x")
        assert page is not None and page.content == b"\x00bytes"
        assert page.expires_at is None and not page.is_expired()
        page_rows, id_rows = await raw_records(pages)
        assert len(page_rows) == 1 and len(id_rows) == 1

    with_pages(db_url, body)


def test_resave_moves_the_requested_url_to_a_new_canonical() -> None:
    async def body(pages: PageStore) -> None:
        await pages.save(REQUESTED, CANONICAL, "v1")
        await pages.save(REQUESTED, "https://example.com/blog/moved", "v2")
        page = await pages.fetch(REQUESTED)
        assert page is not None and page.content == "v2"
        old = await pages.fetch(CANONICAL)
        assert old is not None and old.content == "v1"

    with_pages("memory://", body)


# --- collisions ----------------------------------------------------------------------------------


def test_colliding_url_keys_never_return_the_wrong_page(db_url: str) -> None:
    async def body(pages: PageStore) -> None:
        pages.url_key = lambda url, **kw: 42  # every URL shares one key
        await pages.save("https://a.example/x", "https://a.example/x", "page A")
        assert (await pages.fetch("https://a.example/x")).content == "page A"  # type: ignore[union-attr]
        with pytest.raises(UrlCollisionError, match="0x000000000000002a"):
            await pages.fetch("https://b.example/y")
        with pytest.raises(UrlCollisionError):
            await pages.save("https://b.example/y", "https://b.example/y", "page B")
        with pytest.raises(UrlCollisionError):
            await pages.delete("https://b.example/y")
        page = await pages.fetch("https://a.example/x")
        assert page is not None and page.content == "page A"
        page_rows, id_rows = await raw_records(pages)
        assert len(page_rows) == 1 and len(id_rows) == 1

    with_pages(db_url, body)


def test_collision_on_the_canonical_key_only() -> None:
    """The id_map entry is fine but the page record under the canonical key is another
    URL's (written directly): fetch refuses it."""

    async def body(pages: PageStore) -> None:
        await pages.save(REQUESTED, CANONICAL, "right")
        intruder = {
            "url": "https://evil.example/",
            "requested": "https://evil.example/",
            "content": "wrong page",
            "fetched": 0,
            "expires": None,
            "meta": {},
        }
        await pages.store.put(pages.page, (url_key(CANONICAL),), intruder)
        for url in (REQUESTED, CANONICAL):
            with pytest.raises(UrlCollisionError, match=r"evil\.example"):
                await pages.fetch(url)
        with pytest.raises(UrlCollisionError):
            await pages.save(REQUESTED, CANONICAL, "again")
        with pytest.raises(UrlCollisionError):
            await pages.delete(CANONICAL)

    with_pages("memory://", body)


def test_collision_on_the_id_map_key_only() -> None:
    async def body(pages: PageStore) -> None:
        await pages.save(REQUESTED, CANONICAL, "right")
        other = "https://other.example/"
        await pages.store.put(
            pages.page_id,
            (url_key(clean_url(other)),),
            {"requested": "https://not-other.example/", "url": CANONICAL, "key": 1},
        )
        with pytest.raises(UrlCollisionError):
            await pages.fetch(other)

    with_pages("memory://", body)


# --- delete --------------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["requested", "requested-variant", "canonical"])
def test_delete_removes_page_and_id_map_entry(db_url: str, by: str) -> None:
    url = {
        "requested": REQUESTED,
        "requested-variant": "https://Example.com/blog/post?b=2&a=1&utm_term=z",
        "canonical": CANONICAL,
    }[by]

    async def body(pages: PageStore) -> None:
        await pages.save(REQUESTED, CANONICAL, "x")
        await pages.save("https://example.org/", "https://example.org/", "keep")
        assert await pages.delete(url) is True
        assert await pages.fetch(REQUESTED) is None
        assert await pages.fetch(CANONICAL) is None
        page_rows, id_rows = await raw_records(pages)
        assert [r.value["url"] for r in page_rows] == ["https://example.org/"]
        assert [r.value["url"] for r in id_rows] == ["https://example.org/"]
        assert await pages.delete(url) is False
        assert await pages.fetch("https://example.org/") is not None

    with_pages(db_url, body)


# --- expiry --------------------------------------------------------------------------------------


def test_expired_lists_pages_past_their_expiry(db_url: str) -> None:
    async def body(pages: PageStore) -> None:
        old = NOW - datetime.timedelta(days=2)
        await pages.save(
            "https://a.example/old", "https://a.example/old", "old", 3600, fetched_at=old
        )
        await pages.save("https://a.example/new", "https://a.example/new", "new", 3600)
        await pages.save("https://a.example/forever", "https://a.example/forever", "f")
        expired = await pages.expired().to_list()
        assert [p.url for p in expired] == ["https://a.example/old"]
        assert expired[0].is_expired()
        later = NOW + datetime.timedelta(hours=2)
        assert sorted(p.url for p in await pages.expired(later).to_list()) == [
            "https://a.example/new",
            "https://a.example/old",
        ]
        assert len(await pages.expired(later, limit=1).to_list()) == 1
        # fetch hides an expired page unless asked
        assert await pages.fetch("https://a.example/old") is None
        stale = await pages.fetch("https://a.example/old", include_expired=True)
        assert stale is not None and stale.content == "old"
        assert await pages.purge_expired() == 1
        assert await pages.fetch("https://a.example/old", include_expired=True) is None
        page_rows, id_rows = await raw_records(pages)
        assert len(page_rows) == 2 and len(id_rows) == 2
        assert len(await pages.scan().to_list()) == 2

    with_pages(db_url, body)


def test_default_ttl_and_bad_ttls() -> None:
    async def body(pages: PageStore) -> None:
        page = await pages.save("https://a.example/", "https://a.example/", "x")
        assert page.expires_at == page.fetched_at + datetime.timedelta(minutes=5)
        for bad in (0, -1, "1h"):
            with pytest.raises(ValueError):
                await pages.save("https://a.example/", "https://a.example/", "x", bad)  # type: ignore[arg-type]

    with_pages("memory://", body, default_ttl=datetime.timedelta(minutes=5))


def test_evict_after_caps_the_expiry() -> None:
    """evict_after is SlateDB's TTL; slatedb 0.17 only drops expired entries in compaction,
    so the page's own expiry is capped at the eviction time and fetch stops returning it."""

    async def body(pages: PageStore) -> None:
        # 0.5 s, not less: the fetch right after the save must come before the eviction even
        # on a loaded machine (50 ms was within reach of one scheduling stall)
        saved = await pages.save(REQUESTED, CANONICAL, "gone soon", 3600, evict_after=0.5)
        assert saved.expires_at == saved.fetched_at + datetime.timedelta(milliseconds=500)
        forever = await pages.save("https://a.example/", "https://a.example/", "x", evict_after=60)
        assert forever.expires_at == forever.fetched_at + datetime.timedelta(seconds=60)
        assert await pages.fetch(REQUESTED) is not None
        await asyncio.sleep(0.65)
        assert await pages.fetch(REQUESTED) is None
        assert await pages.fetch(CANONICAL) is None
        assert await pages.fetch("https://a.example/") is not None

    with_pages("memory://", body)


# --- values --------------------------------------------------------------------------------------


def test_page_store_needs_msgpack_values() -> None:
    schema = default_schema()

    async def main() -> None:
        async with Store.open("memory://", schema, values=Values(schema, bytes)) as store:
            with pytest.raises(SchemaError, match=r"register\(values\)"):
                PageStore(store)
        async with Store.open("memory://", schema, values=default_values(schema, bytes)) as s:
            pages = PageStore(s)
            await pages.save("https://a.example/", "https://a.example/", "x")
            assert (await pages.fetch("https://a.example/")) is not None

    run(main())


def test_layout_record_types() -> None:
    assert [t.record_type for t in PAGES.record_types] == [0xD, 0xE]
    assert [t.name for t in PAGES.record_types] == ["page", "page_id"]
