"""Examples of the key layer's public API: Key objects, RecordType, Schema, errors, imports."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import opendata_kv
from opendata_kv.errors import (
    KeyDecodeError,
    KeyEncodeError,
    OpendataKvError,
    SchemaError,
    UnknownRecordError,
)
from opendata_kv.keys import Key, RecordType, Schema, fields, prefix_successor

SRC = Path(__file__).resolve().parent.parent

POST = RecordType(
    "app.bsky.feed.post",
    1,
    [("repo", fields.string), ("rkey", fields.string)],
)
LIKE = RecordType(
    "like",
    2,
    [("repo", fields.string), ("subject", fields.string), ("at", fields.u64)],
)
EVENT = RecordType(
    "event",
    3,
    [("seq", fields.u64), ("kind", fields.u8), ("body", fields.trailing_bytes)],
    keyspace=b"\x07",
)


def test_public_names() -> None:
    assert opendata_kv.RecordType is RecordType
    assert opendata_kv.Schema is Schema
    assert opendata_kv.fields is fields
    assert opendata_kv.OpendataKvError is OpendataKvError


# --- Key objects -------------------------------------------------------------------------------


def test_key_attributes_and_tuple_behaviour() -> None:
    key = POST.key("did:plc:abc", "3k2a")
    assert key.repo == "did:plc:abc" and key.rkey == "3k2a"
    assert key[0] == "did:plc:abc" and len(key) == 2
    assert tuple(key) == ("did:plc:abc", "3k2a")
    assert key.record_type is POST
    assert type(key).__name__ == "AppBskyFeedPostKey"
    assert repr(key) == "AppBskyFeedPostKey(repo='did:plc:abc', rkey='3k2a')"
    assert POST.field_names == ("repo", "rkey")
    assert key.encode() == POST.encode("did:plc:abc", "3k2a") == b"\x01\x10did:plc:abc\x003k2a\x00"


def test_key_is_immutable() -> None:
    key = POST.key("a", "b")
    with pytest.raises(AttributeError):
        key.repo = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        key.other = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        key[0] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        del key.repo  # type: ignore[misc]


def test_key_hash_and_equality() -> None:
    a, b = POST.key("a", "b"), POST.decode(POST.encode("a", "b"))
    assert a == b and hash(a) == hash(b)
    assert not a.__ne__(b)
    assert len({a, b, POST.key("a", "c")}) == 2
    assert a != ("a", "b")  # never equal to a plain tuple
    assert ("a", "b") != a  # noqa: SIM300 (the reflected comparison)
    # Same values, another record type: not equal.
    other = RecordType("other", 4, [("repo", fields.string), ("rkey", fields.string)])
    assert other.key("a", "b") != a
    assert POST.key("a", "b") in {a: 1}
    # Same values, another version of a layout: not equal either.
    v2 = RecordType("app.bsky.feed.post", 1, POST.fields, version=2)
    assert v2.key("a", "b") != a


def test_look_alike_record_types_are_distinct() -> None:
    """RecordTypes compare by identity: a look-alike built elsewhere is another layout (the
    collections layer relies on this to check that a Schema holds *its* record types)."""
    twin = RecordType("app.bsky.feed.post", 1, [("repo", fields.string), ("rkey", fields.string)])
    assert twin != POST and twin not in Schema(POST)
    assert twin.key("a", "b") != POST.key("a", "b")
    assert twin.encode("a", "b") == POST.encode("a", "b")  # same bytes, still another type
    # pickling finds the very object that was pickled, not the first look-alike
    back = pickle.loads(pickle.dumps(twin.key("a", "b")))
    assert back.record_type is twin and back == twin.key("a", "b")
    assert pickle.loads(pickle.dumps(twin)) is twin


def test_key_values_are_canonical_and_hashable() -> None:
    rt = RecordType("t", 1, [("b", fields.bytes_), ("f", fields.f64), ("x", fields.fixed(2))])
    key = rt.key(bytearray(b"ab"), 3, memoryview(b"xy"))
    assert type(key.b) is bytes and type(key.x) is bytes
    assert type(key.f) is float and key.f == 3.0
    assert hash(key) == hash(rt.key(b"ab", 3.0, b"xy"))


def test_asdict_and_replace() -> None:
    key = LIKE.key("did:a", "at://x", 5)
    assert key.asdict() == {"repo": "did:a", "subject": "at://x", "at": 5}
    assert list(key.asdict()) == ["repo", "subject", "at"]
    moved = key.replace(at=6)
    assert moved == LIKE.key("did:a", "at://x", 6) and key.at == 5
    with pytest.raises(KeyEncodeError, match="nope"):
        key.replace(nope=1)
    with pytest.raises(KeyEncodeError, match="'at'"):
        key.replace(at=-1)


def test_pickle_and_copy_round_trip() -> None:
    for key in (
        POST.key("did:plc:abc", "3k2a"),
        LIKE.key("r", "s", 2**64 - 1),
        EVENT.key(1, 2, b"\x00\xff"),
        RecordType("d", 5, [("x", fields.desc(fields.var_u64)), ("y", fields.fixed(3))]).key(
            7, b"abc"
        ),
    ):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(key, protocol))
            assert back == key and type(back) is type(key)
            assert back.record_type is key.record_type
        assert copy.copy(key) == key and copy.deepcopy(key) == key
    assert pickle.loads(pickle.dumps(POST)) is POST
    assert pickle.loads(pickle.dumps(fields.desc(fields.string))) == fields.desc(fields.string)
    assert pickle.loads(pickle.dumps(fields.u64)) is fields.u64


def test_pickle_in_a_fresh_interpreter() -> None:
    """A key pickled here unpickles in a process that has never seen its RecordType."""
    blob = pickle.dumps(LIKE.key("did:a", "at://x", 5))
    code = (
        "import pickle, sys; k = pickle.loads(sys.stdin.buffer.read()); "
        "assert k.asdict() == {'repo': 'did:a', 'subject': 'at://x', 'at': 5}, k; "
        "assert k.encode() == k.record_type.encode('did:a', 'at://x', 5); print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=blob,
        capture_output=True,
        env={"PYTHONPATH": str(SRC)},
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == b"ok", result.stderr.decode()


# --- encoding by name, and field errors --------------------------------------------------------


def test_keyword_encode() -> None:
    raw = LIKE.encode("did:a", "at://x", 5)
    assert LIKE.encode(repo="did:a", subject="at://x", at=5) == raw
    assert LIKE.encode(at=5, subject="at://x", repo="did:a") == raw
    assert LIKE.encode("did:a", at=5, subject="at://x") == raw
    assert LIKE.key(at=5, repo="did:a", subject="at://x") == LIKE.decode(raw)


def test_missing_extra_and_unknown_fields() -> None:
    with pytest.raises(KeyEncodeError, match=r"needs 3 fields \['repo', 'subject', 'at'\]"):
        LIKE.encode("did:a", "x")
    with pytest.raises(KeyEncodeError, match="needs 3 fields"):
        LIKE.encode("did:a", "x", 1, 2)
    with pytest.raises(KeyEncodeError, match=r"missing fields \['at'\]"):
        LIKE.encode(repo="did:a", subject="x")
    with pytest.raises(KeyEncodeError, match="no field named 'when'"):
        LIKE.encode(repo="did:a", subject="x", at=1, when=2)
    with pytest.raises(KeyEncodeError, match="'repo' given twice"):
        LIKE.encode("did:a", "x", repo="did:b", at=1)
    with pytest.raises(KeyEncodeError, match="needs 3 fields"):
        LIKE.key("did:a")
    with pytest.raises(KeyEncodeError, match="a prefix of 4 fields"):
        LIKE.prefix("a", "b", 1, 2)


def test_encode_errors_name_the_field() -> None:
    for values, name in (
        ((1, "x", 1), "repo"),
        (("a", b"x", 1), "subject"),
        (("a", "x", -1), "at"),
        (("a", "x", 2**64), "at"),
        (("a", "x", "1"), "at"),
        (("a", "x", True), "at"),
        (("a", "\ud800", 1), "subject"),
    ):
        with pytest.raises(KeyEncodeError, match=f"'{name}'") as info:
            LIKE.encode(*values)
        assert "like" in str(info.value)
        assert isinstance(info.value, ValueError) and isinstance(info.value, OpendataKvError)


def test_decode_errors_name_field_offset_and_bytes() -> None:
    raw = LIKE.encode("did:a", "at://x", 5)
    short = r"field 'at' at offset 15: u64: needs 8 bytes.*only 7 left"
    with pytest.raises(KeyDecodeError, match=short):
        LIKE.decode(raw[:-1])
    with pytest.raises(KeyDecodeError, match="1 unexpected bytes 0xff"):
        LIKE.decode(raw + b"\xff")
    with pytest.raises(KeyDecodeError, match="does not start with this record type's prefix"):
        LIKE.decode(POST.encode("a", "b"))
    with pytest.raises(KeyDecodeError, match=r"field 'repo'.*invalid UTF-8"):
        LIKE.decode(b"\x01\x20\xff\x00x\x00" + bytes(8))
    with pytest.raises(KeyDecodeError, match="must be bytes, got str"):
        LIKE.decode(raw.hex())  # type: ignore[arg-type]


class Index:
    """An integer type that is not an int but says it is one (like numpy.uint64)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n


def test_integer_likes_agree_on_both_paths() -> None:
    import enum

    class Kind(enum.IntEnum):
        POST = 3

    rt = RecordType("ints", 1, [("a", fields.u8), ("b", fields.i64), ("c", fields.var_u64)])
    want = rt.encode(3, 3, 3)
    for value in (Index(3), Kind.POST):
        args = (value, value, value)
        assert rt.encode(*args) == rt.encode_by_field(args) == want
        assert rt.key(*args) == rt.decode(want) and type(rt.key(*args).a) is int
    for bad in (Index(256), Index(-1)):
        with pytest.raises(KeyEncodeError, match="'a'"):
            rt.encode(bad, 0, 0)


def test_bytes_fields_take_the_bytes_of_a_buffer() -> None:
    """`0 in array("H", [256])` is False although its bytes hold 0x00: the encoder must still
    escape that byte (the compiled path hands such input to the reference path)."""
    import array

    rt = RecordType("b", 1, [("b", fields.bytes_), ("n", fields.u8)])
    wide = array.array("H", [256, 2])
    for value in (memoryview(wide), bytearray(wide.tobytes())):
        key = rt.encode(value, 1)
        assert key == rt.encode_by_field((value, 1)) == rt.encode(wide.tobytes(), 1)
        assert rt.decode(key).b == wide.tobytes()
    with pytest.raises(KeyEncodeError, match="'b'"):
        rt.encode(wide, 1)


def test_varints_decode_only_the_shortest_form() -> None:
    """One number, one key: longer forms, overflowing values and unknown length codes fail."""
    for codec, raw in (
        (fields.var_u64, b"\x10\x05"),  # 5 in two bytes
        (fields.var_u64, b"\x20\x00\xff"),  # 255 in three bytes
        (fields.var_u64, b"\x8f" + b"\xff" * 8),  # 68 value bits: above 2**64 - 1
        (fields.var_u64, b"\x90" + bytes(9)),  # length code 9
        (fields.var_u32, b"\x20\x1f"),  # 31 in two bytes
        (fields.var_u32, b"\x81\x00\x00\x00\x00"),  # 2**32
        (fields.var_u32, b"\xa0" + bytes(5)),  # length code 5
        (fields.var_u32, b"\x40\x20"),  # truncated
    ):
        with pytest.raises(KeyDecodeError):
            codec.decode_all(raw)
        with pytest.raises(KeyDecodeError):
            fields.desc(codec).decode_all(fields.invert(raw))


def test_desc_string_ends_at_ff() -> None:
    d = fields.desc(fields.string)
    assert d.encode("a\x00") == fields.invert(b"a\x01\x01\x00") == b"\x9e\xfe\xfe\xff"
    assert d.decode(d.encode("ab") + b"\xff\x00", 0) == ("ab", 3)
    with pytest.raises(KeyDecodeError):
        d.decode_all(b"\x9e\x9d")  # no terminator


# --- layout definitions ------------------------------------------------------------------------


def test_trailing_field_must_be_last() -> None:
    with pytest.raises(SchemaError, match="only be the last field"):
        RecordType("t", 1, [("a", fields.trailing_string), ("b", fields.u8)])
    with pytest.raises(SchemaError, match="only be the last field"):
        RecordType("t", 1, [("a", fields.trailing_bytes), ("b", fields.trailing_bytes)])
    RecordType("t", 1, [("a", fields.u8), ("b", fields.trailing_bytes)])


def test_desc_rejects_trailing_and_desc() -> None:
    for inner in (fields.trailing_string, fields.trailing_bytes):
        with pytest.raises(SchemaError, match="not prefix-free"):
            fields.desc(inner)
    with pytest.raises(SchemaError):
        fields.desc(fields.desc(fields.u8))
    with pytest.raises(SchemaError):
        fields.desc("u8")  # type: ignore[arg-type]


def test_bad_definitions() -> None:
    for bad_fields in (
        [("a", fields.u8), ("a", fields.u8)],
        [("1a", fields.u8)],
        [("_a", fields.u8)],
        [("encode", fields.u8)],
        [("count", fields.u8)],
        [("a", "u8")],
        [("a",)],
    ):
        with pytest.raises(SchemaError):
            RecordType("t", 1, bad_fields)  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        RecordType("", 1, [])
    with pytest.raises(SchemaError):
        RecordType("t", 1, [], keyspace="x")  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        RecordType("t", True, [])  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        fields.fixed(0)
    assert RecordType("t", 1, {"a": fields.u8, "b": fields.string}).field_names == ("a", "b")


def _names_a_key_answers_to() -> list[str]:
    """Every public attribute of a real key object that is not one of its fields: what a
    field of the same name would hide. Found on a live key, apart from the library's list."""
    rt = RecordType("probe", 1, [("a", fields.u8)])
    return sorted(n for n in dir(rt.key(1)) if not n.startswith("_") and n != "a")


@pytest.mark.parametrize("name", _names_a_key_answers_to())
def test_every_name_a_key_needs_is_refused_by_name(name: str) -> None:
    with pytest.raises(SchemaError) as info:
        RecordType("profile", 2, [("did", fields.string), (name, fields.u8)])
    message = str(info.value)
    assert message.startswith(f"profile: field name {name!r} is reserved: every Key has ")
    assert "rename the field" in message


def test_the_reserved_names_are_exactly_what_keys_answer_to() -> None:
    from opendata_kv.keys.record import RESERVED_FIELD_NAMES

    assert sorted(RESERVED_FIELD_NAMES) == _names_a_key_answers_to()
    assert {"record_type", "encode", "replace", "asdict", "count", "index"} <= RESERVED_FIELD_NAMES
    # a name that merely looks like one is fine
    assert RecordType("t", 1, [("record_types", fields.u8)]).key(3).record_types == 3


def test_underscore_names_are_refused_with_the_reason() -> None:
    with pytest.raises(SchemaError, match=r"'_fields' is reserved: names starting with '_'"):
        RecordType("t", 1, [("_fields", fields.u8)])


def test_partial_prefixes() -> None:
    assert POST.prefix("did:a", partial="3k") == b"\x01\x10did:a\x003k"
    start, end = POST.range("did:a", partial="3k")
    assert (start, end) == (b"\x01\x10did:a\x003k", b"\x01\x10did:a\x003l")
    assert start <= POST.encode("did:a", "3k") < end  # type: ignore[operator]
    assert start <= POST.encode("did:a", "3kzz") < end  # type: ignore[operator]
    assert not start <= POST.encode("did:a", "3l") < end  # type: ignore[operator]
    assert POST.range() == (b"\x01\x10", b"\x01\x11")
    assert POST.prefix(partial="did:") == b"\x01\x10did:"
    for bad in (
        lambda: LIKE.prefix("a", "b", partial=1),  # u64 takes no partial
        lambda: RecordType("f", 1, [("h", fields.fixed(4))]).prefix(partial=b"ab"),
        lambda: POST.prefix("a", "b", partial="c"),  # every field already given
        lambda: POST.prefix(partial=b"bytes for a str field"),
    ):
        with pytest.raises(KeyEncodeError):
            bad()
    with pytest.raises(KeyEncodeError, match="'at'"):
        LIKE.prefix("a", "b", partial=1)


def test_desc_partial_and_range() -> None:
    rt = RecordType("d", 1, [("name", fields.desc(fields.string))])
    start, end = rt.range(partial="ab")
    inside = [rt.encode(v) for v in ("ab", "abc", "ab\x00", "ab\xff")]
    outside = [rt.encode(v) for v in ("a", "ac", "b", "")]
    assert all(start <= k < end for k in inside)  # type: ignore[operator]
    assert not any(start <= k < end for k in outside)  # type: ignore[operator]
    # descending: later names sort first
    assert rt.encode("b") < rt.encode("ab") < rt.encode("a") < rt.encode("")


def test_prefix_successor_edges() -> None:
    assert prefix_successor(b"") is None
    assert prefix_successor(b"\xff\xff") is None
    assert prefix_successor(b"\x01\xff") == b"\x02"
    rt = RecordType("hi", 15, [("b", fields.trailing_bytes)], version=255, reserved=15)
    assert rt.range() == (b"\xff\xff", None)
    assert rt.range(partial=b"\xff") == (b"\xff\xff\xff", None)


# --- Schema ------------------------------------------------------------------------------------


def test_schema_rejects_duplicates() -> None:
    with pytest.raises(SchemaError, match="share the prefix 0x0110"):
        Schema(POST, RecordType("other", 1, [("a", fields.u8)]))
    with pytest.raises(SchemaError, match=r"version 1 is registered twice .*another version"):
        Schema(POST, RecordType("app.bsky.feed.post", 1, [("a", fields.u8)], reserved=1))
    with pytest.raises(SchemaError, match="two different record types are both named"):
        Schema(POST, RecordType("app.bsky.feed.post", 2, [("a", fields.u8)], version=2))
    with pytest.raises(SchemaError, match=r"keyspace 0x6b.*the same record type and keyspace"):
        Schema(POST, RecordType("app.bsky.feed.post", 1, POST.fields, version=2, keyspace=b"k"))
    with pytest.raises(SchemaError):
        Schema(POST, "like")  # type: ignore[arg-type]


def test_schema_rejects_nested_prefixes() -> None:
    """[0x07][v 0x10][tag 0x20] starts with [v 0x07][tag 0x10]: keys would be ambiguous."""
    plain = RecordType("plain", 1, [("a", fields.u8)], version=7)
    spaced = RecordType("spaced", 2, [("a", fields.u8)], version=0x10, keyspace=b"\x07")
    with pytest.raises(SchemaError, match="one starts with the other"):
        Schema(plain, spaced)
    with pytest.raises(SchemaError, match="one starts with the other"):
        Schema(spaced, plain)


def test_schema_lookup() -> None:
    v2 = RecordType("app.bsky.feed.post", 1, [("repo", fields.string)], version=2)
    schema = Schema(POST, [LIKE, v2], EVENT)
    assert len(schema) == 4 and list(schema) == [POST, LIKE, v2, EVENT]
    assert POST in schema and RecordType("zz", 9, []) not in schema
    assert schema.names() == ["app.bsky.feed.post", "like", "event"]
    assert schema.get("app.bsky.feed.post") is v2
    assert schema.get("app.bsky.feed.post", 1) is POST
    assert schema.versions("app.bsky.feed.post") == [POST, v2]
    assert schema.select(record_type=1) == [POST, v2]
    assert schema.select(version=1) == [POST, LIKE, EVENT]
    assert schema.select(record_type=1, version=2) == [v2]
    assert schema.select(record_type=9) == []
    with pytest.raises(SchemaError, match="no record type named 'nope'"):
        schema.get("nope")
    with pytest.raises(SchemaError, match=r"no version 3; registered: \[1, 2\]"):
        schema.get("app.bsky.feed.post", 3)
    with pytest.raises(SchemaError):
        schema.versions("nope")
    assert [d["prefix"] for d in schema.describe()] == ["0110", "0120", "0210", "070130"]
    assert "like@v1" in repr(schema)


def test_schema_decode_dispatch_across_keyspaces() -> None:
    v2 = RecordType("app.bsky.feed.post", 1, [("repo", fields.string)], version=2)
    schema = Schema(POST, LIKE, v2, EVENT)
    for key in (
        POST.key("did:a", "3k"),
        LIKE.key("did:a", "at://x", 9),
        v2.key("did:b"),
        EVENT.key(3, 1, b"payload"),
    ):
        raw = key.encode()
        assert schema.decode(raw) == key and type(schema.decode(raw)) is type(key)
        assert schema.record_type_of(raw) is key.record_type
        assert schema.try_record_type_of(raw) is key.record_type
        assert schema.decode(bytearray(raw)) == key
    assert EVENT.encode(3, 1, b"") == b"\x07\x01\x30" + bytes(7) + b"\x03\x01"
    assert schema.try_record_type_of(b"\x05\x50") is None


def test_unknown_record_errors_name_the_prefix() -> None:
    schema = Schema(POST, LIKE, EVENT)
    with pytest.raises(UnknownRecordError) as info:
        schema.decode(b"\x01\x40abc")
    message = str(info.value)
    assert "0x014061626" in message and "prefix 0x0140" in message
    assert "version 1, record type 0x4, reserved 0" in message
    with pytest.raises(UnknownRecordError, match=r"prefix 0x0530 \(version 5, record type 0x3"):
        schema.decode(b"\x05\x30")
    with pytest.raises(
        UnknownRecordError, match=r"prefix 0x0140 .*version 1, record type 0x4.* keyspace 0x07"
    ):
        schema.decode(b"\x07\x01\x40")
    with pytest.raises(UnknownRecordError, match="version 0x00 at offset 0 is reserved"):
        schema.decode(b"\x00\x10abc")
    with pytest.raises(UnknownRecordError, match="record type 0x0"):
        schema.decode(b"\x01\x05abc")
    with pytest.raises(UnknownRecordError, match="too short"):
        schema.decode(b"\x01")
    with pytest.raises(UnknownRecordError, match="too short"):
        schema.decode(b"")
    only_keyspace = Schema(EVENT)
    with pytest.raises(UnknownRecordError, match="starts with none of the keyspaces"):
        only_keyspace.decode(b"\x01\x10")
    assert issubclass(UnknownRecordError, KeyDecodeError)


def test_schema_decode_rejects_non_bytes() -> None:
    schema = Schema(POST)
    for bad in ("\x01\x10a\x00b\x00", 5, None, [1, 16]):
        with pytest.raises(KeyDecodeError, match="must be bytes"):
            schema.decode(bad)  # type: ignore[arg-type]


def test_record_type_repr_and_parts() -> None:
    assert EVENT.prefix_parts == (1, 3, 0)
    assert EVENT.owns(EVENT.encode(1, 2, b"")) and not POST.owns(EVENT.encode(1, 2, b""))
    assert "prefix=0x070130" in repr(EVENT) and "seq=fields.u64" in repr(EVENT)
    assert repr(fields.desc(fields.string)) == "fields.desc(string)"


def test_field_objects_are_values() -> None:
    assert fields.fixed(4) == fields.fixed(4) and fields.fixed(4) != fields.fixed(5)
    assert fields.desc(fields.u8) == fields.desc(fields.u8) != fields.u8
    assert len({fields.desc(fields.u8), fields.desc(fields.u8), fields.u8}) == 2
    assert not dataclasses.is_dataclass(fields.u8)


# --- imports -----------------------------------------------------------------------------------


def test_importing_keys_does_not_load_slatedb() -> None:
    for module in ("opendata_kv.keys", "opendata_kv"):
        code = f"import {module}, sys; assert 'slatedb' not in sys.modules, 'slatedb loaded'"
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            env={"PYTHONPATH": str(SRC)},
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode()


def test_key_base_class_is_exported() -> None:
    assert isinstance(POST.key("a", "b"), Key)


def test_cli_reports_a_reserved_field_name_in_a_schema_module_as_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `dump --schema` on a schema with a `record_type` field printed a
    traceback; now the definition fails and the CLI says why in one line."""
    from opendata_kv.cli.main import main

    (tmp_path / "reserved_schema.py").write_text(
        "from opendata_kv.keys import RecordType, Schema, fields\n"
        "SCHEMA = Schema(RecordType('event', 1, [('record_type', fields.u8)]))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = main(["key", "inspect", "0110", "--schema", "reserved_schema:SCHEMA"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "event: field name 'record_type' is reserved" in err
