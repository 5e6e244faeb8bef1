"""The typed schema the snippets beside it use (tests/test_typed_mypy.py)."""

from dataclasses import dataclass
from typing import Annotated, NamedTuple

from opendata_kv import Index, RecordType, Schema, fields


class PostKey(NamedTuple):
    repo: Annotated[str, fields.string]
    rkey: Annotated[str, fields.rkey("tid")]


@dataclass
class Post:
    text: str
    langs: list[str] | None = None


post = RecordType("post", 2, PostKey, value=Post)
listed = RecordType("like", 3, [("subject", fields.string)])
by_text = Index("by_text", post, [("text", fields.string)], kind="unique")
likes = Index("likes", post, [("text", fields.string)], kind="count")
schema = Schema(post, listed)
