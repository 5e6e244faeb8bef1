"""Hostile values: every msgpack decode cap refuses quickly with ValueLimitError naming it,
the caps are configurable per codec and per store, DataclassCodec checks declared types,
and a value too long for the binding is a clean ValueEncodeError (issue 13)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Literal

import msgpack
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.errors import ValueDecodeError, ValueEncodeError, ValueLimitError
from opendata_kv.values import DEFAULT_LIMITS, DataclassCodec, DecodeLimits, MsgpackCodec, Values
from opendata_kv.values import limits as limits_mod


def array_header(n: int) -> bytes:
    return b"\xdd" + n.to_bytes(4, "big")


def refused(codec: Any, data: bytes) -> ValueLimitError:
    with pytest.raises(ValueLimitError) as info:
        codec.decode(data)
    assert info.value.cap in str(info.value) and str(info.value.limit) in str(info.value)
    return info.value


# --- each cap ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cap", "limit", "over", "under"),
    [
        ("max_value_bytes", 1000, msgpack.packb(b"x" * 1000), msgpack.packb(b"x" * 990)),
        ("max_str_len", 10, msgpack.packb("x" * 11), msgpack.packb("x" * 10)),
        ("max_bin_len", 10, msgpack.packb(b"x" * 11), msgpack.packb(b"x" * 10)),
        ("max_array_len", 10, msgpack.packb([0] * 11), msgpack.packb([0] * 10)),
        ("max_map_len", 10, msgpack.packb({i: 0 for i in range(11)}), msgpack.packb({1: 2})),
        ("max_ext_len", 10, msgpack.packb(msgpack.ExtType(5, b"x" * 11)), msgpack.packb(1)),
        ("max_depth", 5, msgpack.packb([[[[[[1]]]]]]), msgpack.packb([[[[[1]]]]])),
        # more bytes than max_objects, so counted: 6 lists of 9 + the outer one = 61 objects
        ("max_objects", 50, msgpack.packb([[0] * 9] * 6), msgpack.packb([[0] * 9] * 4)),
    ],
)
def test_each_cap_refuses_just_past_it_and_accepts_at_it(
    cap: str, limit: int, over: bytes, under: bytes
) -> None:
    codec = MsgpackCodec(limits=DEFAULT_LIMITS.but(**{cap: limit}))
    error = refused(codec, over)
    assert (error.cap, error.limit) == (cap, limit)
    assert codec.decode(under) == msgpack.unpackb(under, strict_map_key=False)


def test_default_caps_refuse_the_audit_values_quickly() -> None:
    """The issue's values: 8 million empty arrays, a 3000 x 3000 nesting of empty arrays,
    492 levels in 493 bytes, a length header claiming 4 GiB, 70 MiB of binary."""
    codec = MsgpackCodec()
    assert refused(codec, array_header(8_000_000) + b"\x90" * 8_000_000).cap == "max_array_len"
    side = (b"\xdc" + (3000).to_bytes(2, "big")) + (
        b"\xdc" + (3000).to_bytes(2, "big") + b"\x90" * 3000
    ) * 3000
    assert refused(codec, side).cap == "max_objects"
    assert refused(codec, b"\x91" * 492 + b"\x90").cap == "max_depth"
    assert refused(codec, b"\x91" * 5000 + b"\x90").cap == "max_depth"
    with pytest.raises(ValueDecodeError):
        codec.decode(b"\xdb\xff\xff\xff\xff" + b"x" * 10)
    assert refused(codec, b"\xc6" + (70 << 20).to_bytes(4, "big") + bytes(70 << 20)).cap == (
        "max_value_bytes"
    )


def nesting(value: Any) -> int:
    """How deep lists and maps nest (recursive; the test values stay under 400 levels)."""
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    return 0


@given(depth=st.integers(0, 300), wide=st.integers(0, 3))
def test_depth_cap_matches_the_real_nesting(depth: int, wide: int) -> None:
    value: Any = 1
    for level in range(depth):
        value = [value] + [[]] * wide if level % 2 else {"k": value, "w": [0] * wide}
    data = msgpack.packb(value)
    codec = MsgpackCodec()
    if nesting(value) > DEFAULT_LIMITS.max_depth:
        assert refused(codec, data).cap == "max_depth"
    else:
        assert codec.decode(data) == value


SCALARS = st.none() | st.integers(-(2**63), 2**64 - 1) | st.text() | st.binary()


@given(st.recursive(SCALARS, lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_values_within_the_caps_decode_as_msgpack_does(value: Any) -> None:
    data = msgpack.packb(value)
    assert MsgpackCodec().decode(data) == msgpack.unpackb(data, strict_map_key=False)


small_caps = st.builds(
    DecodeLimits,
    max_value_bytes=st.integers(1, 400),
    max_str_len=st.integers(1, 64),
    max_bin_len=st.integers(1, 64),
    max_array_len=st.integers(1, 64),
    max_map_len=st.integers(1, 64),
    max_ext_len=st.integers(1, 64),
    max_objects=st.integers(1, 400),
    max_depth=st.integers(1, 12),
)
packed = st.recursive(
    SCALARS | st.floats() | st.booleans(),
    lambda c: (
        st.lists(c, max_size=8)
        | st.dictionaries(st.text(max_size=8) | st.integers(-(2**40), 2**40), c)
    ),
    max_leaves=40,
).map(lambda value: msgpack.packb(value, use_bin_type=True))


@settings(max_examples=400)
@given(
    data=packed
    | st.binary(max_size=120)
    | st.tuples(packed, st.integers(0, 500), st.binary(min_size=1, max_size=3)).map(
        lambda t: t[0][: t[1] % (len(t[0]) + 1)] + t[2] + t[0][t[1] % (len(t[0]) + 1) + 1 :]
    ),
    limits=small_caps | st.just(DEFAULT_LIMITS),
)
@example(data=b"\xd9\xc8" + b"x" * 100, limits=DEFAULT_LIMITS)  # says 200 B of str, has 100
@example(data=b"\x91" * 30 + b"\x01", limits=DecodeLimits(max_depth=5))
@example(data=msgpack.packb("x" * 70), limits=DecodeLimits(max_str_len=64))
def test_the_uncapped_path_decodes_and_fails_as_the_capped_path(
    data: bytes, limits: DecodeLimits
) -> None:
    """limited_unpackb skips passing the caps to msgpack for values no longer than every cap;
    for any bytes and any caps it returns, or raises (class, message, cap), what the path
    passing every cap does."""

    def outcome(decode: Any) -> str:
        try:
            return repr(("ok", decode()))
        except Exception as exc:
            return repr(("error", type(exc), str(exc), getattr(exc, "cap", None)))

    fast = outcome(lambda: limits_mod.limited_unpackb(data, limits))
    assert fast == outcome(lambda: limits_mod._capped_unpackb(data, len(data), limits))


def test_limits_are_validated_and_copied() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        DecodeLimits(max_depth=0)
    with pytest.raises(ValueError, match="max_objects"):
        DecodeLimits(max_objects=True)
    assert DEFAULT_LIMITS.but(max_depth=7).max_depth == 7
    assert DEFAULT_LIMITS.but(max_depth=7) == DecodeLimits(max_depth=7)


# --- per codec and per store ------------------------------------------------------------------

thing = RecordType("thing", 1, [("id", F.u32)])
other = RecordType("other", 2, [("id", F.u32)])


@dataclasses.dataclass
class Doc:
    text: str
    tags: list[str] = dataclasses.field(default_factory=list)
    score: float = 0.0
    parent: int | None = None
    when: datetime.datetime | None = None
    kind: Literal["a", "b"] = "a"
    extra: dict[str, int] = dataclasses.field(default_factory=dict)
    anything: Any = None


def test_store_limits_reach_its_codecs_unless_a_codec_has_its_own() -> None:
    schema = Schema(thing, other)
    own = MsgpackCodec(limits=DecodeLimits(max_depth=50))
    values = Values(schema, limits=DecodeLimits(max_depth=3)).register(other, own)
    deep = msgpack.packb([[[[1]]]])
    with pytest.raises(ValueLimitError) as info:
        values.decode(thing, thing.encode(1), deep)
    assert info.value.cap == "max_depth" and info.value.limit == 3
    assert "thing v1" in str(info.value)  # the error names the record
    assert values.decode(other, other.encode(1), deep) == [[[[1]]]]
    dataclass_values = Values(schema, limits=DecodeLimits(max_str_len=3)).register(thing, Doc)
    with pytest.raises(ValueLimitError):
        dataclass_values.decode(thing, thing.encode(1), msgpack.packb({"text": "long"}))


# --- DataclassCodec type checks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "field"),
    [
        ({"text": 1}, "text"),
        ({"text": b"bytes"}, "text"),
        ({"text": "t", "tags": ["a", 2]}, "tags"),
        ({"text": "t", "tags": "ab"}, "tags"),
        ({"text": "t", "score": "1.5"}, "score"),
        ({"text": "t", "score": True}, "score"),
        ({"text": "t", "parent": 1.5}, "parent"),
        ({"text": "t", "parent": False}, "parent"),
        ({"text": "t", "when": 5}, "when"),
        ({"text": "t", "kind": "c"}, "kind"),
        ({"text": "t", "extra": {"a": "1"}}, "extra"),
    ],
)
def test_dataclass_codec_checks_declared_types(stored: dict[str, Any], field: str) -> None:
    data = msgpack.packb(stored)
    with pytest.raises(ValueDecodeError, match=f"field '{field}' is declared"):
        DataclassCodec(Doc).decode(data)
    unchecked = DataclassCodec(Doc, check_types=False).decode(data)  # the opt-out
    assert getattr(unchecked, field) == stored[field]


def test_dataclass_codec_accepts_well_typed_values() -> None:
    when = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
    doc = Doc("t", ["a"], 2, 3, when, "b", {"x": 1}, object())
    codec = DataclassCodec(Doc)
    stored = dataclasses.replace(doc, anything=[1, {"a": None}])
    assert codec.decode(codec.encode(stored)) == stored
    assert codec.decode(msgpack.packb({"text": "t", "score": 1})).score == 1  # int for float


# --- values too long for the binding ----------------------------------------------------------


def test_a_value_over_the_binding_cap_is_a_clean_encode_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2 GiB cannot be allocated in CI: the same check, with the cap lowered."""
    assert limits_mod.MAX_STORED_VALUE_BYTES == 2**31 - 1
    monkeypatch.setattr(limits_mod, "MAX_STORED_VALUE_BYTES", 100)
    values = Values(Schema(thing)).register(thing, bytes)
    with pytest.raises(ValueEncodeError, match="MAX_STORED_VALUE_BYTES=100") as info:
        values.encode(thing, b"x" * 101, thing.encode(1))
    assert "thing v1" in str(info.value)
    assert values.encode(thing, b"x" * 100) == b"x" * 100


# --- put refuses what get would refuse (issue 28, point 7) -------------------------------------

BLOB = RecordType("blob", 7, [("n", F.u32)])
#: small caps, so the property runs on small values: the default 64 MiB behaves the same
SMALL = DecodeLimits(
    max_value_bytes=400,
    max_str_len=60,
    max_bin_len=80,
    max_array_len=12,
    max_map_len=8,
    max_objects=40,
    max_depth=4,
)
SMALL_VALUES = Values(Schema(BLOB), limits=SMALL)

NESTED = st.recursive(
    st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=80)
    | st.binary(max_size=100),
    lambda inner: (
        st.lists(inner, max_size=15) | st.dictionaries(st.text(max_size=3), inner, max_size=10)
    ),
    max_leaves=60,
)


@settings(max_examples=150, deadline=None)
@given(NESTED)
def test_encode_refuses_exactly_what_decode_would_refuse(value: Any) -> None:
    try:
        data = SMALL_VALUES.encode(BLOB, value, BLOB.encode(1))
    except ValueLimitError as refused:
        assert refused.record == "blob" and refused.value == BLOB.encode(1)
        assert "put refused" in str(refused) and "0x0170" in str(refused)
        with pytest.raises(ValueLimitError):  # get would refuse the same bytes
            SMALL_VALUES.decode(BLOB, BLOB.encode(1), msgpack.packb(value))
    else:
        SMALL_VALUES.decode(BLOB, BLOB.encode(1), data)  # what put stores, get reads


def test_every_write_path_refuses_a_value_get_would_refuse(tmp_path: Any) -> None:
    from opendata_kv.store import SyncStore

    too_long = "s" * 61  # over max_str_len
    with SyncStore.open(str(tmp_path / "db"), SMALL_VALUES) as store:
        writes = {
            "put": lambda: store.put(BLOB, (1,), too_long),
            "put_raw": lambda: store.put_raw(BLOB.encode(2), msgpack.packb(too_long)),
            "put_many": lambda: store.put_many([(BLOB, (3,), too_long)]),
        }
        for name, write in writes.items():
            with pytest.raises(ValueLimitError, match="put refused") as caught:
                write()
            assert caught.value.cap == "max_str_len" and caught.value.record == "blob", name
        with pytest.raises(ValueLimitError, match="max_value_bytes"), store.batch() as batch:
            batch.put(BLOB, (4,), b"b" * 79)
            batch.put_raw(BLOB.encode(5), b"\xc5\x01\xf4" + b"x" * 500)  # bin16 of 500 bytes
        assert store.scan_all().to_list() == []  # nothing was written
        store.put(BLOB, (6,), "s" * 60)  # at the caps: stored and read back
        store.put_raw(BLOB.encode(7), b"\xc1 not msgpack" * 20)  # raw junk: get reports it
        assert store.get(BLOB, (6,)) == "s" * 60


def test_a_value_over_the_default_64_mib_cap_is_refused_at_put(tmp_path: Any) -> None:
    """The issue's case: a 100 MB value put, then refused by get. Refused at put now."""
    from opendata_kv.store import SyncStore

    with SyncStore.open(str(tmp_path / "db"), Schema(BLOB)) as store:
        with pytest.raises(ValueLimitError, match="max_value_bytes=67108864") as caught:
            store.put(BLOB, (1,), b"x" * (65 << 20))
        assert caught.value.record == "blob"
        assert store.get(BLOB, (1,)) is None
