"""The writer's cache of aggregate groups: the (count, sum) of each count or sum group as its
last acknowledged write left it, so index upkeep skips reading them (RFC 0010, "The group
cache").

An aggregate row takes no TTL and only this writer writes it (slatedb fences a second one),
so it changes only by writes made here. The cache learns a group's value from the upkeep that
wrote it, and only once that write is acknowledged (`stage`, then `written`); anything else
drops it whole (`drop`): a failed or uncertain write, a transaction's commit, a write of index
rows outside upkeep (builds, drops, raw writes), a change of the IndexSet's generation. Held
by the IndexSet and used under its lock.
"""

from __future__ import annotations

from opendata_kv.store.indexes.sums import Sum

#: groups remembered before the cache starts afresh (~150 B each: a few MB at most)
GROUPS_LIMIT = 65_536

#: a group's exact state as stored (sums.Sum), or None: no row (nothing counted)
Group = Sum | None


class GroupCache:
    """Aggregate group values known to be current (see the module docstring)."""

    __slots__ = ("_generation", "_pending", "_values", "epoch", "limit")

    def __init__(self, limit: int = GROUPS_LIMIT) -> None:
        self._values: dict[bytes, Group] = {}
        self._generation: int | None = None
        self._pending: tuple[int, dict[bytes, Group]] | None = None
        self.limit = limit
        #: bumped by every drop: a write planned before a drop leaves the cache alone
        self.epoch = 0

    def known(self, generation: int) -> dict[bytes, Group]:
        """The groups known now (read only: learn through stage/written), emptied first when
        the index set changed `generation` since they were learnt."""
        if generation != self._generation:
            self.drop()
            self._generation = generation
        return self._values

    def stage(self, values: dict[bytes, Group]) -> None:
        """The groups a planned write sets, learnt by `written` once it is acknowledged."""
        self._pending = (self.epoch, values)

    def written(self) -> None:
        """The staged write was acknowledged: learn its groups (unless a drop came between)."""
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != self.epoch:
            return
        values = pending[1]
        if len(self._values) + len(values) > self.limit:
            self._values.clear()
        if len(values) <= self.limit:
            self._values.update(values)

    def drop(self) -> None:
        """Forget every group and any staged write."""
        self._values.clear()
        self._pending = None
        self.epoch += 1

    def __len__(self) -> int:
        return len(self._values)
