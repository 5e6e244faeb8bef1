"""Web pages by URL key, as efixler/scrape stores them: `urls` and `id_map`.

Key layouts (version 1; see rfcs/0007-collections.md):

    page     0xD   [keyspace][0x01][0xD0] url_key:8 bytes    url_key(canonical URL)
    page_id  0xE   [keyspace][0x01][0xE0] url_key:8 bytes    url_key(clean_url(requested URL))

A `page` value holds the canonical URL (as Go's net/url writes it), the cleaned requested
URL, the content, optional metadata, and the fetch and expiry times in µs since the epoch.
A `page_id` value maps a requested URL to its page: the cleaned requested URL, the
canonical URL and the canonical key. `save` always writes both (like scrape, even when the
two URLs are the same), in one atomic batch.

URL keys are 63-bit hashes, so two URLs can share one. Every read compares the URL stored
in the value with the URL the key was computed from; a different URL under the key is a
collision and raises UrlCollisionError: a wrong page is never returned, and `save` and
`delete` never replace or remove another URL's records.

Expiry. `ttl` on save sets the page's `expires_at` (scrape's TTL): `fetch` treats an expired
page as absent (unless include_expired=True) and `expired()` lists them for a refetch or
`purge_expired()`. `evict_after` is separate: SlateDB's own TTL on both records, so the
database drops them by itself. slatedb 0.17 drops expired entries only when compaction
reaches them (reads still return them until then, and the two records may go at different
times), so `evict_after` also caps `expires_at`: from that moment fetch treats the page as
expired whether or not compaction has run. A missing page or id_map entry is a miss.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from opendata_kv.collections._common import (
    Instant,
    Layout,
    Results,
    StoreT,
    check_limit,
    from_plain,
    key_of,
    to_micros,
    to_plain,
    writer_of,
)
from opendata_kv.errors import UrlCollisionError, ValueDecodeError
from opendata_kv.ids import urlkey
from opendata_kv.ids.micros import now as now_micros
from opendata_kv.ids.micros import to_datetime as from_micros
from opendata_kv.keys import RecordType, fields
from opendata_kv.store import Batch, Store
from opendata_kv.store.ttl import Duration, ttl_seconds
from opendata_kv.values import as_codec

#: Default record type nibbles: pages (scrape's `urls`) and the requested-URL map (`id_map`).
PAGE_TYPE = 0xD
PAGE_ID_TYPE = 0xE


class PagesLayout(Layout):
    """The page store's two RecordTypes: `page` and `page_id`, each keyed by a URL key."""

    kind = "PageStore"

    def __init__(
        self,
        record_type: int = PAGE_TYPE,
        id_record_type: int = PAGE_ID_TYPE,
        *,
        version: int = 1,
        keyspace: bytes = b"",
        name: str = "page",
    ) -> None:
        self.page = RecordType(
            name, record_type, [("url_key", fields.url_key)], version=version, keyspace=keyspace
        )
        self.page_id = RecordType(
            f"{name}_id",
            id_record_type,
            [("url_key", fields.url_key)],
            version=version,
            keyspace=keyspace,
        )
        self._owned_values = (self.page, self.page_id)

    @property
    def record_types(self) -> tuple[RecordType, ...]:
        return (self.page, self.page_id)


#: The default layout (record types 0xD and 0xE, version 1, no keyspace).
PAGES = PagesLayout()


@dataclass(frozen=True)
class Page:
    """A stored page. `url` is the canonical URL it is keyed by, `requested` the cleaned URL
    it was fetched as; times are aware UTC datetimes."""

    key: int
    url: str
    requested: str
    content: Any
    fetched_at: datetime.datetime
    expires_at: datetime.datetime | None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def is_expired(self, now: Instant | None = None) -> bool:
        """True once `now` (default: the current time) reaches `expires_at`."""
        if self.expires_at is None:
            return False
        at = now_micros() if now is None else to_micros(now, "now")
        return to_micros(self.expires_at, "expires_at") <= at


class PageStore(Generic[StoreT]):
    """Web pages keyed by URL key (see the module docstring).

    default_ttl: the `ttl` of pages saved without one (None: they never expire).
    content_type: the type of every page's content (a dataclass, TypedDict or msgspec.Struct,
        or a value codec): saved through its codec's checks as plain msgpack data inside the
        page record, read back as that type (None: content is plain data).
    store: a Store, or a StoreReader for the read methods only.
    """

    def __init__(
        self,
        store: StoreT,
        *,
        default_ttl: Duration | None = None,
        layout: PagesLayout = PAGES,
        content_type: Any = None,
    ) -> None:
        layout.check(store)
        if default_ttl is not None:
            ttl_seconds(default_ttl, "default_ttl")
        self.store: StoreT = store
        self.layout = layout
        self.page = layout.page
        self.page_id = layout.page_id
        self.default_ttl = default_ttl
        self.content_codec = None if content_type is None else as_codec(content_type)
        #: the key function (scrape's Key over net/url's string); replaceable in tests
        self.url_key = urlkey.url_key

    def __repr__(self) -> str:
        return f"<PageStore on {self.store.where}>"

    def _writer(self) -> Store:
        """The store, for a write (ReadOnlyError when this PageStore was given a reader)."""
        return writer_of(self.store, "PageStore")

    # --- values ---------------------------------------------------------------------------------

    def _content(self, key: int, content: Any) -> Any:
        codec = self.content_codec
        if codec is None:
            return content
        return from_plain(
            codec, content, f"{self.page.name} url_key {key:#x} content", self.page.name
        )

    def _page(self, key: int, value: Any) -> Page:
        try:
            expires = value["expires"]
            return Page(
                key=key,
                url=value["url"],
                requested=value["requested"],
                content=self._content(key, value["content"]),
                fetched_at=from_micros(value["fetched"]),
                expires_at=None if expires is None else from_micros(expires),
                metadata=value.get("meta") or {},
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueDecodeError(
                f"{self.page.name} 0x{key:016x}: not a page value ({type(exc).__name__}: {exc})"
            ) from None

    def _collision(self, key: int, wanted: str, stored: str, what: str) -> UrlCollisionError:
        return UrlCollisionError(
            f"URL key 0x{key:016x} ({what}) holds {stored!r}, not {wanted!r}: two URLs share "
            "one 63-bit key"
        )

    async def _page_at(self, key: int, url: str) -> Page | None:
        """The page under `key`, which must be `url`'s; UrlCollisionError if another URL's."""
        value = await self.store.get(self.page, (key,))
        if value is None:
            return None
        page = self._page(key, value)
        if page.url != url:
            raise self._collision(key, url, page.url, self.page.name)
        return page

    async def _id_entry(self, key: int, requested: str) -> dict[str, Any] | None:
        """The id_map entry under `key`, which must be `requested`'s."""
        entry = await self.store.get(self.page_id, (key,))
        if entry is None:
            return None
        stored = entry.get("requested") if isinstance(entry, dict) else None
        if stored != requested:
            raise self._collision(key, requested, str(stored), self.page_id.name)
        assert isinstance(entry, dict)
        return entry

    # --- writes ---------------------------------------------------------------------------------

    async def save(
        self: PageStore[Store],
        requested: str,
        canonical: str,
        content: Any,
        ttl: Duration | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        fetched_at: Instant | None = None,
        evict_after: Duration | None = None,
    ) -> Page:
        """Store a fetched page under url_key(canonical) and map url_key(clean_url(requested))
        to it, atomically; returns the stored Page.

        ttl (seconds or timedelta; default `default_ttl`) sets `expires_at` = fetched_at +
        ttl. evict_after sets SlateDB's TTL on both records and caps `expires_at` at
        fetched_at + evict_after. Raises UrlCollisionError, writing nothing, when either key
        already holds another URL's record.
        """
        writer = self._writer()
        canonical_url = urlkey.normalize(canonical)
        requested_url = urlkey.clean_url(requested)
        page_key = self.url_key(canonical)
        id_key = self.url_key(requested_url)
        fetched = now_micros() if fetched_at is None else to_micros(fetched_at, "fetched_at")
        ttl = self.default_ttl if ttl is None else ttl
        expires = None if ttl is None else fetched + round(ttl_seconds(ttl, "ttl") * 1_000_000)
        evict = None if evict_after is None else ttl_seconds(evict_after, "evict_after")
        if evict is not None:
            evicted = fetched + round(evict * 1_000_000)
            expires = evicted if expires is None else min(expires, evicted)
        # Refuse to clobber another URL's records (the reads raise UrlCollisionError).
        await self._page_at(page_key, canonical_url)
        await self._id_entry(id_key, requested_url)
        value = {
            "url": canonical_url,
            "requested": requested_url,
            "content": content
            if self.content_codec is None
            else to_plain(self.content_codec, content, "content", self.page.name),
            "fetched": fetched,
            "expires": expires,
            "meta": dict(metadata or {}),
        }
        entry = {"requested": requested_url, "url": canonical_url, "key": page_key}
        async with writer.batch() as batch:
            batch.put(self.page, (page_key,), value, ttl=evict)
            batch.put(self.page_id, (id_key,), entry, ttl=evict)
        return self._page(page_key, value)

    async def delete(self: PageStore[Store], url: str) -> bool:
        """Remove a page (by requested or canonical URL, found as `fetch` finds it) and the
        id_map entries naming it, in one atomic batch. False when there was nothing to
        remove. Never removes another URL's records: a collision raises UrlCollisionError."""
        writer = self._writer()
        id_key, page_key, page = await self._locate(url)
        batch = Batch(writer)
        if id_key is not None:
            batch.delete(self.page_id, (id_key,))
        if page is not None:
            batch.delete(self.page, (page_key,))
            # The entry the page was saved with, if it still points at this page.
            back_key = self.url_key(page.requested)
            if back_key != id_key:
                back = await self.store.get(self.page_id, (back_key,))
                if (
                    isinstance(back, dict)
                    and back.get("requested") == page.requested
                    and back.get("key") == page_key
                ):
                    batch.delete(self.page_id, (back_key,))
        removed = bool(batch)
        await writer.write(batch)
        return removed

    async def purge_expired(
        self: PageStore[Store], now: Instant | None = None, *, batch_size: int = 500
    ) -> int:
        """Delete every expired page (and its id_map entries); returns how many pages."""
        writer = self._writer()
        removed = 0
        pending = await self.expired(now).to_list()
        for start in range(0, len(pending), batch_size):
            batch = Batch(writer)
            for page in pending[start : start + batch_size]:
                batch.delete(self.page, (page.key,))
                back_key = self.url_key(page.requested)
                back = await self.store.get(self.page_id, (back_key,))
                if isinstance(back, dict) and back.get("key") == page.key:
                    batch.delete(self.page_id, (back_key,))
                removed += 1
            await writer.write(batch)
        return removed

    # --- reads ----------------------------------------------------------------------------------

    async def fetch(self, url: str, *, include_expired: bool = False) -> Page | None:
        """The page for `url`: through the id_map (url_key(clean_url(url))) first, else
        directly under url_key(url), else under url_key(clean_url(url)). None when there is
        none, or it has expired (unless include_expired). UrlCollisionError when a key holds
        another URL's record."""
        _, _, page = await self._locate(url)
        if page is None or (not include_expired and page.is_expired()):
            return None
        return page

    async def _locate(self, url: str) -> tuple[int | None, int, Page | None]:
        """(id_map key when `url` resolved through the id_map, page key, page or None)."""
        requested_url = urlkey.clean_url(url)
        id_key = self.url_key(requested_url)
        entry = await self._id_entry(id_key, requested_url)
        if entry is not None:
            page_key = int(entry["key"])
            return id_key, page_key, await self._page_at(page_key, str(entry["url"]))
        normalized = urlkey.normalize(url)
        first_key = self.url_key(url)
        page = await self._page_at(first_key, normalized)
        if page is None and requested_url != normalized:
            # a canonical URL asked for with tracking parameters or a fragment
            clean_key = self.url_key(requested_url)
            page = await self._page_at(clean_key, requested_url)
            if page is not None:
                return None, clean_key, page
        return None, first_key, page

    def expired(self, now: Instant | None = None, *, limit: int | None = None) -> Results[Page]:
        """Pages whose expires_at is at or before `now` (default: the current time), in key
        order. A full scan of the pages; records SlateDB already evicted are not seen."""
        limit = check_limit(limit)
        at = now_micros() if now is None else to_micros(now, "now")
        return Results(self._expired(at, limit))

    async def _expired(self, at: int, limit: int | None) -> AsyncIterator[Page]:
        if limit == 0:
            return
        found = 0
        async for row in self.store.scan(self.page, batch_size=1024):
            expires = row.value.get("expires") if isinstance(row.value, dict) else None
            if expires is not None and expires <= at:
                yield self._page(key_of(row).url_key, row.value)
                found += 1
                if limit is not None and found >= limit:
                    return

    def scan(self, *, limit: int | None = None) -> Results[Page]:
        """Every stored page in URL-key order."""
        limit = check_limit(limit)
        rows = self.store.scan(self.page, limit=limit)

        async def pages() -> AsyncIterator[Page]:
            async for row in rows:
                yield self._page(key_of(row).url_key, row.value)

        return Results(pages())
