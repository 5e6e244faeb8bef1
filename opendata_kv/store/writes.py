"""Writes as values: the operations a Batch collects and index maintainers return, and the
small read protocol index upkeep reads through (RFC 0010, "Writes as values")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol


class Undecoded:
    """The value of a put made from bytes alone (decoded with its codec when needed)."""

    def __repr__(self) -> str:
        return "<undecoded>"


UNDECODED: Any = Undecoded()


class Put(NamedTuple):
    """Store `data` under `key`; `expire_at`: absolute expiry, Unix ms (carried by `options`,
    the PutOptions, None for none); `value`: the typed object encoded, or UNDECODED. `data`
    is None only in an index build that copies nothing."""

    key: bytes
    data: bytes | None
    expire_at: int | None = None
    value: Any = UNDECODED
    options: Any = None


class Delete(NamedTuple):
    """Remove whatever is stored under `key`."""

    key: bytes


Op = Put | Delete
Fetch = Callable[[list[bytes]], Awaitable[list[bytes | None]]]


class MaintenanceReads(Protocol):
    """What index upkeep reads: the values a write replaces (old_values' marking: Expired,
    Expiring) and the current live values of index rows (unique holders, aggregate groups)."""

    async def replaced(self, keys: list[bytes]) -> list[bytes | None]: ...

    async def current(self, keys: list[bytes]) -> list[bytes | None]: ...


class FetchReads:
    """MaintenanceReads from two fetch functions (the writer's, a transaction's, a build's)."""

    __slots__ = ("_current", "_replaced")

    def __init__(self, replaced: Fetch, current: Fetch) -> None:
        self._replaced = replaced
        self._current = current

    async def replaced(self, keys: list[bytes]) -> list[bytes | None]:
        return await self._replaced(keys)

    async def current(self, keys: list[bytes]) -> list[bytes | None]:
        return await self._current(keys)
