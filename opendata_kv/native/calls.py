"""The slatedb calls the store makes, each an awaitable that either face can drive.

Hot calls (point reads, scan batches, puts, deletes, batch writes) are made directly on the
native library: the handle cloned, byte strings lowered in one copy (wire.py), the result
lifted without building binding objects. Every other binding method goes through `method()`,
which runs the generated method's own code (its checks, lowering and lifting) with the
future handed to our driver instead of to the generated asyncio driver: a sync caller needs
no event loop for any call. When the binding is not the build this was written for
(binding.decide), every call is the generated coroutine itself and sync callers run it on a
private event loop (driver.run).
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from time import time_ns as _time_ns
from typing import Any, Final, TypeVar

from opendata_kv.native import accel, driver, selfcheck, wire
from opendata_kv.native.binding import COST, NativeStatus, decide, generated, logger
from opendata_kv.native.driver import FutureKind, Pending
from opendata_kv.native.wire import Columns, PointRow

T = TypeVar("T")

_B = generated()
_lib = _B._UniffiLib
_Status = _B._UniffiRustCallStatus
_check = _B._uniffi_check_call_status
_Errors = _B._UniffiFfiConverterTypeError
_byref = ctypes.byref

_RB: Final = FutureKind("rust_buffer")
_U64: Final = FutureKind("u64")
_VOID: Final = FutureKind("void")
_KINDS = {kind.poll.__name__: kind for kind in (_RB, _U64, _VOID)}


def _rust_call(function: Any) -> Callable[..., Any]:
    """function(*args) with a fresh call status, raising what the generated code raises."""

    def call(*args: Any) -> Any:
        status = _Status()
        result = function(*args, _byref(status))
        if status.code:
            _check(_Errors, status)
        return result

    return call


class _Source:
    """The native functions of one binding class with get / get_key_value."""

    __slots__ = ("clone", "clone_raw", "get", "get_key_value")

    def __init__(self, name: str) -> None:
        self.clone_raw = getattr(_lib, f"uniffi_slatedb_uniffi_fn_clone_{name}")
        self.clone = _rust_call(self.clone_raw)
        self.get = getattr(_lib, f"uniffi_slatedb_uniffi_fn_method_{name}_get")
        self.get_key_value = getattr(_lib, f"uniffi_slatedb_uniffi_fn_method_{name}_get_key_value")


_SOURCES: dict[type, _Source] = {
    _B.Db: _Source("db"),
    _B.DbReader: _Source("dbreader"),
    _B.DbSnapshot: _Source("dbsnapshot"),
    _B.DbTransaction: _Source("dbtransaction"),
}
_clone_db = _rust_call(_lib.uniffi_slatedb_uniffi_fn_clone_db)
_clone_iterator = _rust_call(_lib.uniffi_slatedb_uniffi_fn_clone_dbiterator)
_clone_batch_raw = _lib.uniffi_slatedb_uniffi_fn_clone_writebatch
_clone_batch = _rust_call(_clone_batch_raw)
#: keys up to this size are framed inline by point reads (wire.lower_bytes's one-copy size)
_FRAMED_INLINE = 64 * 1024
_db_put = _lib.uniffi_slatedb_uniffi_fn_method_db_put
_db_put_with_options = _lib.uniffi_slatedb_uniffi_fn_method_db_put_with_options
_db_delete = _lib.uniffi_slatedb_uniffi_fn_method_db_delete
_db_write = _lib.uniffi_slatedb_uniffi_fn_method_db_write
_next_batch = _lib.uniffi_slatedb_uniffi_fn_method_dbiterator_next_batch
_batch_put = _lib.uniffi_slatedb_uniffi_fn_method_writebatch_put
_batch_delete = _lib.uniffi_slatedb_uniffi_fn_method_writebatch_delete
_batch_put_with_options = _lib.uniffi_slatedb_uniffi_fn_method_writebatch_put_with_options
_seek = _lib.uniffi_slatedb_uniffi_fn_method_dbiterator_seek
_free_write_handle = _rust_call(_lib.uniffi_slatedb_uniffi_fn_free_writehandle)


def _cloned(clone: Callable[[Any], int], target: Any, *buffers: Any) -> int:
    """A clone of target's handle for one call; the lowered buffers are freed if it fails."""
    try:
        handle: int = clone(target._handle)
    except BaseException:
        for buffer in buffers:
            wire.free(buffer)
        raise
    return handle


def _drop_write_handle(handle: int) -> None:
    _free_write_handle(handle)


# --- the status: decided once, on first use -------------------------------------------------

_lock = threading.Lock()
_status: NativeStatus | None = None
_checker: int | None = None  # the thread running the self-check, which uses the driver


def status() -> NativeStatus:
    """Whether calls go through the native driver (decided and self-checked once)."""
    global _status, _checker
    if _status is None:
        with _lock:
            if _status is None:
                decided = decide()
                if decided.active:
                    _checker = threading.get_ident()
                    try:
                        failure = selfcheck.self_check(_DRIVEN)
                    finally:
                        _checker = None
                    if failure is not None:
                        decided = NativeStatus(False, decided.version, failure)
                        logger.warning(
                            "opendata_kv runs slatedb through its generated binding: the "
                            "native driver's self-check failed (%s); %s",
                            failure,
                            COST,
                        )
                _status = decided
                _install(decided.active)
                selfcheck.lowered.cache_clear()  # both checks have read it: ~0.6 MB freed
    return _status


def active() -> bool:
    """True when the native driver is in use."""
    current = _status
    if current is not None:
        return current.active
    if _checker == threading.get_ident():
        return True
    return status().active


def set_active(on: bool) -> NativeStatus:
    """Switch the driver off (or back on, when the binding allows it): tests and benchmarks
    compare the two paths with this. Returns the status in force afterwards."""
    global _status
    current = status()
    if on and not current.active:
        decided = decide()
        if decided.active:
            _status = decided
    elif not on and current.active:
        _status = NativeStatus(False, current.version, "switched off by set_active(False)")
    _install(bool(_status and _status.active))
    return _status or current


def _install(on: bool) -> None:
    """Rebind the hot names (accel.HOT) to the C accelerator's functions when the driver is on
    and accel.py accepts the extension, else to the pure ones below (saved on first use)."""
    if not _PURE:
        _PURE.update({name: globals()[name] for name in accel.HOT if name in globals()})
    table = accel.functions(_PURE, _DRIVEN) if on else None
    globals().update(table or _PURE)
    module = accel.active_module() if table else None
    driver.use_send(
        getattr(module, "send_to_end", None),
        *(kind for kind in (getattr(module, "TimedAwait", None),) if kind is not None),
    )


_PURE: dict[str, Callable[..., Any]] = {}


def sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run an operation for a sync caller: inline through the driver, or on a private event
    loop when the generated binding is in use."""
    current = _status
    if (current is not None and current.active) or (current is None and active()):
        return driver.drive(coroutine)
    return driver.run(coroutine)


# --- the generic path: any binding method, driven by us -------------------------------------


def _capture(
    handle: int, poll: Any, complete: Any, free: Any, lift: Any, errors: Any
) -> Pending[Any]:
    """Stands in for the generated `_uniffi_rust_call_async`: the started future, for our
    driver."""
    return Pending(handle, _KINDS[poll.__name__], lift, errors)


_GLOBALS: dict[str, Any] = {**vars(_B), "_uniffi_rust_call_async": _capture}


def _replica(owner: Any, name: str) -> Callable[..., Any]:
    """The generated async method `owner.name`, its code run with our future driver."""
    return _replica_of(getattr(owner, name))


@functools.cache
def _replica_of(function: Any) -> Callable[..., Any]:
    """`function` (a generated async method) run with our future driver; anything else (no
    code object, or code not calling the generated driver) is returned as it is."""
    code = getattr(function, "__code__", None)
    if code is None or "_uniffi_rust_call_async" not in code.co_names:
        return function  # type: ignore[no-any-return]
    return types.FunctionType(
        code, _GLOBALS, function.__name__, function.__defaults__, function.__closure__
    )


def method(target: Any, name: str, *args: Any) -> Awaitable[Any]:
    """`target.name(*args)` of the binding, awaitable by either face."""
    if not active():
        result: Awaitable[Any] = getattr(target, name)(*args)
        return result
    replica: Callable[..., Awaitable[Any]] = _replica(target.__class__, name)
    return replica(target, *args)


# --- the hot calls ------------------------------------------------------------------------


def get(source: Any, key: bytes) -> Awaitable[bytes | None]:
    """source.get(key): the value, or None."""
    native = _SOURCES.get(source.__class__)
    if native is None or key.__class__ is not bytes or not active():
        return method(source, "get", key)
    future = _start_point(native, source, key, False, _Status())
    return Pending(future, _RB, wire.read_optional_bytes)


def _as_point_row(row: Any) -> PointRow:
    return None if row is None else (row.value, row.expire_ts)


async def _generated_row(source: Any, key: Any) -> PointRow:
    return _as_point_row(await method(source, "get_key_value", key))


def get_row(source: Any, key: bytes) -> Awaitable[PointRow]:
    """source.get_key_value(key) as (value, expire_ts), or None when there is no row."""
    native = _SOURCES.get(source.__class__)
    if native is None or key.__class__ is not bytes or not active():
        return _generated_row(source, key)
    future = _start_point(native, source, key, True, _Status())
    return Pending(future, _RB, wire.read_point_row)


_poll_rb = _RB.poll
_complete_rb = _RB.complete
_free_rb = _RB.free
_from_bytes = wire.from_bytes_call()
_pack_i32 = struct.Struct(">i").pack


def _start_point(native: _Source, source: Any, key: bytes, rows: bool, status: Any) -> int:
    """Start one point read: the key framed in one call, the source's handle cloned, the
    method called; the future's handle (Rust owns the key buffer and the clone from here)."""
    size = len(key)
    if _from_bytes is None or size > _FRAMED_INLINE:
        key_buffer = wire.lower_bytes(key)
    else:  # wire.lower_bytes, inlined on the hottest path: one call, the key framed in place
        key_buffer = _from_bytes(size + 4, _pack_i32(size) + key, _byref(status))
        if status.code:
            _check(None, status)
    handle = native.clone_raw(source._handle, _byref(status))
    if status.code:
        wire.free(key_buffer)
        _check(_Errors, status)
    future: int = (native.get_key_value if rows else native.get)(handle, key_buffer)
    return future


def _end_point(future: int, rows: bool, status: Any) -> Any:
    """Complete a READY point read and lift its row (or value); its buffer is freed."""
    result = _complete_rb(future, _byref(status))
    if status.code:
        _check(_Errors, status)
    size = result.len
    try:
        data = result.data[:size] if size else b""
    finally:
        wire.free(result)
    return wire.parse_point_row(data) if rows else wire.parse_optional_bytes(data)


def _point_now(source: Any, key: bytes, rows: bool) -> Any:
    """One point read for a sync caller, driven on this thread in one frame (no awaitable):
    the sync face's hottest path; _Point is the same read for either face."""
    native = _SOURCES.get(source.__class__)
    if native is None or key.__class__ is not bytes or not active():
        return driver.run(_generated_row(source, key) if rows else method(source, "get", key))
    status = _Status()
    future = _start_point(native, source, key, rows, status)
    waiter = driver.Waiter()
    try:
        driver.poll_now(_poll_rb, future, waiter)
        return _end_point(future, rows, status)
    finally:
        _free_rb(future)
        driver.forget(waiter)


class _Point:
    """One point read as an awaitable, either face: _Points for a single key, without the
    lists (the async face's get)."""

    __slots__ = ("key", "native", "rows", "source")

    def __init__(self, source: Any, native: _Source, key: bytes, rows: bool) -> None:
        self.source = source
        self.native = native
        self.key = key
        self.rows = rows

    def __await__(self) -> Generator[Any, None, Any]:
        status = _Status()
        future = _start_point(self.native, self.source, self.key, self.rows, status)
        waiter = driver.Waiter()
        try:
            driver.poll_once(_poll_rb, future, waiter)
            if waiter.code != driver.READY:
                yield from driver.settle(_poll_rb, future, waiter)
            return _end_point(future, self.rows, status)
        finally:
            _free_rb(future)
            driver.forget(waiter)


def read_row(source: Any, key: bytes) -> Awaitable[PointRow]:
    """get_row(source, key) as one fused awaitable (a single read; use get_row with many())."""
    native = _SOURCES.get(source.__class__)
    if native is None or key.__class__ is not bytes or not active():
        return get_row(source, key)
    return _Point(source, native, key, True)


def read_value(source: Any, key: bytes) -> Awaitable[bytes | None]:
    """get(source, key) as one fused awaitable (a single read; use get with many())."""
    native = _SOURCES.get(source.__class__)
    if native is None or key.__class__ is not bytes or not active():
        return get(source, key)
    return _Point(source, native, key, False)


class _Points:
    """Many point reads as one awaitable, either face: every key lowered, every call started
    and polled once before any is waited for (all in flight at once), then each completed
    in order. Pending and Gather do the same per call; this does it in one frame per batch,
    which is what makes get_many cheaper per key than get."""

    __slots__ = ("keys", "native", "rows", "source")

    def __init__(self, source: Any, native: _Source, keys: list[bytes], rows: bool) -> None:
        self.source = source
        self.native = native
        self.keys = keys
        self.rows = rows

    def __await__(self) -> Generator[Any, None, list[Any]]:
        native, source, rows = self.native, self.source, self.rows
        status = _Status()
        futures: list[int] = []
        waiters: list[driver.Waiter] = []
        out: list[Any] = []
        try:
            for key in self.keys:
                futures.append(_start_point(native, source, key, rows, status))
            poll_once, new_waiter = driver.poll_once, driver.Waiter
            for future in futures:
                waiter = new_waiter()
                waiters.append(waiter)
                poll_once(_poll_rb, future, waiter)
            for future, waiter in zip(futures, waiters, strict=True):
                if waiter.code != driver.READY:
                    yield from driver.settle(_poll_rb, future, waiter)
                out.append(_end_point(future, rows, status))
        finally:
            for future in futures:
                _free_rb(future)
            for waiter in waiters:
                driver.forget(waiter)
        return out


def _points(source: Any, keys: list[bytes], rows: bool) -> Awaitable[list[Any]]:
    """The point reads of `keys`, all in flight at once, awaitable by either face."""
    native = _SOURCES.get(source.__class__)
    if native is None or not active() or any(key.__class__ is not bytes for key in keys):
        return many([get_row(source, key) if rows else get(source, key) for key in keys])
    return _Points(source, native, keys, rows)


def get_rows(source: Any, keys: list[bytes]) -> Awaitable[list[PointRow]]:
    """get_row of each key, in flight together; in order."""
    return _points(source, keys, True)


def get_values(source: Any, keys: list[bytes]) -> Awaitable[list[bytes | None]]:
    """get of each key, in flight together; in order."""
    return _points(source, keys, False)


def _points_now(source: Any, keys: list[bytes], rows: bool) -> list[Any]:
    """The point reads of `keys` for a sync caller, driven on this thread."""
    return sync(_points_drive(source, keys, rows))


async def _points_drive(source: Any, keys: list[bytes], rows: bool) -> list[Any]:
    return await _points(source, keys, rows)


def get_rows_now(source: Any, keys: list[bytes]) -> list[PointRow]:
    """get_row of each key, in flight together, run on this thread (sync face)."""
    return _points_now(source, keys, True)


def get_values_now(source: Any, keys: list[bytes]) -> list[bytes | None]:
    """get of each key, in flight together, run on this thread (sync face)."""
    return _points_now(source, keys, False)


def get_row_now(source: Any, key: bytes) -> PointRow:
    """get_row(source, key), run to completion on this thread (sync face)."""
    row: PointRow = _point_now(source, key, True)
    return row


def get_now(source: Any, key: bytes) -> bytes | None:
    """get(source, key), run to completion on this thread (sync face)."""
    value: bytes | None = _point_now(source, key, False)
    return value


def _columns(rows: list[Any]) -> Columns:
    return [row.key for row in rows], [row.value for row in rows], [r.expire_ts for r in rows]


async def _generated_columns(iterator: Any, limit: int) -> Columns:
    return _columns(await method(iterator, "next_batch", limit))


def next_columns(iterator: Any, limit: int) -> Awaitable[Columns]:
    """The iterator's next batch of up to `limit` rows as columns (empty at the end)."""
    if iterator.__class__ is not _B.DbIterator or not active():
        return _generated_columns(iterator, limit)
    if not 0 <= limit < 1 << 32:
        raise ValueError(f"u32 requires 0 <= value < 4294967296, got {limit!r}")
    handle = _clone_iterator(iterator._handle)
    return Pending(_next_batch(handle, limit), _RB, wire.read_columns)


_wal_next = _lib.uniffi_slatedb_uniffi_fn_method_slatedbwaliterator_next
_clone_wal_iterator = _rust_call(_lib.uniffi_slatedb_uniffi_fn_clone_slatedbwaliterator)


def wal_next(iterator: Any) -> Awaitable[Any]:
    """A WAL iterator's next file as WalRows (None at the end), its rows read by one parser
    (wire.read_wal_rows) instead of field by field: the change feed's hot call."""
    if iterator.__class__ is not _B.SlateDbWalIterator or not active():
        return method(iterator, "next")
    return Pending(_wal_next(_clone_wal_iterator(iterator._handle)), _RB, wire.read_wal_rows)


def _both_bytes(key: Any, value: Any) -> bool:
    return key.__class__ is bytes and value.__class__ is bytes


async def _generated_write(call: Awaitable[Any]) -> None:
    await call


def put(db: Any, key: bytes, value: bytes) -> Awaitable[None]:
    """db.put(key, value) (the write handle is dropped)."""
    if db.__class__ is not _B.Db or not _both_bytes(key, value) or not active():
        return _generated_write(method(db, "put", key, value))
    key_buffer = wire.lower_bytes(key)
    try:
        value_buffer = wire.lower_bytes(value)
    except BaseException:
        wire.free(key_buffer)
        raise
    handle = _cloned(_clone_db, db, key_buffer, value_buffer)
    return Pending(_db_put(handle, key_buffer, value_buffer), _U64, _drop_write_handle)


def put_expiring(db: Any, key: bytes, value: bytes, expire_at: int) -> Awaitable[None]:
    """db.put_with_options(key, value, PutOptions(ttl=EXPIRE_AT_MILLIS(expire_at)),
    WriteOptions()), a direct call as put is: the options lowered as their bytes (12 for the
    TTL, 8 for the default WriteOptions' seqnum 0), not through the generated converters."""
    if (
        db.__class__ is not _B.Db
        or _from_bytes is None
        or not (_one_copy(key) and _one_copy(value))
        or expire_at.__class__ is not int
        or not -(1 << 63) <= expire_at < 1 << 63
        or not active()
    ):
        options = _B.PutOptions(ttl=_B.Ttl.EXPIRE_AT_MILLIS(expire_at))
        call = method(db, "put_with_options", key, value, options, _B.WriteOptions())
        return _generated_write(call)
    status = _Status()
    ref = _byref(status)
    buffers = [_lowered(key, status)]
    try:
        buffers.append(_lowered(value, status))
        for framed in (_put_options(_TTL_EXPIRE_AT, expire_at), _DEFAULT_WRITE_OPTIONS):
            buffers.append(_from_bytes(len(framed), framed, ref))
            if status.code:
                _check(None, status)
        handle = _cloned(_clone_db, db)
    except BaseException:
        for buffer in buffers:
            wire.free(buffer)
        raise
    # Rust owns the buffers and the clone from here
    return Pending(_db_put_with_options(handle, *buffers), _U64, _drop_write_handle)


def delete(db: Any, key: bytes) -> Awaitable[None]:
    """db.delete(key)."""
    if db.__class__ is not _B.Db or key.__class__ is not bytes or not active():
        return _generated_write(method(db, "delete", key))
    key_buffer = wire.lower_bytes(key)
    handle = _cloned(_clone_db, db, key_buffer)
    return Pending(_db_delete(handle, key_buffer), _U64, _drop_write_handle)


def write(db: Any, batch: Any) -> Awaitable[None]:
    """db.write(batch): applies it atomically; slatedb consumes the batch."""
    if db.__class__ is not _B.Db or batch.__class__ is not _B.WriteBatch or not active():
        return _generated_write(method(db, "write", batch))
    handle = _clone_db(db._handle)
    batch_handle = _clone_batch(batch._handle)
    return Pending(_db_write(handle, batch_handle), _U64, _drop_write_handle)


def batch_put(batch: Any, key: bytes, value: bytes) -> None:
    """batch.put(key, value): queue a put in a WriteBatch (no future: a plain call)."""
    if batch.__class__ is not _B.WriteBatch:
        raise TypeError(f"batch_put needs a WriteBatch, got {type(batch).__name__}")
    if not _both_bytes(key, value) or not active():
        batch.put(key, value)
        return
    key_buffer = wire.lower_bytes(key)
    try:
        value_buffer = wire.lower_bytes(value)
    except BaseException:
        wire.free(key_buffer)
        raise
    status = _Status()
    handle = _clone_batch_raw(batch._handle, _byref(status))
    if status.code:
        wire.free(key_buffer)
        wire.free(value_buffer)
        _check(_Errors, status)
    # from here Rust owns both buffers and the cloned handle
    _batch_put(handle, key_buffer, value_buffer, _byref(status))
    if status.code:
        _check(_Errors, status)


def _lowered(data: bytes, status: Any) -> Any:
    """`data` framed as a Bytes RustBuffer in one call (the caller checked the size and that
    _from_bytes exists); `status` is reused, so it is checked here."""
    size = len(data)
    buffer = _from_bytes(size + 4, _pack_i32(size) + data, _byref(status))
    if status.code:
        _check(None, status)
    return buffer


def _one_copy(data: Any) -> bool:
    return data.__class__ is bytes and len(data) <= _FRAMED_INLINE


def pack_value(value: Any, max_len: int, max_depth: int) -> bytes | None:
    """msgpack bytes of `value` when it holds only the common types (exact dict, list, tuple,
    str, bytes, int, float, bool, None), is at most `max_len` bytes and nests fewer than
    `max_depth` containers; None otherwise. The C accelerator's; this pure stand-in packs
    nothing (see packer())."""
    return None


_PURE_PACK = pack_value


def queue_put(
    plans: dict[object, Any],
    target: object,
    fields: Any,
    value: Any,
    keys: list[bytes],
    data: list[Any],
    expires: list[Any],
    expire_at: int | None = None,
) -> bool:
    """Batch.put's common case in one call: the key (the plan's C KeyEncoder) and the msgpack
    value (its packing) of a put addressed by a record type or name in `plans` with a field
    tuple, appended to the batch's columns with `expire_at` (a TTL put's expiry, Unix ms);
    False, nothing queued, for any put it does not encode. The C accelerator's; this pure
    stand-in queues nothing."""
    return False


def batch_putter(
    put: Callable[..., None],
    plans: dict[object, Any],
    keys: list[bytes],
    data: list[Any],
    expires: list[Any],
) -> Callable[..., None]:
    """A put for a sync batch to hold: `put(target, fields, value)` queued as queue_put does,
    any other call (and every call once its `switch_off()` is called: the batch was written)
    passed to `put`. The C accelerator's (BatchPut); this pure stand-in is `put` itself."""
    return put


def queue_puts(
    plans: dict[object, Any],
    items: list[Any],
    start: int,
    keys: list[bytes],
    data: list[Any],
    expires: list[Any],
) -> int:
    """queue_put of put_many's items from `start` while each is `(target, fields, value)` (or
    with a None ttl) that it encodes; the position of the first it leaves to the caller. The C
    accelerator's; this pure stand-in queues nothing."""
    return start


def packer() -> Callable[[Any, int, int], bytes | None] | None:
    """The C accelerator's pack_value when it is in use, else None: the pure path encodes with
    its codec as before."""
    found: Callable[[Any, int, int], bytes | None] = globals()["pack_value"]
    return None if found is _PURE_PACK else found


def batch_put_many(
    batch: Any,
    keys: Sequence[bytes],
    values: Sequence[bytes],
    expires: Sequence[int | None] | None = None,
) -> None:
    """batch_put of each (key, value) in order, or batch_put_expiring where `expires` (one
    Unix-ms expiry or None per put) holds one: a batch's deferred puts and index ops, plain
    and TTL ones in one loop with the status, clone and framing bound once (about 1 us less
    per entry than a call each)."""
    if batch.__class__ is not _B.WriteBatch:
        raise TypeError(f"batch_put_many needs a WriteBatch, got {type(batch).__name__}")
    if len(keys) != len(values):
        raise ValueError(f"batch_put_many: {len(keys)} keys but {len(values)} values")
    if expires is None:
        expires = (None,) * len(keys)
    elif len(expires) != len(keys):
        raise ValueError(f"batch_put_many: {len(keys)} keys but {len(expires)} expiries")
    if _from_bytes is None or not active():
        for key, value, expire_at in zip(keys, values, expires, strict=True):
            if expire_at is None:
                batch_put(batch, key, value)
            else:
                batch_put_expiring(batch, key, value, expire_at)
        return
    status = _Status()
    ref = _byref(status)
    handle = batch._handle
    frame, pack, clone, put = _from_bytes, _pack_i32, _clone_batch_raw, _batch_put
    for key, value, expire_at in zip(keys, values, expires, strict=True):
        if expire_at is not None:  # a TTL put: its options framed too (batch_put_expiring)
            batch_put_expiring(batch, key, value, expire_at)
            continue
        # _one_copy and _lowered inlined: this loop runs once per index entry
        if not (
            key.__class__ is bytes
            and value.__class__ is bytes
            and len(key) <= _FRAMED_INLINE
            and len(value) <= _FRAMED_INLINE
        ):
            batch_put(batch, key, value)
            continue
        size = len(key)
        key_buffer = frame(size + 4, pack(size) + key, ref)
        if status.code:
            _check(None, status)
        size = len(value)
        value_buffer = frame(size + 4, pack(size) + value, ref)
        if status.code:
            wire.free(key_buffer)
            _check(None, status)
        cloned = clone(handle, ref)
        if status.code:
            wire.free(key_buffer)
            wire.free(value_buffer)
            _check(_Errors, status)
        put(cloned, key_buffer, value_buffer, ref)  # Rust owns both buffers and the clone
        if status.code:
            _check(_Errors, status)


def expire_after(ms: int) -> int:
    """The wall clock in Unix ms (the clock slatedb stamps with) plus `ms`: the expiry of a
    TTL put, read once per put (in C without Python's big-int arithmetic on nanoseconds)."""
    return _time_ns() // 1_000_000 + ms


def batch_delete(batch: Any, key: bytes) -> None:
    """batch.delete(key), a direct call (the generated one lowers the key byte by byte:
    19.7 us against about 3)."""
    if batch.__class__ is not _B.WriteBatch:
        raise TypeError(f"batch_delete needs a WriteBatch, got {type(batch).__name__}")
    if _from_bytes is None or not _one_copy(key) or not active():
        batch.delete(key)
        return
    status = _Status()
    key_buffer = _lowered(key, status)
    handle = _clone_batch_raw(batch._handle, _byref(status))
    if status.code:
        wire.free(key_buffer)
        _check(_Errors, status)
    _batch_delete(handle, key_buffer, _byref(status))
    if status.code:
        _check(_Errors, status)


_TTL_EXPIRE_AT: Final = 4  # the Ttl variant EXPIRE_AT_MILLIS, as PutOptions lowers it
_put_options = struct.Struct(">iq").pack
#: WriteOptions() as its converter lowers it: the u64 seqnum 0
_DEFAULT_WRITE_OPTIONS: Final = bytes(8)


def batch_put_expiring(batch: Any, key: bytes, value: bytes, expire_at: int) -> None:
    """batch.put_with_options(key, value, PutOptions(ttl=EXPIRE_AT_MILLIS(expire_at))), a
    direct call: the options lowered as their 12 bytes (i32 variant, i64 ms), not through
    the generated converters (52.6 us against about 5)."""
    if batch.__class__ is not _B.WriteBatch:
        raise TypeError(f"batch_put_expiring needs a WriteBatch, got {type(batch).__name__}")
    if (
        _from_bytes is None
        or not (_one_copy(key) and _one_copy(value))
        or expire_at.__class__ is not int
        or not -(1 << 63) <= expire_at < 1 << 63
        or not active()
    ):
        options = _B.PutOptions(ttl=_B.Ttl.EXPIRE_AT_MILLIS(expire_at))
        batch.put_with_options(key, value, options)
        return
    status = _Status()
    ref = _byref(status)
    key_buffer = _lowered(key, status)
    buffers = [key_buffer]
    try:
        buffers.append(_lowered(value, status))
        options = _from_bytes(12, _put_options(_TTL_EXPIRE_AT, expire_at), ref)
        if status.code:
            _check(None, status)
        buffers.append(options)
        handle = _clone_batch_raw(batch._handle, ref)
        if status.code:
            _check(_Errors, status)
    except BaseException:
        for buffer in buffers:
            wire.free(buffer)
        raise
    _batch_put_with_options(handle, *buffers, ref)  # Rust owns the buffers and the clone
    if status.code:
        _check(_Errors, status)


def seek(iterator: Any, key: bytes) -> Awaitable[None]:
    """iterator.seek(key): a direct call (the generated one lowers the key byte by byte:
    22.7 us against 6.1), awaitable by either face."""
    if (
        iterator.__class__ is not _B.DbIterator
        or _from_bytes is None
        or not _one_copy(key)
        or not active()
    ):
        awaitable: Awaitable[None] = method(iterator, "seek", key)
        return awaitable
    status = _Status()
    key_buffer = _lowered(key, status)
    handle = _cloned(_clone_iterator, iterator, key_buffer)
    return Pending(_seek(handle, key_buffer), _VOID, _none)


def _none(_: Any) -> None:
    return None


_scan_with_options = {
    _B.Db: _lib.uniffi_slatedb_uniffi_fn_method_db_scan_with_options,
    _B.DbReader: _lib.uniffi_slatedb_uniffi_fn_method_dbreader_scan_with_options,
    _B.DbSnapshot: _lib.uniffi_slatedb_uniffi_fn_method_dbsnapshot_scan_with_options,
    _B.DbTransaction: _lib.uniffi_slatedb_uniffi_fn_method_dbtransaction_scan_with_options,
}
_lift_iterator = _B._UniffiFfiConverterTypeDbIterator.lift
_lower_options = _B._UniffiFfiConverterTypeScanOptions
#: ScanOptions lowered once: id -> (the options, their fields then, their bytes); the
#: options object is held, so its id stays its own
_LOWERED_OPTIONS: dict[int, tuple[Any, tuple[Any, ...], bytes]] = {}
_OPTION_FIELDS: Final = (
    "durability_filter",
    "dirty",
    "read_ahead_bytes",
    "cache_blocks",
    "max_fetch_tasks",
    "order",
    "filter_context",
    "tracing_options",
)


def _options_bytes(options: Any) -> bytes:
    """ScanOptions as the generated converter lowers them, computed once per options object
    (the converter writes byte by byte: ~0.3 ms a scan) and again if its fields changed."""
    fields = tuple(getattr(options, name) for name in _OPTION_FIELDS)
    found = _LOWERED_OPTIONS.get(id(options))
    if found is not None and found[0] is options and found[1] == fields:
        return found[2]
    _lower_options.check_lower(options)
    buffer = _lower_options.lower(options)
    try:
        data = bytes(buffer.data[: buffer.len]) if buffer.len else b""
    finally:
        wire.free(buffer)
    if len(_LOWERED_OPTIONS) >= 64:
        _LOWERED_OPTIONS.clear()
    _LOWERED_OPTIONS[id(options)] = (options, fields, data)
    return data


_pack_bound = struct.Struct(">Bi").pack


def _bound(key: bytes | None) -> bytes:
    """An Option<bytes> as lowered: flag 0, or flag 1, the i32 length, the bytes."""
    return b"\x00" if key is None else _pack_bound(1, len(key)) + key


def scan(
    source: Any,
    start: bytes | None,
    start_inclusive: bool,
    end: bytes | None,
    end_inclusive: bool,
    options: Any,
) -> Awaitable[Any]:
    """source.scan_with_options(KeyRange(...), options): a DbIterator. A direct call: the
    range framed in one piece, the options' bytes lowered once per options object (the
    generated call lowers both byte by byte, ~0.3 ms of a short scan's set-up)."""
    call = _scan_with_options.get(source.__class__)
    if (
        call is None
        or _from_bytes is None
        or not (start is None or start.__class__ is bytes)
        or not (end is None or end.__class__ is bytes)
        or start_inclusive.__class__ is not bool
        or end_inclusive.__class__ is not bool
        or not active()
    ):
        key_range = _B.KeyRange(
            start=start, start_inclusive=start_inclusive, end=end, end_inclusive=end_inclusive
        )
        awaitable: Awaitable[Any] = method(source, "scan_with_options", key_range, options)
        return awaitable
    framed = b"".join((_bound(start), b"\x01" if start_inclusive else b"\x00", _bound(end))) + (
        b"\x01" if end_inclusive else b"\x00"
    )
    lowered = _options_bytes(options)
    status = _Status()
    ref = _byref(status)
    buffers = []
    try:
        for data in (framed, lowered):
            buffers.append(_from_bytes(len(data), data, ref))
            if status.code:
                _check(None, status)
        handle = _SOURCES[source.__class__].clone(source._handle)
    except BaseException:
        for buffer in buffers:
            wire.free(buffer)
        raise
    # Rust owns the buffers and the clone from here
    return Pending(call(handle, *buffers), _U64, _lift_iterator)


def many(calls: list[Awaitable[T]]) -> Awaitable[list[T]]:
    """Await many calls with all of their futures in flight at once (results in order)."""
    if all(isinstance(call, Pending) for call in calls):
        return driver.Gather(calls)  # type: ignore[arg-type]
    return _in_order(calls)


async def _in_order(calls: list[Awaitable[T]]) -> list[T]:
    if driver.syncing():
        return [await call for call in calls]
    import asyncio

    return list(await asyncio.gather(*calls))


#: what the self-check (selfcheck.py) drives and compares with the generated methods
_DRIVEN = selfcheck.Driven(
    replica=_replica,
    put=put,
    batch_put=batch_put,
    write=write,
    delete=delete,
    get=get,
    get_row=get_row,
    next_columns=next_columns,
    columns=_columns,
    many=many,
)
