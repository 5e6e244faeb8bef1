"""The C accelerator's Record builder (native/_accel/records.c, compiled per record type by
native/records.py) against the Python decoders it stands in for. On random record types' keys
(valid, truncated, damaged, foreign) and msgpack values (valid, float32, damaged, extensions,
nested or long past the caps) it returns exactly the Records the Python path builds, or None
whenever Python refuses a row (the scan then decodes that batch in Python). The store-level
scan property runs on both paths (OPENDATA_KV_NO_EXTENSIONS=1 too). OPENDATA_KV_ACCEL_EXAMPLES
raises the example counts."""

from __future__ import annotations

import dataclasses
import datetime
import os
import struct
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import run

from opendata_kv import RecordType, Schema, Store, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import KeyDecodeError, ValueDecodeError
from opendata_kv.ids import tid
from opendata_kv.keys.codecs import Field
from opendata_kv.native import accel, calls, records
from opendata_kv.store.scan import RawRecord, Record
from opendata_kv.values import Values
from opendata_kv.values.codecs import DataclassCodec, MsgpackCodec, RawCodec
from opendata_kv.values.limits import DEFAULT_LIMITS, DecodeLimits

EXAMPLES = int(os.environ.get("OPENDATA_KV_ACCEL_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
calls.status()  # decides the accelerator
ON = accel.reason() == "C accelerator"
needs_c = pytest.mark.skipif(not ON, reason="the C accelerator is off or not built")


def canon(x: Any) -> Any:
    """`x` with every type spelled out and floats as their bits (NaN, -0.0 compare)."""
    if isinstance(x, float):
        return ("float", struct.pack(">d", x))
    if isinstance(x, (tuple, list)):
        return (type(x), tuple(map(canon, x)))
    if isinstance(x, dict):
        return (dict, tuple((canon(k), canon(v)) for k, v in x.items()))
    return (type(x), x)


# --- keys -----------------------------------------------------------------------------------

I64 = (-(2**63), 2**63 - 1)
#: codecs C decodes, with their values
SCALARS: list[tuple[Field, st.SearchStrategy[Any]]] = [
    (F.u8, st.integers(0, 255)),
    (F.u16, st.integers(0, 2**16 - 1)),
    (F.u32, st.integers(0, 2**32 - 1)),
    (F.u64, st.integers(0, 2**64 - 1)),
    (F.i32, st.integers(-(2**31), 2**31 - 1)),
    (F.i64, st.integers(*I64)),
    (F.f64, st.floats(allow_nan=True, allow_infinity=True)),
    (F.boolean, st.booleans()),
    (F.string, st.text(max_size=6)),
    (F.bytes_, st.binary(max_size=6)),
    (F.var_u32, st.integers(0, 2**32 - 1)),
    (F.var_u64, st.integers(0, 2**64 - 1)),
    (F.fixed(3), st.binary(min_size=3, max_size=3)),
    (F.url_key, st.integers(0, 2**63 - 1)),
    (F.tid, st.integers(0, 2**63 - 1).map(tid.encode)),
]
TRAILING = [(F.trailing_string, st.text(max_size=6)), (F.trailing_bytes, st.binary(max_size=6))]
#: codecs C leaves to Python
OTHERS: list[tuple[Field, st.SearchStrategy[Any]]] = [
    (F.u128, st.integers(0, 2**128 - 1)),
    (F.lp_string, st.text(max_size=4)),
]


@st.composite
def layouts(draw: st.DrawFn, others: bool = False) -> tuple[RecordType, list[Any]]:
    """A record type of 1-4 fields (desc() of any non-trailing one, a trailing last field),
    and its fields' value strategies."""
    pool = SCALARS + (OTHERS if others else [])
    chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
    chosen = [(F.desc(f), s) if draw(st.booleans()) else (f, s) for f, s in chosen]
    if draw(st.booleans()):
        chosen.append(draw(st.sampled_from(TRAILING)))
    pairs = [(f"f{i}", field) for i, (field, _) in enumerate(chosen)]
    record_type = RecordType("r", draw(st.integers(1, 15)), pairs)
    return record_type, [s for _, s in chosen]


#: terminators, escapes, bool bytes, sign bits and varint length codes
POKES = [0x00, 0x01, 0x02, 0x03, 0x20, 0x40, 0x7F, 0x80, 0xC0, 0xFD, 0xFE, 0xFF]


@st.composite
def damaged(draw: st.DrawFn, good: bytes, head: bytes) -> bytes:
    """`good` or a damaged copy: cut, a byte changed, junk after it, anything after the head,
    or no head at all."""
    how = draw(st.sampled_from(["good", "good", "cut", "flip", "poke", "junk", "tail", "foreign"]))
    if how == "cut":
        return good[: draw(st.integers(0, max(0, len(good) - 1)))]
    if how == "flip" and len(good) > len(head):
        at = draw(st.integers(len(head), len(good) - 1))
        return good[:at] + bytes([good[at] ^ draw(st.integers(1, 255))]) + good[at + 1 :]
    if how == "poke" and len(good) > len(head):  # a byte set to a value codecs care about
        at = draw(st.integers(len(head), len(good) - 1))
        return good[:at] + bytes([draw(st.sampled_from(POKES))]) + good[at + 1 :]
    if how == "junk":
        return good + draw(st.binary(min_size=1, max_size=4))
    if how == "tail":
        return head + draw(st.binary(max_size=12))
    if how == "foreign":
        return draw(st.binary(max_size=12))
    return good


@st.composite
def key_batches(draw: st.DrawFn, others: bool = False) -> tuple[RecordType, list[bytes]]:
    record_type, strategies = draw(layouts(others))
    keys = []
    for _ in range(draw(st.integers(1, 6))):
        good = record_type.encode(*[draw(s) for s in strategies])
        keys.append(draw(damaged(good, record_type.head)))
    return record_type, keys


def python_keys(record_type: RecordType, keys: list[bytes]) -> list[Any] | None:
    """The keys as RecordType.decode makes them, None when it refuses one."""
    try:
        return [record_type.decode(key) for key in keys]
    except KeyDecodeError:
        return None


def c_decoder(
    record_type: RecordType, codec: Any, shape: str = "records", upgrade: Any = None
) -> Any:
    decode = records.decoder(record_type, codec, upgrade, shape, Record)
    assert decode is not None
    return decode


@needs_c
@FUZZ
@given(key_batches())
def test_keys_decode_as_the_record_type_decodes_them(batch: tuple[RecordType, list[bytes]]) -> None:
    record_type, keys = batch
    values = [b"v%d" % i for i in range(len(keys))]
    expected = python_keys(record_type, keys)
    decode = c_decoder(record_type, RawCodec())
    prefixes = [False] + ([True] if all(k.startswith(record_type.head) for k in keys) else [])
    for prefixed in prefixes:
        for key, value in zip(keys, values, strict=True):  # one by one: no bad key hides another
            one = python_keys(record_type, [key])
            assert (decode([key], [value], prefixed) is None) == (one is None), key
        got = decode(keys, values, prefixed)
        if expected is None:
            assert got is None
            continue
        assert got is not None, keys
        want = [Record(k, v, raw) for k, v, raw in zip(expected, values, keys, strict=True)]
        assert canon(got) == canon(want)
        for record, key in zip(got, keys, strict=True):
            assert type(record) is Record and type(record.key) is record_type.Key
            assert record.raw_key is key  # the row's own bytes object


@needs_c
@pytest.mark.parametrize(
    ("fields", "end"),
    [
        ([F.var_u32], b""),
        ([F.desc(F.var_u64)], b""),
        ([F.string], b"\x00"),
        ([F.desc(F.bytes_)], b"\xff"),
        ([F.trailing_string], b""),
        ([F.boolean, F.desc(F.boolean)], b""),
        ([F.u8, F.desc(F.u8)], b""),
    ],
    ids=repr,
)
def test_every_short_key(fields: list[Field], end: bytes) -> None:
    """Every key of up to two bytes after the head (and these followed by `end`, a terminated
    field's terminator), one by one: C takes exactly those the record type decodes, to the
    same values; and none of them under another head."""
    record_type = RecordType("e", 7, [(f"f{i}", f) for i, f in enumerate(fields)])
    decode = c_decoder(record_type, RawCodec())
    head = record_type.head
    tails = [b""] + [bytes([a]) for a in range(256)]
    tails += [bytes([a, b]) for a in range(256) for b in range(256)]
    if end:
        tails += [tail + end for tail in tails]
    taken = 0
    for tail in tails:
        key = head + tail
        want = python_keys(record_type, [key])
        got = decode([key], [b""], True)
        if want is None:
            assert got is None, key
        else:
            taken += 1
            assert got is not None, key
            assert canon(got[0].key) == canon(want[0]), key
            assert decode([bytes([head[0] ^ 1]) + key[1:]], [b""], False) is None
    assert taken  # some of them are keys


@needs_c
@pytest.mark.parametrize(
    "field", [F.var_u32, F.var_u64, F.desc(F.var_u32), F.desc(F.var_u64)], ids=repr
)
def test_every_varint_length_code(field: Field) -> None:
    """Every first byte of a var_u32 / var_u64 (its length code) before 0-9 more bytes of a
    few fills: C takes exactly the shortest encodings within the codec's range."""
    record_type = RecordType("e", 8, [("n", field)])
    decode = c_decoder(record_type, RawCodec())
    taken = 0
    for first in range(256):
        for size in range(10):
            for fill in (0x00, 0x01, 0x5A, 0xFF):
                key = record_type.head + bytes([first]) + bytes([fill]) * size
                want = python_keys(record_type, [key])
                got = decode([key], [b""], True)
                assert (got is None) == (want is None), key
                if want is not None and got is not None:
                    taken += 1
                    assert canon(got[0].key) == canon(want[0]), key
    assert taken


@needs_c
@pytest.mark.parametrize(
    "field", [F.tid, F.url_key, F.desc(F.tid), F.i64, F.desc(F.f64), F.u64], ids=repr
)
def test_every_first_byte_of_an_eight_byte_field(field: Field) -> None:
    """Every first byte (the sign or top bit) of an 8-byte field before a few fills, and one
    byte short or long: C takes exactly what the codec decodes, to the same value."""
    record_type = RecordType("e", 9, [("n", field)])
    decode = c_decoder(record_type, RawCodec())
    for first in range(256):
        for fill in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            for size in (6, 7, 8):
                key = record_type.head + bytes([first]) + bytes([fill]) * size
                want = python_keys(record_type, [key])
                got = decode([key], [b""], True)
                assert (got is None) == (want is None), key
                if want is not None and got is not None:
                    assert canon(got[0].key) == canon(want[0]), key


@needs_c
@FUZZ
@given(key_batches(others=True))
def test_only_the_codecs_c_decodes_get_a_decoder(batch: tuple[RecordType, list[bytes]]) -> None:
    record_type, _ = batch
    supported = all(
        any(f is c or (type(f) is F.Desc and f.inner is c) for c, _ in SCALARS + TRAILING)
        or type(f) is F.Fixed
        or (type(f) is F.Desc and type(f.inner) is F.Fixed)
        for _, f in record_type.fields
    )
    decode = records.decoder(record_type, RawCodec(), None, "records", Record)
    assert (decode is not None) == supported


class PostKey(NamedTuple):
    repo: Annotated[str, F.string]
    at: Annotated[int, F.desc(F.u64)]


@needs_c
def test_declared_key_classes_and_shapes() -> None:
    record_type = RecordType("post", 3, PostKey)
    keys = [record_type.encode("did:a", 5), record_type.encode("did:\x00b", 2**64 - 1)]
    data = [msgpack.packb({"t": 1}), msgpack.packb([1, "x"])]
    got = c_decoder(record_type, MsgpackCodec())(keys, data, False)
    assert got == [
        Record(record_type.decode(k), msgpack.unpackb(d), k)
        for k, d in zip(keys, data, strict=True)
    ]
    assert type(got[0].key) is record_type.Key and got[0].key.repo == "did:a"
    only_keys = c_decoder(record_type, MsgpackCodec(), "keys")(keys, data, True)
    assert [r.value for r in only_keys] == [None, None] and only_keys[1].key.at == 2**64 - 1
    only_values = c_decoder(record_type, MsgpackCodec(), "values")(keys, [b"\xc3", b"\x01"], True)
    assert [(r.key, r.value) for r in only_values] == [(None, True), (None, 1)]
    # extended layouts (a header, a suffix ...) keep their Python decoder
    extended = RecordType("ext", 4, [("a", F.u8)], suffix=b"!")
    assert records.decoder(extended, MsgpackCodec(), None, "records", Record) is None


# --- values ---------------------------------------------------------------------------------

KEYS = st.text(max_size=6) | st.integers(-3, 300) | st.binary(max_size=3) | st.booleans()
PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-40, 300)
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(KEYS, kids, max_size=4),
    max_leaves=12,
)
UTC = datetime.timezone.utc
EXTRA = (
    st.datetimes(timezones=st.just(UTC)).map(lambda d: ("dt", d))
    | st.binary(max_size=5).map(lambda b: ("ext", msgpack.ExtType(5, b)))
    | st.integers(1, 140).map(lambda n: ("deep", n))
)


HUGE = [
    b"\xdd\xff\xff\xff\xff",
    b"\xdf\x7f\xff\xff\xff",
    b"\xdb\xff\xff\xff\xf0",
    b"\xc6\x7f\xff\xff\xff",
]


@st.composite
def value_bytes(draw: st.DrawFn) -> bytes:
    """msgpack bytes of a plain value (float32 or float64), one holding an extension or
    nested deep, or a damaged copy: cut, a byte changed, junk, a huge length header."""
    if draw(st.integers(0, 5)) == 0:
        kind, extra = draw(EXTRA)
        value: Any = {"x": [extra]}
        if kind == "deep":  # `extra` lists, one in the other
            value = []
            for _ in range(extra - 1):
                value = [value]
        good = msgpack.packb(value, use_bin_type=True, datetime=True)
    else:
        value = draw(PLAIN)
        try:
            good = msgpack.packb(value, use_bin_type=True, use_single_float=draw(st.booleans()))
        except OverflowError:  # a float32 cannot hold it
            good = msgpack.packb(value, use_bin_type=True)
    how = draw(st.sampled_from(["good", "good", "good", "cut", "flip", "junk", "huge"]))
    at = draw(st.integers(0, len(good) - 1))
    if how == "cut":
        return good[:at]
    if how == "flip":
        return good[:at] + bytes([good[at] ^ draw(st.integers(1, 255))]) + good[at + 1 :]
    if how == "junk":
        return good + draw(st.binary(min_size=1, max_size=3))
    if how == "huge":  # an array, map, str or bin header claiming ~2**31 or more
        return good[:at] + draw(st.sampled_from(HUGE)) + good[at:]
    return good


def depth(value: Any) -> int:
    if type(value) is list:
        return 1 + max(map(depth, value), default=0)
    if type(value) is dict:
        return 1 + max(map(depth, value.values()), default=0)
    return 0


def plain(value: Any) -> bool:
    """No extension (timestamp, ExtType) anywhere in `value`."""
    if isinstance(value, (datetime.datetime, msgpack.ExtType)):
        return False
    if isinstance(value, list):
        return all(map(plain, value))
    if isinstance(value, dict):
        return all(map(plain, value.values())) and all(map(plain, value))
    return True


VALUES_ONLY = RecordType("v", 1, [("a", F.u8)])
LIMITS = [
    DEFAULT_LIMITS,
    DecodeLimits(max_depth=3, max_str_len=24),  # values over 24 bytes: the capped path
]


@needs_c
@FUZZ
@given(st.lists(value_bytes(), min_size=1, max_size=5), st.sampled_from(LIMITS))
def test_values_decode_as_the_msgpack_codec_decodes_them(
    datas: list[bytes], limits: DecodeLimits
) -> None:
    codec = MsgpackCodec(limits=limits)
    decode = c_decoder(VALUES_ONLY, codec, "values")
    expected: list[Any] = []
    refused = False
    c_takes = True
    for data in datas:  # one by one first: no refused value hides another
        one = decode([b"k"], [data], True)
        try:
            value = codec.decode(data)
        except ValueDecodeError:
            refused = True
            assert one is None, data
            continue
        takes = plain(value) and len(data) <= limits.uncapped_bytes
        takes = takes and depth(value) <= limits.max_depth
        if takes:
            assert one is not None and canon(one[0].value) == canon(value), data
        else:
            assert one is None, data
        expected.append(value)
        c_takes = c_takes and takes
    got = decode([b"k"] * len(datas), datas, True)
    if refused or not c_takes:
        assert got is None
        return
    assert got is not None, datas
    assert canon([r.value for r in got]) == canon(expected)
    assert all(type(r) is Record and r.key is None for r in got)


@needs_c
def test_map_keys_are_interned_as_msgpack_interns_them() -> None:
    record_type = RecordType("v", 1, [("a", F.u8)])
    datas = [msgpack.packb({"name" + "x" * n: n, "é": 1}) for n in range(40)] * 2
    got = c_decoder(record_type, MsgpackCodec(), "values")([b"k"] * 80, datas, True)
    assert got is not None
    for record, data in zip(got, datas, strict=True):
        reference = msgpack.unpackb(data, raw=False, strict_map_key=False)
        assert record.value == reference
        for mine, theirs in zip(record.value, reference, strict=True):
            assert mine is theirs  # the interned str


@needs_c
def test_upgrades_and_python_codecs() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int = 0

    record_type = RecordType("p", 1, [("a", F.u16)])
    keys = [record_type.encode(n) for n in range(3)]
    datas = [msgpack.packb({"x": n}) for n in range(3)]
    got = c_decoder(record_type, DataclassCodec(Point))(keys, datas, True)
    assert [r.value for r in got] == [Point(0), Point(1), Point(2)]
    with pytest.raises(ValueDecodeError):  # a Python codec's own error, as the scan gets it
        c_decoder(record_type, DataclassCodec(Point))(keys, [b"\x01"] * 3, True)
    upgraded = c_decoder(record_type, MsgpackCodec(), upgrade=lambda v: ("up", v))
    assert [r.value for r in upgraded(keys, datas, True)] == [("up", {"x": n}) for n in range(3)]

    def refuse(value: Any) -> Any:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):  # the scan decodes such a batch in Python, which names it
        c_decoder(record_type, MsgpackCodec(), upgrade=refuse)(keys, datas, True)
    assert c_decoder(record_type, RawCodec())([], [], False) == []
    with pytest.raises(ValueError):
        c_decoder(record_type, RawCodec())(keys, datas[:1], False)


# --- scans, on both paths -------------------------------------------------------------------

SCANNED = RecordType("s", 2, [("who", F.string), ("n", F.desc(F.u32))])
ROWS = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from(["int", "map", "dt", "badvalue", "badkey"])),
    max_size=40,
)


def _value(n: int, kind: str) -> Any:
    if kind == "map":
        return {"n": n, "f": float(n) / 3, "s": "x" * n}
    if kind == "dt":
        return datetime.datetime(2026, 1, 1, n % 24, tzinfo=UTC)
    return n


@settings(max_examples=max(10, EXAMPLES // 6), deadline=None)
@given(
    ROWS,
    st.sampled_from(["raise", "skip", "raw"]),
    st.booleans(),
    st.sampled_from(["records", "keys", "values"]),
)
def test_scans_yield_what_the_reference_decoders_make(
    rows: list[tuple[int, str]], on_error: str, upgrade: bool, shape: str
) -> None:
    """Typed rows, rows whose value or key does not decode, and timestamp values (left to
    Python): a scan yields what decoding each row on its own gives, with the same errors."""
    record_type = SCANNED
    schema = Schema(record_type)
    values = Values(schema)
    if upgrade:
        values.register(record_type, MsgpackCodec(), upgrade=_upgrade)
    with SyncStore.open("memory://", schema, values=values) as store:
        with store.batch() as batch:
            for n, kind in rows:
                key = record_type.encode(f"w{n % 3}", n)
                if kind == "badvalue":
                    batch.put_raw(key, b"\xc1")
                elif kind == "badkey":
                    batch.put_raw(record_type.head + b"w\x00\x01" + bytes([n]), msgpack.packb(n))
                else:
                    batch.put_raw(key, msgpack.packb(_value(n, kind), datetime=True))
        raws = [r for r in store.scan(record_type).undecoded()]
        expected: list[Any] = []
        bad: list[Exception] = []
        error: Exception | None = None
        for raw in raws:
            try:
                key = None if shape == "values" else record_type.decode(raw.raw_key)
                value = (
                    None if shape == "keys" else values.decode(record_type, raw.raw_key, raw.value)
                )
                expected.append(Record(key, value, raw.raw_key))
            except (KeyDecodeError, ValueDecodeError) as exc:
                bad.append(exc)
                if on_error == "raise":
                    error = exc
                    break
                if on_error == "raw":
                    expected.append(RawRecord(raw.raw_key, raw.value, raw.raw_key, exc))
        scan = store.scan(record_type, on_error=on_error, batch_size=8)
        source: Callable[[], Any] = {
            "records": lambda: scan,
            "keys": lambda: scan.keys(),
            "values": lambda: scan.values(),
        }[shape]
        if error is not None:
            with pytest.raises(type(error)) as raised:
                list(source())
            assert str(raised.value) == str(error)
            return
        got = list(source())
        if shape != "records":  # keys() / values() yield that item of each row (raw ones too)
            expected = [row[0 if shape == "keys" else 1] for row in expected]
        assert canon([_shown(g) for g in got]) == canon([_shown(e) for e in expected])
        assert (scan.failed, scan.last_error is None) == (len(bad), not bad)


def _upgrade(value: Any) -> Any:
    return ("v2", value)


def _shown(row: Any) -> Any:
    """A row with its error as (class, message) (exceptions do not compare equal)."""
    if isinstance(row, RawRecord):
        return ("raw", row.key, row.value, type(row.error), str(row.error))
    return row


def test_the_decoder_follows_the_accelerator() -> None:
    record_type = RecordType("q", 1, [("a", F.u8)])
    codec = MsgpackCodec()
    decode = records.decoder(record_type, codec, None, "records", Record)
    assert (decode is not None) == ON
    assert records.decoder(record_type, codec, None, "records", Record) is decode  # compiled once


# --- async iteration (records.c's ScanRows, or the async generator on the pure path) --------


def test_async_for_mixes_with_next_chunk_has_more_and_breaks() -> None:
    """`async for` reads the Scan's position at every step: next_chunk() and has_more() taken
    between its steps, a break and a new `async for`, all continue from the same row."""
    record_type = RecordType("a", 3, [("n", F.u16)])

    async def main() -> list[Any]:
        async with Store.open("memory://", Schema(record_type)) as store:
            async with store.batch() as batch:
                for n in range(300):
                    batch.put(record_type, (n,), n)
            scan = store.scan(record_type, batch_size=16)
            seen: list[Any] = []
            async for record in scan:
                seen.append(record.value)
                if len(seen) == 5:
                    seen += [r.value for r in await scan.next_chunk(7)]
                    assert await scan.has_more()
                if len(seen) == 40:
                    break
            assert scan.position == record_type.encode(39)
            step = aiter(scan)
            seen.append((await anext(step)).value)
            async for record in scan:
                seen.append(record.value)
            with pytest.raises(StopAsyncIteration):  # and again, once at the end
                await anext(aiter(scan))
            return seen

    assert run(main()) == list(range(300))


def test_async_for_raises_what_the_fill_raises() -> None:
    record_type = RecordType("b", 4, [("n", F.u8)])

    async def main() -> None:
        async with Store.open("memory://", Schema(record_type)) as store:
            async with store.batch() as batch:
                for n in range(10):
                    batch.put_raw(record_type.encode(n), b"\xc1" if n == 7 else b"\x01")
            got = []
            with pytest.raises(ValueDecodeError):
                async for record in store.scan(record_type, batch_size=4):
                    got.append(record.key.n)
            assert got == [0, 1, 2, 3]  # the fetched batch holding the bad row is refused whole
            rows = [r async for r in store.scan(record_type, on_error="skip")]
            assert [r.key.n for r in rows] == [0, 1, 2, 3, 4, 5, 6, 8, 9]

    run(main())


@needs_c
def test_a_scan_step_is_an_awaitable_of_the_row() -> None:
    """The step ScanRows hands out completes at once with the row, through await, send and
    the iterator protocol alike; it is awaited once."""
    record_type = RecordType("c", 5, [("n", F.u8)])
    raw = record_type.encode(2)

    async def main() -> None:
        async with Store.open("memory://", Schema(record_type)) as store:
            for n, text in ((1, "one"), (2, "two"), (3, "three")):
                await store.put(record_type, (n,), text)
            rows = aiter(store.scan(record_type))
            assert type(rows).__name__ == "ScanRows"
            assert (await anext(rows)).value == "one"  # the Scan's __anext__ fills the buffer
            step = anext(rows)
            assert type(step).__name__ == "Ready"
            with pytest.raises(StopIteration) as stop:
                next(iter(step.__await__()))
            assert stop.value.value == Record(record_type.decode(raw), "two", raw)
            with pytest.raises(RuntimeError):
                step.send(None)
            step = anext(rows)
            with pytest.raises(KeyError):
                step.throw(KeyError("k"))
            step.close()
            with pytest.raises(StopAsyncIteration):
                await anext(rows)

    run(main())


def test_for_mixes_with_next_chunk_has_more_and_breaks() -> None:
    """The sync face's `for` (ScanRows with the face's step on the C path) likewise."""
    record_type = RecordType("d", 6, [("n", F.u16)])
    with SyncStore.open("memory://", Schema(record_type)) as sync:
        with sync.batch() as batch:
            for n in range(300):
                batch.put(record_type, (n,), n)
        scan = sync.scan(record_type, batch_size=16)
        seen: list[Any] = []
        for record in scan:
            seen.append(record.value)
            if len(seen) == 5:
                seen += [r.value for r in scan.next_chunk(7)]
                assert scan.has_more()
            if len(seen) == 40:
                break
        assert scan.position == record_type.encode(39)
        seen.append(next(scan).value)
        seen += [record.value for record in scan]
        assert list(scan) == [] and seen == list(range(300))
        with pytest.raises(StopIteration):
            next(iter(scan))
