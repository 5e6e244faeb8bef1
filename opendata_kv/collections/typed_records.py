"""A typed view of one collection NSID of a RecordCollection: `records.typed(nsid, Post)`.

Every read gives the records' values as `ValueT` (RepoRecord[Post], RecordList[Post]) and every
write takes one, to mypy and at run time: a value the type's codec refuses is a
ValueEncodeError on write and a stored one it cannot read a ValueDecodeError naming its
`at://` URI. The view runs the collection's own methods (a copy of it whose value type for
`nsid` is the view's), so keys, checks, backlinks and cursors are exactly the collection's.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from opendata_kv.collections._common import Results, StoreT, ValueT
from opendata_kv.errors import InvalidInputError
from opendata_kv.store import Store

if TYPE_CHECKING:
    from opendata_kv.collections.backlinks import Backlink
    from opendata_kv.collections.records import (
        BacklinkPage,
        RecordCollection,
        RecordList,
        RepoRecord,
    )

D = TypeVar("D")

#: a typed put_many record: (repo, rkey, value)
TypedPutItem = tuple[str, str, ValueT]
#: a typed create_many record: (repo, value) or (repo, value, rkey or None)
TypedCreateItem = tuple[str, ValueT] | tuple[str, ValueT, str | None]


class TypedRecords(Generic[ValueT, StoreT]):
    """The records of one collection NSID as `ValueT` (see the module docstring).

    `records`: the RecordCollection (a copy whose value type for `nsid` is this view's);
    `nsid`: the collection every method reads and writes.
    """

    def __init__(self, records: RecordCollection[StoreT], nsid: str) -> None:
        self.records = records
        self.nsid = nsid

    def __repr__(self) -> str:
        codec = self.records.value_codecs[self.nsid]
        return f"<TypedRecords {self.nsid} as {codec.name} of {self.records!r}>"

    # --- reads ----------------------------------------------------------------------------------

    @overload
    async def get(self, repo: str, rkey: str) -> ValueT | None: ...

    @overload
    async def get(self, repo: str, rkey: str, default: D) -> ValueT | D: ...

    async def get(self, repo: str, rkey: str, default: Any = None) -> Any:
        """The record's value, or `default` when there is none."""
        return await self.records.get(repo, self.nsid, rkey, default)

    async def exists(self, repo: str, rkey: str) -> bool:
        """True when the record exists."""
        return await self.records.exists(repo, self.nsid, rkey)

    async def list(
        self,
        repo: str,
        reverse: bool = False,
        limit: int | None = None,
        cursor: str | bytes | None = None,
    ) -> RecordList[ValueT]:
        """One page of `repo`'s records in record key order (reverse: newest TID first, a
        feed), as RecordCollection.list."""
        page = await self.records.list(repo, self.nsid, reverse, limit, cursor)
        return cast("RecordList[ValueT]", page)

    def scan(self, repo: str, *, reverse: bool = False) -> Results[RepoRecord[ValueT]]:
        """Stream `repo`'s records of this collection in record key order."""
        return cast(
            "Results[RepoRecord[ValueT]]", self.records.scan(repo, self.nsid, reverse=reverse)
        )

    async def count(self, repo: str) -> int:
        """How many records of this collection `repo` holds."""
        return await self.records.count(repo, self.nsid)

    async def backlink_page(
        self,
        link: Backlink,
        subject: str,
        limit: int | None = None,
        cursor: str | bytes | None = None,
        reverse: bool = False,
    ) -> BacklinkPage[ValueT]:
        """One page of this collection's records pointing at `subject` through `link` (a
        backlink of this collection: `records.backlinks.likes` for a like view)."""
        if link.collection != self.nsid:
            raise InvalidInputError(
                f"backlink_page: {link.entries.name!r} links {link.collection!r} records, not this "
                f"view's {self.nsid!r}",
                field="link",
                value=link.entries.name,
            )
        page = await self.records.backlink_page(link, subject, limit, cursor, reverse)
        return cast("BacklinkPage[ValueT]", page)

    # --- writes ---------------------------------------------------------------------------------

    async def create(
        self: TypedRecords[ValueT, Store], repo: str, value: ValueT, *, rkey: str | None = None
    ) -> RepoRecord[ValueT]:
        """Store a new record (never overwrites) and return it, as RecordCollection.create."""
        made = await self.records.create(repo, self.nsid, value, rkey=rkey)
        return cast("RepoRecord[ValueT]", made)

    async def put(
        self: TypedRecords[ValueT, Store], repo: str, rkey: str, value: ValueT
    ) -> RepoRecord[ValueT]:
        """Store `value` under the key, replacing any record there."""
        return cast("RepoRecord[ValueT]", await self.records.put(repo, self.nsid, rkey, value))

    async def put_many(
        self: TypedRecords[ValueT, Store],
        records: Iterable[TypedPutItem[ValueT]] | AsyncIterable[TypedPutItem[ValueT]],
        *,
        batch_size: int = 1000,
        durable: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Put `(repo, rkey, value)` records, as RecordCollection.put_many."""
        nsid = self.nsid

        def full(item: TypedPutItem[ValueT]) -> tuple[str, str, str, Any]:
            repo, rkey, value = _parts(item, 3, "put_many", "(repo, rkey, value)")
            return repo, nsid, rkey, value

        source = _mapped(full, records)
        return await self.records.put_many(
            source, batch_size=batch_size, durable=durable, progress=progress
        )

    async def create_many(
        self: TypedRecords[ValueT, Store],
        records: Iterable[TypedCreateItem[ValueT]] | AsyncIterable[TypedCreateItem[ValueT]],
        *,
        batch_size: int = 1000,
        durable: bool = False,
    ) -> builtins.list[RepoRecord[ValueT]]:
        """Create `(repo, value)` or `(repo, value, rkey)` records, as
        RecordCollection.create_many; returns the records made."""
        nsid = self.nsid

        def full(item: TypedCreateItem[ValueT]) -> tuple[str, str, Any, str | None]:
            if isinstance(item, tuple) and len(item) == 2:
                return item[0], nsid, item[1], None
            repo, value, rkey = _parts(item, 3, "create_many", "(repo, value[, rkey])")
            return repo, nsid, value, rkey

        source = _mapped(full, records)
        made = await self.records.create_many(source, batch_size=batch_size, durable=durable)
        return cast("builtins.list[RepoRecord[ValueT]]", made)

    async def delete(self: TypedRecords[ValueT, Store], repo: str, rkey: str) -> None:
        """Remove the record (no error when there is none)."""
        await self.records.delete(repo, self.nsid, rkey)


def _parts(item: object, count: int, what: str, shape: str) -> tuple[Any, ...]:
    if not isinstance(item, tuple) or len(item) != count:
        shown = repr(item)
        shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
        raise InvalidInputError(
            f"{what}: each record is a tuple {shape}, got {shown}", value=item, field="records"
        )
    return item


def _mapped(
    function: Callable[[Any], Any], items: Iterable[Any] | AsyncIterable[Any]
) -> Iterable[Any] | AsyncIterable[Any]:
    """`function` over `items`, as an async iterable when they are one."""
    if isinstance(items, AsyncIterable):
        return _amap(function, items)
    return map(function, items)


async def _amap(function: Callable[[Any], Any], items: AsyncIterable[Any]) -> AsyncIterator[Any]:
    async for item in items:
        yield function(item)
