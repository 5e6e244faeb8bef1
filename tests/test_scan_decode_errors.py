"""Rows that fail to decode: the per-scan on_error policy (raise, skip and count, raw with the
error), the batch key decoder it sits on, and put_many streaming into batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.errors import KeyDecodeError, ValueDecodeError
from opendata_kv.ids import tid
from opendata_kv.keys.plan import compile_decode_many
from opendata_kv.native import calls, wire
from opendata_kv.store.scan import DECODE_CHUNK, RawRecord

num = RecordType("num", 1, [("n", F.u64)])
pair = RecordType("pair", 2, [("a", F.u32), ("b", F.u16)])
name = RecordType("name", 3, [("who", F.string), ("at", F.desc(F.u64))])
SCHEMA = Schema(num, pair, name)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except KeyDecodeError as exc:
        return ("error", type(exc), str(exc))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([num, pair, name]),
    st.lists(
        st.one_of(
            st.integers(0, 2**16 - 1).map(lambda n: ("valid", n)),
            st.binary(max_size=12).map(lambda b: ("suffix", b)),
            st.binary(max_size=12).map(lambda b: ("garbage", b)),
        ),
        max_size=20,
    ),
)
def test_decode_many_is_decode_over_a_list(record_type: RecordType, items: list[Any]) -> None:
    keys = []
    for kind, item in items:
        if kind == "valid":
            fields = {num: (item,), pair: (item, item), name: (f"w{item}", item)}[record_type]
            keys.append(record_type.encode(*fields))
        elif kind == "suffix":  # the right prefix, anything after it
            keys.append(record_type.head + item)
        else:
            keys.append(item)
    expected: list[Any] = []
    for key in keys:
        outcome = _outcome(record_type.decode, key)
        if outcome[0] == "error":
            expected = outcome  # the first bad key's error, as decode raises it
            break
        expected.append(outcome[1])
    got = _outcome(record_type.decode_many, keys)
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert got == ("ok", expected)
        assert all(type(k) is record_type.Key for k in got[1])


# Layouts decode_many takes column by column: a terminated run between struct fields.
event = RecordType("event", 4, [("actor", F.string), ("at", F.desc(F.tid))])
mixed = RecordType(
    "mixed",
    5,
    [
        ("k", F.u16),
        ("blob", F.bytes_),
        ("text", F.string),
        ("s", F.desc(F.i32)),
        ("x", F.f64),
        ("t", F.tid),
    ],
)
# struct fields only, some converted: one unpack, then the conversions column by column
feed = RecordType("feed", 7, [("at", F.desc(F.tid)), ("n", F.i32)])
RUN_FIELDS = {
    event: st.tuples(st.text(max_size=5), st.integers(0, 2**63 - 1).map(tid.encode)),
    feed: st.tuples(st.integers(0, 2**63 - 1).map(tid.encode), st.integers(-(2**31), 2**31 - 1)),
    mixed: st.tuples(
        st.integers(0, 2**16 - 1),
        st.binary(max_size=4),
        st.text(max_size=4),
        st.integers(-(2**31), 2**31 - 1),
        st.floats(allow_nan=False),
        st.integers(0, 2**63 - 1).map(tid.encode),
    ),
}


def _mutate(key: bytes, op: str, at: int, byte: int) -> bytes:
    at %= len(key) + 1
    if op == "cut":
        return key[:at]
    if op == "insert":
        return key[:at] + bytes([byte]) + key[at:]
    return key[:at] + bytes([byte]) + key[at + 1 :]  # "set" (appends at the end)


def _no_fallback(key: bytes) -> Any:
    raise AssertionError(f"decode_many fell back to decode for {key!r}")


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([event, mixed, feed]), st.data())
def test_run_layouts_decode_many_is_decode_over_a_list(
    record_type: RecordType, data: st.DataObject
) -> None:
    """The columnar decode_many (string + desc(tid) and the like) equals decode key by key,
    bad keys included (the first one's error, as decode raises it); valid batches never need
    the per-key path."""
    valid = RUN_FIELDS[record_type].map(lambda v: record_type.encode(*v))
    head = record_type.head
    mutated = st.tuples(
        valid,
        st.sampled_from(["cut", "insert", "set"]),
        st.integers(0, 30),
        st.sampled_from([0, 1, 3, 0x80, 0xC3, 0xFF]),  # NUL, escape, bad escape, bad UTF-8
    ).map(lambda a: _mutate(*a))
    kinds = [valid, valid, mutated, mutated, st.binary(max_size=14).map(lambda b: head + b)]
    if record_type is feed:  # the inverted value of desc(tid) with the top bit set
        kinds.append(
            st.binary(min_size=12, max_size=12).map(lambda b: head + bytes([b[0] & 0x7F]) + b[1:])
        )
    if record_type is event:
        # a desc(tid) tail whose inverted value has the top bit set: not a TID
        kinds.append(
            st.tuples(st.text(max_size=3), st.integers(0, 2**63 - 1)).map(
                lambda a: head + a[0].encode() + b"\x00" + a[1].to_bytes(8, "big")
            )
        )
    keys = data.draw(st.lists(st.one_of(kinds), max_size=12))
    expected: list[Any] = []
    for key in keys:
        outcome = _outcome(record_type.decode, key)
        if outcome[0] == "error":
            expected = outcome
            break
        expected.append(outcome[1])
    for prefixed in (False, True) if all(k.startswith(head) for k in keys) else (False,):
        got = _outcome(lambda ks, p=prefixed: record_type.decode_many(ks, prefixed=p), keys)
        if isinstance(expected, tuple):
            assert got == expected
        else:
            assert got == ("ok", expected)
            assert all(type(k) is record_type.Key for k in got[1])
    if not isinstance(expected, tuple):
        fields = [f for _, f in record_type.fields]
        strict = compile_decode_many(head, fields, record_type.Key, _no_fallback)
        assert strict(keys) == expected


EDIT_BYTES = (0, 1, 2, 3, 0x7F, 0x80, 0xC3, 0xFF)  # NUL, escapes, a bad escape, UTF-8 edges


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([event, mixed, feed]), st.data())
def test_run_layouts_every_one_byte_edit(record_type: RecordType, data: st.DataObject) -> None:
    """Every cut, insertion and replacement of one byte of a valid key, in a batch after a
    valid key: decode_many gives decode's keys or decode's error for it."""
    fields = data.draw(RUN_FIELDS[record_type])
    key = record_type.encode(*fields)
    good = record_type.encode(*data.draw(RUN_FIELDS[record_type]))
    edits = {key[:at] for at in range(len(key))}
    for at in range(len(key) + 1):
        for byte in EDIT_BYTES:
            edits.add(key[:at] + bytes([byte]) + key[at:])
            edits.add(key[:at] + bytes([byte]) + key[at + 1 :])
    for edited in sorted(edits):
        # a key as much shorter or longer as `edited` is longer or shorter: a batch whose
        # total length is right although no key's is
        other = good[: len(good) - 1] if len(edited) > len(good) else good + b"\x00"
        for keys in ([good, edited], [edited, good], [edited, other]):
            # repr: an edited f64 may be NaN, which equals nothing
            expected = repr(_outcome(lambda ks: [record_type.decode(k) for k in ks], keys))
            assert repr(_outcome(record_type.decode_many, keys)) == expected, edited


def test_run_layout_short_keys_fall_back() -> None:
    """A key too short for its parts (a u16 of 0, no room for the string's terminator, then
    the tail) must not be read with overlapping slices: it falls back to decode's error."""
    lead = RecordType("lead", 6, [("k", F.u16), ("actor", F.string), ("at", F.desc(F.tid))])
    key = lead.head + bytes(2) + b"\xff" * 8
    with pytest.raises(KeyDecodeError) as info:
        lead.decode(key)
    with pytest.raises(KeyDecodeError) as batch:
        lead.decode_many([lead.encode(1, "a", tid.encode(0)), key])
    assert str(batch.value) == str(info.value)


def _value(n: int) -> dict[str, Any]:
    return {"n": n, "text": f"row {n}"}


# Bad rows under registered prefixes: keys that do not decode, values that are not msgpack.
BAD_KEY = st.one_of(
    st.binary(max_size=7).map(lambda b: num.head + b),  # too short for a u64
    st.binary(min_size=9, max_size=12).map(lambda b: num.head + b),  # too long
)
BAD_VALUE = st.sampled_from([b"\xc1", b"\x92\x01", b"\x01\x02", b"\xd9\x05ab"])


async def _fill(store: Store, good: int, bad_keys: list[bytes], bad_values: list[int]) -> None:
    async with store.batch() as batch:
        for n in range(good):
            if n in bad_values:
                batch.put_raw(num.encode(n), b"\xc1")  # 0xc1: never valid msgpack
            else:
                batch.put(num, (n,), _value(n))
        for key in bad_keys:
            batch.put_raw(key, msgpack.packb({"bad": True}))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    good=st.integers(0, 300),
    bad_keys=st.lists(BAD_KEY, max_size=5, unique=True),
    bad_values=st.lists(st.integers(0, 299), max_size=5, unique=True),
)
@aio
async def test_on_error_policies(good: int, bad_keys: list[bytes], bad_values: list[int]) -> None:
    bad_values = [n for n in bad_values if n < good]
    async with Store.open("memory://on-error", SCHEMA) as store:
        await _fill(store, good, bad_keys, bad_values)
        every = sorted([num.encode(n) for n in range(good)] + bad_keys)
        bad = set(bad_keys) | {num.encode(n) for n in bad_values}
        good_keys = [k for k in every if k not in bad]

        # raise (the default): the first bad row stops the scan with an error naming it
        if bad:
            with pytest.raises((KeyDecodeError, ValueDecodeError)) as info:
                await store.scan(num, batch_size=64).to_list()
            assert "num" in str(info.value)  # the error names the record type
        else:
            assert len(await store.scan(num).to_list()) == good

        # skip: every good row, in order, and a count of the others
        scan = store.scan(num, on_error="skip", batch_size=64)
        rows = [r async for r in scan]
        assert [r.raw_key for r in rows] == good_keys
        assert all(r.value == _value(r.key.n) for r in rows)
        assert scan.failed == len(bad)
        assert (scan.last_error is None) == (not bad)

        # raw: every row in key order, the bad ones as RawRecord holding their error
        scan = store.scan(num, on_error="raw", batch_size=64)
        rows = await scan.to_list()
        assert [r.raw_key for r in rows] == every
        for record in rows:
            if record.raw_key in bad:
                assert isinstance(record, RawRecord)
                assert isinstance(record.error, (KeyDecodeError, ValueDecodeError))
                assert record.key == record.raw_key
            else:
                assert not isinstance(record, RawRecord)
        assert scan.failed == len(bad)

        # scan_all: the same policy for rows of every record type
        all_rows = await store.scan_all(on_error="skip").to_list()
        assert [r.raw_key for r in all_rows] == good_keys


ROW_KINDS = st.sampled_from(["good", "bad value", "expired", "expires later"])


@settings(max_examples=20, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 400), ROW_KINDS), max_size=80, unique_by=lambda r: r[0]),
    batch_size=st.integers(1, 300),
    on_error=st.sampled_from(["skip", "raw"]),
    reverse=st.booleans(),
)
def test_columns_and_row_objects_yield_the_same_records(
    rows: list[tuple[int, str]], batch_size: int, on_error: Any, reverse: bool
) -> None:
    """Typed scans take batches as columns read by the native driver (wire.read_columns, or the
    C accelerator's next_columns), and
    KeyValue rows of the generated binding when the driver is off: both paths yield the same
    records, drop rows whose TTL has passed (slatedb still returns them before a flush) and
    handle undecodable rows alike."""
    now_ms = int(time.time() * 1000)
    by_kind: dict[str, set[int]] = {}
    for n, kind in rows:
        by_kind.setdefault(kind, set()).add(n)

    async def scan(columns: bool) -> tuple[list[Any], int, int]:
        offered = 0
        real = wire.read_columns

        def read_columns(buffer: Any) -> Any:
            nonlocal offered
            offered += 1
            return real(buffer)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(wire, "read_columns", read_columns)
            calls.set_active(columns)
            accelerated = calls.next_columns
            if accelerated is not calls._PURE["next_columns"]:  # the C accelerator parses in C

                def next_columns(iterator: Any, limit: int) -> Any:
                    nonlocal offered
                    offered += 1
                    return accelerated(iterator, limit)

                patch.setattr(calls, "next_columns", next_columns)
            async with Store.open("memory://paths", SCHEMA) as store:
                async with store.batch() as batch:
                    for n, kind in rows:
                        if kind == "good":
                            batch.put(num, (n,), _value(n))
                        elif kind == "bad value":
                            batch.put_raw(num.encode(n), b"\x92\x01")  # a 2-array holding 1
                        else:
                            at = now_ms - 1000 if kind == "expired" else now_ms + 3_600_000
                            batch.put_raw(num.encode(n), msgpack.packb(_value(n)), expire_at=at)
                found = store.scan(num, batch_size=batch_size, on_error=on_error, reverse=reverse)
                got = [
                    (type(r).__name__, r.raw_key, r.value, type(getattr(r, "error", None)))
                    async for r in found
                ]
                return got, found.failed, offered

    try:
        with_columns, failed, offered = asyncio.run(scan(columns=True))
        with_rows, failed_rows, offered_rows = asyncio.run(scan(columns=False))
    finally:
        calls.set_active(True)
    assert with_columns == with_rows and failed == failed_rows
    assert offered >= 1 and offered_rows == 0
    live = sorted(by_kind.get("good", set()) | by_kind.get("expires later", set()))
    bad = by_kind.get("bad value", set())
    shown = sorted(live + (sorted(bad) if on_error == "raw" else []), reverse=reverse)
    assert [num.decode(raw_key).n for _, raw_key, _, _ in with_columns] == shown
    assert failed == len(bad)
    for kind, raw_key, value, _ in with_columns:
        n = num.decode(raw_key).n
        assert (kind, value) == (("RawRecord", b"\x92\x01") if n in bad else ("Record", _value(n)))


@aio
async def test_on_unknown_skip_with_on_error_skip_skips_a_malformed_key() -> None:
    """The issue-13 case: one malformed key under a registered prefix no longer aborts."""
    async with Store.open("memory://malformed", SCHEMA) as store:
        await store.put(num, (1,), _value(1))
        await store.put_raw(num.head + b"\x00", b"\x80")  # a u64 key one byte long
        await store.put(num, (2,), _value(2))
        with pytest.raises(KeyDecodeError):
            await store.scan_all(on_unknown="skip").to_list()
        rows = await store.scan_all(on_unknown="skip", on_error="skip").to_list()
        assert [tuple(r.key) for r in rows] == [(1,), (2,)]
        with pytest.raises(ValueError, match="on_error"):
            store.scan(num, on_error="ignore")


@aio
async def test_async_for_and_next_chunk_mix() -> None:
    """async for decodes DECODE_CHUNK rows at a time; next_chunk and the cursor stay exact."""
    count = 3 * DECODE_CHUNK + 5
    async with Store.open("memory://mix", SCHEMA) as store:
        await store.put_many(((num, (n,), _value(n)) for n in range(count)), batch_size=100)
        scan = store.scan(num, batch_size=1000)
        seen: list[int] = []
        async for record in scan:
            seen.append(record.key.n)
            assert scan.position == record.raw_key
            if len(seen) == DECODE_CHUNK // 2:
                seen += [r.key.n for r in await scan.next_chunk(7)]
            if len(seen) >= 2 * DECODE_CHUNK:
                break
        seen += [r.key.n for r in await scan.to_list()]
        assert seen == list(range(count))
        # a bulk scan that leaves the block cache alone reads the same rows
        bulk = [r.key.n async for r in store.scan(num, fill_cache=False, reverse=True)]
        assert bulk == list(reversed(range(count)))


@aio
async def test_put_many_streams_batches() -> None:
    made = 0

    def records() -> Iterator[tuple[Any, ...]]:
        nonlocal made
        for n in range(2500):
            made += 1
            yield (num, (n,), _value(n)) if n % 2 else (num.key(n), _value(n))

    seen: list[tuple[int, int]] = []
    async with Store.open("memory://put-many", SCHEMA) as store:
        total = await store.put_many(
            records(), batch_size=1000, progress=lambda n: seen.append((n, made))
        )
        assert total == 2500
        # each batch is written before the generator is asked for the next one
        assert seen == [(1000, 1000), (2000, 2000), (2500, 2500)]
        rows = await store.scan(num).to_list()
        assert [r.value for r in rows] == [_value(n) for n in range(2500)]

        async def arecords() -> AsyncIterator[tuple[Any, ...]]:
            for n in range(3):
                yield name, (f"w{n}", n), n

        assert await store.put_many(arecords(), durable=True) == 3
        assert [r.value for r in await store.scan(name).to_list()] == [0, 1, 2]
        with pytest.raises(ValueError):
            await store.put_many([], batch_size=0)


MSGPACK_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            MSGPACK_VALUES.map(lambda v: msgpack.packb(v, use_bin_type=True)),
            st.binary(max_size=12),  # garbage: truncated, extra bytes, invalid
            st.integers(1, 120).map(lambda n: b"\x91" * n + b"\xc0"),  # nested n deep
        ),
        max_size=12,
    ),
    st.integers(2, 50),
)
def test_limited_unpack_many_is_limited_unpackb_over_a_list(
    batch: list[bytes], max_depth: int
) -> None:
    """The stream decode of a batch gives exactly the per-value decodes, or fails when any
    per-value decode fails (under the same caps, depth included)."""
    from opendata_kv.values.codecs import limited_unpack_many
    from opendata_kv.values.limits import DEFAULT_LIMITS, limited_unpackb

    limits = DEFAULT_LIMITS.but(max_depth=max_depth, max_array_len=60)
    try:
        expected: Any = [limited_unpackb(data, limits) for data in batch]
    except Exception:
        expected = None
    try:
        got: Any = limited_unpack_many(batch, limits)
    except Exception:
        got = None
    assert repr(got) == repr(expected)
