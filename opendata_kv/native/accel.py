"""Decides whether the optional C accelerator (native/_accel, built from native/_accel/*.c)
drives the hot calls, and hands calls.py its functions.

It is used only on top of the ctypes driver (the same slatedb version and hash guard, and the
driver's own self-check passed), when `OPENDATA_KV_NO_EXTENSIONS` is not set, when the module
imports (it is skipped at install time without a compiler), and when its own self-check, the
driver's round trip run through the C functions plus its parsers compared with wire.py's,
agrees; otherwise the ctypes driver stays, with one warning when the check failed.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

from opendata_kv.native import driver, selfcheck, wire
from opendata_kv.native.binding import NativeStatus, generated, logger

ENV_DISABLE: Final = "OPENDATA_KV_NO_EXTENSIONS"
"""Set to 1 (or true/yes/on) to keep the C accelerator off (the ctypes driver is used)."""

ABI: Final = 1
#: the calls.py functions the extension replaces (same names, same signatures)
HOT: Final = (
    "get_now",
    "get_row_now",
    "get_values_now",
    "get_rows_now",
    "read_value",
    "read_row",
    "get_values",
    "get_rows",
    "next_columns",
    "put",
    "put_expiring",
    "delete",
    "write",
    "batch_put",
    "seek",
    "batch_delete",
    "batch_put_expiring",
    "batch_put_many",
    "expire_after",
    "pack_value",
    "queue_put",
    "queue_puts",
    "batch_putter",
)

_B = generated()
_lib = _B._UniffiLib
_SOURCES: Final = (
    (_B.Db, "db"),
    (_B.DbReader, "dbreader"),
    (_B.DbSnapshot, "dbsnapshot"),
    (_B.DbTransaction, "dbtransaction"),
)
_F: Final = "uniffi_slatedb_uniffi_fn_"
_FUTURE: Final = "ffi_slatedb_uniffi_rust_future_"


def _disabled_by_env() -> bool:
    return os.environ.get(ENV_DISABLE, "").strip().lower() in {"1", "true", "yes", "on"}


def _address(name: str) -> int:
    return ctypes.cast(getattr(_lib, name), ctypes.c_void_p).value or 0


def _table() -> dict[str, int]:
    """The library entry points the extension calls, by its short names."""
    names = {
        "rustbuffer_alloc": "ffi_slatedb_uniffi_rustbuffer_alloc",
        "rustbuffer_free": "ffi_slatedb_uniffi_rustbuffer_free",
        "clone_db": f"{_F}clone_db",
        "free_db": f"{_F}free_db",
        "clone_dbiterator": f"{_F}clone_dbiterator",
        "clone_writebatch": f"{_F}clone_writebatch",
        "dbiterator_next_batch": f"{_F}method_dbiterator_next_batch",
        "db_put": f"{_F}method_db_put",
        "db_put_with_options": f"{_F}method_db_put_with_options",
        "db_delete": f"{_F}method_db_delete",
        "db_write": f"{_F}method_db_write",
        "writebatch_put": f"{_F}method_writebatch_put",
        "dbiterator_seek": f"{_F}method_dbiterator_seek",
        "writebatch_delete": f"{_F}method_writebatch_delete",
        "writebatch_put_with_options": f"{_F}method_writebatch_put_with_options",
        "free_writehandle": f"{_F}free_writehandle",
    }
    for kind in ("rust_buffer", "u64", "void"):
        for op in ("poll", "cancel", "free", "complete"):
            names[f"{op}_{kind}"] = f"{_FUTURE}{op}_{kind}"
    for _, suffix in _SOURCES:
        names[f"clone_{suffix}"] = f"{_F}clone_{suffix}"
        names[f"{suffix}_get"] = f"{_F}method_{suffix}_get"
        names[f"{suffix}_get_key_value"] = f"{_F}method_{suffix}_get_key_value"
    return {short: _address(name) for short, name in names.items()}


def _raise_status(raw: bytes) -> None:
    """The error of a failed call status (its bytes, from C), raised as the generated code
    raises it; the error buffer is consumed."""
    status = _B._UniffiRustCallStatus.from_buffer_copy(raw)
    _B._uniffi_check_call_status(_B._UniffiFfiConverterTypeError, status)
    raise AssertionError("a failed call status raised nothing")


def _import() -> tuple[ModuleType | None, str]:
    try:
        module = importlib.import_module("opendata_kv.native._accel")
    except ImportError as exc:
        if exc.name == "opendata_kv.native._accel":
            return None, "extension not built"
        return None, f"extension not loadable: {exc}"
    if getattr(module, "__file__", None) is None:  # the C sources' folder, a namespace package
        return None, "extension not built"
    if getattr(module, "ABI", None) != ABI:
        return None, f"extension ABI {getattr(module, 'ABI', None)} is not {ABI}: rebuild it"
    return module, "C accelerator"


def _init(module: ModuleType, pure: dict[str, Callable[..., Any]]) -> None:
    module.init(
        table=_table(),
        sources=_SOURCES,
        types=(_B.Db, _B.DbIterator, _B.WriteBatch),
        hooks=(
            _raise_status,
            driver.syncing,
            asyncio.get_running_loop,
            driver._wake,
            wire.InternalError,
        ),
        fallbacks=pure,
    )


def _check_parsers(module: ModuleType) -> None:
    """The C parsers read what the generated converters write exactly as wire.py does (the
    generated bytes are selfcheck.lowered()'s, made once for both checks)."""
    made = selfcheck.lowered()
    if module._parse_columns(made.row_list) != wire.parse_columns(made.row_list):
        raise AssertionError("C row columns differ from wire.py's")
    for data in made.point_rows:
        if module._parse_point_row(data) != wire.parse_point_row(data):
            raise AssertionError("a C point row differs from wire.py's")
    for value, data in zip(selfcheck.OPTIONAL, made.optional_bytes, strict=True):
        if module._parse_optional_bytes(data) != value:
            raise AssertionError("C optional bytes differ")


def _self_check(module: ModuleType, driven: selfcheck.Driven) -> str | None:
    try:
        _check_parsers(module)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    c_driven = selfcheck.Driven(
        replica=driven.replica,
        put=module.put,
        batch_put=module.batch_put,
        write=module.write,
        delete=module.delete,
        get=module.read_value,
        get_row=module.read_row,
        next_columns=module.next_columns,
        columns=driven.columns,
        many=driven.many,
    )
    return selfcheck.self_check(c_driven)


_lock = threading.Lock()
_state: tuple[ModuleType | None, str] | None = None


def functions(
    pure: dict[str, Callable[..., Any]], driven: selfcheck.Driven
) -> dict[str, Callable[..., Any]] | None:
    """The C replacements of `pure` (those of calls.py's HOT functions it has, which they fall
    back on) once
    the extension is imported, bound and self-checked; None when the ctypes driver stays
    (reason()). Decided once."""
    global _state
    with _lock:
        if _state is None:
            _state = _decide(pure, driven)
    module = _state[0]
    if module is None:
        return None
    # a name an older build lacks keeps its pure function
    return {name: getattr(module, name) for name in HOT if name in pure and hasattr(module, name)}


def _decide(
    pure: dict[str, Callable[..., Any]], driven: selfcheck.Driven
) -> tuple[ModuleType | None, str]:
    if _disabled_by_env():
        return None, f"{ENV_DISABLE}=1"
    module, why = _import()
    if module is None:
        return None, why
    try:
        _init(module, pure)
    except Exception as exc:
        return None, f"extension init failed: {type(exc).__name__}: {exc}"
    atexit.register(module.shutdown)
    failure = _self_check(module, driven)
    if failure is not None:
        logger.warning(
            "opendata_kv keeps the ctypes driver: the C accelerator's self-check failed (%s)",
            failure,
        )
        return None, f"self-check failed: {failure}"
    return module, "C accelerator"


def active_module() -> ModuleType | None:
    """The extension when it was decided in use (None: off, or not decided yet)."""
    return None if _state is None else _state[0]


def reason() -> str | None:
    """Why the accelerator is or is not in use (None: not decided yet)."""
    return None if _state is None else _state[1]


def describe(status: NativeStatus) -> str:
    """The active native path in words, for `opendata-kv --version`."""
    if not status.active:
        return f"native: generated binding ({status.reason})"
    why = reason()
    if why == "C accelerator":
        return "native: C accelerator"
    return f"native: ctypes driver ({why or 'accelerator not decided'})"
