"""Translate slatedb's exceptions into the OpendataKvError hierarchy."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from slatedb.uniffi import CloseReason, Error

from opendata_kv.errors import (
    FencedError,
    StoreClosedError,
    StoreDataError,
    StoreError,
    StoreUnavailableError,
    TransactionConflictError,
)

T = TypeVar("T")


def translate(exc: BaseException, where: str) -> StoreError:
    """The opendata_kv error for a slatedb failure during `where` (e.g. "put on file:///db")."""
    message = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, Error.Closed):
        if getattr(exc, "reason", None) == CloseReason.FENCED:
            return FencedError(
                f"{where}: another writer opened the same database and fenced this one; "
                f"its writes now fail (reopen to continue as the writer) [{message}]"
            )
        return StoreClosedError(f"{where}: the database is closed [{message}]")
    if isinstance(exc, Error.Transaction):
        return TransactionConflictError(
            f"{where}: the transaction conflicts with a concurrent write; retry it [{message}]"
        )
    if isinstance(exc, Error.Unavailable):
        return StoreUnavailableError(
            f"{where}: the object store is unavailable [{message}]; writes not yet "
            "acknowledged by flush() may be lost, and a writer is stopped by such a failure: "
            "reopen the store once the object store answers again"
        )
    if isinstance(exc, Error.Data):
        return StoreDataError(f"{where}: unreadable data [{message}]")
    if isinstance(exc, Error.Invalid):
        return StoreError(f"{where}: slatedb rejected the call [{message}]")
    return StoreError(f"{where}: {type(exc).__name__}: {message}")


async def call(awaitable: Awaitable[T], where: str) -> T:
    """Await a binding call, translating its exceptions (used off the hot paths)."""
    try:
        return await awaitable
    except Error as exc:
        raise translate(exc, where) from exc
