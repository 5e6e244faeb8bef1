"""Translate slatedb's exceptions into the OpendataKvError hierarchy.

slatedb's error kinds do not always say what happened: a truncated SST comes back as
"Unavailable" (an invalid byte range, which slatedb retries forever by default), a manifest
that does not decode as "Internal" or as a Rust panic (uniffi's InternalError), a file the
process may not read as "Unavailable". `translate` looks at the text too, so that a damaged
object is a StoreDataError, a refused access a StorePermissionError, and only a real outage a
StoreUnavailableError.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from slatedb.uniffi import CloseReason, Error
from slatedb.uniffi._slatedb_uniffi.slatedb import InternalError

from opendata_kv.errors import (
    FencedError,
    OpendataKvError,
    StoreClosedError,
    StoreDataError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
    TransactionConflictError,
)

T = TypeVar("T")

#: Every exception a binding call can raise: slatedb's Error, and uniffi's InternalError for
#: a Rust panic (seen on manifests whose bytes were damaged).
FOREIGN: tuple[type[BaseException], ...] = (Error, InternalError)

VERIFY_ADVICE = "run `opendata-kv verify URL` to list every damaged object"

#: what every FencedError says (the store's own refusals too, store/fencing.py)
FENCED = "another writer opened the same database and fenced this one"

# An object shorter than the manifest says (truncated, emptied, or a damaged offset):
# object_store reports the read as an invalid range, slatedb calls that "Unavailable".
_BAD_RANGE = re.compile(
    r"Requested range was invalid|InvalidRange|range not satisfiable|status(?: code)?:? 416",
    re.IGNORECASE,
)
_PERMISSION = re.compile(
    r"Permission denied|os error 13|AccessDenied|Access Denied|status(?: code)?:? 403|Forbidden|"
    r"InvalidAccessKeyId|SignatureDoesNotMatch",
    re.IGNORECASE,
)
# Decoding failures of manifests, compactions files and SSTs (flatbuffers, versions, ...).
_UNDECODABLE = re.compile(
    r"transactional object|manifest|compaction|flatbuffer|OutOfBounds|Unaligned|"
    r"InvalidFlatbuffer|Utf8|sst|checksum|format version|sequence tracker",
    re.IGNORECASE,
)
# slatedb's WAL replay finding sequence numbers that go back from one file to the next
_WAL_ORDER = re.compile(r"out-of-order seqs", re.IGNORECASE)
# What an "Invalid" error says when it is about stored data rather than about the call.
_INVALID_DATA = re.compile(
    r"invalid compaction|checksum|format version|flatbuffer|does not decode", re.IGNORECASE
)
_OBJECT = re.compile(
    r"((?:wal|compacted|manifest|compactions|checkpoints?)/[0-9A-Za-z_.-]+\.(?:sst|manifest|compactions))"
)


def is_bad_range(message: str) -> bool:
    """True when an object-store message says a read went past the object's end."""
    return _BAD_RANGE.search(message) is not None


def one_line(text: str) -> str:
    """slatedb's messages span lines (flatbuffer traces, panics): one line for an error."""
    return " ".join(text.split())


# slatedb names a WAL file by its id alone in some messages ("wal truncated at wal file `12`",
# "out-of-order seqs across WAL files. [wal_id=37, ...]").
_WAL_ID = re.compile(r"wal file `?(\d{1,20})`?|wal_id=(\d{1,20})", re.IGNORECASE)


def object_named(message: str) -> str | None:
    """The store object ("wal/....sst", "compacted/....sst") a slatedb message names, if any."""
    found = _OBJECT.search(message)
    if found:
        return found.group(1)
    wal = _WAL_ID.search(message)
    if wal:
        return f"wal/{int(wal.group(1) or wal.group(2)):020d}.sst"
    return None


def data_error(
    where: str, what: str, message: str, object_name: str | None = None
) -> StoreDataError:
    """A StoreDataError for damaged data, naming the object when known, with the advice."""
    name = object_name or object_named(message)
    named = f" in {name}" if name else ""
    return StoreDataError(f"{where}: {what}{named} [{message}]; {VERIFY_ADVICE}", object_name=name)


def translate(exc: BaseException, where: str) -> StoreError:
    """The opendata_kv error for a slatedb failure during `where` (e.g. "put on file:///db")."""
    message = one_line(getattr(exc, "message", None) or str(exc))
    if isinstance(exc, InternalError):
        return data_error(
            where, "slatedb crashed reading damaged data", message[:300] or type(exc).__name__
        )
    if _PERMISSION.search(message) and not isinstance(exc, (Error.Closed, Error.Transaction)):
        return StorePermissionError(
            f"{where}: the object store refused access [{message}]; retrying will not help: "
            "check the file permissions or the credentials and bucket policy"
        )
    if isinstance(exc, Error.Closed):
        if getattr(exc, "reason", None) == CloseReason.FENCED:
            return FencedError(
                f"{where}: {FENCED}; "
                f"its writes now fail (reopen to continue as the writer) [{message}]"
            )
        return StoreClosedError(f"{where}: the database is closed [{message}]")
    if isinstance(exc, Error.Transaction):
        return TransactionConflictError(
            f"{where}: the transaction conflicts with a concurrent write; retry it [{message}]"
        )
    if _BAD_RANGE.search(message):
        return data_error(
            where, "an object is shorter than the manifest says (truncated or damaged)", message
        )
    if isinstance(exc, Error.Unavailable):
        return StoreUnavailableError(
            f"{where}: the object store is unavailable [{message}]; writes not yet "
            "acknowledged by flush() may be lost, and a writer is stopped by such a failure: "
            "reopen the store once the object store answers again"
        )
    if isinstance(exc, Error.Data):
        return data_error(where, "unreadable data", message)
    if isinstance(exc, Error.Internal) and _WAL_ORDER.search(message):
        return data_error(
            where,
            "WAL files out of order (one replaced by an older copy, or two swapped)",
            message,
        )
    if isinstance(exc, Error.Internal) and _UNDECODABLE.search(message):
        return data_error(where, "damaged data does not decode", message)
    if isinstance(exc, Error.Invalid):
        if _INVALID_DATA.search(message):
            return data_error(where, "stored data slatedb rejects as invalid", message)
        return StoreError(f"{where}: slatedb rejected the call [{message}]")
    return StoreError(f"{where}: {type(exc).__name__}: {message}")


class translating:
    """`with translating(where):` turns a binding exception raised inside into
    `translate(exc, where)`; `unless(exc)` true lets it through unchanged (for a caller that
    handles that one itself), `others=True` makes any other non-OpendataKvError a StoreError.
    A class, not a generator: entering and leaving cost two plain method calls."""

    __slots__ = ("others", "unless", "where")

    def __init__(
        self,
        where: str,
        unless: Callable[[BaseException], bool] | None = None,
        others: bool = False,
    ) -> None:
        self.where = where
        self.unless = unless
        self.others = others

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None or (self.unless is not None and self.unless(exc)):
            return
        if isinstance(exc, FOREIGN):
            raise translate(exc, self.where) from exc
        if self.others and isinstance(exc, Exception) and not isinstance(exc, OpendataKvError):
            raise StoreError(f"{self.where}: {type(exc).__name__}: {exc}") from exc


async def call(awaitable: Awaitable[T], where: str, *, others: bool = False) -> T:
    """Await a binding call, translating its exceptions (used off the hot paths); `others`
    as in `translating`."""
    with translating(where, others=others):
        return await awaitable
