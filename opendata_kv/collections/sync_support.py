"""The hand-written part of the collections' sync face (the rest is generated into
collections/sync.py by tools/gen_sync.py): the iterator over a query's Results and the
members every sync collection has."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from opendata_kv.collections._common import Results
from opendata_kv.store.sync import SyncStore, SyncStoreReader
from opendata_kv.store.sync_support import run_inline

T = TypeVar("T")

if TYPE_CHECKING:  # a TypeVar default (PEP 696) for the type checker only, as StoreT
    from typing_extensions import TypeVar as DefaultingTypeVar

    #: what a sync collection reads through: a SyncStore (the default) or a SyncStoreReader
    #: (reads only: mypy flags its write methods)
    SyncStoreT = DefaultingTypeVar("SyncStoreT", bound=SyncStoreReader, default=SyncStore)
else:
    SyncStoreT = TypeVar("SyncStoreT", bound=SyncStoreReader)


class SyncResults(Generic[T]):
    """`for item in results`, or `results.to_list()`: one pass over a query, each step driven
    on the calling thread (a collection's queries wait only on native calls)."""

    def __init__(self, results: Results[T]) -> None:
        self._results = results

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            item: T = run_inline(_step(self._results))
        except StopAsyncIteration:
            raise StopIteration from None
        return item

    def to_list(self) -> list[T]:
        """Every remaining item."""
        return list(self)


async def _step(results: Results[T]) -> T:
    return await results.__anext__()


class CollectionFace:
    """What every sync collection has besides its generated methods: the async collection it
    runs (`collection`) and a repr naming it."""

    collection: Any

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.collection!r}>"


class TypedFace(CollectionFace):
    """The sync face of a typed view (SyncTypedRecords): made from the async view
    RecordCollection.typed returns, which it runs."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
