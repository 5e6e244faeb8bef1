"""A py-key-value store (the `AsyncKeyValue` protocol FastMCP and others program against) on a
SlateDB Store: `pip install 'opendata-kv[py-key-value]'`, then

    from opendata_kv.keyvalue import SlateDBStore
    kv = SlateDBStore("s3://bucket/state")      # a directory, memory://, s3://, or a Store

Each entry is one record of KEYVALUE (key fields `collection` and `key`), its value the mapping
itself in the store's msgpack codec (no JSON envelope), its TTL slatedb's own expiry: `ttl()`
reads value and expiry in one point read (get_with_expiry). `put_many` and `delete_many` are
one atomic batch each. Values py-key-value refuses (not JSON: bytes, sets, objects) are refused
with its SerializationError, as are values the store's caps refuse (too deep, too large, an int
msgpack cannot hold); keys that cannot be encoded raise its InvalidKeyError. One process writes
a database: a second writer fences the first (docs/keyvalue.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from opendata_kv.errors import (
    KeyEncodeError,
    MissingExtraError,
    SchemaError,
    StoreClosedError,
    ValueCodecError,
    ValueDecodeError,
)
from opendata_kv.keys import RecordType, Schema, fields
from opendata_kv.store import Entry, Store
from opendata_kv.store.expiry import now_ms

try:
    from key_value.aio.errors import DeserializationError, InvalidKeyError, SerializationError
    from key_value.aio.stores.base import (
        BaseContextManagerStore,
        BaseCullStore,
        BaseDestroyCollectionStore,
        BaseDestroyStore,
        BaseEnumerateCollectionsStore,
        BaseEnumerateKeysStore,
        BaseStore,
        ManagedEntry,
    )
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise MissingExtraError(
        "opendata_kv.keyvalue needs py-key-value-aio: pip install 'opendata-kv[py-key-value]'"
    ) from exc

__all__ = ["KEYVALUE", "SlateDBStore"]

#: the record type entries are stored as (a store opened here has only this one)
KEYVALUE: RecordType = RecordType(
    "keyvalue", 0xE, [("collection", fields.string), ("key", fields.string)]
)
#: keys() lists at most this many keys, as py-key-value's own stores do
PAGE_LIMIT = 10_000
#: keys tombstoned per atomic batch by destroy, destroy_collection and cull
DELETE_CHUNK = 10_000


class SlateDBStore(
    BaseEnumerateKeysStore,
    BaseEnumerateCollectionsStore,
    BaseDestroyStore,
    BaseDestroyCollectionStore,
    BaseCullStore,
    BaseContextManagerStore,
    BaseStore,
):
    """py-key-value's AsyncKeyValue over a SlateDB Store: get/put/delete/ttl and their
    `*_many` forms, keys(), collections(), destroy(), destroy_collection() and cull().

    `location`: where Store.open opens the database (a directory, `memory://name`,
    `file:///abs`, `s3://bucket/prefix`), opened at the first call (or `async with`) and
    closed by close(); or an open Store, whose schema holds `record` and which the caller keeps
    and closes. `record`: a RecordType whose key fields are `collection` and `key`, both
    strings (default KEYVALUE). `open_options`: keywords for Store.open (settings, timeout...).
    """

    def __init__(
        self,
        location: str | os.PathLike[str] | Store,
        *,
        record: RecordType = KEYVALUE,
        default_collection: str | None = None,
        **open_options: Any,
    ) -> None:
        if record.field_names[:2] != ("collection", "key") or len(record.field_names) != 2:
            raise SchemaError(
                f"{record.name}: a key-value record's key fields are (collection, key), "
                f"not {record.field_names}",
                record=record.name,
            )
        self._record = record
        self._store: Store | None = None
        self._location: str | os.PathLike[str] | None = None
        self._open_options = open_options
        if isinstance(location, Store):
            if record not in location.schema:
                raise SchemaError(
                    f"{location.where}: its schema has no {record.name!r} record type; open it "
                    "with opendata_kv.keyvalue.KEYVALUE (or the `record` given here) in its "
                    "schema",
                    record=record.name,
                )
            self._store = location
        else:
            self._location = location
        super().__init__(
            default_collection=default_collection,
            client_provided_by_user=self._store is not None,
            stable_api=True,
        )

    @property
    def store(self) -> Store:
        """The Store entries live in (opened by the first call when given a location)."""
        if self._store is None:
            raise StoreClosedError(
                f"{self._location}: the key-value store is not open (it opens at its first "
                "call or `async with`, and close() closes it)"
            )
        return self._store

    async def _setup(self) -> None:
        if self._store is None:
            assert self._location is not None
            self._store = await Store.open(
                self._location, Schema(self._record), **self._open_options
            )
            self._exit_stack.push_async_callback(self._close_store)

    async def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.close()

    # --- reads ----------------------------------------------------------------------------

    async def _get_managed_entry(self, *, collection: str, key: str) -> ManagedEntry | None:
        try:
            entry = await self.store.get_with_expiry(self._record, (collection, key))
        except (KeyEncodeError, ValueDecodeError) as exc:
            raise _mapped(exc, collection, key) from exc
        return None if entry is None else _managed(entry)

    async def _get_managed_entries(
        self, *, collection: str, keys: Sequence[str]
    ) -> list[ManagedEntry | None]:
        if not keys:
            return []
        try:
            entries = await self.store.get_many_with_expiry(
                self._record, [(collection, key) for key in keys]
            )
        except (KeyEncodeError, ValueDecodeError) as exc:
            raise _mapped(exc, collection, None) from exc
        return [None if entry is None else _managed(entry) for entry in entries]

    async def _get_collection_keys(self, *, collection: str, limit: int | None = None) -> list[str]:
        limit = min(limit or PAGE_LIMIT, PAGE_LIMIT)
        found = self.store.scan(self._record, collection, limit=limit).keys()
        return [str(key.key) async for key in found]

    async def _get_collection_names(self, *, limit: int | None = None) -> list[str]:
        limit = min(limit or PAGE_LIMIT, PAGE_LIMIT)
        names = await self.store.distinct(self._record, "collection")
        return [str(name) for name in names[:limit]]

    # --- writes ---------------------------------------------------------------------------

    async def _put_managed_entry(
        self, *, collection: str, key: str, managed_entry: ManagedEntry
    ) -> None:
        value = _json_value(managed_entry.value, collection, key)
        try:
            await self.store.put(
                self._record, (collection, key), value, ttl=_ttl(managed_entry.expires_at)
            )
        except (KeyEncodeError, ValueCodecError) as exc:
            raise _mapped(exc, collection, key, writing=True) from exc

    async def _put_managed_entries(
        self,
        *,
        collection: str,
        keys: Sequence[str],
        managed_entries: Sequence[ManagedEntry],
        ttl: float | None,
        created_at: datetime,
        expires_at: datetime | None,
    ) -> None:
        if not keys:
            return
        remaining = _ttl(expires_at)
        record = self._record
        try:
            async with self.store.batch() as batch:  # one atomic write, in the order given
                put = batch.put
                for key, entry in zip(keys, managed_entries, strict=True):
                    put(
                        record,
                        (collection, key),
                        _json_value(entry.value, collection, key),
                        ttl=remaining,
                    )
        except (KeyEncodeError, ValueCodecError) as exc:
            raise _mapped(exc, collection, None, writing=True) from exc

    async def _delete_managed_entry(self, *, key: str, collection: str) -> bool:
        try:
            return await self.store.delete(self._record, (collection, key))
        except KeyEncodeError as exc:
            raise _mapped(exc, collection, key) from exc

    async def _delete_managed_entries(self, *, keys: Sequence[str], collection: str) -> int:
        if not keys:
            return 0
        try:
            return await self.store.delete_many(self._record, [(collection, k) for k in keys])
        except KeyEncodeError as exc:
            raise _mapped(exc, collection, None) from exc

    async def _delete_collection(self, *, collection: str) -> bool:
        return await self._delete_all(collection) > 0

    async def _delete_store(self) -> bool:
        await self._delete_all()
        return True

    async def _delete_all(self, *leading: str) -> int:
        """Delete every entry (of one collection), DELETE_CHUNK keys per atomic batch."""
        store, total = self.store, 0
        while True:
            found = store.scan(self._record, *leading, limit=DELETE_CHUNK).keys()
            keys = [key async for key in found]
            if not keys:
                return total
            total += await store.delete_many(keys)

    async def _cull(self) -> None:
        while await self.store.purge_expired(self._record, max_keys=DELETE_CHUNK):
            pass


def _managed(entry: Entry[Any]) -> ManagedEntry:
    return ManagedEntry(value=entry.value, expires_at=entry.expires_at)


def _ttl(expires_at: datetime | None) -> float | None:
    """The seconds left until `expires_at` (at least a millisecond: the entry was given a
    positive TTL, and the store refuses none), None for no expiry."""
    if expires_at is None:
        return None
    left_ms = int(expires_at.timestamp() * 1000) - now_ms()
    return max(left_ms, 1) / 1000.0


def _json_value(value: Mapping[str, Any], collection: str, key: str) -> dict[str, Any]:
    """The value as py-key-value takes it: a mapping of string keys holding JSON only, else
    its SerializationError (its stores serialize every value to JSON)."""
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        raise SerializationError(
            "a value must be a mapping with string keys",
            extra_info={"collection": collection, "key": key, "type": type(value).__name__},
        )
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"value is not JSON: {exc}", extra_info={"collection": collection, "key": key}
        ) from exc
    return dict(value)


def _mapped(
    exc: Exception, collection: str, key: str | None, *, writing: bool = False
) -> Exception:
    """The py-key-value error for a store error: keys that do not encode are InvalidKeyError,
    values the codec or its caps refuse SerializationError on a write, values stored that do
    not decode DeserializationError on a read."""
    info: dict[str, str | int | float | bool | None] = {"collection": collection, "key": key}
    if isinstance(exc, KeyEncodeError):
        return InvalidKeyError(str(exc), extra_info=info)
    if writing:
        return SerializationError(str(exc), extra_info=info)
    return DeserializationError(str(exc), extra_info=info)
