"""The atproto SDK's record models as value types (issue 39 point 2): posts, likes and follows
written and read through `records.typed(nsid, models.X.Record)` and value_types are the
lexicon's JSON-shaped msgpack (`createdAt`, `$type`), the same bytes as the plain dict of the
same record; backlinks index them; a record with fields the SDK does not know reads and
writes back byte-identical."""

from __future__ import annotations

from typing import Any

import pytest
from atproto import models

from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    RECORDS,
    SyncRecordCollection,
    default_schema,
)
from opendata_kv.errors import ValueDecodeError, ValueEncodeError
from opendata_kv.store import SyncStore
from opendata_kv.values import ModelCodec, as_codec, pack, unpack

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
BOB = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"
POST, LIKE, FOLLOW = "app.bsky.feed.post", "app.bsky.feed.like", "app.bsky.graph.follow"
AT = "2024-05-01T12:00:00.000Z"


def plain(record: Any) -> dict[str, Any]:
    """The record as its lexicon's JSON shape (what Jetstream carries, minus unknown fields)."""
    shaped: dict[str, Any] = record.model_dump(by_alias=True, exclude_none=True)
    return shaped


def test_sdk_models_are_value_codecs() -> None:
    assert isinstance(as_codec(models.AppBskyFeedPost.Record), ModelCodec)
    post = models.AppBskyFeedPost.Record(text="hello", created_at=AT, langs=["en"])
    data = as_codec(models.AppBskyFeedPost.Record).encode(post)
    assert unpack(data) == {"createdAt": AT, "langs": ["en"], "text": "hello", "$type": POST}


def test_post_like_follow_through_typed_views_are_the_plain_records_bytes() -> None:
    with SyncStore.open("memory://sdk", default_schema(), indexes=BACKLINKS.indexes) as db:
        records = SyncRecordCollection(db, key_types=BSKY_KEY_TYPES)
        posts = records.typed(POST, models.AppBskyFeedPost.Record)
        likes = records.typed(LIKE, models.AppBskyFeedLike.Record)
        follows = records.typed(FOLLOW, models.AppBskyGraphFollow.Record)

        post = models.AppBskyFeedPost.Record(text="hello", created_at=AT, langs=["en"])
        made = posts.create(ALICE, post)
        assert posts.get(ALICE, made.rkey) == post
        ref = models.ComAtprotoRepoStrongRef.Main(uri=made.uri, cid="bafyreib")
        like = models.AppBskyFeedLike.Record(subject=ref, created_at=AT)
        liked = likes.create(BOB, like)
        follow = models.AppBskyGraphFollow.Record(subject=ALICE, created_at=AT)
        followed = follows.create(BOB, follow)

        for view, rec, value in (
            (posts, made, post),
            (likes, liked, like),
            (follows, followed, follow),
        ):
            key = RECORDS.record.encode(rec.repo, rec.collection, rec.rkey)
            twin = "3kzzzzzzzzzz2"
            records.put(rec.repo, rec.collection, twin, plain(value))  # the same record, a dict
            assert db.get_raw(key) == db.get_raw(
                RECORDS.record.encode(rec.repo, rec.collection, twin)
            )
            assert unpack(db.get_raw(key))["$type"] == rec.collection
            assert [r.value for r in view.scan(rec.repo)] == [value, value]
            records.delete(rec.repo, rec.collection, twin)

        assert records.like_count(made.uri) == 1
        page = likes.backlink_page(records.backlinks.likes, made.uri)
        assert [(r.repo, r.value.subject.uri) for r in page] == [(BOB, made.uri)]
        assert records.follower_count(ALICE) == 1
        assert [r.value.subject for r in follows.list(BOB)] == [ALICE]
        with pytest.raises(ValueEncodeError, match="must be a Record"):
            posts.put(ALICE, made.rkey, plain(post))  # type: ignore[arg-type]


def test_a_newer_post_with_fields_the_sdk_lacks_round_trips_byte_identical() -> None:
    stored = {
        "$type": POST,
        "text": "#tag",
        "facets": [
            {
                "index": {"byteStart": 0, "byteEnd": 4},
                "features": [{"$type": "app.bsky.richtext.facet#tag", "tag": "tag"}],
            }
        ],
        "createdAt": AT,
        "langs": ["en"],
        "via": {"client": "new-app", "labels": [1, None, b"\x00"]},  # a newer lexicon's field
        "embed": None,
    }
    with SyncStore.open("memory://sdk-newer", default_schema()) as db:
        records = SyncRecordCollection(db, value_types={POST: models.AppBskyFeedPost.Record})
        SyncRecordCollection(db).put(ALICE, POST, "3kabcdefghij2", stored)  # from Jetstream
        key = RECORDS.record.encode(ALICE, POST, "3kabcdefghij2")
        before = db.get_raw(key)
        post = records.get(ALICE, POST, "3kabcdefghij2")
        assert post.facets[0].features[0].tag == "tag"
        records.put(ALICE, POST, "3kabcdefghij2", post)
        assert db.get_raw(key) == before
        post.text = "#tag edited"
        records.put(ALICE, POST, "3kabcdefghij2", post)
        assert unpack(db.get_raw(key)) == {**stored, "text": "#tag edited"}
        strict = records.typed(POST, models.AppBskyFeedPost.Record, unknown="forbid")
        with pytest.raises(ValueDecodeError, match=r"unknown fields \['via'\]") as caught:
            strict.get(ALICE, "3kabcdefghij2")
        assert caught.value.field == "via"


def test_nested_fields_the_sdk_lacks_survive_too() -> None:
    external = {"uri": "https://a.example", "title": "t", "description": "d", "newField": [1, 2]}
    stored = {
        "text": "x",
        "$type": POST,
        "embed": {"$type": "app.bsky.embed.external", "external": external, "extra": True},
        "createdAt": AT,
        "reply": None,
    }
    codec = as_codec(models.AppBskyFeedPost.Record)
    data = pack(stored)
    post = codec.decode(data)
    assert post.embed.external.title == "t"
    assert codec.encode(post) == data


def test_pydantic_is_imported_only_for_a_model() -> None:
    """Importing the package and the CLI leaves pydantic unimported (it cost every process
    ~0.1 s of its start); a model value type still works once the user imports pydantic."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import opendata_kv, opendata_kv.store, opendata_kv.cli.main, opendata_kv.values as v\n"
        "assert 'pydantic' not in sys.modules, 'imported at start'\n"
        "import pydantic\n"
        "class M(pydantic.BaseModel):\n"
        "    a: int\n"
        "codec = v.as_codec(M)\n"
        "assert codec.decode(codec.encode(M(a=1))) == M(a=1)\n"
        "try:\n"
        "    codec.decode(v.pack({'a': 'x'}))\n"
        "except Exception as exc:\n"
        "    assert type(exc).__name__ == 'ValueDecodeError' and exc.field == 'a', exc\n"
        "else:\n"
        "    raise AssertionError('not refused')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
