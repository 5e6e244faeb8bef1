"""What the command-line tools need of a writer's indexes beyond Store's methods: opening a
writer that writes index rows only (index build, rebuild, drop), and declaring an index on a
store already open (`opendata-kv index build` learns the declaration from the database it
opened), with the same checks and registration as Store.open(indexes=...)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opendata_kv.store.indexes.admin import INDEX_ROWS_ONLY, load
from opendata_kv.store.indexes.declare import Index

if TYPE_CHECKING:
    from opendata_kv.store.writer import Store


@contextmanager
def index_rows_only() -> Iterator[None]:
    """Within it, Store.open opens a writer that writes index rows only, never a record: the
    stored indexes it is not given are neither taken up nor refused (no write of it can make
    them stale). Only for the index tools."""
    token = INDEX_ROWS_ONLY.set(True)
    try:
        yield
    finally:
        INDEX_ROWS_ONLY.reset(token)


async def declare(store: Store, indexes: Iterable[Index]) -> None:
    """Make `indexes` the store's declared indexes: each not stored yet is registered
    (readable at once when none of its records exist, else write_only until built); one
    stored with another definition is an IndexStateError. Call it before any write."""
    store._indexes = await load(store, indexes, undeclared=False)
