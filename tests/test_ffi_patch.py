"""The memmove speed-up for slatedb's UniFFI byte copy: same bytes, guarded, revertible."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import importlib
import importlib.metadata
import inspect
import struct
from collections.abc import Iterator
from typing import Any

import ffikit
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from opendata_kv.store import ffi_patch

binding = ffikit.binding
Builder: Any = binding._UniffiRustBufferBuilder
ORIGINAL_WRITE = Builder.__dict__["write"]
ORIGINAL_PACK_INTO = Builder.__dict__["_pack_into"]
Rows: Any = binding._UniffiFfiConverterSequenceTypeKeyValue
ORIGINAL_ROWS_READ = Rows.__dict__["read"]
Row: Any = binding._UniffiFfiConverterTypeKeyValue
ORIGINAL_ROW_READ = Row.__dict__["read"]


@pytest.fixture(autouse=True)
def pristine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts and ends with the original binding and a fresh patch state."""
    yield from ffikit.fresh_patch_state(monkeypatch)
    assert_unpatched()


def assert_unpatched() -> None:
    assert ffi_patch._row_readers == {} and ffi_patch._value_readers == {}
    assert Builder.__dict__["write"] is ORIGINAL_WRITE
    assert Builder.__dict__["_pack_into"] is ORIGINAL_PACK_INTO
    assert Rows.__dict__["read"] is ORIGINAL_ROWS_READ
    assert Row.__dict__["read"] is ORIGINAL_ROW_READ


# --- what gets lowered: a sequence of byte strings and integers, as the converters write them ----

PACKS = {
    "i8": (1, ">b", st.integers(-(2**7), 2**7 - 1)),
    "u8": (1, ">B", st.integers(0, 2**8 - 1)),
    "i16": (2, ">h", st.integers(-(2**15), 2**15 - 1)),
    "u32": (4, ">I", st.integers(0, 2**32 - 1)),
    "i32": (4, ">i", st.integers(-(2**31), 2**31 - 1)),
    "i64": (8, ">q", st.integers(-(2**63), 2**63 - 1)),
    "u64": (8, ">Q", st.integers(0, 2**64 - 1)),
    "f64": (8, ">d", st.floats(allow_nan=False)),
    "size_t": (ctypes.sizeof(ctypes.c_size_t), "@N", st.integers(0, 2**32 - 1)),
}

byte_items = st.binary(max_size=3000).flatmap(
    lambda raw: st.sampled_from(
        [("bytes", raw), ("bytearray", bytearray(raw)), ("memoryview", memoryview(raw))]
    )
)
int_items = st.sampled_from(sorted(PACKS)).flatmap(
    lambda name: PACKS[name][2].map(lambda value: (name, value))
)
items = st.lists(st.one_of(byte_items, int_items), max_size=12)


def lower(sequence: list[tuple[str, Any]], write: Any, pack_into: Any) -> bytes:
    """Lower `sequence` through a real Rust buffer with the given methods; return its bytes."""
    builder = Builder()
    for kind, value in sequence:
        if kind in PACKS:
            size, fmt, _ = PACKS[kind]
            pack_into(builder, size, fmt, value)
        else:
            write(builder, value)
    rbuf = builder.finalize()
    try:
        return bytes(rbuf.data[0 : rbuf.len])
    finally:
        rbuf.free()


@settings(deadline=None, max_examples=150)
@given(items)
def test_patched_builder_writes_the_same_bytes_as_the_original(
    sequence: list[tuple[str, Any]],
) -> None:
    assert ffi_patch.install(db_check=False)
    patched = lower(sequence, Builder.__dict__["write"], Builder.__dict__["_pack_into"])
    original = lower(sequence, ORIGINAL_WRITE, ORIGINAL_PACK_INTO)
    assert patched == original


@settings(deadline=None, max_examples=60)
@given(st.binary(max_size=20000))
def test_bytes_converter_lowers_identically_and_reads_back(value: bytes) -> None:
    converter = binding._UniffiFfiConverterBytes

    def lowered() -> bytes:
        rbuf = converter.lower(value)
        try:
            return bytes(rbuf.data[0 : rbuf.len])
        finally:
            rbuf.free()

    original = lowered()
    assert ffi_patch.install(db_check=False)
    assert lowered() == original == struct.pack(">i", len(value)) + value
    assert converter.lift(converter.lower(value)) == value


def test_buffer_growth_follows_reserve() -> None:
    """A write larger than the spare capacity grows the buffer through the binding's reserve."""
    assert ffi_patch.install(db_check=False)
    builder = Builder()
    first = builder.rbuf.capacity
    builder.write(b"\xab" * (first + 1000))
    builder.write_u8(7)
    rbuf = builder.finalize()
    try:
        assert rbuf.capacity >= first + 1001
        assert rbuf.len == first + 1001
        assert rbuf.data[0 : rbuf.len] == b"\xab" * (first + 1000) + b"\x07"
    finally:
        rbuf.free()


# --- guards ------------------------------------------------------------------------------------


def test_install_applies_once_and_uninstall_restores() -> None:
    assert ffi_patch.install(db_check=False)
    first = ffi_patch.status()
    assert first.applied and first.slatedb_version == importlib.metadata.version("slatedb")
    assert str(first).startswith("applied")
    patched_write = Builder.__dict__["write"]
    assert patched_write is not ORIGINAL_WRITE
    assert ffi_patch.install() is True  # idempotent: nothing re-applied
    assert Builder.__dict__["write"] is patched_write
    assert ffi_patch.uninstall() is True
    assert_unpatched()
    assert ffi_patch.status().applied is False and ffi_patch.status().reason == "uninstalled"
    assert ffi_patch.uninstall() is False


def test_status_is_a_frozen_dataclass() -> None:
    ffi_patch.install(db_check=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ffi_patch.status().applied = False  # type: ignore[misc]


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_environment_variable_disables_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ffi_patch.ENV_DISABLE, value)
    assert ffi_patch.install() is False
    assert ffi_patch.ENV_DISABLE in ffi_patch.status().reason
    assert str(ffi_patch.status()).startswith("skipped")
    assert_unpatched()
    monkeypatch.setenv(ffi_patch.ENV_DISABLE, "0")
    assert ffi_patch.install(db_check=False) is True  # a skip is not final: it looks again


@pytest.mark.parametrize("version", ["0.18.0", "1.0.0", "0.16.3", "garbage"])
def test_unknown_slatedb_version_is_skipped(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: version if name == "slatedb" else real(name)
    )
    assert ffi_patch.install() is False
    assert f"unknown slatedb version {version}" in ffi_patch.status().reason
    assert_unpatched()


def test_patch_release_of_the_series_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.17.9" if name == "slatedb" else real(name)
    )
    assert ffi_patch.install(db_check=False) is True


def test_binding_that_already_uses_memmove_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def write(self: Any, value: Any) -> None:  # what uniffi 0.32 generates, roughly
        with self._reserve(len(value)):
            ctypes.memmove(
                ctypes.addressof(self.rbuf.data.contents) + self.rbuf.len, bytes(value), len(value)
            )

    monkeypatch.setattr(Builder, "write", write)
    assert ffi_patch.install() is False
    assert "already copies with memmove" in ffi_patch.status().reason
    assert Builder.__dict__["write"] is write


def test_changed_byte_loop_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def _pack_into(self: Any, size: int, format: str, value: Any) -> None:
        with self._reserve(size):
            for i, byte in enumerate(struct.pack(format, value)):  # same loop, other text
                self.rbuf.data[self.rbuf.len + i] = byte

    monkeypatch.setattr(Builder, "_pack_into", _pack_into)
    assert ffi_patch.install() is False
    assert "_pack_into differs from the known 0.17 byte loop" in ffi_patch.status().reason
    assert Builder.__dict__["_pack_into"] is _pack_into
    assert Builder.__dict__["write"] is ORIGINAL_WRITE


def test_missing_source_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_source(obj: object) -> str:
        raise OSError("could not get source code")

    monkeypatch.setattr(inspect, "getsource", no_source)
    assert ffi_patch.install() is False
    assert "source of _UniffiRustBufferBuilder.write unavailable" in ffi_patch.status().reason
    assert_unpatched()


def test_failed_self_check_restores_the_originals(monkeypatch: pytest.MonkeyPatch) -> None:
    make_fast = ffi_patch._make_fast_methods

    def broken(binding_module: Any) -> tuple[Any, Any]:
        write, pack_into = make_fast(binding_module)

        def lossy_write(self: Any, value: Any) -> None:
            write(self, bytes(value)[:-1] if len(value) > 1000 else value)

        return lossy_write, pack_into

    monkeypatch.setattr(ffi_patch, "_make_fast_methods", broken)
    assert ffi_patch.install() is False
    reason = ffi_patch.status().reason
    assert reason.startswith("self-check failed, originals restored")
    assert_unpatched()
    monkeypatch.setattr(ffi_patch, "_make_fast_methods", make_fast)
    assert ffi_patch.install() is False  # a failed self-check is final for the process
    assert ffi_patch.status().reason == reason


# --- the read side: next_batch rows -----------------------------------------------------------

key_value = st.builds(
    lambda key, value, seq, create_ts, expire_ts: binding.KeyValue(
        key=key, value=value, seq=seq, create_ts=create_ts, expire_ts=expire_ts
    ),
    st.binary(max_size=64),
    st.binary(max_size=2000),
    st.integers(0, 2**64 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)
key_values = st.lists(key_value, max_size=40)


def read_rows(raw: bytes) -> Any:
    """Read a list of KeyValue rows from raw buffer bytes with the currently installed reader."""
    return ffikit.read(Rows, raw)


@settings(max_examples=60)
@given(rows=key_values)
def test_fast_row_reader_reads_what_the_generated_reader_reads(rows: list[Any]) -> None:
    raw = ffikit.lower(Rows, rows)
    expected = read_rows(raw)
    assert ffi_patch.install(db_check=False)
    assert read_rows(raw) == expected == rows


@pytest.mark.parametrize("reader", ["rows", "columns"])
@settings(max_examples=60)
@given(rows=key_values.filter(bool), cut=st.integers(1, 40), flag=st.integers(2, 255))
def test_fast_readers_reject_truncated_and_malformed_buffers(
    reader: str, rows: list[Any], cut: int, flag: int
) -> None:
    """The row reader and the columns reader refuse a buffer cut short, an optional flag
    other than 0/1 and a key length past the end, as the generated reader does."""
    raw = ffikit.lower(Rows, rows)
    assert ffi_patch.install(db_check=False)
    read = read_rows if reader == "rows" else read_columns
    first = rows[0]
    flag_at = 4 + 4 + len(first.key) + 4 + len(first.value) + 16
    for bad in (
        raw[: max(0, len(raw) - cut)],
        raw[:flag_at] + bytes([flag]) + raw[flag_at + 1 :],
        raw[:4] + struct.pack(">i", len(raw)) + raw[8:],
    ):
        with pytest.raises(binding.InternalError):
            read(bad)


@settings(max_examples=30)
@given(rows=key_values)
def test_fast_single_row_reader_lifts_optional_rows(rows: list[Any]) -> None:
    optional = binding._UniffiFfiConverterOptionalTypeKeyValue
    assert ffi_patch.install(db_check=False)
    for row in [None, *rows]:
        assert optional.lift(optional.lower(row)) == row


def test_broken_row_reader_fails_the_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    make_readers = ffi_patch._make_row_readers

    def broken(binding_module: Any) -> Any:
        read_rows, read_row = make_readers(binding_module)
        return (lambda cls, buf: read_rows(cls, buf)[::-1]), read_row

    monkeypatch.setattr(ffi_patch, "_make_row_readers", broken)
    assert ffi_patch.install() is False
    assert ffi_patch.status().reason.startswith("self-check failed, originals restored")
    assert_unpatched()


# --- the read side as columns: what typed scans use instead of KeyValue rows ----------------------


def read_columns(raw: bytes) -> Any:
    """Read raw buffer bytes with the columns reader (a pure function of the buffer)."""
    reader = ffi_patch._make_columns_reader(binding)

    class Converter:
        read = staticmethod(reader)

    return ffikit.read(Converter, raw)


@settings(max_examples=60)
@given(rows=key_values)
def test_columns_reader_reads_what_the_generated_reader_reads(rows: list[Any]) -> None:
    raw = ffikit.lower(Rows, rows)
    keys, values, expires = read_columns(raw)
    assert keys == [row.key for row in rows]
    assert values == [row.value for row in rows]
    assert expires == [row.expire_ts for row in rows]


def test_columns_are_offered_only_for_the_bindings_iterator_while_patched() -> None:
    async def main() -> None:
        db = await binding.DbBuilder("columns-for", binding.ObjectStore.resolve("memory:///")).build()
        try:
            everything = binding.KeyRange(
                start=None, start_inclusive=True, end=None, end_inclusive=False
            )
            iterator = await db.scan(everything)
            assert ffi_patch.columns_for(iterator) is None  # not installed
            assert ffi_patch.install()
            assert ffi_patch.columns_for(object()) is None  # not a DbIterator
            assert ffi_patch.columns_for(iterator) is not None
            ffi_patch.uninstall()
            assert ffi_patch.columns_for(iterator) is None
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_columns_by_batch_match_next_batch_on_a_memory_db() -> None:
    rows = {b"k%04d" % i: bytes([i % 256]) * (i % 300) for i in range(700)}

    async def main() -> None:
        assert ffi_patch.install()
        db = await binding.DbBuilder("columns-db", binding.ObjectStore.resolve("memory:///")).build()
        try:
            batch = binding.WriteBatch()
            for key, value in rows.items():
                batch.put(key, value)
            await db.write(batch)
            ttl = binding.PutOptions(ttl=binding.Ttl.EXPIRE_AFTER_MILLIS(60_000))
            await db.put_with_options(b"k9999", b"ttl", ttl, binding.WriteOptions())
            everything = binding.KeyRange(
                start=None, start_inclusive=True, end=None, end_inclusive=False
            )
            expected = await (await db.scan(everything)).next_batch(1000)
            next_columns = ffi_patch.columns_for(await db.scan(everything))
            assert next_columns is not None
            keys: list[bytes] = []
            values: list[bytes] = []
            expires: list[int | None] = []
            for size in (0, 1, 64, 1000, 5):
                k, v, e = await next_columns(size)
                assert len(k) == len(v) == len(e) <= size
                keys += k
                values += v
                expires += e
            assert keys == [row.key for row in expected] == [*rows, b"k9999"]
            assert values == [row.value for row in expected]
            assert expires == [row.expire_ts for row in expected]
            assert expires[-1] is not None and expires[:-1] == [None] * len(rows)
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_broken_columns_reader_fails_the_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    make_reader = ffi_patch._make_columns_reader

    def broken(binding_module: Any) -> Any:
        reader = make_reader(binding_module)
        return lambda buf: tuple(column[::-1] for column in reader(buf))

    monkeypatch.setattr(ffi_patch, "_make_columns_reader", broken)
    assert ffi_patch.install() is False
    assert ffi_patch.status().reason.startswith("self-check failed, originals restored")
    assert ffi_patch.columns_for(object()) is None and ffi_patch._columns == (None, None)


# --- point reads: get_key_value as (value, expire_ts), what typed gets use ----------------------

OptionalRow: Any = binding._UniffiFfiConverterOptionalTypeKeyValue
OptionalBytes: Any = binding._UniffiFfiConverterOptionalBytes
POINT_SOURCES = ("Db", "DbReader", "DbSnapshot", "DbTransaction")


def lift_outcome(lift: Any, raw: bytes) -> tuple[str, Any]:
    """What `lift` makes of a fresh Rust buffer holding `raw` (it frees the buffer): the
    result, or the class of the exception it raised."""
    buffer = binding._UniffiRustBuffer.alloc(len(raw))
    if raw:
        ctypes.memmove(ctypes.addressof(buffer.data.contents), raw, len(raw))
    buffer.len = len(raw)
    try:
        return "ok", lift(buffer)
    except Exception as exc:
        return "error", type(exc)


def as_point_row(outcome: tuple[str, Any]) -> tuple[str, Any]:
    kind, row = outcome
    if kind == "ok" and row is not None:
        return kind, (row.value, row.expire_ts)
    return outcome


def mutated(raw: bytes, how: tuple[str, int, int]) -> bytes:
    kind, at, byte = how
    if kind == "cut":
        return raw[: at % (len(raw) + 1)]
    if kind == "junk":
        return raw + bytes([byte]) * (at % 5 + 1)
    at %= len(raw)
    return raw[:at] + bytes([byte]) + raw[at + 1 :]


mutations = st.none() | st.tuples(
    st.sampled_from(["cut", "junk", "set"]), st.integers(0, 5000), st.integers(0, 255)
)


@settings(max_examples=150)
@given(row=st.none() | key_value, how=mutations)
@example(row=None, how=("cut", 0, 0))
@example(row=None, how=("set", 0, 2))
@example(row=None, how=("junk", 0, 0))
def test_point_lift_reads_what_the_generated_optional_reader_reads(
    row: Any, how: tuple[str, int, int] | None
) -> None:
    """On the bytes an optional KeyValue lowers to, as written or truncated, with a byte
    changed or junk appended: the same (value, expire_ts), or the same exception class, as
    the generated reader (the fixture leaves it unpatched)."""
    raw = ffikit.lower(OptionalRow, row)
    if how is not None:
        raw = mutated(raw, how)
    point = lift_outcome(ffi_patch._make_point_lift(binding), raw)
    assert point == as_point_row(lift_outcome(OptionalRow.lift, raw))
    if how is None:
        assert point == ("ok", None if row is None else (row.value, row.expire_ts))


@settings(max_examples=150)
@given(value=st.none() | st.binary(max_size=3000), how=mutations)
@example(value=None, how=("set", 0, 2))
@example(value=b"", how=("junk", 0, 0))
@example(value=b"abc", how=("set", 1, 0x80))  # a negative length
def test_value_lift_reads_what_the_generated_optional_bytes_reader_reads(
    value: bytes | None, how: tuple[str, int, int] | None
) -> None:
    """get's result, optional bytes, as written or damaged like the rows above: the same
    bytes or the same exception class as the generated reader."""
    raw = ffikit.lower(OptionalBytes, value)
    if how is not None:
        raw = mutated(raw, how)
    point = lift_outcome(ffi_patch._make_value_lift(binding), raw)
    assert point == lift_outcome(OptionalBytes.lift, raw)
    if how is None:
        assert point == ("ok", value)


@settings(max_examples=100)
@given(key=st.binary(max_size=5000), kind=st.sampled_from(["bytes", "bytearray", "memoryview"]))
@example(key=b"", kind="bytes")
@example(key=b"\x00" * 65536, kind="bytes")
def test_key_lowering_writes_the_generated_lowering_bytes(key: bytes, kind: str) -> None:
    lower_key = ffi_patch._make_key_lowerer(binding)
    value = as_kind(key, kind)
    fast, slow = lower_key(value), binding._UniffiFfiConverterBytes.lower(value)
    try:
        assert fast.len == slow.len == len(key) + 4
        written = fast.data[0 : fast.len]
        assert written == slow.data[0 : slow.len] == struct.pack(">i", len(key)) + key
    finally:
        fast.free()
        slow.free()


@pytest.mark.parametrize("code", [0, 1, 2])
def test_direct_rust_calls_raise_what_the_generated_call_raises(code: int) -> None:
    """_make_rust_call (alloc, free and handle clones of the point readers) passes a success
    through and leaves a Rust error (1) or panic (2) to the generated status check."""

    def function(arg: int, status: Any) -> int:
        status._obj.code = code  # what Rust does through the pointer
        return arg * 2

    def outcome(call: Any) -> tuple[str, Any]:
        try:
            return "ok", call(21)
        except binding.InternalError as exc:
            return "error", str(exc)

    generated = outcome(lambda arg: binding._uniffi_rust_call(function, arg))
    assert outcome(ffi_patch._make_rust_call(binding, function)) == generated
    assert generated == ("ok", 42) if code == 0 else generated[0] == "error"


@pytest.mark.parametrize("reader_for", [ffi_patch.row_reader_for, ffi_patch.value_reader_for])
def test_point_readers_are_offered_for_the_four_sources_only_while_patched(
    reader_for: Any,
) -> None:
    sources = [getattr(binding, name) for name in POINT_SOURCES]
    fake = [object.__new__(cls) for cls in sources]  # never called: only the class is looked up
    assert [reader_for(source) for source in fake] == [None] * 4
    assert ffi_patch.install(db_check=False)
    assert all(reader_for(source) is not None for source in fake)
    assert reader_for(object()) is None
    assert reader_for(binding.DbIterator.__new__(binding.DbIterator)) is None
    ffi_patch.uninstall()
    assert [reader_for(source) for source in fake] == [None] * 4


def test_point_reads_match_get_key_value_on_every_source() -> None:
    """Db, DbReader, DbSnapshot and DbTransaction: present, absent, TTL'd and empty keys and
    values, a key that is not bytes (the generated method's path), and a closed Db's error."""
    rows = {b"k%03d" % i: bytes([i]) * (i * 37 % 700) for i in range(60)}
    keys = [*rows, b"k", b"missing", b"ttl", b"\xff" * 300, b""]  # b"": slatedb refuses it

    async def outcome(read: Any) -> tuple[str, Any]:
        try:
            return "ok", await read
        except binding.Error as exc:
            return "error", type(exc)

    async def expected(source: Any, key: Any) -> Any:
        kv = await source.get_key_value(key)
        return None if kv is None else (kv.value, kv.expire_ts)

    async def main() -> None:
        assert ffi_patch.install()
        store = binding.ObjectStore.resolve("memory:///")
        db = await binding.DbBuilder("point-reads", store).build()
        closed = False
        try:
            batch = binding.WriteBatch()
            for key, value in rows.items():
                batch.put(key, value)
            await db.write(batch)
            ttl = binding.PutOptions(ttl=binding.Ttl.EXPIRE_AFTER_MILLIS(60_000))
            await db.put_with_options(b"ttl", b"expiring", ttl, binding.WriteOptions())
            await db.flush()
            reader = await binding.DbReaderBuilder("point-reads", store).build()
            snapshot = await db.snapshot()
            transaction = await db.begin(binding.IsolationLevel.SNAPSHOT)
            sources = (db, reader, snapshot, transaction)
            assert [type(s).__name__ for s in sources] == list(POINT_SOURCES)
            for source in sources:
                read = ffi_patch.row_reader_for(source)
                read_value = ffi_patch.value_reader_for(source)
                assert read is not None and read_value is not None
                for key in keys:
                    got = await outcome(read(source, key))
                    assert got == await outcome(expected(source, key)), key
                    value = await outcome(read_value(source, key))
                    assert value == await outcome(source.get(key)), key
                got = await read(source, bytearray(b"k001"))  # type: ignore[arg-type]
                assert got == (rows[b"k001"], None)
                same = await read_value(source, memoryview(b"k001"))  # type: ignore[arg-type]
                assert same == rows[b"k001"]
                ttl_row = await read(source, b"ttl")
                assert ttl_row is not None and ttl_row[1] is not None
            await transaction.rollback()
            await reader.shutdown()
            await db.shutdown()
            closed = True
            read = ffi_patch.row_reader_for(db)
            assert read is not None
            failed = await outcome(read(db, b"k001"))
            assert failed[0] == "error" and failed == await outcome(expected(db, b"k001"))
            read_value = ffi_patch.value_reader_for(db)
            assert read_value is not None
            assert await outcome(read_value(db, b"k001")) == await outcome(db.get(b"k001"))
        finally:
            if not closed:
                await db.shutdown()

    asyncio.run(main())


def test_broken_point_lift_fails_the_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    make_lift = ffi_patch._make_point_lift

    def broken(binding_module: Any) -> Any:
        lift = make_lift(binding_module)

        def no_ttl(rbuf: Any) -> Any:
            row = lift(rbuf)
            return None if row is None else (row[0], None)

        return no_ttl

    monkeypatch.setattr(ffi_patch, "_make_point_lift", broken)
    assert ffi_patch.install() is False
    assert ffi_patch.status().reason.startswith("self-check failed, originals restored")
    assert ffi_patch._row_readers == {} and ffi_patch._value_readers == {}


def test_broken_value_lift_fails_the_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    make_lift = ffi_patch._make_value_lift

    def broken(binding_module: Any) -> Any:
        lift = make_lift(binding_module)
        return lambda rbuf: (lift(rbuf) or b"")[:100]  # long values cut, None read as b""

    monkeypatch.setattr(ffi_patch, "_make_value_lift", broken)
    assert ffi_patch.install() is False
    assert ffi_patch.status().reason.startswith("self-check failed, originals restored")
    assert ffi_patch._row_readers == {} and ffi_patch._value_readers == {}


# --- the write side: batch_put, what Store batches queue their puts through ------------------


def memory_db(name: str) -> Any:
    return binding.DbBuilder(name, binding.ObjectStore.resolve("memory:///")).build()


async def stored(db: Any) -> dict[bytes, bytes]:
    everything = binding.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    return {row.key: row.value for row in await (await db.scan(everything)).next_batch(10_000)}


@settings(max_examples=30, deadline=None)
@given(
    puts=st.lists(
        st.tuples(st.binary(min_size=1, max_size=64), byte_items.map(lambda item: item[1])),
        max_size=30,
    )
)
def test_batch_put_writes_what_writebatch_put_writes(puts: list[tuple[bytes, Any]]) -> None:
    """Every key and value (bytes, bytearray, memoryview) queued by batch_put is stored as
    WriteBatch.put stores it; the last put of a key wins in both."""

    async def main() -> None:
        assert ffi_patch.install()
        fast = ffi_patch.batch_put()
        assert fast is not binding.WriteBatch.put
        db = await memory_db("batch-put")
        try:
            generated, patched = binding.WriteBatch(), binding.WriteBatch()
            for key, value in puts:
                binding.WriteBatch.put(generated, b"g" + key, value)
                fast(patched, b"f" + key, value)
            if puts:
                await db.write(generated)
                await db.write(patched)
            rows = await stored(db)
            expected = {key: bytes(value) for key, value in puts}
            assert {k[1:]: v for k, v in rows.items() if k[:1] == b"g"} == expected
            assert {k[1:]: v for k, v in rows.items() if k[:1] == b"f"} == expected
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_batch_put_fails_as_writebatch_put_does() -> None:
    """Without the patch batch_put is WriteBatch.put; with it, the same errors: an empty key,
    a batch already written."""
    assert ffi_patch.batch_put() is binding.WriteBatch.put

    async def main() -> None:
        assert ffi_patch.install()
        db = await memory_db("batch-put-errors")
        try:
            written = binding.WriteBatch()
            written.put(b"a", b"1")
            await db.write(written)
            for put in (binding.WriteBatch.put, ffi_patch.batch_put()):
                for batch, key in ((binding.WriteBatch(), b""), (written, b"b")):
                    with pytest.raises(binding.Error.Invalid) as info:
                        put(batch, key, b"v")
                    assert ("empty" if key == b"" else "consumed") in str(info.value)
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_batch_put_refuses_anything_but_a_write_batch() -> None:
    """Rust would take any object's handle for a WriteBatch's (a Db's: a crash): refused."""

    async def main() -> None:
        assert ffi_patch.install()
        db = await memory_db("batch-put-type")
        try:
            for wrong in (db, None, object()):
                with pytest.raises(TypeError, match="WriteBatch"):
                    ffi_patch.batch_put()(wrong, b"k", b"v")
            assert await stored(db) == {}
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_nothing_fast_is_handed_out_before_the_self_check_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While install() checks itself, and after a failed check, callers get the generated
    calls: the fast ones are published only once the check passed."""
    seen: list[Any] = []
    real_check = ffi_patch._self_check

    def checking(binding_module: Any, db_check: bool) -> None:
        seen.append(
            (
                ffi_patch.batch_put(),
                ffi_patch.columns_for(object.__new__(binding.DbIterator)),
                ffi_patch.row_reader_for(object.__new__(binding.Db)),
                ffi_patch._columns_for(object.__new__(binding.DbIterator)) is not None,
            )
        )
        real_check(binding_module, db_check)
        raise AssertionError("failed on purpose")

    monkeypatch.setattr(ffi_patch, "_self_check", checking)
    assert ffi_patch.install(db_check=False) is False
    assert seen == [(binding.WriteBatch.put, None, None, True)]  # built, not handed out
    assert ffi_patch.batch_put() is binding.WriteBatch.put


# --- the real thing ------------------------------------------------------------------------------


def test_round_trip_through_a_memory_db() -> None:
    values = [
        b"",
        b"\x00",
        b"\xff",
        b"\x00\xff" * 3,
        bytes(range(256)) * 40,
        b"v" * 10240,
        b"w" * 65536,
    ]

    async def main() -> None:
        assert ffi_patch.install()  # from inside a running loop: the Db self-check runs aside
        assert "memory Db round trip" in ffi_patch.status().reason
        db = await binding.DbBuilder(
            "ffi-patch-test", binding.ObjectStore.resolve("memory:///")
        ).build()
        try:
            batch = binding.WriteBatch()
            for index, value in enumerate(values):
                await db.put(b"p" + bytes([index]) + value[:3], value)
                batch.put(b"b" + bytes([index]) + value[:3], value)
            await db.write(batch)
            for index, value in enumerate(values):
                assert await db.get(b"p" + bytes([index]) + value[:3]) == value
            everything = binding.KeyRange(
                start=b"b", start_inclusive=True, end=b"c", end_inclusive=False
            )
            rows = await (await db.scan(everything)).next_batch(100)
            assert [row.value for row in rows] == values
            assert [row.key for row in rows] == [
                b"b" + bytes([i]) + v[:3] for i, v in enumerate(values)
            ]
        finally:
            await db.shutdown()

    asyncio.run(main())


# --- memory safety over large values (issue 13: keep the review's properties in the suite) -----

SIZES = st.one_of(
    st.integers(0, 300),
    st.integers(0, 8 << 20),
    st.sampled_from([0, 1, 4095, 4096, 65535, 65536, (1 << 20) + 1, 8 << 20]),
)


def as_kind(data: bytes, kind: str) -> Any:
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "strided memoryview":  # not contiguous: the patch must copy it element-wise
        return memoryview(data + data)[::2] if data else memoryview(data)
    return data


@settings(deadline=None, max_examples=24)
@given(
    size_kind=st.one_of(
        st.tuples(SIZES, st.sampled_from(["bytes", "bytearray", "memoryview"])),
        # a strided view goes through the generated element-by-element loop: keep it small
        st.tuples(st.integers(0, 1 << 16), st.just("strided memoryview")),
    ),
    seed=st.integers(0, 2**32),
)
@example(size_kind=(8 << 20, "bytes"), seed=1)
@example(size_kind=(8 << 20, "bytearray"), seed=2)
@example(size_kind=(8 << 20, "memoryview"), seed=3)
@example(size_kind=((3 << 20) + 7, "memoryview"), seed=4)
def test_values_up_to_8_mib_round_trip_through_put_get_and_the_row_readers(
    size_kind: tuple[int, str], seed: int
) -> None:
    """bytes, bytearray and memoryview values of 0 to 8 MiB go in through the patched
    lowering and come back equal through get, get_key_value (single-row reader) and a scan's
    next_batch (list reader); the caller's buffer is left as it was."""
    import random

    size, kind = size_kind
    data = random.Random(seed).randbytes(size)
    expected = bytes(as_kind(data, kind))
    value = as_kind(data, kind)

    async def main() -> None:
        assert ffi_patch.install()
        db = await binding.DbBuilder("ffi-sizes", binding.ObjectStore.resolve("memory:///")).build()
        try:
            await db.put(b"k1", value)
            batch = binding.WriteBatch()
            batch.put(b"k2", value)
            await db.write(batch)
            assert await db.get(b"k1") == expected
            row = await db.get_key_value(b"k2")
            assert row is not None and row.key == b"k2" and row.value == expected
            everything = binding.KeyRange(
                start=b"k", start_inclusive=True, end=b"l", end_inclusive=False
            )
            rows = await (await db.scan(everything)).next_batch(10)
            assert [(r.key, r.value) for r in rows] == [(b"k1", expected), (b"k2", expected)]
        finally:
            await db.shutdown()

    asyncio.run(main())
    assert bytes(value) == expected  # the source buffer untouched


# --- what it says it does, and saying so when it cannot ----------------------------------------


def _owner_attr(qualname: str) -> tuple[Any, str]:
    owner_name, attr = qualname.split(".", 1)
    return getattr(binding, owner_name), attr


def test_the_patch_is_active_on_the_pinned_slatedb() -> None:
    """The slatedb this project pins (0.17.0) is the build the patch was written for: opening a
    store applies it, replacing exactly the functions REPLACED (and the docstring) names."""
    from opendata_kv import SyncStore
    from opendata_kv.keys import Schema

    originals = {}
    for name in ffi_patch.REPLACED:
        owner, attr = _owner_attr(name)
        originals[name] = owner.__dict__[attr]
    assert importlib.metadata.version("slatedb") == "0.17.0"
    with SyncStore.open("memory://pinned", Schema()):
        pass
    state = ffi_patch.status()
    assert state.applied and state.slatedb_version == "0.17.0", state
    for name, original in originals.items():
        owner, attr = _owner_attr(name)
        assert owner.__dict__[attr] is not original, f"{name} was not replaced"
    assert ffi_patch._patched is not None
    replaced = {f"{owner.__name__}.{attr}" for owner, attr, _ in ffi_patch._patched}
    assert replaced == set(ffi_patch.REPLACED)
    doc = ffi_patch.__doc__ or ""
    assert "five generated functions" in doc and len(ffi_patch.REPLACED) == 5
    for name in ffi_patch.REPLACED:
        owner_name, attr = name.split(".", 1)
        assert owner_name in doc and attr in doc


def test_an_unknown_build_logs_one_warning_with_version_and_cost(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.18.2" if name == "slatedb" else real(name)
    )
    with caplog.at_level("WARNING", logger="opendata_kv.store.ffi_patch"):
        assert ffi_patch.install() is False
        assert ffi_patch.install() is False  # looked again, but warned once
    [record] = [r for r in caplog.records if r.name == "opendata_kv.store.ffi_patch"]
    message = record.getMessage()
    assert record.levelname == "WARNING"
    assert "slatedb 0.18.2" in message and "slower" in message and ffi_patch.ENV_DISABLE in message


def test_changed_generated_code_warns_but_an_asked_for_skip_does_not(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="opendata_kv.store.ffi_patch"):
        monkeypatch.setenv(ffi_patch.ENV_DISABLE, "1")
        assert ffi_patch.install() is False
        assert not caplog.records  # turned off on purpose: no warning
        monkeypatch.delenv(ffi_patch.ENV_DISABLE)
        monkeypatch.setattr(Builder, "_pack_into", lambda *args: None)
        assert ffi_patch.install() is False
    [record] = caplog.records
    assert "slatedb 0.17.0" in record.getMessage() and "differs" in record.getMessage()
