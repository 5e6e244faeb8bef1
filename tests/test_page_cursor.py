"""Page cursors (issue 29 point 4): one printable type from every scan, index scan and
collection page that round-trips and fits a URL as it is; paging with it equals paging with the
raw key bytes older releases gave; malformed cursors raise CursorError naming them. And
index_scan's options= (keywords win) and partial= (prefix= its older name), as for scan."""

from __future__ import annotations

import os
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from indexkit import SCHEMA, by_tag, post
from storekit import aio

from opendata_kv.collections import BACKLINKS, BSKY_KEY_TYPES, RecordCollection, default_schema
from opendata_kv.collections.backlinks import LIKE
from opendata_kv.errors import ArgumentTypeError, CursorError, InvalidArgumentError
from opendata_kv.store import ScanOptions, Store, SyncStore
from opendata_kv.store.cursor import decode_cursor, encode_cursor

EXAMPLES = int(os.environ.get("ODKV_CURSOR_EXAMPLES", "40"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.binary(max_size=300))
def test_cursor_round_trips_and_fits_a_url(position: bytes) -> None:
    cursor = encode_cursor(position)
    assert isinstance(cursor, str) and cursor.startswith("k1.")
    assert quote(cursor, safe="") == cursor  # nothing to escape in a URL
    assert decode_cursor(cursor) == position
    assert decode_cursor(position) == position  # an older release's bytes cursor


@FAST
@given(st.text(max_size=40))
def test_any_str_is_a_cursor_exactly_or_a_cursor_error(text: str) -> None:
    for candidate in (text, "k1." + text):
        try:
            position = decode_cursor(candidate)
        except CursorError as exc:
            assert exc.field == "after" and exc.value == candidate
            assert "after=" in str(exc)
        else:
            assert encode_cursor(position) == candidate  # only canonical cursors pass


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "AAAA",  # no version tag
        "k2.AAAA",  # another version
        "k1.A",  # a length base64 cannot have
        "k1.AB",  # non-canonical: trailing bits set
        "k1.AA==",  # padding is never written
        "k1.a+b/",  # the standard alphabet, not the URL-safe one
        "k1.AA AA",
        12,
        None,
    ],
)
def test_malformed_cursors_raise_cursor_error_naming_them(bad: Any) -> None:
    with pytest.raises(CursorError) as caught:
        decode_cursor(bad, "cursor")
    assert caught.value.field == "cursor" and caught.value.value == bad
    with SyncStore.open("memory://", SCHEMA) as db:
        if isinstance(bad, str):  # (a wrong type is an ArgumentTypeError there)
            with pytest.raises(CursorError, match="after="):
                db.scan(post, after=bad)


ROWS = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 30)),
    st.sampled_from(["x", "y"]),
    max_size=40,
)


def _pages(fetch: Any, limits: list[int], old: bool) -> tuple[list[bytes], list[Any]]:
    """Page through `fetch(limit, after)` to the end; `old`: resume from the raw key bytes."""
    keys: list[bytes] = []
    cursors: list[Any] = []
    after: Any = None
    for n in range(100):
        scan = fetch(limits[n % len(limits)], after)
        keys += [row.raw_key for row in scan.to_list()]
        if not scan.has_more():
            return keys, cursors
        cursors.append(scan.cursor)
        after = scan.position if old else scan.cursor
    raise AssertionError("paging did not end")


@FAST
@given(rows=ROWS, limits=st.lists(st.integers(1, 7), min_size=1, max_size=3), rev=st.booleans())
def test_paging_with_the_cursor_equals_paging_with_old_bytes(
    rows: dict[tuple[str, int], str], limits: list[int], rev: bool
) -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[by_tag]) as db:
        for key, tag in rows.items():
            db.put(post, key, {"tag": tag})
        whole = [r.raw_key for r in db.scan(post, reverse=rev)]
        for fetch in (
            lambda limit, after: db.scan(post, reverse=rev, limit=limit, after=after),
            lambda limit, after: db.index_scan(
                by_tag, "x", reverse=rev, limit=limit, after=after, records=False
            ),
        ):
            new, cursors = _pages(fetch, limits, old=False)
            old, old_cursors = _pages(fetch, limits, old=True)
            assert new == old and cursors == old_cursors
            assert all(isinstance(c, str) for c in cursors)
        paged = _pages(
            lambda limit, after: db.scan(post, reverse=rev, limit=limit, after=after),
            limits,
            old=False,
        )
        assert paged[0] == whole


def test_index_scan_options_keywords_and_partial() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=[by_tag]) as db:
        for n, author in enumerate(["ann", "anna", "bob", "annie", "al"]):
            db.put(post, (author, n), {"tag": "x"})

        def authors(scan: Any) -> list[str]:
            return [r.key.author for r in scan]

        opts = ScanOptions(reverse=True, limit=2, batch_size=1)
        assert authors(db.index_scan(by_tag, "x", options=opts)) == authors(
            db.index_scan(by_tag, "x", reverse=True, limit=2, batch_size=1)
        )
        assert authors(db.index_scan(by_tag, "x", options=opts)) == ["bob", "annie"]
        # keywords win over the options
        assert authors(db.index_scan(by_tag, "x", options=opts, limit=3)) == [
            "bob",
            "annie",
            "anna",
        ]
        assert authors(db.index_scan(by_tag, "x", options=opts, reverse=False)) == ["al", "ann"]
        # partial= is scan's partial; prefix= its older name (deprecated), the same scan
        assert authors(db.index_scan(by_tag, "x", partial="ann")) == ["ann", "anna", "annie"]
        with pytest.warns(DeprecationWarning, match="pass partial="):
            assert authors(db.index_scan(by_tag, "x", prefix="ann")) == ["ann", "anna", "annie"]
        with pytest.raises(ArgumentTypeError, match="older name"):
            db.index_scan(by_tag, "x", partial="a", prefix="a")
        with pytest.raises(InvalidArgumentError, match="on_error"):
            db.index_scan(by_tag, "x", options=ScanOptions(on_error="skip"))
        with pytest.raises(ArgumentTypeError, match="unknown scan option"):
            db.index_scan(by_tag, "x", nope=1)  # type: ignore[call-arg]


@aio
async def test_collection_pages_take_new_and_old_cursors() -> None:
    url = f"memory://cursor-{uuid.uuid4().hex}"
    async with Store.open(url, default_schema(), indexes=BACKLINKS.indexes) as store:
        repo = RecordCollection(store, key_types=BSKY_KEY_TYPES)
        subject = "at://did:plc:aaa/app.bsky.feed.post/3kx1"
        value = {"$type": LIKE, "subject": {"uri": subject, "cid": "c"}, "createdAt": "2024"}
        for did in ("did:plc:bbb", "did:plc:ccc", "did:plc:ddd"):
            await repo.create(did, LIKE, value)
        page = await repo.likes(subject, limit=1)
        assert isinstance(page.cursor, str)
        new = await repo.likes(subject, limit=1, cursor=page.cursor)
        old = await repo.likes(subject, limit=1, cursor=decode_cursor(page.cursor))
        assert new == old and [r.repo for r in new] == ["did:plc:ccc"]
        with pytest.raises(CursorError, match="cursor="):
            await repo.likes(subject, cursor="k1.!")
        # a list cursor of another listing is refused, not read as a record key
        other = await repo.list("did:plc:bbb", LIKE, limit=0, cursor="3jzfcijpj2z2a")
        assert other.cursor is not None and other.cursor.startswith("k1.")
        with pytest.raises(CursorError, match="outside the scan's range"):
            await repo.list("did:plc:ccc", LIKE, cursor=other.cursor)
        listed = await repo.list("did:plc:bbb", LIKE, limit=0)
        assert listed.has_more and listed.cursor is None
