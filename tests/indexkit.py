"""A small indexed schema for the index tests: posts (author, rkey) -> {"tag", "likes",
"handle", "tags"} with a value index, a unique index, a count index, a sum index and a
multi-entry index (one entry per tag)."""

from __future__ import annotations

from typing import Any

from opendata_kv import Index, RecordType, fields
from opendata_kv.keys import Key

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
