"""Typed reads and writes shared by Store, Transaction, Snapshot and Batch.

A record is addressed either by a Key object (`post.key(repo, rkey)`) or by a RecordType and
its field values (`post, (repo, rkey)` or a mapping of field names).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

from slatedb.uniffi import PutOptions, Ttl

from opendata_kv.errors import InvalidInputError, KeyEncodeError, SchemaError
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store.failures import FOREIGN, translate
from opendata_kv.store.scan import KeySpan, Scan
from opendata_kv.values import Values, check_policy

Fields = Sequence[Any] | Mapping[str, Any] | None
Target = Key | RecordType


def key_bytes(target: Target, fields: Fields) -> tuple[RecordType, bytes]:
    """(RecordType, encoded key) for a Key object, or a RecordType plus its field values."""
    if fields.__class__ is tuple and isinstance(target, RecordType):
        # the common case first: no ABC isinstance checks (they cost ~1 µs per call)
        return target, target.encode(*fields)
    if isinstance(target, Key):
        if fields is not None:
            raise KeyEncodeError("give either a Key object or a RecordType with fields, not both")
        record_type = target.record_type
        return record_type, record_type.encode(*target)
    if isinstance(target, RecordType):
        if fields is None:
            raise KeyEncodeError(f"{target.name}: field values are missing")
        if isinstance(fields, Mapping):
            return target, target.encode(**fields)
        if isinstance(fields, (str, bytes, bytearray)) or not isinstance(fields, Sequence):
            raise KeyEncodeError(
                f"{target.name}: fields must be a tuple or mapping, got {type(fields).__name__}"
                f" {fields!r} (a one-field key is ({fields!r},))"
            )
        return target, target.encode(*fields)
    raise KeyEncodeError(f"expected a Key or a RecordType, got {type(target).__name__}")


def put_args(target: Target, fields: Fields, value: Any) -> tuple[Fields, Any]:
    """Let `put(key_obj, value)` work: with a Key object the second argument is the value."""
    if isinstance(target, Key) and value is None:
        return None, fields
    return fields, value


def put_options(ttl: float | datetime.timedelta | None, check_expiry: bool = True) -> Any:
    """PutOptions expiring after `ttl` seconds (or a timedelta); None when no TTL is asked."""
    if ttl is None:
        return None
    if not check_expiry:
        raise InvalidInputError(
            "this store was opened with check_expiry=False, so an expired record would stay "
            "visible; open it with check_expiry=True to write a ttl"
        )
    seconds = ttl.total_seconds() if isinstance(ttl, datetime.timedelta) else ttl
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return PutOptions(ttl=Ttl.EXPIRE_AFTER_MILLIS(max(1, round(seconds * 1000))))


def encode_put(
    values: Values,
    check_expiry: bool,
    target: Target,
    fields: Fields,
    value: Any,
    ttl: float | datetime.timedelta | None,
) -> tuple[bytes, bytes, Any]:
    """(key, value bytes, PutOptions or None): how Store, Batch and Transaction encode a put."""
    fields, value = put_args(target, fields, value)
    record_type, key = key_bytes(target, fields)
    return key, values.encode(record_type, value, key), put_options(ttl, check_expiry)


class ReadView:
    """get / exists / scan against a slatedb source (Db, DbReader, DbSnapshot, DbTransaction).

    Expired records are hidden here: slatedb 0.17 stamps each TTL'd row with `expire_ts` but
    its read path does not compare it with the clock (expired rows only vanish when a memtable
    flush or a compaction rewrites them), so reads fetch the KeyValue and drop rows whose
    `expire_ts` is at or before now. `check_expiry=False` (Store.open) skips that for stores
    that never write a TTL.
    """

    def _view_of(self, source: Any, store: ReadView, label: str) -> None:
        """Read through `source` with the schema, codecs and expiry policy of `store`."""
        self._source = source
        self.schema = store.schema
        self.values = store.values
        self.check_expiry = store.check_expiry
        self.where = f"{label} {store.where}"

    _source: Any
    schema: Schema
    values: Values
    where: str
    check_expiry: bool = True

    async def _fetch(self, key: bytes) -> bytes | None:
        """The live value under `key` (None when absent or expired)."""
        source = self._source
        try:
            if not self.check_expiry:
                data: bytes | None = await source.get(key)
                return data
            kv = await source.get_key_value(key)
        except FOREIGN as exc:
            raise translate(exc, f"get on {self.where}") from exc
        if kv is None:
            return None
        expire = kv.expire_ts
        # Wall-clock ms: slatedb stamps create/expire times with its default system clock.
        if expire is not None and expire <= time.time_ns() // 1_000_000:
            return None
        value: bytes = kv.value
        return value

    async def get_raw(self, key: bytes) -> bytes | None:
        """The stored bytes under a raw key, or None (also once its TTL has passed)."""
        return await self._fetch(key)

    async def get(
        self, target: Target, fields: Fields = None, *, default: Any = None, upgrade: bool = True
    ) -> Any:
        """The decoded value stored under the key, or `default` when there is none."""
        # _fetch inlined: this is the point-read hot path
        record_type, key = key_bytes(target, fields)
        source = self._source
        try:
            if self.check_expiry:
                kv = await source.get_key_value(key)
                if kv is None:
                    return default
                expire = kv.expire_ts
                if expire is not None and expire <= time.time_ns() // 1_000_000:
                    return default
                data = kv.value
            else:
                data = await source.get(key)
                if data is None:
                    return default
        except FOREIGN as exc:
            raise translate(exc, f"get on {self.where}") from exc
        return self.values.decode(record_type, key, data, upgrade=upgrade)

    async def exists(self, target: Target, fields: Fields = None) -> bool:
        """True when a record is stored under the key."""
        _, key = key_bytes(target, fields)
        return await self._fetch(key) is not None

    def scan(
        self,
        record: RecordType | str,
        *leading: Any,
        partial: Any = None,
        version: int | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: bytes | Key | None = None,
        start: bytes | None = None,
        end: bytes | None = None,
        batch_size: int = 1024,
        upgrade: bool = True,
    ) -> Scan:
        """Records of one RecordType (or every registered version of a record name), in key
        order, optionally narrowed to leading field values, a partial string, and [start, end).

        `after` (a cursor: raw key or Key) resumes after that key. Versions are walked in
        version order (reversed when `reverse`), since the version byte leads the key.
        """
        if isinstance(record, RecordType):
            if version is not None and version != record.version:
                raise SchemaError(
                    f"{record.name} is version {record.version}; version={version} contradicts it"
                )
            record_types = [record]
        else:
            record_types = (
                self.schema.versions(record)
                if version is None
                else [self.schema.get(record, version)]
            )
        spans = []
        for record_type in record_types:
            lo, hi = record_type.range(*leading, partial=partial)
            spans.append(KeySpan(record_type, lo, hi))
        return Scan(
            self._source,
            spans,
            schema=self.schema,
            values=self.values,
            reverse=reverse,
            limit=limit,
            after=after.encode() if isinstance(after, Key) else after,
            start=start,
            end=end,
            batch_size=batch_size,
            upgrade=upgrade,
            check_expiry=self.check_expiry,
            where=f"scan on {self.where}",
        )

    def scan_all(
        self,
        *,
        prefix: bytes = b"",
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: bytes | None = None,
        on_unknown: str = "raise",
        batch_size: int = 1024,
        upgrade: bool = True,
    ) -> Scan:
        """Every record (or those under a raw `prefix`), each key decoded by the RecordType its
        prefix names. Keys no RecordType owns: on_unknown "raise" (default), "skip" or "raw"."""
        from opendata_kv.keys import prefix_successor

        span = KeySpan(None, prefix or None, prefix_successor(prefix) if prefix else None)
        return Scan(
            self._source,
            [span],
            schema=self.schema,
            values=self.values,
            reverse=reverse,
            limit=limit,
            after=after,
            start=start,
            end=end,
            on_unknown=check_policy(on_unknown),
            batch_size=batch_size,
            upgrade=upgrade,
            check_expiry=self.check_expiry,
            where=f"scan on {self.where}",
        )
