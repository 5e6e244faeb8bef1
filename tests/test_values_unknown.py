"""Records that evolve (issue 39 point 2): a typed value read from a record carrying fields it
does not declare keeps them, and writing it back stores the same bytes, for every value type
(dataclass, TypedDict, msgspec.Struct, pydantic model), through the codec and through a typed
collection view's get and put; unknown="forbid" refuses such records naming the field and
bytes; an object that cannot keep them refuses them too, never drops them."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, TypedDict

import msgspec
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendata_kv.collections import RECORDS, SyncRecordCollection, default_schema
from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError, ValueDecodeError
from opendata_kv.store import SyncStore
from opendata_kv.values import (
    DataclassCodec,
    ModelCodec,
    StructCodec,
    TypedDictCodec,
    ValueCodec,
    as_codec,
    pack,
    unknown_fields,
    unpack,
)
from opendata_kv.values.unknown import KEPT

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
POST = "app.bsky.feed.post"


@dataclasses.dataclass
class PostDc:
    text: str
    likes: int = 0


class PostTd(TypedDict):
    text: str
    likes: int


class PostSt(msgspec.Struct, weakref=True):
    text: str
    likes: int = 0


class PostModel(pydantic.BaseModel):  # extra="ignore", pydantic's default
    text: str
    likes: int = 0


class PostOpen(pydantic.BaseModel, extra="allow"):
    text: str
    likes: int = 0


TYPES: list[Any] = [PostDc, PostTd, PostSt, PostModel, PostOpen]
DECLARED = {"text", "likes"}

plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
#: undeclared field names (not pydantic's own attribute names, which extra="allow" refuses)
names = st.text(min_size=1, max_size=12).filter(
    lambda name: (
        name not in DECLARED
        and not name.startswith(("_", "model_"))
        and name not in dir(pydantic.BaseModel)
    )
)


@st.composite
def stored_maps(draw: st.DrawFn) -> dict[str, Any]:
    """A stored record: the declared fields and undeclared ones, in any order."""
    extra = draw(st.dictionaries(names, plain_values, min_size=1, max_size=5))
    items = [("text", draw(st.text(max_size=20))), ("likes", draw(st.integers(0, 2**31)))]
    items += list(extra.items())
    return dict(draw(st.permutations(items)))


@pytest.mark.parametrize("spec", TYPES, ids=lambda t: t.__name__)
@settings(max_examples=60, deadline=None)
@given(stored=stored_maps())
def test_codec_round_trip_keeps_unknown_fields_byte_identical(
    spec: Any, stored: dict[str, Any]
) -> None:
    codec: ValueCodec[Any] = as_codec(spec)
    data = pack(stored)
    value = codec.decode(data)
    assert codec.encode(value) == data
    if not isinstance(value, dict):
        assert unknown_fields(value) == {k: v for k, v in stored.items() if k not in DECLARED}
    with pytest.raises(ValueDecodeError, match=r"unknown (fields|keys) .*unknown='forbid'") as no:
        as_codec(spec, unknown="forbid").decode(data)
    assert no.value.field in set(stored) - DECLARED
    assert no.value.value == data  # the bytes, as the message shows them


@pytest.mark.parametrize("spec", TYPES, ids=lambda t: t.__name__)
def test_a_changed_field_is_written_beside_the_kept_ones(spec: Any) -> None:
    stored = {"facets": [{"index": 1}], "text": "hi", "likes": 1, "langs": ["en"]}
    codec: ValueCodec[Any] = as_codec(spec)
    value = codec.decode(pack(stored))
    if isinstance(value, dict):
        value["text"] = "edited"
    else:
        value.text = "edited"
    assert unpack(codec.encode(value)) == {**stored, "text": "edited"}
    assert list(unpack(codec.encode(value))) == list(stored)  # the stored order


@pytest.mark.parametrize("spec", TYPES, ids=lambda t: t.__name__)
def test_a_new_object_stores_only_its_own_fields(spec: Any) -> None:
    codec: ValueCodec[Any] = as_codec(spec)
    made = {"text": "hi", "likes": 2}
    value = made if spec is PostTd else spec(**made)
    assert unpack(codec.encode(value)) == made


def test_kept_fields_go_with_the_object() -> None:
    codec = DataclassCodec(PostDc)
    gc.collect()
    before = len(KEPT)
    values = [codec.decode(pack({"text": "a", "likes": 1, "x": n})) for n in range(100)]
    assert len(KEPT) == before + 100
    del values
    gc.collect()
    assert len(KEPT) == before
    plain = codec.decode(pack({"text": "a", "likes": 1}))  # nothing to keep: no entry
    assert len(KEPT) == before and unknown_fields(plain) == {}


def test_an_object_that_cannot_keep_them_refuses_them() -> None:
    @dataclasses.dataclass(slots=True)
    class Slotted:
        text: str

    class Bare(msgspec.Struct):  # no weakref=True
        text: str

    for codec in (DataclassCodec(Slotted), StructCodec(Bare)):
        assert codec.decode(pack({"text": "ok"})).text == "ok"  # nothing unknown: fine
        data = pack({"text": "hi", "facets": []})
        with pytest.raises(ValueDecodeError, match=r"cannot keep them .*weak") as caught:
            codec.decode(data)
        assert (caught.value.field, caught.value.value) == ("facets", data)
        with pytest.raises(ValueDecodeError, match="unknown='forbid'"):
            type(codec)(codec.cls, unknown="forbid").decode(data)


def test_forbid_unknown_fields_struct_is_strict_and_bad_choices_are_refused() -> None:
    class Strict(msgspec.Struct, forbid_unknown_fields=True):
        text: str

    assert StructCodec(Strict).unknown == "forbid"
    with pytest.raises(ValueDecodeError, match="facets"):
        StructCodec(Strict).decode(pack({"text": "hi", "facets": []}))
    for make in (DataclassCodec, TypedDictCodec, StructCodec, ModelCodec):
        with pytest.raises(InvalidArgumentError, match="unknown must be one of"):
            make(
                TYPES[[DataclassCodec, TypedDictCodec, StructCodec, ModelCodec].index(make)],
                unknown="drop",
            )  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="pydantic model type"):
        ModelCodec(PostDc)


class Ref(TypedDict):
    uri: str


class Like(TypedDict):
    subject: Ref


def test_nested_typeddicts_keep_their_unknown_keys_too() -> None:
    data = pack({"subject": {"cid": "bafy", "uri": "at://x"}, "via": 1})
    assert TypedDictCodec(Like).encode(TypedDictCodec(Like).decode(data)) == data
    with pytest.raises(ValueDecodeError):
        TypedDictCodec(Like, unknown="forbid").decode(pack({"subject": {"uri": "a", "c": 1}}))


@pytest.mark.parametrize("spec", TYPES, ids=lambda t: t.__name__)
def test_typed_view_get_and_put_is_byte_identical(spec: Any) -> None:
    with SyncStore.open("memory://unknown-view", default_schema()) as db:
        records = SyncRecordCollection(db)
        view = records.typed(POST, spec)
        counter = iter(range(10**6))

        @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(stored=stored_maps())
        def check(stored: dict[str, Any]) -> None:
            rkey = f"3kabcdefg{next(counter):04d}"
            key = RECORDS.record.encode(ALICE, POST, rkey)
            records.put(ALICE, POST, rkey, stored)  # as a newer writer stored it
            before = db.get_raw(key)
            value = view.get(ALICE, rkey)
            assert value is not None
            view.put(ALICE, rkey, value)
            assert db.get_raw(key) == before
            page = view.list(ALICE, reverse=True, limit=1)
            assert page.records[0].rkey == rkey
            view.put(ALICE, rkey, page.records[0].value)
            assert db.get_raw(key) == before
            with pytest.raises(ValueDecodeError, match=rf"at://{ALICE}/{POST}/{rkey}") as no:
                records.typed(POST, spec, unknown="forbid").get(ALICE, rkey)
            assert no.value.field in set(stored) - DECLARED

        check()


def test_a_store_read_refusing_unknown_fields_names_record_field_and_bytes() -> None:
    from opendata_kv import RecordType, Schema, fields
    from opendata_kv.values import Values

    note = RecordType("note", 1, [("rkey", fields.string)])
    with SyncStore.open("memory://strict-note", Schema(note)) as db:
        db.put(note, ("a",), {"text": "hi", "likes": 1, "facets": []})
        data = db.get_raw(note.encode("a"))
    strict = Values(Schema(note)).register(note, DataclassCodec(PostDc, unknown="forbid"))
    with pytest.raises(ValueDecodeError, match=r"note v1 key .*unknown fields \['facets'\]") as no:
        strict.decode(note, note.encode("a"), data)
    assert (no.value.record, no.value.field, no.value.value) == ("note", "facets", data)
    kept = Values(Schema(note)).register(note, PostDc).decode(note, note.encode("a"), data)
    assert unknown_fields(kept) == {"facets": []}
