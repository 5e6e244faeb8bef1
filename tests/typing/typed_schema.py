"""The typed schema the snippets beside it use (tests/test_typed_mypy.py)."""

from dataclasses import dataclass
from typing import Annotated, NamedTuple

from opendata_kv import Index, RecordType, Schema, fields
from opendata_kv.ids.muid import Muid


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
by_lang = Index("by_lang", post, [("text", fields.string)])  # a value index
sizes = Index("sizes", post, [("repo", fields.string)], kind="sum", amount="size")
named = Index("named", "post", [("text", fields.string)], kind="unique")  # by record name


class CountKey(NamedTuple):  # each codec under the annotation of what it decodes to
    seq: Annotated[int, fields.u64]
    score: Annotated[float, fields.f64]
    flag: Annotated[bool, fields.boolean]
    blob: Annotated[bytes, fields.fixed(4)]
    node: Annotated[Muid, fields.muid]
    url: Annotated[int, fields.url_key]


counter = RecordType("counter", 4, CountKey)
schema = Schema(post, listed, counter)
