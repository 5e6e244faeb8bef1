"""What index reads, index admin and bulk load need from a store, as typed capabilities
(slatedb's DbRead / Db split, for shape): RowReads reads rows by key and by span, OpWrites
also writes ops straight to the database. A ReadView (Store, StoreReader, a snapshot's view)
is a RowReads and a Store an OpWrites, structurally: nothing reaches them through `Any`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opendata_kv.keys import Schema
    from opendata_kv.store.indexes.registry import IndexSet
    from opendata_kv.store.options import ScanOptions
    from opendata_kv.store.scan import KeySpan, Scan
    from opendata_kv.store.writes import Op
    from opendata_kv.values import Values


class RowReads(Protocol):
    """Point reads and span scans of raw rows, with the store's schema, codecs and indexes."""

    @property
    def schema(self) -> Schema: ...

    @property
    def values(self) -> Values: ...

    @property
    def where(self) -> str: ...

    @property
    def check_expiry(self) -> bool: ...

    @property
    def read_window(self) -> int: ...

    #: the slatedb object read through (Db, DbReader, DbSnapshot, DbTransaction)
    @property
    def _source(self) -> Any: ...

    @property
    def _indexes(self) -> IndexSet | None: ...

    async def _fetch(self, key: bytes) -> bytes | None: ...

    async def _fetch_many(
        self, keys: list[bytes], expiries: dict[bytes, int] | None = None
    ) -> list[bytes | None]: ...

    def _scan(
        self,
        spans: list[KeySpan],
        start: Any,
        end: Any,
        after: Any,
        on_unknown: Any,
        options: ScanOptions | None,
        on_error: str | None,
        keywords: Mapping[str, Any],
    ) -> Scan[Any]: ...


class OpWrites(RowReads, Protocol):
    """RowReads that also writes ops as they are (no index upkeep: the caller did it)."""

    def _writable(self) -> Any: ...

    async def _write_ops(self, db: Any, ops: list[Op]) -> None: ...
