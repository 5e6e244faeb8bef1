"""Property tests of the key layer: every field codec alone, then random RecordTypes.

The central invariant (DESIGN "Key layout"): comparing encoded keys as bytes gives the order of
the field tuples. Around it: exact round trips, prefix-freeness, scan prefixes and bounds,
agreement of the compiled fast path with the codec-by-codec reference path, and decoders that
on any malformed input raise only KeyDecodeError, never a wrong value or another exception.

Example counts follow the hypothesis profile chosen in conftest.py (OPENDATA_KV_FUZZ=long for
a long run); the heavier tests take a fraction of it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import pickle
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from opendata_kv.errors import KeyDecodeError, KeyEncodeError, OpendataKvError
from opendata_kv.keys import Field, RecordType, Schema, fields, prefix_successor

BASE = settings.default.max_examples


def scaled(fraction: float) -> settings:
    """A settings object running `fraction` of the profile's example count (at least 10)."""
    return settings(max_examples=max(10, int(BASE * fraction)))


# --- value order, independent of the encodings -------------------------------------------------


@functools.total_ordering
class Rev:
    """Wraps a sort key so that it compares the other way round (a desc field)."""

    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rev) and self.k == other.k

    def __lt__(self, other: Rev) -> bool:
        less: bool = other.k < self.k
        return less

    def __hash__(self) -> int:
        return hash(self.k)

    def __repr__(self) -> str:
        return f"Rev({self.k!r})"


def f64_bits(value: float) -> int:
    bits: int = struct.unpack(">Q", struct.pack(">d", value))[0]
    return bits


def from_bits(bits: int) -> float:
    value: float = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    return value


def f64_order(value: float) -> tuple[Any, ...]:
    """IEEE-754 totalOrder written from the meaning of the values, not from the encoding:
    -NaN (larger payload first) < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN."""
    if math.isnan(value):
        magnitude = f64_bits(value) & 0x7FFFFFFFFFFFFFFF
        return (2, magnitude) if math.copysign(1.0, value) > 0 else (-2, -magnitude)
    return (0, value, math.copysign(1.0, value))


def same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and NaNs apart by bits, and checks types."""
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and f64_bits(a) == f64_bits(b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def identity(value: Any) -> Any:
    return value


# --- one spec per codec ------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    name: str
    codec: Field
    values: st.SearchStrategy[Any]
    order: Callable[[Any], Any] = identity
    bad: tuple[Any, ...] = ()
    sliceable: bool = False  # str or bytes: a leading slice is a valid `partial`
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def trailing(self) -> bool:
        return self.codec.trailing


def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Uniform draws plus the edges and powers of two around them, where varints change size."""
    edges = {lo, hi, lo + 1, hi - 1, 0, 1} | {
        x for k in range(1, 129) for x in (1 << k, (1 << k) - 1, -(1 << k), -(1 << k) + 1)
    }
    inside = sorted(x for x in edges if lo <= x <= hi)
    return st.one_of(st.integers(lo, hi), st.sampled_from(inside))


SPECIAL = "\x00\x01\x02\x7f\xfe\xff\u0100\u07ff\u0800\uffff\U00010000\U0010ffff"
texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="ab" + SPECIAL, max_size=8),
)
binaries = st.one_of(
    st.binary(max_size=12),
    st.lists(st.sampled_from([0, 1, 2, 0x61, 0xFE, 0xFF]), max_size=8).map(bytes),
)
floats = st.one_of(
    st.floats(),
    st.integers(0, (1 << 64) - 1).map(from_bits),
    st.sampled_from(
        [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324, 1.5, -1.5]
    ),
)

NOT_INT = (None, "1", b"\x01", 1.0, [1], True, False)


def unsigned(name: str, bits: int) -> Spec:
    top = (1 << bits) - 1
    return Spec(name, getattr(fields, name), ints(0, top), bad=(*NOT_INT, -1, top + 1))


def signed(name: str, bits: int) -> Spec:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return Spec(name, getattr(fields, name), ints(lo, hi), bad=(*NOT_INT, lo - 1, hi + 1))


BASIC: list[Spec] = [
    unsigned("u8", 8),
    unsigned("u16", 16),
    unsigned("u32", 32),
    unsigned("u64", 64),
    unsigned("u128", 128),
    signed("i32", 32),
    signed("i64", 64),
    Spec(
        "f64",
        fields.f64,
        floats,
        f64_order,
        bad=(None, "1.0", b"", [1.0], True, 10**400, 2**53 + 1),
    ),
    Spec("boolean", fields.boolean, st.booleans(), bad=(None, 0, 1, "True", 2, b"\x01")),
    Spec("string", fields.string, texts, bad=(None, b"x", 1, "\ud800"), sliceable=True),
    Spec("bytes_", fields.bytes_, binaries, bad=(None, "x", 1, [1, 2], [5]), sliceable=True),
    # length-prefixed (RFC 0009): ordered by (byte length, bytes), not by the bytes alone
    Spec(
        "lp_string",
        fields.lp_string,
        texts,
        lambda v: (len(v.encode()), v.encode()),
        bad=(None, b"x", 1, "\ud800", "x" * 65536),
    ),
    Spec(
        "lp_bytes",
        fields.lp_bytes,
        binaries,
        lambda v: (len(v), v),
        bad=(None, "x", 1, [1, 2], b"x" * 65536),
    ),
    Spec("var_u32", fields.var_u32, ints(0, (1 << 32) - 1), bad=(*NOT_INT, -1, 1 << 32)),
    Spec("var_u64", fields.var_u64, ints(0, (1 << 64) - 1), bad=(*NOT_INT, -1, 1 << 64)),
    *(
        Spec(
            f"fixed({n})",
            fields.fixed(n),
            st.binary(min_size=n, max_size=n),
            bad=(None, "x" * n, b"x" * (n + 1), b"x" * (n - 1), n),
        )
        for n in (1, 2, 5)
    ),
]
TRAILING: list[Spec] = [
    Spec(
        "trailing_string",
        fields.trailing_string,
        texts,
        bad=(None, b"x", 1, "\ud800"),
        sliceable=True,
    ),
    Spec(
        "trailing_bytes",
        fields.trailing_bytes,
        binaries,
        bad=(None, "x", 1, [1, 2]),
        sliceable=True,
    ),
]


def id_specs() -> list[Spec]:
    """Specs for the identifier codecs (tid, url_key, muid, rkey) where this tree has them:
    they live over opendata_kv.ids and run through the same compiled plans."""
    found: list[Spec] = []
    top = (1 << 63) - 1
    if isinstance(getattr(fields, "tid", None), Field):
        from opendata_kv.ids import tid as tid_ids

        found.append(
            Spec(
                "tid",
                fields.tid,
                ints(0, top).map(tid_ids.encode),  # TID strings sort like their integers
                bad=(None, "not-a-tid", "3jzfcijpj2z2a\n", -1, 0, 5, top + 1, True, 1.5),
            )
        )
    if isinstance(getattr(fields, "url_key", None), Field):
        found.append(
            Spec("url_key", fields.url_key, ints(0, top), bad=(None, -1, top + 1, True, "1", 1.5))
        )
    if isinstance(getattr(fields, "muid", None), Field):
        from opendata_kv.ids.muid import Muid

        found.append(
            Spec(
                "muid",
                fields.muid,
                ints(0, (1 << 128) - 1).map(Muid.from_int),  # Muids order like their bytes
                bad=(None, "zz", b"x" * 16, 5),
            )
        )
    if callable(getattr(fields, "rkey", None)):
        found.append(
            Spec(
                "rkey",
                fields.rkey(),
                st.from_regex(r"[A-Za-z0-9._:~-]{1,24}", fullmatch=True).filter(
                    lambda r: r not in (".", "..")
                ),
                bad=(None, "", ".", "..", "a b", b"x", 1),
                sliceable=True,
                extra={"bad_partial": ("a b", b"x", 1)},
            )
        )
    return found


def desc(spec: Spec) -> Spec:
    order = spec.order
    return Spec(
        f"desc({spec.name})",
        fields.desc(spec.codec),
        spec.values,
        lambda v: Rev(order(v)),
        spec.bad,
        spec.sliceable,
        spec.extra,
    )


BASIC += id_specs()
DESC = [desc(s) for s in BASIC]
INNER = BASIC + DESC  # may stand anywhere in a key
ALL = INNER + TRAILING
BY_NAME = {s.name: s for s in ALL}


def test_every_public_codec_has_a_spec() -> None:
    public = {
        name
        for name in fields.__all__
        if isinstance(getattr(fields, name), Field) and name not in ("Field",)
    }
    assert public <= set(BY_NAME), public - set(BY_NAME)


def cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


# --- single codecs -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [s.name for s in ALL])
@given(data=st.data())
@scaled(1.0)
def test_codec_round_trip(name: str, data: st.DataObject) -> None:
    spec = BY_NAME[name]
    value = data.draw(spec.values, "value")
    encoded = spec.codec.encode(value)
    assert type(encoded) is bytes
    back = spec.codec.decode_all(encoded)
    assert same(back, value), (value, back, encoded.hex())
    # Decoding in the middle of a buffer consumes exactly the field.
    lead = data.draw(st.binary(max_size=4), "lead")
    tail = b"" if spec.trailing else data.draw(st.binary(max_size=4), "tail")
    got, end = spec.codec.decode(lead + encoded + tail, len(lead))
    assert same(got, value) and end == len(lead) + len(encoded)
    if spec.codec.width is not None:
        assert len(encoded) == spec.codec.width


@pytest.mark.parametrize("name", [s.name for s in ALL])
@given(data=st.data())
@scaled(1.0)
def test_codec_order(name: str, data: st.DataObject) -> None:
    """Bytes compare as the values do (reversed for desc); equal bytes iff equal values."""
    spec = BY_NAME[name]
    a = data.draw(spec.values, "a")
    b = data.draw(st.one_of(spec.values, st.just(a)), "b")
    ea, eb = spec.codec.encode(a), spec.codec.encode(b)
    assert cmp(spec.order(a), spec.order(b)) == cmp(ea, eb), (a, b, ea.hex(), eb.hex())


@pytest.mark.parametrize("name", [s.name for s in ALL])
@given(data=st.data())
@scaled(0.5)
def test_codec_sorting(name: str, data: st.DataObject) -> None:
    spec = BY_NAME[name]
    values = data.draw(st.lists(spec.values, max_size=12), "values")
    by_value = [spec.codec.encode(v) for v in sorted(values, key=spec.order)]
    assert by_value == sorted(spec.codec.encode(v) for v in values)


@pytest.mark.parametrize("name", [s.name for s in INNER])
@given(data=st.data())
@scaled(1.0)
def test_codec_prefix_free(name: str, data: st.DataObject) -> None:
    """No encoding is a proper prefix of another, so a field ends where its bytes say."""
    spec = BY_NAME[name]
    a, b = data.draw(spec.values, "a"), data.draw(spec.values, "b")
    ea, eb = spec.codec.encode(a), spec.codec.encode(b)
    if ea != eb:
        assert not eb.startswith(ea) and not ea.startswith(eb)
    value, end = spec.codec.decode(ea + eb, 0)
    assert same(value, a) and end == len(ea)


@pytest.mark.parametrize("name", [s.name for s in INNER if s.codec.struct_code is not None])
@given(raws=st.lists(st.one_of(st.integers(0, 2**63 - 1), st.integers(0, 2**64 - 1)), max_size=8))
@scaled(0.3)
def test_from_raw_many_is_from_raw_over_a_list(name: str, raws: list[int]) -> None:
    """A struct codec's batch conversion (decode_many's columns) equals from_raw per item,
    the error for a bad raw value (a tid with the top bit set) included."""
    codec = BY_NAME[name].codec
    raws = [r % (1 << (8 * (codec.width or 0))) for r in raws]

    def outcome(fn: Callable[[], list[Any]]) -> Any:
        try:
            return ("ok", repr(fn()))  # repr: NaN equals nothing
        except OpendataKvError as exc:
            return ("error", type(exc), str(exc))

    expected = outcome(lambda: [codec.from_raw(r) for r in raws])
    assert outcome(lambda: codec.from_raw_many(raws)) == expected


@pytest.mark.parametrize("name", [s.name for s in ALL])
@given(raw=st.binary(max_size=20))
@scaled(1.0)
def test_codec_decode_is_canonical(name: str, raw: bytes) -> None:
    """Any bytes either fail with KeyDecodeError or decode to a value encoding to those bytes."""
    spec = BY_NAME[name]
    try:
        value, end = spec.codec.decode(raw, 0)
    except KeyDecodeError:
        return
    assert spec.codec.encode(value) == raw[:end], (raw.hex(), value)


@pytest.mark.parametrize("name", [s.name for s in ALL])
def test_codec_rejects_bad_values(name: str) -> None:
    spec = BY_NAME[name]
    assert spec.bad, "every codec needs bad values"
    for bad in spec.bad:
        with pytest.raises(KeyEncodeError):
            spec.codec.encode(bad)
            pytest.fail(f"{name} encoded {bad!r}")


@pytest.mark.parametrize("name", [s.name for s in ALL if s.sliceable])
@given(data=st.data())
@scaled(1.0)
def test_codec_partial_is_a_prefix(name: str, data: st.DataObject) -> None:
    spec = BY_NAME[name]
    value = data.draw(spec.values, "value")
    cut = data.draw(st.integers(0, len(value)), "cut")
    encoded = spec.codec.encode(value)
    assert encoded.startswith(spec.codec.encode_partial(value[:cut]))
    other = data.draw(spec.values, "other")
    # A partial matches exactly the values that start with it.
    if not other.startswith(value[:cut]):
        assert not spec.codec.encode(other).startswith(spec.codec.encode_partial(value[:cut]))


@pytest.mark.parametrize("name", [s.name for s in ALL])
@given(data=st.data())
@settings(max_examples=5)
def test_codec_pickles(name: str, data: st.DataObject) -> None:
    spec = BY_NAME[name]
    value = data.draw(spec.values, "value")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(spec.codec, protocol))
        assert back == spec.codec and repr(back) == repr(spec.codec)
        assert back.encode(value) == spec.codec.encode(value)


def test_f64_special_values() -> None:
    f = fields.f64
    nans = (math.nan, -math.nan, from_bits(0x7FF0000000000001), from_bits(0xFFF4000000000000))
    for value in nans:
        assert f64_bits(f.decode_all(f.encode(value))) == f64_bits(value)
    assert f.encode(-0.0) < f.encode(0.0)
    assert f.encode(math.inf) < f.encode(math.nan) and f.encode(-math.nan) < f.encode(-math.inf)
    assert f.decode_all(f.encode(3)) == 3.0 and type(f.decode_all(f.encode(3))) is float


# --- random RecordTypes ------------------------------------------------------------------------


@st.composite
def layouts(draw: st.DrawFn, max_fields: int = 5) -> tuple[RecordType, list[Spec]]:
    specs = draw(st.lists(st.sampled_from(INNER), max_size=max_fields))
    if draw(st.booleans()) and len(specs) < max_fields + 1:
        specs.append(draw(st.sampled_from(TRAILING)))
    version = draw(st.integers(1, 255))
    record_type = draw(st.integers(1, 15))
    reserved = draw(st.integers(0, 15))
    keyspace = draw(st.sampled_from([b"", b"\x07", b"\x00", b"\xff\xff", b"sys\x00"]))
    rt = RecordType(
        "rand",
        record_type,
        [(f"f{i}", s.codec) for i, s in enumerate(specs)],
        version=version,
        reserved=reserved,
        keyspace=keyspace,
    )
    return rt, specs


def values_for(specs: Sequence[Spec]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(*(s.values for s in specs))


def sort_key(specs: Sequence[Spec], values: Sequence[Any]) -> tuple[Any, ...]:
    """The value-tuple order the encoded keys must follow (desc components reversed)."""
    return tuple(s.order(v) for s, v in zip(specs, values, strict=True))


@given(data=st.data())
@scaled(2.0)
def test_key_round_trip_and_paths_agree(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    values = data.draw(values_for(specs), "values")
    key = rt.encode(*values)
    assert type(key) is bytes and key.startswith(rt.head)
    assert key == rt.encode_by_field(values)
    assert key == rt.encode(**{f"f{i}": v for i, v in enumerate(values)})
    decoded = rt.decode(key)
    assert type(decoded) is rt.Key
    assert same(tuple(decoded), tuple(values)), (values, decoded)
    assert same(rt.decode_by_field(key), tuple(values))
    if not any(isinstance(v, float) and math.isnan(v) for v in values):
        assert decoded == rt.Key(values)
    assert decoded.encode() == key
    via_schema = Schema(rt).decode(key)
    assert type(via_schema) is rt.Key and same(tuple(via_schema), tuple(values))


@given(data=st.data())
@scaled(1.0)
def test_compiled_paths_take_valid_input(data: st.DataObject) -> None:
    """Valid keys never fall back to the reference paths: the compiled code really runs (a
    fast path that always fell back would pass every other test, only slowly)."""
    fallbacks: list[str] = []
    reference_decode = RecordType._decode_fallback
    reference_encode = RecordType.encode_by_field

    def counted_decode(self: RecordType, key: object) -> Any:
        fallbacks.append("decode")
        return reference_decode(self, key)

    def counted_encode(self: RecordType, values: Sequence[Any]) -> bytes:
        fallbacks.append("encode")
        return reference_encode(self, values)

    with (
        mock.patch.object(RecordType, "_decode_fallback", counted_decode),
        mock.patch.object(RecordType, "encode_by_field", counted_encode),
    ):
        rt, specs = data.draw(layouts(), "layout")  # compiled while patched
        values = data.draw(values_for(specs), "values")
        key = rt.encode(*values)
        assert same(tuple(rt.decode(key)), tuple(values))
        assert fallbacks == []
        with pytest.raises(KeyDecodeError):  # and invalid input does fall back
            rt.decode(key + b"\x00" if not specs or not specs[-1].trailing else key[:1])
        assert fallbacks == ["decode"]


@given(data=st.data())
@scaled(2.0)
def test_key_order_is_tuple_order(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    rows = data.draw(st.lists(values_for(specs), min_size=2, max_size=6), "rows")
    # Near neighbours: copy a leading run of one row into another, so later fields decide.
    a, b = rows[0], rows[1]
    cut = data.draw(st.integers(0, len(specs)), "cut")
    rows.append(a[:cut] + b[cut:])
    by_value = [rt.encode(*r) for r in sorted(rows, key=lambda r: sort_key(specs, r))]
    assert by_value == sorted(rt.encode(*r) for r in rows)
    for x in rows:
        for y in rows:
            assert cmp(sort_key(specs, x), sort_key(specs, y)) == cmp(rt.encode(*x), rt.encode(*y))


@given(data=st.data())
@scaled(2.0)
def test_prefixes_and_ranges(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    values = data.draw(values_for(specs), "values")
    other = data.draw(values_for(specs), "other")
    key = rt.encode(*values)
    other_key = rt.encode(*other)
    for n in range(len(specs) + 1):
        prefix = rt.prefix(*values[:n])
        assert key.startswith(prefix)
        start, end = rt.range(*values[:n])
        assert start == prefix and end == prefix_successor(prefix)
        assert start <= key and (end is None or key < end)
        # The range holds exactly the keys whose leading n fields are equal.
        inside = start <= other_key and (end is None or other_key < end)
        if n and n == len(specs) and specs[-1].trailing:
            # An unterminated last field cannot say where it ends: a prefix holding every
            # field matches the keys whose last field starts with the given value.
            expect = all(
                same(x, y) for x, y in zip(values[:-1], other[:-1], strict=True)
            ) and other[-1].startswith(values[-1])
        else:
            expect = all(same(x, y) for x, y in zip(values[:n], other[:n], strict=True))
        assert inside == expect
        if n < len(specs) and specs[n].sliceable:
            cut = data.draw(st.integers(0, len(values[n])), f"cut{n}")
            part = values[n][:cut]
            pprefix = rt.prefix(*values[:n], partial=part)
            assert key.startswith(pprefix) and pprefix.startswith(prefix)
            pstart, pend = rt.range(*values[:n], partial=part)
            assert pstart == pprefix and pstart <= key and (pend is None or key < pend)
            inside = pstart <= other_key and (pend is None or other_key < pend)
            assert inside == (
                all(same(x, y) for x, y in zip(values[:n], other[:n], strict=True))
                and other[n].startswith(part)
            )
    with pytest.raises(KeyEncodeError):
        rt.prefix(*values, None)


def _check_decoded(rt: RecordType, raw: Any, got: Any) -> None:
    """A decode that did not raise must be exact: re-encoding gives the input bytes back."""
    assert isinstance(got, rt.Key)
    assert rt.encode(*got) == bytes(raw)
    assert same(tuple(got), rt.decode_by_field(bytes(raw)))
    for (_, codec), value in zip(rt.fields, got, strict=True):
        if isinstance(value, (bytes, bytearray, memoryview)):
            assert type(value) is bytes, (codec, type(value))


def _decode_both(rt: RecordType, schema: Schema, raw: Any) -> None:
    for by_schema, decode in ((False, rt.decode), (True, schema.decode)):
        try:
            got = decode(raw)
        except KeyDecodeError as exc:
            assert isinstance(exc, OpendataKvError)
            continue
        # Any other exception propagates and fails the test. (`decode is schema.decode` was
        # never true: each attribute access makes a new bound method.)
        if by_schema and type(got) is not rt.Key:
            # another layout of the schema owns these bytes; it must be exact too
            assert got.record_type.encode(*got) == bytes(raw)
            continue
        _check_decoded(rt, raw, got)


def _schema_for(rt: RecordType) -> Schema:
    """The random layout plus a neighbour in the empty keyspace (unless the heads clash)."""
    schema = Schema(rt)
    neighbour = RecordType("n", 3, [("a", fields.string), ("b", fields.u8)], version=2)
    with contextlib.suppress(OpendataKvError):
        schema.add(neighbour)
    return schema


@given(data=st.data())
@scaled(2.0)
def test_malformed_keys_raise_only_key_decode_error(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    schema = _schema_for(rt)
    values = data.draw(values_for(specs), "values")
    key = rt.encode(*values)
    # every truncation
    for n in range(len(key)):
        _decode_both(rt, schema, key[:n])
    # single-byte mutations
    for _ in range(4):
        i = data.draw(st.integers(0, len(key) - 1), "index")
        byte = data.draw(st.integers(0, 255), "byte")
        mutated = key[:i] + bytes((byte,)) + key[i + 1 :]
        _decode_both(rt, schema, mutated)
    # extra bytes after the key
    extra = data.draw(st.binary(min_size=1, max_size=6), "extra")
    _decode_both(rt, schema, key + extra)
    # random bodies behind a valid head, and random bytes
    _decode_both(rt, schema, rt.head + data.draw(st.binary(max_size=24), "body"))
    _decode_both(rt, schema, data.draw(st.binary(max_size=24), "raw"))


@given(data=st.data())
@scaled(1.0)
def test_bytes_like_and_non_bytes_input(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    schema = _schema_for(rt)
    values = data.draw(values_for(specs), "values")
    key = rt.encode(*values)
    for raw in (bytearray(key), memoryview(key), memoryview(bytearray(key))):
        for decode in (rt.decode, schema.decode):
            got = decode(raw)
            assert type(got) is rt.Key
            _check_decoded(rt, key, got)
    for raw in (key.hex(), key.decode("latin-1"), 5, None, 1.5, [1, 16], (1, 16)):
        for decode in (rt.decode, schema.decode):
            with pytest.raises(KeyDecodeError):
                decode(raw)


@given(data=st.data())
@scaled(1.0)
def test_bad_values_name_the_field(data: st.DataObject) -> None:
    rt, specs = data.draw(layouts(), "layout")
    assume(specs)
    values = list(data.draw(values_for(specs), "values"))
    i = data.draw(st.integers(0, len(specs) - 1), "index")
    bad = data.draw(st.sampled_from(specs[i].bad), "bad")
    values[i] = bad
    for call in (
        lambda: rt.encode(*values),
        lambda: rt.encode_by_field(values),
        lambda: rt.key(*values),
        lambda: rt.prefix(*values[: i + 1]),
        lambda: rt.range(*values[: i + 1]),
    ):
        with pytest.raises(KeyEncodeError) as info:
            call()
        assert f"'f{i}'" in str(info.value), str(info.value)
    bad_partials = specs[i].extra.get("bad_partial", specs[i].bad)
    if specs[i].sliceable and bad is not None and bad in bad_partials:  # None: "no partial"
        with pytest.raises(KeyEncodeError) as info:
            rt.prefix(*values[:i], partial=bad)
        assert f"'f{i}'" in str(info.value)
