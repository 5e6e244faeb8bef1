"""Batch, Transaction and Snapshot: writes collected and applied atomically, reads and
writes inside one slatedb transaction, and a consistent point-in-time view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from opendata_kv.errors import (
    StoreError,
)
from opendata_kv.keys import Key, RecordType
from opendata_kv.native import calls
from opendata_kv.native.errors import FOREIGN, call, translate
from opendata_kv.native.slatedb import WriteBatch
from opendata_kv.store.deletes import MAX_KEYS
from opendata_kv.store.indexes import hooks
from opendata_kv.store.views import (
    MISSING,
    Bound,
    Fields,
    ReadView,
    Target,
    TtlArg,
    encode_put,
    key_bytes,
    options_at,
)
from opendata_kv.values.limits import check_stored_size

if TYPE_CHECKING:
    from opendata_kv.store.writer import Store


class Batch:
    """Writes collected in memory and applied atomically by Store.write (or on block exit)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._batch: Any = None
        self._count = 0
        self._written = False
        self._tracked = hooks.tracked_list(store._indexes)  # indexed writes (see hooks)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def _wb(self) -> Any:
        if self._written:
            raise StoreError(
                f"this batch was already written to {self._store.where}; "
                "a Batch is applied once: start a new one"
            )
        if self._batch is None:
            self._batch = WriteBatch()
        return self._batch

    @overload
    def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put (addressed as for Store.put)."""
        store = self._store
        key, data, expire_at = encode_put(
            store.schema, store.values, store.check_expiry, target, fields, value, ttl
        )
        options = options_at(expire_at)
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            if options is None:
                calls.batch_put(self._wb(), key, data)
            else:
                self._wb().put_with_options(key, data, options)  # a plain call: no future
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self._store.where}") from exc
        self._count += 1
        if self._tracked is not None:
            new = hooks.Raw(data, hooks.put_value(target, fields, value), expire_at, options)
            hooks.track(self, key, new)

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Queue a typed delete."""
        _, key = key_bytes(self._store.schema, target, fields)
        self.delete_raw(key)

    async def delete_range(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        prefix: bytes | None = None,
        start: Bound = None,
        end: Bound = None,
        max_keys: int = MAX_KEYS,
    ) -> int:
        """Queue a tombstone for every key Store.delete_range would delete (read now, deleted
        atomically with the rest of the batch); returns how many live records they delete."""
        keys, live = await self._store._range_keys(
            record, leading, partial, version, prefix, start, end, max_keys
        )
        for key in keys:
            self.delete_raw(key)
        return live

    def put_raw(self, key: bytes, data: bytes, *, expire_at: int | None = None) -> None:
        """Queue raw bytes under a raw key; `expire_at`: absolute expiry, Unix ms."""
        check_stored_size(data)
        found = self._store.schema.try_record_type_of(key)
        if found is not None:  # a value get would refuse is refused here
            self._store.values.check_caps(found, data, key)
        options = options_at(expire_at)
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            if options is None:
                calls.batch_put(self._wb(), key, data)
            else:
                self._wb().put_with_options(key, data, options)  # a plain call: no future
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self._store.where}") from exc
        self._count += 1
        if self._tracked is not None:
            hooks.track(self, key, hooks.Raw(data, expire_at=expire_at, options=options))

    def delete_raw(self, key: bytes) -> None:
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            self._wb().delete(key)
        except FOREIGN as exc:
            raise translate(exc, f"batch delete on {self._store.where}") from exc
        self._count += 1
        if self._tracked is not None:
            hooks.track(self, key, hooks.DELETED)

    def write_batch(self) -> Any:
        """The slatedb WriteBatch (only built once something was queued); handing it out for
        a write consumes it (slatedb takes ownership), so the Batch cannot be written twice."""
        batch = self._wb()
        self._written = True
        return batch


@dataclass
class _BatchContext:
    store: Store
    durable: bool
    batch: Batch | None = None

    async def __aenter__(self) -> Batch:
        self.store._writable()
        self.batch = Batch(self.store)
        return self.batch

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None and self.batch is not None:
            await self.store.write(self.batch, durable=self.durable)


class Transaction(ReadView):
    """Reads and writes inside one SlateDB transaction (see Store.transaction)."""

    def __init__(self, txn: Any, store: Store) -> None:
        self._view_of(txn, store, "transaction on")
        self._done = False
        self._store = store
        self._generation: int | None = None  # the index generation its entries were planned at

    @overload
    async def put(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    async def put(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    async def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put in the transaction (visible to its own reads at once)."""
        key, data, expire_at = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        options = options_at(expire_at)
        if self._store._indexes is not None:
            new = hooks.Raw(data, hooks.put_value(target, fields, value), expire_at, options)
            await hooks.transaction_write(self, key, new)
        if options is None:
            await call(calls.method(self._source, "put", key, data), f"put in {self.where}")
        else:
            await call(
                calls.method(self._source, "put_with_options", key, data, options),
                f"put in {self.where}",
            )

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key when the transaction commits."""
        _, key = key_bytes(self.schema, target, fields)
        if self._store._indexes is not None:
            await hooks.transaction_write(self, key, hooks.DELETED)
        await call(calls.method(self._source, "delete", key), f"delete in {self.where}")

    async def commit(self) -> None:
        if not self._done:
            self._done = True
            if self._generation is not None:
                await hooks.transaction_commit(self)
                return
            await call(calls.method(self._source, "commit"), f"commit of {self.where}")

    async def rollback(self) -> None:
        if not self._done:
            self._done = True
            await call(calls.method(self._source, "rollback"), f"rollback of {self.where}")


class Snapshot(ReadView):
    """A consistent, read-only, point-in-time view (see Store.snapshot)."""

    def __init__(self, snap: Any, store: Store) -> None:
        self._view_of(snap, store, "snapshot of")
