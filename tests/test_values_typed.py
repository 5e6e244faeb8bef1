"""Typed value codecs: TypedDicts checked on write and read, msgspec Structs encoded and
validated by msgspec, and the bytes of both readable by every other codec and by dump."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pytest
from clikit import run_in_process
from hypothesis import given, settings
from hypothesis import strategies as st
from mypykit import mypy_strict
from storekit import aio, run

from opendata_kv import RecordType, Schema, Store, fields
from opendata_kv.cli.common import jsonable
from opendata_kv.errors import (
    ArgumentTypeError,
    ValueDecodeError,
    ValueEncodeError,
    ValueLimitError,
)
from opendata_kv.values import (
    DataclassCodec,
    MsgpackCodec,
    StructCodec,
    TypedDictCodec,
    Values,
    as_codec,
    batch_decoder,
    pack,
)

EXAMPLES = int(os.environ.get("OPENDATA_KV_TYPED_EXAMPLES", "40"))


@dataclasses.dataclass
class PostDc:
    text: str
    likes: int
    langs: list[str] | None = None


class PostStruct(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    likes: int
    langs: list[str] | None = None


class PostTd(TypedDict):
    text: str
    likes: int
    langs: list[str] | None


post = RecordType("post", 1, [("repo", fields.string), ("rkey", fields.string)])


# --- TypedDict -----------------------------------------------------------------------------------


def test_typeddict_round_trip_is_the_plain_dict() -> None:
    codec = as_codec(PostTd)
    assert isinstance(codec, TypedDictCodec)
    value: PostTd = {"text": "hi", "likes": 1, "langs": None}
    data = codec.encode(value)
    assert data == pack(value)
    assert codec.decode(data) == value


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ({"text": "hi", "likes": 1}, "langs", "missing keys ['langs']"),
        # refused with unknown="forbid" (kept by default: tests/test_values_unknown.py)
        ({"text": "hi", "likes": 1, "langs": None, "ownr": "x"}, "ownr", "unknown keys"),
        ({"text": 1, "likes": 1, "langs": None}, "text", "declared str, but the value is int"),
        ({"text": "hi", "likes": True, "langs": None}, "likes", "declared int"),
    ],
)
def test_typeddict_refuses_what_a_dataclass_refuses(
    value: dict[str, Any], field: str, words: str
) -> None:
    codec = TypedDictCodec(PostTd, unknown="forbid")
    with pytest.raises(ValueEncodeError, match=re.escape(words)) as written:
        codec.encode(value)  # type: ignore[arg-type]
    assert written.value.field == field
    with pytest.raises(ValueDecodeError, match=re.escape(words)) as read:
        codec.decode(pack(value))
    assert read.value.field == field
    if field != "langs":  # a dataclass field with a default may be absent; else the same error
        with pytest.raises(ValueDecodeError):
            DataclassCodec(PostDc, unknown="forbid").decode(pack(value))


def test_typeddict_not_a_dict_is_refused() -> None:
    with pytest.raises(ValueEncodeError, match="expected a dict, got list"):
        TypedDictCodec(PostTd).encode([1])  # type: ignore[arg-type]


@aio
async def test_store_put_of_a_bad_typeddict_names_record_and_field(tmp_path: Path) -> None:
    values = Values(Schema(post)).register(post, TypedDictCodec(PostTd, unknown="forbid"))
    async with Store.open(str(tmp_path / "db"), values) as store:
        with pytest.raises(ValueEncodeError, match=r"post v1 .*unknown keys") as caught:
            await store.put(
                post, ("did:plc:a", "r1"), {"text": "x", "likes": 1, "langs": None, "z": 1}
            )
        assert (caught.value.record, caught.value.field, caught.value.value) == ("post", "z", "z")
        assert await store.get(post, ("did:plc:a", "r1")) is None


# --- msgspec.Struct ------------------------------------------------------------------------------


def test_struct_codec_refuses_structs_that_would_hide_fields() -> None:
    class Loose(msgspec.Struct):
        text: str

    class Array(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
        text: str

    assert StructCodec(Loose).unknown == "keep"  # issue 39: no forbid_unknown_fields needed
    assert StructCodec(Loose, unknown="forbid").unknown == "forbid"
    with pytest.raises(ArgumentTypeError, match="array_like"):
        StructCodec(Array)
    with pytest.raises(ArgumentTypeError, match=r"msgspec\.Struct type"):
        StructCodec(PostDc)


def test_struct_decode_validates() -> None:
    codec = as_codec(PostStruct)
    assert isinstance(codec, StructCodec)
    for bad, words in (
        (pack({"text": 1, "likes": 1}), "Expected `str`, got `int`"),
        (pack({"text": "a"}), "missing required field `likes`"),
        (pack({"text": "a", "likes": 1, "ownr": 2}), "unknown field `ownr`"),
        (pack({"text": "a", "likes": 1}) + b"\x00", "trailing characters"),
        (b"\xc1", "not a msgpack value"),
    ):
        with pytest.raises(ValueDecodeError, match=words) as caught:
            codec.decode(bad)
        assert caught.value.value == bad
    with pytest.raises(ValueEncodeError, match="must be a PostStruct, got PostDc"):
        codec.encode(PostDc("a", 1))


def test_struct_decode_keeps_the_stores_caps() -> None:
    deep: Any = "x"
    for _ in range(150):
        deep = [deep]

    class Deep(msgspec.Struct, forbid_unknown_fields=True):
        tree: Any

    codec = StructCodec(Deep)
    data = pack({"tree": deep})
    with pytest.raises(ValueLimitError, match="deeper than 100"):
        codec.decode(data)
    with pytest.raises(ValueLimitError):
        codec.fast_decode_many([pack({"tree": 1}), data])


texts = st.text(max_size=20)
posts = st.builds(
    lambda text, likes, langs: (text, likes, langs),
    texts,
    st.integers(-(2**63), 2**64 - 1),
    st.none() | st.lists(texts, max_size=3),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(posts)
def test_dataclass_and_struct_bytes_read_back_as_each_other(fields_: tuple[Any, ...]) -> None:
    dc, struct, td = DataclassCodec(PostDc), StructCodec(PostStruct), TypedDictCodec(PostTd)
    as_dc, as_struct = PostDc(*fields_), PostStruct(*fields_)
    as_td: PostTd = {"text": fields_[0], "likes": fields_[1], "langs": fields_[2]}
    for data in (dc.encode(as_dc), struct.encode(as_struct), td.encode(as_td)):
        assert dc.decode(data) == as_dc
        assert struct.decode(data) == as_struct
        assert td.decode(data) == as_td
        assert MsgpackCodec().decode(data) == as_td
        assert batch_decoder(struct)([data, data]) == [as_struct, as_struct]


def test_written_as_dataclass_read_as_struct_and_dumped(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    run(_dataclass_then_struct(url))
    result = run_in_process("dump", url, "--values", "--json", "--limit", "1")
    assert result.returncode == 0, result.stderr
    [row] = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["value"] == {"text": "t0", "likes": 0, "langs": ["en"]}


async def _dataclass_then_struct(url: str) -> None:
    async with Store.open(url, Values(Schema(post)).register(post, PostDc)) as store:
        await store.put_many(
            (post, ("did:plc:a", f"r{i}"), PostDc(f"t{i}", i, ["en"])) for i in range(300)
        )
    async with Store.open(url, Values(Schema(post)).register(post, PostStruct)) as store:
        records = await store.scan(post).to_list()
        assert [r.value for r in records] == [
            PostStruct(f"t{i}", i, ["en"]) for i in sorted(range(300), key=lambda i: f"r{i}")
        ]
        assert await store.get(post, ("did:plc:a", "r7")) == PostStruct("t7", 7, ["en"])
        await store.put(post, ("did:plc:a", "r7"), PostStruct("seven", 7))
    async with Store.open(url, Values(Schema(post)).register(post, PostDc)) as store:
        assert await store.get(post, ("did:plc:a", "r7")) == PostDc("seven", 7)


@aio
async def test_a_scan_of_structs_reports_the_bad_value_precisely(tmp_path: Path) -> None:
    async with Store.open(str(tmp_path / "db"), Values(Schema(post))) as store:
        await store.put(post, ("did:plc:a", "a"), {"text": "ok", "likes": 1})
        await store.put(post, ("did:plc:a", "b"), {"text": 2, "likes": 1})
    async with Store.open(
        str(tmp_path / "db"), Values(Schema(post)).register(post, PostStruct)
    ) as store:
        with pytest.raises(ValueDecodeError, match=r"post v1 key .*Expected `str`, got `int`"):
            await store.scan(post).to_list()


# --- typed upgrades under mypy -------------------------------------------------------------------


def test_an_upgrade_must_take_the_old_value_type(tmp_path: Path, mypy_cache: Path) -> None:
    source = tmp_path / "upgrades.py"
    source.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from typing import TypedDict

            import msgspec

            from opendata_kv import RecordType, Schema, fields
            from opendata_kv.values import Values

            class PostV1(TypedDict):
                text: str

            class PostV2(msgspec.Struct, forbid_unknown_fields=True):
                text: str
                langs: list[str]

            @dataclass
            class Other:
                n: int

            v1 = RecordType("post", 1, [("rkey", fields.string)])
            v2 = RecordType("post", 1, [("rkey", fields.string)], version=2)
            values = Values(Schema(v1, v2)).register(v2, PostV2)

            def to_v2(old: PostV1) -> PostV2:
                return PostV2(old["text"], [])

            def from_other(old: Other) -> PostV2:
                return PostV2(str(old.n), [])

            values.register(v1, PostV1, upgrade=to_v2)
            values.register(v1, PostV1, upgrade=from_other)  # E1: takes an Other, not a PostV1
            values.register(v1, Other, upgrade=to_v2)  # E2
            """
        )
    )
    status, out = mypy_strict(tmp_path, [source.name], mypy_cache)
    flagged = {line.split(":")[1] for line in out.splitlines() if ": error:" in line}
    expected = {
        str(i + 1) for i, text in enumerate(source.read_text().splitlines()) if "# E" in text
    }
    assert flagged == expected, out
    assert status == 1


def test_dump_with_a_struct_schema_shows_the_stored_map(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    run(_dataclass_then_struct(url))
    (tmp_path / "struct_schema.py").write_text(
        textwrap.dedent(
            """
            import msgspec
            from opendata_kv import RecordType, Schema, fields
            from opendata_kv.values import Values

            class Post(msgspec.Struct, forbid_unknown_fields=True):
                text: str
                likes: int
                langs: list[str] | None = None

            post = RecordType("post", 1, [("repo", fields.string), ("rkey", fields.string)])
            values = Values(Schema(post)).register(post, Post)
            """
        )
    )
    result = run_in_process(
        "dump",
        url,
        "--values",
        "--json",
        "--limit",
        "1",
        "--schema",
        "struct_schema:values",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    [row] = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["value"] == {"text": "t0", "likes": 0, "langs": ["en"]}


def test_tools_show_a_struct_by_its_stored_field_names() -> None:
    class Follow(msgspec.Struct, forbid_unknown_fields=True, rename={"type_": "$type"}):
        type_: str
        subject: str

    assert jsonable(Follow("app.bsky.graph.follow", "did:plc:a")) == {
        "$type": "app.bsky.graph.follow",
        "subject": "did:plc:a",
    }


class NoteV1(TypedDict):
    body: str


class NoteV2(msgspec.Struct, forbid_unknown_fields=True):
    body: str
    tags: list[str]


def note_to_v2(old: NoteV1) -> NoteV2:
    return NoteV2(old["body"], ["migrated"])


@aio
async def test_migrate_upgrades_a_typeddict_version_to_a_struct_one(tmp_path: Path) -> None:
    v1 = RecordType("note", 3, [("id", fields.string)])
    v2 = RecordType("note", 3, [("id", fields.string)], version=2)
    values = Values(Schema(v1, v2)).register(v2, NoteV2).register(v1, NoteV1, upgrade=note_to_v2)
    async with Store.open(str(tmp_path / "db"), values) as store:
        await store.put_many((v1, (f"n{i}",), {"body": f"b{i}"}) for i in range(5))
        assert await store.get(v1, ("n1",)) == NoteV2("b1", ["migrated"])  # upgraded on read
        assert await store.get(v1, ("n1",), upgrade=False) == {"body": "b1"}
        await store.migrate("note")
        assert await store.count(v1) == 0
        assert [r.value for r in await store.scan(v2).to_list()] == [
            NoteV2(f"b{i}", ["migrated"]) for i in range(5)
        ]
        assert MsgpackCodec().decode(await store.get_raw(v2.encode("n0")) or b"") == {
            "body": "b0",
            "tags": ["migrated"],
        }
