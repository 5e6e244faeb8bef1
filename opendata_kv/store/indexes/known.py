"""Replaced values read ahead of a write by the writer that makes it (a Jetstream consumer's
read before write), handed to the write's index plan so that it does not read them again.

A value read while nobody held the store's write lock is still the one a later write under
that lock replaces if nobody took the lock in between: every write of an indexed record is
made under it (its plan reads there), and a failed or uncertain write drops the group cache,
bumping its epoch. So a read carries (times the lock was taken, index generation, group
epoch), taken before it; the plan, holding the lock, uses it only when the lock was taken
once since (its own) and neither of the others moved. Otherwise it reads as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from opendata_kv.store.indexes.maintain import Expired
from opendata_kv.store.indexes.registry import IndexSet, WriteLock
from opendata_kv.store.writes import Fetch

__all__ = ["KnownValues", "token_of"]

#: (WriteLock.entered, IndexSet.generation, GroupCache.epoch) when a read began
Token = tuple[int, int, int]


def token_of(lock: WriteLock, indexes: IndexSet | None) -> Token | None:
    """The state a read beginning now is valid at, or None when the lock is held (a write
    may be on its way: the read may or may not see it)."""
    entered = lock.entered  # before the check: a taker after it moves `entered`
    if lock.locked():
        return None
    if indexes is None:
        return (entered, -1, -1)
    return (entered, indexes.generation, indexes.groups.epoch)


class KnownValues:
    """Stored values under some keys as old_values returns them (None: nothing stored;
    maintain.Expired / Expiring where they have a TTL), read at `token`."""

    __slots__ = ("token", "values")

    def __init__(self, keys: Sequence[bytes], values: Sequence[bytes | None], token: Token | None):
        self.values = dict(zip(keys, values, strict=True))
        self.token = token

    def live(self, key: bytes) -> bool:
        """Whether `key` held a live record when read."""
        value = self.values[key]
        return value is not None and value.__class__ is not Expired

    def valid(self, lock: WriteLock, indexes: IndexSet) -> bool:
        """Whether the values are still what a write now replaces (called holding `lock`,
        taken once since the read)."""
        token = self.token
        return token is not None and token == (
            lock.entered - 1,
            indexes.generation,
            indexes.groups.epoch,
        )

    def reading(self, read: Fetch) -> Fetch:
        """`read` answering the known keys from these values, reading only the others."""
        known = self.values

        async def fetch(keys: list[bytes]) -> list[bytes | None]:
            rest = [key for key in keys if key not in known]
            if not rest:
                return [known[key] for key in keys]
            found = dict(zip(rest, await read(rest), strict=True))
            return [known[key] if key in known else found[key] for key in keys]

        return fetch
