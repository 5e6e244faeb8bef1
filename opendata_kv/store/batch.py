"""Batch, Transaction and Snapshot: writes collected as values and applied atomically, reads
and writes inside one slatedb transaction, and a consistent point-in-time view."""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol, overload

from opendata_kv.errors import (
    InvalidArgumentError,
    InvalidInputError,
    StoreError,
    TransactionConflictError,
)
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.native import calls
from opendata_kv.native.errors import FOREIGN, call, translate
from opendata_kv.native.slatedb import WriteBatch
from opendata_kv.store.absent import exists_error
from opendata_kv.store.deletes import MAX_KEYS
from opendata_kv.store.indexes.known import KnownValues
from opendata_kv.store.indexes.maintain import IndexedOp, index_ops_for
from opendata_kv.store.indexes.maintainers import column_passes
from opendata_kv.store.indexes.old_values import point_reads
from opendata_kv.store.indexes.registry import IndexSet, WriteLock
from opendata_kv.store.ranges import RangeKeywords, ScanRange, scan_range
from opendata_kv.store.scan import V
from opendata_kv.store.views import (
    MISSING,
    Fields,
    ReadView,
    Target,
    TtlArg,
    encode_put,
    expire_at_of,
    key_bytes,
    options_at,
    put_encoders,
    ttl_ms,
)
from opendata_kv.store.writes import UNDECODED, Delete, FetchReads, Op, Put
from opendata_kv.values import Values
from opendata_kv.values.limits import check_stored_size

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from opendata_kv.keys.record import Addressed, Fs

_new = tuple.__new__  # a Put without NamedTuple.__new__'s keyword handling (per-record path)
_new_put = functools.partial(_new, Put)  # the same for map()


class Codecs(Protocol):
    """What a Batch encodes with (a Store has these)."""

    schema: Schema
    values: Values
    check_expiry: bool
    where: str


class RangeReader(Protocol):
    """What Batch.delete_range reads the range's keys through (a Store)."""

    async def _range_keys(
        self, record: RecordType | str | None, found: ScanRange, max_keys: int
    ) -> tuple[list[bytes], int]: ...


def native_batch(ops: Sequence[Op], more: Sequence[Op], where: str) -> Any:
    """One slatedb WriteBatch of `ops` then `more` (a batch's records, then their index ops)."""
    wb = WriteBatch()
    fill(wb, ops, where)
    fill(wb, more, where)
    return wb


def fill(wb: Any, ops: Iterable[Op], where: str) -> None:
    """Queue `ops` in the slatedb WriteBatch `wb`, in order: each run of puts, plain or
    expiring, in one calls.batch_put_many (index ops are mostly that), the rest a direct call
    each."""
    keys: list[bytes] = []
    data: list[bytes] = []
    expires: list[int | None] = []
    if isinstance(ops, list) and _plain(ops):  # index ops are mostly that: one call, no loop
        try:
            _put_run(wb, list(map(_KEY, ops)), list(map(_DATA, ops)), None)
        except FOREIGN as exc:
            raise translate(exc, f"batch write on {where}") from exc
        return
    try:
        for op in ops:
            if op.__class__ is Put:
                key, value, expire_at, _, options = op
                if value is None:  # only an index build's record puts lack bytes
                    raise AssertionError(f"a put of {key!r} without its bytes")
                if options is None or expire_at is not None:
                    keys.append(key)
                    data.append(value)
                    expires.append(expire_at)
                    continue
                _put_run(wb, keys, data, expires)
                wb.put_with_options(key, value, options)  # options without an expiry
            else:
                _put_run(wb, keys, data, expires)
                calls.batch_delete(wb, op.key)
        _put_run(wb, keys, data, expires)
    except FOREIGN as exc:
        raise translate(exc, f"batch write on {where}") from exc


_KEY = operator.itemgetter(0)
_DATA = operator.itemgetter(1)


def _plain(ops: list[Op]) -> bool:
    """Whether every op of `ops` is a Put with its bytes and no PutOptions (no TTL)."""
    return all(op.__class__ is Put and op[4] is None and op[1] is not None for op in ops)


def _put_run(
    wb: Any, keys: list[bytes], data: list[bytes], expires: list[int | None] | None
) -> None:
    """Queue the run of puts collected so far (with their expiries; None: none expires), and
    empty it."""
    if keys:
        calls.batch_put_many(wb, keys, data, expires)
        keys.clear()
        data.clear()
        if expires is not None:
            expires.clear()


def _put_with_options(
    wb: Any, key: bytes, data: bytes, expire_at: int | None, options: Any
) -> None:
    """A put with its PutOptions (which carry `expire_at`): a direct call when it is that."""
    if expire_at is not None:
        calls.batch_put_expiring(wb, key, data, expire_at)
    else:
        wb.put_with_options(key, data, options)  # a plain call: no future


#: what put_many items address as (record, fields, value): a RecordType or its name
_ADDRESSES = frozenset((RecordType, str))


class Batch:
    """Writes collected in memory as typed ops (writes.Put / writes.Delete: `ops`), applied
    atomically by Store.write (or on block exit); it encodes with the store's codecs and
    holds the store only as `reader`, for delete_range's reads, when given one."""

    # The ops are kept as columns, not a tuple each: 1,000 tuples (or typed values) alive per
    # batch set off the cyclic collector ~1 to 2 times a batch, which made put_many without
    # indexes 6-9% slower. The slatedb WriteBatch is filled as ops are queued.
    __slots__ = (
        "_absent",
        "_cput",
        "_data",
        "_encoders",
        "_expires",
        "_fields",
        "_keep",
        "_keep_fields",
        "_keys",
        "_native",
        "_pack",
        "_putter",
        "_queued",
        "_reader",
        "_ttl",
        "_ttl_ms",
        "_typed",
        "_written",
        "check_expiry",
        "known",
        "schema",
        "values",
        "where",
    )

    def __init__(self, codecs: Codecs, *, reader: RangeReader | None = None) -> None:
        self.schema = codecs.schema
        self.values = codecs.values
        self.check_expiry = codecs.check_expiry
        self.where = codecs.where
        self._reader = reader  # only for delete_range's reads (store.batch() passes the store)
        # the typed values are kept only for index upkeep (which decodes when one is absent)
        indexes = getattr(codecs, "_indexes", None)
        self._keep = indexes is not None and indexes.active
        # and the field tuples when some index reads keys (key_fields: else never asked for;
        # an index taken up later decodes the key instead)
        self._keep_fields = indexes is not None and indexes.active and indexes.keys_read
        self._keys: list[bytes] = []
        self._data: list[bytes | None] = []  # None: a delete
        self._expires: list[int | None] = []
        self._typed: dict[int, Any] = {}  # position -> the typed value of a put
        #: position -> the field tuple a put's key was encoded from (index upkeep takes it
        #: for the key's fields instead of decoding the key: maintain.py)
        self._fields: dict[int, tuple[Any, ...]] = {}
        self._native: Any = None
        #: the accelerator's msgpack packer (None on the pure path): with it, Batch.put's
        #: per-record path queues its puts in the native batch together, at the next native
        #: call (_wb), instead of one call each
        self._pack = calls.packer()
        #: the accelerator's queue_put (None on the pure path, with index upkeep, or once
        #: written): Batch.put's common case, key and value encoded and queued in one C call
        self._cput = calls.queue_put if self._pack is not None and not self._keep else None
        self._putter: Any = None  # the C put a sync face holds (_sync_put): off once written
        self._queued = 0  # how many of the ops are in the native batch
        self._encoders = self.values.put_encoders  # Batch.put's encoders by target (views)
        self._written = False
        self._absent: list[int] = []  # positions of the puts queued by create()
        self._ttl: Any = None  # the last ttl put's per-record path checked, and its ms
        self._ttl_ms = 0
        #: values its writer read ahead (Store.read_before_write), for its index upkeep
        self.known: KnownValues | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __iter__(self) -> Iterator[Op]:
        """The queued operations, in order."""
        return map(self._op, range(len(self._keys)))

    def _op(self, at: int) -> Op:
        key, data, expire_at = self._keys[at], self._data[at], self._expires[at]
        if data is None:
            return Delete(key)
        value = self._typed.get(at, UNDECODED)
        return _new(Put, (key, data, expire_at, value, options_at(expire_at)))

    def indexed_ops(self, indexes: IndexSet) -> list[IndexedOp]:
        """The queued ops with index upkeep (IndexSet.indexed_at decides), with their types."""
        keys, data, expires = self._keys, self._data, self._expires
        found = indexes.indexed_at(keys)
        if expires.count(None) != len(expires):  # some with a TTL: their PutOptions too
            return [(keys[at], rt, self._op(at)) for at, rt in found]
        count = len(keys)
        if len(found) == count and len(self._typed) == count and None not in data:
            # puts only, each with upkeep and its value kept (put_many's case): the triples
            # built in one C loop on the accelerator (native/_accel/columns.c), else by zip
            # and map, no Python loop (0.64 µs a record, 0.8 with a comprehension)
            passes = column_passes()
            if passes is not None:
                built = passes.indexed_puts(Put, found, keys, data, self._typed)
                if built is not None:
                    return built  # type: ignore[no-any-return]
            values = map(self._typed.__getitem__, range(count))
            puts = map(_new_put, zip(keys, data, repeat(None), values, repeat(None)))
            return list(zip(keys, [record_type for _, record_type in found], puts, strict=True))
        typed = self._typed.get
        # _op inlined for puts without a TTL, one comprehension
        return [
            (
                key,
                record_type,
                Delete(key)
                if (value := data[at]) is None
                else _new(Put, (key, value, None, typed(at, UNDECODED), None)),
            )
            for at, record_type in found
            for key in (keys[at],)
        ]

    def key_fields(self) -> dict[bytes, tuple[Any, ...]]:
        """The field tuples the per-record puts' keys were encoded from, by key (kept only
        when the store has indexes)."""
        keys = self._keys
        return {keys[at]: fields for at, fields in self._fields.items()}

    def replacing(self, known: KnownValues) -> None:
        """Carry values read by Store.read_before_write to the write's index upkeep (used
        only while nothing was written since: indexes/known.py)."""
        self.known = known

    def tracked(self, indexes: IndexSet) -> list[IndexedOp]:
        """Deprecated: the old name of indexed_ops (one meaning per name, issue 44)."""
        warnings.warn(
            "Batch.tracked is deprecated: use Batch.indexed_ops", DeprecationWarning, stacklevel=2
        )
        return self.indexed_ops(indexes)

    def columns(self) -> tuple[list[bytes], list[bytes | None], list[int | None]]:
        """The queued ops as columns: keys, value bytes (None: a delete), expire_at."""
        return self._keys, self._data, self._expires

    @property
    def ops(self) -> tuple[Op, ...]:
        """The queued operations, in order."""
        return tuple(self)

    def _reused(self) -> StoreError:
        return StoreError(
            f"this batch was already written to {self.where}; "
            "a Batch is applied once: start a new one"
        )

    @overload
    def put(self, target: Key | tuple[Any, ...], value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def put(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        value: V,
        *,
        ttl: TtlArg = None,
    ) -> None: ...

    @overload
    def put(
        self, target: RecordType[Key, V], fields: Fields, value: V, *, ttl: TtlArg = None
    ) -> None: ...

    @overload
    def put(self, target: str, fields: Fields, value: Any, *, ttl: TtlArg = None) -> None: ...

    def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put (addressed as for Store.put)."""
        cput = self._cput  # the accelerator's one call: True when it queued the put
        if cput is not None:
            if ttl is None:
                if cput(
                    self._encoders, target, fields, value, self._keys, self._data, self._expires
                ):
                    return
            elif ttl is self._ttl and cput(  # the ttl checked last time, with its expiry
                self._encoders,
                target,
                fields,
                value,
                self._keys,
                self._data,
                self._expires,
                calls.expire_after(self._ttl_ms),
            ):
                return
        if fields.__class__ is tuple and value is not MISSING:
            # the per-record path: a RecordType or name with a field tuple, encoded by the
            # encoders bound for it (views.put_encoders), with or without a ttl; everything
            # else takes _put_any
            try:
                found = self._encoders.get(target)
            except TypeError:  # an unhashable target: _put_any names it
                found = None
            if found is not None and not self._written:
                fast_key, full_key, encode_value, packing = found
                try:
                    key = fast_key(*fields)
                except Exception:  # redone with the fallback: the error that names the field
                    key = full_key(*fields)
                if ttl is None:
                    expire_at = None
                elif ttl is self._ttl:  # the ttl of the last put, checked then: its ms
                    expire_at = calls.expire_after(self._ttl_ms)
                elif self.check_expiry:  # expire_at_of inlined: now in ms plus the ttl's ms
                    self._remember_ttl(ttl, ms := ttl_ms(ttl))
                    expire_at = calls.expire_after(ms)
                else:
                    expire_at = expire_at_of(ttl, False)  # raises: the store hides no TTLs
                pack = self._pack
                if pack is not None and packing is not None:
                    # the accelerator's path, with or without a ttl: msgpack in C (None: not
                    # one of its common cases, then the codec's encoder), the native put
                    # deferred to the next _wb() with its expiry beside it
                    data = pack(value, *packing)
                    if data is None:
                        data = encode_value(value, key)
                else:
                    data = encode_value(value, key)
                    native = self._wb()  # sends the deferred puts first: ops keep their order
                    try:  # not `with translating`: ~0.3 us a call on a per-record path
                        if expire_at is None:
                            calls.batch_put(native, key, data)
                        else:
                            calls.batch_put_expiring(native, key, data, expire_at)
                    except FOREIGN as exc:
                        raise translate(exc, f"batch put on {self.where}") from exc
                    self._queued += 1
                if self._keep:
                    self._typed[len(self._keys)] = value
                    if self._keep_fields:
                        self._fields[len(self._keys)] = fields
                self._keys.append(key)
                self._data.append(data)
                self._expires.append(expire_at)
                return
        self._put_any(target, fields, value, ttl)

    def _remember_ttl(self, ttl: Any, ms: int) -> None:
        """The ttl a put just checked, and its ms: a later put with the same object skips the
        check (here, in put's C call, and in the sync face's C put)."""
        self._ttl, self._ttl_ms = ttl, ms
        if self._putter is not None:
            self._putter.remember_ttl(ttl, ms)

    def _sync_put(self) -> Callable[..., None]:
        """put, for a sync face to hold as its own (SyncBatch): on the accelerator, without
        index upkeep, a C callable doing put's common case (Batch.put's one call, without
        put's Python frame) and calling put for every other; put itself otherwise."""
        if self._cput is None:
            return self.put
        found = calls.batch_putter(self.put, self._encoders, self._keys, self._data, self._expires)
        if found != self.put:
            self._putter = found
            if self._ttl is not None:
                self._putter.remember_ttl(self._ttl, self._ttl_ms)
        return found

    def put_all(self, items: Iterable[tuple[Any, ...]]) -> None:
        """Queue put(*item) for each item in order (put_many's items): on the accelerator the
        common `(record type or name, field tuple, value[, ttl])` items in one loop, without a
        put() call each; any other item through put()."""
        pack = self._pack
        if pack is None or self._written:
            for item in items:
                self.put_item(item)
            return
        if items.__class__ is not list:
            items = list(items)
        if self._keep:  # index upkeep: the same runs, their typed values and fields kept
            self._put_all_kept(items)
            return
        # runs of the common items in one C call each (calls.queue_puts); an item it leaves
        # (the first of a record type, which binds its plan; a ttl; a value or key it does
        # not encode) goes through the Python loop, and the rest too once it leaves two
        # running (a batch of ttl puts, a record type without a C key encoder)
        queue_puts, encoders = calls.queue_puts, self._encoders
        keys, data, expires = self._keys, self._data, self._expires
        at, count, left = 0, len(items), False
        while at < count:
            start = at
            at = queue_puts(encoders, items, at, keys, data, expires)
            if at >= count:
                return
            if at == start and left:
                self._put_items(items[at:])
                return
            left = at == start
            self._put_items(items[at : at + 1])
            at += 1

    def _put_all_kept(self, items: list[tuple[Any, ...]]) -> None:
        """put_all with index upkeep: runs of common items in one C call each (as without),
        each queued put's value and field tuple kept by position for the plan (as put() keeps
        them); any other item through put()."""
        queue_puts, encoders = calls.queue_puts, self._encoders
        keys, data, expires = self._keys, self._data, self._expires
        typed, kept_fields = self._typed, self._fields
        at, count, left = 0, len(items), False
        while at < count:
            start, base = at, len(keys)
            at = queue_puts(encoders, items, at, keys, data, expires)
            if at > start:
                run = items[start:at]
                positions = range(base, base + len(run))
                typed.update(zip(positions, [item[2] for item in run], strict=True))
                if self._keep_fields:
                    kept_fields.update(zip(positions, [item[1] for item in run], strict=True))
            if at >= count:
                return
            if at == start and left:  # it leaves two running: the rest through put()
                for item in items[at:]:
                    self.put_item(item)
                return
            left = at == start
            self.put_item(items[at])
            at += 1

    def _put_items(self, items: list[tuple[Any, ...]]) -> None:
        """put_all's Python loop (the accelerator's packer in use, no index upkeep)."""
        pack = self._pack
        if pack is None:
            raise AssertionError("put_all's loop without the accelerator's packer")
        encoders, keys, data, expires = self._encoders, self._keys, self._data, self._expires
        for item in items:
            size = len(item) if item.__class__ is tuple else 0
            if size == 3 or (size == 4 and (item[3] is None or self.check_expiry)):
                target, fields, value = item[0], item[1], item[2]
                try:
                    found = encoders.get(target) if fields.__class__ is tuple else None
                except TypeError:  # an unhashable target: put() names it
                    found = None
                if found is not None and found.packing is not None:
                    fast_key, full_key, encode_value, packing = found
                    try:
                        key = fast_key(*fields)
                    except Exception:  # redone with the fallback: the error naming the field
                        key = full_key(*fields)
                    if size == 3 or item[3] is None:
                        expire_at = None
                    else:  # as put(): the ttl checked after the key, before anything queued
                        ttl = item[3]
                        if ttl is not self._ttl:
                            self._remember_ttl(ttl, ttl_ms(ttl))
                        expire_at = calls.expire_after(self._ttl_ms)
                    packed = pack(value, *packing)
                    if packed is None:
                        packed = encode_value(value, key)  # raises for a value it refuses
                    keys.append(key)
                    data.append(packed)
                    expires.append(expire_at)
                    continue
            self.put_item(item)

    def put_encoded(
        self,
        target: RecordType,
        keys: Sequence[bytes],
        fields: Sequence[tuple[Any, ...]],
        values: Sequence[Any],
    ) -> list[tuple[int, InvalidInputError]]:
        """Queue puts of `target` (no TTL) whose keys the caller already encoded, each equal
        to target.encode(*fields) (a writer's compiled key plan, tested against the encoder:
        atproto/jetstream.py), the values encoded in one loop. Returns the rows whose value
        the codec refused, with the error; those are not queued, the others are, in order."""
        if self._written:
            raise self._reused()
        found = self._encoders.get(target)
        if found is None:
            found = put_encoders(self.schema, self.values, target)
            if found is not None:
                self._encoders[target] = found
        refused: list[tuple[int, InvalidInputError]] = []
        if found is None:  # not a bindable record type: put() does each row, naming faults
            for at, (row, value) in enumerate(zip(fields, values, strict=True)):
                try:
                    self.put(target, row, value)
                except InvalidInputError as exc:
                    refused.append((at, exc))
            return refused
        encode_value, packing = found.value, found.packing
        pack = self._pack if packing is not None else None
        keep, typed, kept = self._keep, self._typed, self._fields
        queued_keys, queued_data, expires = self._keys, self._data, self._expires
        for at, key in enumerate(keys):
            value = values[at]
            try:  # as put(): the accelerator's packer, else (or for what it leaves) the codec
                data = None if pack is None else pack(value, *packing)  # type: ignore[misc]
                if data is None:
                    data = encode_value(value, key)
            except InvalidInputError as exc:
                refused.append((at, exc))
                continue
            if keep:
                typed[len(queued_keys)] = value
                if self._keep_fields:
                    kept[len(queued_keys)] = fields[at]
            queued_keys.append(key)  # deferred: _wb() sends them to the native batch in order
            queued_data.append(data)
            expires.append(None)
        return refused

    def put_item(self, item: tuple[Any, ...]) -> None:
        """Queue one put_many item: `(record, fields, value)`, `(record, fields, value, ttl)`,
        `(key, value)` or `(key, value, ttl)` for a Key or declared key tuple."""
        if len(item) == 4:
            self.put(item[0], item[1], item[2], ttl=item[3])
            return
        target = item[0]
        if (
            len(item) == 3
            and target.__class__ not in _ADDRESSES
            and isinstance(target, tuple)
            and target.__class__ is not tuple
        ):
            self.put(target, item[1], ttl=item[2])
        else:
            self.put(*item)  # as given: put names the mistake

    def _put_any(self, target: Target, fields: Any, value: Any, ttl: TtlArg) -> None:
        """put() of any addressing (a Key, a mapping of fields, a ttl), and the first put of
        each RecordType or name, which binds its plan."""
        if self._written:
            raise self._reused()
        key, data, expire_at, obj = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        if fields.__class__ is tuple and target.__class__ in (RecordType, str):
            found = put_encoders(self.schema, self.values, target)
            if found is not None:
                self._encoders[target] = found
        native = self._wb()
        try:  # not `with translating` nor fill(): ~0.3 us a call on a per-record path
            if expire_at is None:
                calls.batch_put(native, key, data)
            else:
                calls.batch_put_expiring(native, key, data, expire_at)
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self.where}") from exc
        if self._keep:
            self._typed[len(self._keys)] = obj
        self._keys.append(key)
        self._data.append(data)
        self._expires.append(expire_at)
        self._queued += 1

    @overload
    def create(self, target: Key, value: Any, /, *, ttl: TtlArg = None) -> None: ...

    @overload
    def create(
        self, target: RecordType | str, fields: Fields, value: Any, *, ttl: TtlArg = None
    ) -> None: ...

    def create(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a put that never overwrites: the write refuses the whole batch
        (RecordExistsError, nothing written) when the key holds a live record then, or an
        earlier put or create of this batch writes it (RFC 0010, "Creates")."""
        self.put(target, fields, value, ttl=ttl)  # type: ignore[arg-type]
        self._absent.append(len(self._keys) - 1)

    def creates(self) -> list[bytes]:
        """The keys queued by create(), which must hold no live record when written;
        RecordExistsError when an earlier put or create of this batch writes one of them."""
        if not self._absent:
            return []
        created = set(self._absent)
        keys, data = self._keys, self._data
        written: set[bytes] = set()
        for at, key in enumerate(keys):
            if at in created and key in written:
                raise exists_error(
                    self.schema, self.where, key, "an earlier put or create of the same batch"
                )
            if data[at] is not None:
                written.add(key)
        return [keys[at] for at in self._absent]

    @overload
    def delete(
        self, target: Addressed[Any, Unpack[Fs]], fields: tuple[Unpack[Fs]] | Mapping[str, Any]
    ) -> None: ...

    @overload
    def delete(
        self, target: Key | tuple[Any, ...] | str | RecordType[Key, Any], fields: Fields = None
    ) -> None: ...

    def delete(self, target: Target, fields: Fields = None) -> None:
        """Queue a typed delete."""
        _, key = key_bytes(self.schema, target, fields)
        self.delete_raw(key)

    async def delete_range(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        range: ScanRange | None = None,
        max_keys: int = MAX_KEYS,
        **bounds: Unpack[RangeKeywords],
    ) -> int:
        """Queue a tombstone for every key Store.delete_range would delete (read now, deleted
        atomically with the rest of the batch); returns how many live records they delete."""
        if self._reader is None:
            raise InvalidArgumentError(
                f"delete_range on a batch of {self.where} reads the range's keys through its "
                "store: use a batch from store.batch() (or Batch(store, reader=store))",
                field="reader",
            )
        found, _ = scan_range(range, leading, bounds, "delete_range")
        keys, live = await self._reader._range_keys(record, found, max_keys)
        for key in keys:
            self.delete_raw(key)
        return live

    def put_raw(self, key: bytes, data: bytes, *, expire_at: int | None = None) -> None:
        """Queue raw bytes under a raw key; `expire_at`: absolute expiry, Unix ms."""
        check_stored_size(data)
        found = self.schema.try_record_type_of(key)
        if found is not None:  # a value get would refuse is refused here
            self.values.check_caps(found, data, key)
        if self._written:
            raise self._reused()
        options = options_at(expire_at)
        try:  # not `with translating` nor fill(): ~0.3 us a call on a per-record path
            if options is None:
                calls.batch_put(self._wb(), key, data)
            else:
                _put_with_options(self._wb(), key, data, expire_at, options)
        except FOREIGN as exc:
            raise translate(exc, f"batch put on {self.where}") from exc
        self._keys.append(key)
        self._data.append(data)
        self._expires.append(expire_at)
        self._queued += 1

    def delete_raw(self, key: bytes) -> None:
        if self._written:
            raise self._reused()
        try:  # not `with translating` nor fill(): ~0.3 us a call on a per-record path
            calls.batch_delete(self._wb(), key)
        except FOREIGN as exc:
            raise translate(exc, f"batch delete on {self.where}") from exc
        self._keys.append(key)
        self._data.append(None)
        self._expires.append(None)
        self._queued += 1

    def queue(self, ops: Iterable[Op]) -> None:
        """Queue ready-made ops as they are (an index build's entries)."""
        if self._written:
            raise self._reused()
        ops = list(ops)
        fill(self._wb(), ops, self.where)
        keys, data, expires, typed = self._keys, self._data, self._expires, self._typed
        for op in ops:
            if op.__class__ is Put:
                key, put_data, expire_at, value, _ = op
                if value is not UNDECODED:
                    typed[len(keys)] = value
                keys.append(key)
                data.append(put_data)
                expires.append(expire_at)
            else:
                keys.append(op.key)
                data.append(None)
                expires.append(None)
        self._queued = len(keys)

    def _wb(self) -> Any:
        """The native batch, holding every op queued so far (the deferred puts of Batch.put's
        accelerated path added first, in one call, so ops keep their order)."""
        native = self._native
        if native is None:
            native = self._native = WriteBatch()
        queued = self._queued
        if queued < len(self._keys):  # only puts are ever deferred, with their expiries
            keys = self._keys[queued:]
            data: list[Any] = self._data[queued:]
            try:
                calls.batch_put_many(native, keys, data, self._expires[queued:])
            except FOREIGN as exc:
                raise translate(exc, f"batch put on {self.where}") from exc
            self._queued = len(self._keys)
        return native

    def write_batch(self) -> Any:
        """The slatedb WriteBatch of the queued ops (the writer adds their index ops to it);
        handing it out for a write consumes it (slatedb takes ownership): written once."""
        if self._written:
            raise self._reused()
        self._written = True
        self._cput = None
        if self._putter is not None:
            self._putter.switch_off()
        return self._wb()


class Transaction(ReadView):
    """Reads and writes inside one SlateDB transaction (see Store.transaction)."""

    def __init__(self, txn: Any, view: ReadView, lock: WriteLock | None = None) -> None:
        self._view_of(txn, view, "transaction on")
        self._lock = lock  # the store's write lock (Store._write_lock), held by the commit
        self._done = False
        self._generation: int | None = None  # the index generation its entries were planned at

    @overload
    async def put(
        self, target: Key | tuple[Any, ...], value: Any, /, *, ttl: TtlArg = None
    ) -> None: ...

    @overload
    async def put(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        value: V,
        *,
        ttl: TtlArg = None,
    ) -> None: ...

    @overload
    async def put(
        self, target: RecordType[Key, V], fields: Fields, value: V, *, ttl: TtlArg = None
    ) -> None: ...

    @overload
    async def put(self, target: str, fields: Fields, value: Any, *, ttl: TtlArg = None) -> None: ...

    async def put(
        self, target: Target, fields: Any = MISSING, value: Any = MISSING, *, ttl: TtlArg = None
    ) -> None:
        """Queue a typed put in the transaction (visible to its own reads at once)."""
        key, data, expire_at, obj = encode_put(
            self.schema, self.values, self.check_expiry, target, fields, value, ttl
        )
        op = Put(key, data, expire_at, obj, options_at(expire_at))
        indexes = self._indexes
        if indexes is not None:
            record_type = indexes.indexed(key)
            if record_type is not None:
                await self._index(indexes, record_type, op)
        await self._apply(op)

    @overload
    async def delete(
        self, target: Addressed[Any, Unpack[Fs]], fields: tuple[Unpack[Fs]] | Mapping[str, Any]
    ) -> None: ...

    @overload
    async def delete(
        self, target: Key | tuple[Any, ...] | str | RecordType[Key, Any], fields: Fields = None
    ) -> None: ...

    async def delete(self, target: Target, fields: Fields = None) -> None:
        """Remove the record under the key when the transaction commits."""
        _, key = key_bytes(self.schema, target, fields)
        op = Delete(key)
        indexes = self._indexes
        if indexes is not None:
            record_type = indexes.indexed(key)
            if record_type is not None:
                await self._index(indexes, record_type, op)
        await self._apply(op)

    async def _index(self, indexes: IndexSet, record_type: RecordType, op: Op) -> None:
        """Apply the index ops of one write, planned from reads through this transaction (its
        own earlier writes count), before the write itself."""
        if self._generation is None:
            self._generation = indexes.generation
        # expired values marked as the store's reads would judge them
        replaced = functools.partial(
            point_reads, self._source, self.where, check_expiry=self.check_expiry
        )
        reads = FetchReads(replaced, self._fetch_many)
        written = [(op.key, record_type, op)]
        for index_op in await index_ops_for(indexes, self.values, written, reads):
            await self._apply(index_op)

    async def _apply(self, op: Op) -> None:
        if type(op) is Delete:
            await call(calls.method(self._source, "delete", op.key), f"delete in {self.where}")
        elif type(op) is Put and op.options is None:
            await call(calls.method(self._source, "put", op.key, op.data), f"put in {self.where}")
        elif type(op) is Put:
            put = calls.method(self._source, "put_with_options", op.key, op.data, op.options)
            await call(put, f"put in {self.where}")

    async def commit(self) -> None:
        if self._done:
            return
        self._done = True
        indexes = self._indexes
        lock = self._lock if indexes is None else indexes.lock
        if lock is None:
            await call(calls.method(self._source, "commit"), f"commit of {self.where}")
            return
        # committed under the store's write lock: index entries are refused when an index's
        # state or build position moved since they were planned, and a batch's creates
        # (read, then written, under that lock) never land between this commit's checks
        async with lock.held(self.where):
            if indexes is not None and self._generation not in (None, indexes.generation):
                await call(calls.method(self._source, "rollback"), f"rollback of {self.where}")
                raise TransactionConflictError(
                    f"commit of {self.where}: an index build or state change happened while "
                    "this transaction planned its index entries; retry it"
                )
            try:
                await call(calls.method(self._source, "commit"), f"commit of {self.where}")
            finally:  # it may write aggregate groups the writer's cache holds (groups.py)
                if indexes is not None:
                    indexes.groups.drop()

    async def rollback(self) -> None:
        if not self._done:
            self._done = True
            await call(calls.method(self._source, "rollback"), f"rollback of {self.where}")


class Snapshot(ReadView):
    """A consistent, read-only, point-in-time view (see Store.snapshot)."""

    def __init__(self, snap: Any, view: ReadView) -> None:
        self._view_of(snap, view, "snapshot of")
