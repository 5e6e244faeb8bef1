"""A small indexed schema for the index tests: posts (author, rkey) -> {"tag", "likes",
"handle", "tags"} with a value index, a unique index, a count index, a sum index and a
multi-entry index (one entry per tag); and a failure injected into the next native write."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opendata_kv import Index, RecordType, fields
from opendata_kv.keys import Key
from opendata_kv.native import calls

post = RecordType("post", 1, [("author", fields.string), ("rkey", fields.u32)])
note = RecordType("note", 2, [("author", fields.string), ("rkey", fields.u32)])


def each_tag(key: Key, value: Any) -> list[tuple[str]]:
    return [(tag,) for tag in value.get("tags", [])]


by_tag = Index("by_tag", "post", [("tag", fields.string), ("author", fields.string)])
by_handle = Index("by_handle", "post", [("handle", fields.string)], kind="unique")
per_tag = Index("per_tag", "post", [("tag", fields.string)], kind="count")
likes = Index("likes", "post", [("author", fields.string)], kind="sum", amount="likes")
tags = Index("tags", ["post", "note"], [("tag", fields.string)], using=each_tag)
ALL = [by_tag, by_handle, per_tag, likes, tags]
#: a covering value index: its entries hold a copy of each post's value
covered = Index("covered", "post", [("tag", fields.string)], covering=True)
SCHEMA = [post, note]


class InjectedWriteError(Exception):
    """The failure failing_write injects into a native write."""


@contextmanager
def failing_write(landed: bool) -> Iterator[list[int]]:
    """The next native batch write (calls.write) fails with InjectedWriteError: before slatedb
    sees it (`landed` False: nothing written) or after slatedb applied it (`landed` True: the
    outcome a caller cannot tell from a lost write). Yields a list that gets one item per
    failure injected (none when no write was attempted)."""
    real = calls.write
    failed: list[int] = []

    async def failing(db: Any, batch: Any) -> None:
        calls.write = real  # once
        failed.append(1)
        if landed:
            await real(db, batch)
        raise InjectedWriteError(f"injected: the write {'landed' if landed else 'was lost'}")

    calls.write = failing
    try:
        yield failed
    finally:
        calls.write = real
