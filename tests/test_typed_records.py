"""Typed records (issue 30, RFC 0011): key fields declared as a NamedTuple of Annotated codecs,
`RecordType[K, V]`, and what the store gives back at run time for them."""

from __future__ import annotations

import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NewType, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio
from test_keys_properties import BASIC, TRAILING, desc, id_specs

from opendata_kv import Index, RecordType, Schema, Store, SyncStore, fields
from opendata_kv.errors import ArgumentTypeError, SchemaError
from opendata_kv.ids.muid import Muid
from opendata_kv.keys import Key
from opendata_kv.store import Record

EXAMPLES = int(os.environ.get("TYPED_EXAMPLES", "60"))
SPECS_FOR_TYPES = [*BASIC, *id_specs(), *(desc(spec) for spec in BASIC)]


class PostKey(NamedTuple):
    repo: Annotated[str, fields.string]
    rkey: Annotated[str, fields.rkey("tid")]


@dataclass
class Post:
    text: str
    langs: list[str] | None = None


post = RecordType("post", 2, PostKey, value=Post)
by_text = Index("by_text", post, [("text", fields.string)], kind="unique")
SCHEMA = Schema(post)
TID = "3jzfcijpj2z2a"


def test_keys_are_instances_of_the_declared_class_and_of_key() -> None:
    key = post.decode(post.encode("did:plc:a", TID))
    assert type(key) is post.Key and isinstance(key, PostKey) and isinstance(key, Key)
    assert key == post.key(repo="did:plc:a", rkey=TID) and key.repo == "did:plc:a"
    assert repr(key) == f"PostKey(repo='did:plc:a', rkey='{TID}')"
    assert key.encode() == post.encode("did:plc:a", TID) and key.record_type is post
    assert key != PostKey("did:plc:a", TID)  # a Key equals only keys of its RecordType
    assert post.declared is PostKey and post.value_type is Post
    assert pickle.loads(pickle.dumps(post)) is post
    assert pickle.loads(pickle.dumps(key)) == key


def test_index_types_subscript_at_run_time() -> None:
    """Index[R] (one argument, as before the kind parameter) and Index[R, kind] both work at
    run time, as RecordType[K, V] does."""
    assert Index[Record[PostKey, Post]] == Index[Record[PostKey, Post], Any]
    assert Index[Record[PostKey, Post], Literal["unique"]].__args__[1] == Literal["unique"]


def test_a_declaration_without_one_codec_per_field_is_refused() -> None:
    class NoCodec(NamedTuple):
        repo: str

    class TwoCodecs(NamedTuple):
        repo: Annotated[str, fields.string, fields.u8]

    class Defaulted(NamedTuple):
        repo: Annotated[str, fields.string] = "x"

    class Reserved(NamedTuple):
        replace: Annotated[str, fields.string]

    for cls, words in (
        (NoCodec, "key field 'repo' of"),
        (TwoCodecs, "(2 codecs)"),
        (Defaulted, "has a default"),
        (Reserved, "is reserved"),
    ):
        with pytest.raises(SchemaError, match=re.escape(words)):
            RecordType("bad", 3, cls)
    with pytest.raises(SchemaError, match=r"a key class must be a typing\.NamedTuple"):
        RecordType("bad", 3, dict)  # type: ignore[call-overload]
    with pytest.raises(SchemaError, match="value must be a class"):
        RecordType("bad", 3, PostKey, value="Post")  # type: ignore[call-overload]


def _one_field(hint: Any) -> type[Any]:
    return NamedTuple("OneField", [("n", hint)])  # type: ignore[misc]


@pytest.mark.parametrize(
    ("annotation", "codec", "decodes"),
    [
        (str, fields.u64, "int"),  # issue 37: r.key.n.upper() passed mypy, then AttributeError
        (int, fields.f64, "float"),  # decoded to a float under an int annotation
        (str, fields.muid, "Muid"),  # decoded to a Muid under a str annotation
        (str, fields.url_key, "int"),  # a URL key is its 63-bit int
        (float, fields.u64, "int"),  # an int has no float methods (hex, is_integer)
        (int, fields.boolean, "bool"),  # key(n=5) would pass mypy: boolean takes only bools
        (str | None, fields.string, "str"),  # no key field decodes to None, or encodes it
        (bytearray, fields.bytes_, "bytes"),
        (str, fields.desc(fields.u32), "int"),
        (int, fields.typed("kind", {0: fields.string, 1: fields.u64}), "str | int"),
    ],
)
def test_an_annotation_the_codec_disagrees_with_is_refused(
    annotation: Any, codec: Any, decodes: str
) -> None:
    hint = Annotated[annotation, codec]
    declared = _one_field(hint)
    if isinstance(codec, fields.Typed):
        pairs = [("kind", Annotated[int, fields.u8]), ("n", hint)]
        declared = NamedTuple("WithKind", pairs)  # type: ignore[misc]
    with pytest.raises(SchemaError) as caught:
        RecordType("bad", 3, declared)
    message = str(caught.value)
    shown = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    assert "key field 'n'" in message and f"annotated {shown}" in message, message
    assert f"{codec!r} decodes to {decodes}" in message, message
    assert caught.value.record == "bad" and caught.value.field == "n"
    assert caught.value.value == annotation


Did = NewType("Did", str)


@pytest.mark.parametrize(
    ("annotation", "codec"),
    [
        *((int, codec) for codec in (fields.u8, fields.u16, fields.u32, fields.u64)),
        *((int, codec) for codec in (fields.u128, fields.i32, fields.i64, fields.var_u32)),
        (int, fields.var_u64),
        (int, fields.url_key),
        (int, fields.desc(fields.i64)),
        (float, fields.f64),
        (bool, fields.boolean),
        *((str, codec) for codec in (fields.string, fields.tid, fields.rkey("tid"))),
        *((str, codec) for codec in (fields.lp_string, fields.trailing_string)),
        *((bytes, codec) for codec in (fields.bytes_, fields.fixed(4), fields.lp_bytes)),
        (bytes, fields.trailing_bytes),
        (Muid, fields.muid),
        (Muid | str, fields.muid),  # wider, and still only what muid takes
        (Did, fields.string),  # a NewType: narrower to mypy, a str at run time
        (Literal["self"], fields.rkey("literal:self")),
        (Any, fields.u64),  # unchecked on purpose
    ],
)
def test_an_annotation_that_holds_what_the_codec_decodes_is_accepted(
    annotation: Any, codec: Any
) -> None:
    record_type = RecordType("ok", 3, _one_field(Annotated[annotation, codec]))
    assert record_type.fields[0][1] == codec


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.sampled_from([*SPECS_FOR_TYPES, *TRAILING]), st.data())
def test_each_codec_decodes_to_the_types_it_names(spec: Any, data: st.DataObject) -> None:
    """value_types() is what the annotation check trusts: every value a codec decodes is an
    instance of one of them, and encode takes each value_types() instance it decoded."""
    encoded = spec.codec.encode(data.draw(spec.values))
    decoded = spec.codec.decode_all(encoded)
    assert type(decoded) in spec.codec.value_types(), (spec.name, type(decoded))
    assert spec.codec.encode(decoded) == encoded


# Every key codec, with its values (the specs of test_keys_properties): each in a random
# position of a declared key, the trailing ones last.
SPECS = [*BASIC, *id_specs(), *(desc(spec) for spec in BASIC)]


def _declared(codecs: list[Any]) -> type[Any]:
    """A NamedTuple of these codecs, each annotated with the classes it decodes to (accepted
    by the annotation check wherever it stands)."""
    pairs = [
        (f"f{i}", Annotated[Union[codec.value_types()], codec])  # noqa: UP007
        for i, codec in enumerate(codecs)
    ]
    return NamedTuple("Declared", pairs)  # type: ignore[misc]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(st.sampled_from(SPECS), min_size=1, max_size=4),
    st.sampled_from([None, *TRAILING]),
    st.data(),
)
def test_typed_and_list_declarations_encode_identically(
    chosen: list[Any], trailing: Any, data: st.DataObject
) -> None:
    """A NamedTuple and a list of the same fields are one layout: the same bytes, and each
    decodes the other's keys (to its own key class)."""
    specs = [*chosen, trailing] if trailing is not None else chosen
    codecs = [spec.codec for spec in specs]
    typed = RecordType("rec", 7, _declared(codecs))
    listed = RecordType("rec", 7, [(f"f{i}", codec) for i, codec in enumerate(codecs)])
    values = [data.draw(spec.values) for spec in specs]
    raw = typed.encode(*values)
    assert raw == listed.encode(*values)
    assert typed.prefix(*values[:1]) == listed.prefix(*values[:1])
    decoded = typed.decode(raw)  # compared through bytes: a NaN field is not equal to itself
    assert isinstance(decoded, typed.declared) and listed.encode(*decoded) == raw
    assert typed.encode(*listed.decode(raw)) == raw and typed.key(*values).encode() == raw
    assert [key.encode() for key in typed.decode_many([raw, raw])] == [raw, raw]


@aio
async def test_the_store_gives_back_the_declared_types(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    async with Store.open(url, SCHEMA, indexes=[by_text]) as store:
        await store.put(post, ("did:plc:a", TID), Post("hi", ["en"]))
        got = await store.get(post, ("did:plc:a", TID))
        assert got == Post("hi", ["en"])
        [record] = await store.scan(post).to_list()
        assert type(record) is Record and isinstance(record.key, PostKey)
        assert record.value == Post("hi", ["en"])
        assert await store.get(record.key) == got  # a decoded key addresses its record
        assert await store.get(PostKey("did:plc:a", TID)) == got  # so does a plain one
        assert await store.get_many(post, [("did:plc:a", TID), ("did:plc:b", TID)]) == [
            got,
            None,
        ]
        found = await store.lookup(by_text, "hi")
        assert found is not None and found.key == record.key and found.value == got
        assert [r.value for r in await store.index_scan(by_text).to_list()] == [got]
        async with store.transaction() as txn:
            assert await txn.get(post, ("did:plc:a", TID)) == got
            await txn.put(PostKey("did:plc:b", TID), Post("two"))
        async with store.snapshot() as snap:
            assert await snap.get(post, ("did:plc:b", TID)) == Post("two")
        await store.flush()
        changes = [c async for c in store.changes()]
        typed = [c.of(post) for c in changes]
        assert [c.value for c in typed if c is not None] == [got, Post("two")]
    async with Store.open_reader(url, SCHEMA) as reader:
        assert await reader.get(post, ("did:plc:b", TID)) == Post("two")


def test_the_sync_face_gives_back_the_declared_types() -> None:
    with SyncStore.open("memory://typed", SCHEMA) as db:
        db.put(post, ("did:plc:a", TID), Post("hi"))
        assert db.get(post, ("did:plc:a", TID)) == Post("hi")
        [record] = db.scan(post)
        assert isinstance(record.key, PostKey) and record.value == Post("hi")
        with db.batch() as batch:
            batch.put(PostKey("did:plc:c", TID), Post("c"))
        assert db[PostKey("did:plc:c", TID)] == Post("c")


def test_a_plain_key_of_an_undeclared_class_is_refused() -> None:
    class Other(NamedTuple):
        repo: Annotated[str, fields.string]

    with SyncStore.open("memory://typed", SCHEMA) as db, pytest.raises(SchemaError) as caught:
        db.get(Other("did:plc:a"))
    assert "no RecordType of this schema declared with the key class" in str(caught.value)


def test_a_plain_tuple_is_still_no_key() -> None:
    with SyncStore.open("memory://typed", SCHEMA) as db, pytest.raises(ArgumentTypeError) as caught:
        db.get(("did:plc:a", TID))
    assert "expected a RecordType, a record name or a Key, got tuple" in str(caught.value)
