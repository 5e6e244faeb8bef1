"""What the command-line tools need of a writer's indexes beyond Store's methods: declaring
an index on a store already open (`opendata-kv index build` learns the declaration from the
database it opened), with the same checks and registration as Store.open(indexes=...)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from opendata_kv.store.indexes.admin import load
from opendata_kv.store.indexes.declare import Index

if TYPE_CHECKING:
    from opendata_kv.store.writer import Store


async def declare(store: Store, indexes: Iterable[Index]) -> None:
    """Make `indexes` the store's declared indexes: each not stored yet is registered
    (readable at once when none of its records exist, else write_only until built); one
    stored with another definition is an IndexStateError. Call it before any write."""
    store._indexes = await load(store, indexes)
