"""Typed reads and writes shared by Store, Transaction, Snapshot and Batch.

A record is addressed the same way everywhere (get, put, delete, exists, scan): by a Key object
(`post.key(repo, rkey)`), or by a RecordType or a record name (its newest version) and its field
values (`post, (repo, rkey)`, `"post", (repo, rkey)` or a mapping of field names). A RecordType
must be one of the store's schema: a look-alike (even one sharing a prefix) is a SchemaError.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, TypeVar, overload

from opendata_kv.errors import (
    ArgumentTypeError,
    InvalidInputError,
    KeyEncodeError,
    SchemaError,
    show_bytes,
)
from opendata_kv.keys import Key, RecordType, Schema, intersect, prefix_range
from opendata_kv.native import calls
from opendata_kv.native.errors import FOREIGN, translate, translating
from opendata_kv.native.records import key_encoder
from opendata_kv.native.slatedb import PutOptions, Ttl
from opendata_kv.native.wire import PointRow
from opendata_kv.store.cursor import decode_cursor
from opendata_kv.store.distinct import SEEK_AFTER, distinct_values, field_position
from opendata_kv.store.entry import Entry, expiry_datetime
from opendata_kv.store.expiry import live_value, now_ms
from opendata_kv.store.indexes.layout import ROOT as INDEX_ROOT
from opendata_kv.store.indexes.layout import without_index_keys
from opendata_kv.store.options import ScanOptions, scan_settings
from opendata_kv.store.ranges import (
    After,
    Bound,
    RangeArg,
    RangeKeywords,
    ScanArgs,
    ScanRange,
    scan_range,
)
from opendata_kv.store.record_cache import RecordCache
from opendata_kv.store.scan import (
    K,
    KeySpan,
    RawRecord,
    Record,
    Scan,
    V,
    check_cursor,
    check_error_policy,
)
from opendata_kv.store.ttl import ttl_seconds
from opendata_kv.values import Values, check_policy

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from opendata_kv.keys.record import Addressed, Fs
    from opendata_kv.store.indexes.registry import IndexSet
    from opendata_kv.store.metrics import Telemetry

Fields = Sequence[Any] | Mapping[str, Any] | None
#: how a record is addressed: a Key (or an instance of a RecordType's declared NamedTuple
#: key class, typed as the tuple it is), or a RecordType / record name plus field values
if TYPE_CHECKING:  # the typed overloads see a RecordType as Addressed (keys/record.py)
    Target = Key | tuple[Any, ...] | RecordType | str | Addressed[Any, Unpack[tuple[Any, ...]]]
else:
    Target = Key | tuple[Any, ...] | RecordType | str
#: what get_many takes first: a RecordType or record name (then its fields), or Keys
ManyTarget = RecordType | str | Iterable[Key | tuple[Any, ...]] | Target
TtlArg = float | datetime.timedelta | None
#: what get and get_many return for a missing record, when not None
D = TypeVar("D")


class _Missing:
    """The default of `put`'s value: tells "no value given" apart from None."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def foreign_record_type(schema: Schema, record_type: RecordType) -> SchemaError:
    """The error for a RecordType that is not one of `schema`'s (a look-alike, or unregistered)."""
    owner = next((t for t in schema if t.head == record_type.head), None)
    clash = (
        f"; the schema's {owner.name!r} v{owner.version} owns that prefix, so this look-alike "
        "would read and overwrite its records"
        if owner is not None
        else ""
    )
    return SchemaError(
        f"record type {record_type.name!r} v{record_type.version} (prefix "
        f"{show_bytes(record_type.head)}) is not in this store's schema {schema!r}{clash}; "
        "use the RecordType objects the store was opened with",
        record=record_type.name,
    )


def resolve(schema: Schema, record: object) -> RecordType:
    """The schema's RecordType for a RecordType (checked to be the schema's own) or a name;
    ArgumentTypeError for anything else."""
    if record.__class__ is RecordType:
        if record in schema:
            return record
        raise foreign_record_type(schema, record)
    if isinstance(record, str):
        if record not in schema.names():
            raise SchemaError(
                f"no record type named {record!r} in this store's schema; known: {schema.names()}",
                record=record,
            )
        return schema.get(record)
    if isinstance(record, RecordType):
        return resolve(schema, record)
    raise ArgumentTypeError(
        f"expected a RecordType, a record name or a Key, got {type(record).__name__} {record!r}",
        field="record",
        value=record,
    )


def key_bytes(schema: Schema, target: Target, fields: Fields) -> tuple[RecordType, bytes]:
    """(RecordType, encoded key) for a Key object, or a RecordType or record name plus its field
    values; the RecordType must be one of `schema`'s."""
    if fields.__class__ is tuple and target.__class__ is RecordType and target in schema:
        # the common case first: no ABC isinstance checks (they cost ~1 µs per call)
        return target, target.encode(*fields)
    if isinstance(target, tuple) and target.__class__ is not tuple:  # a Key or a declared key
        record_type = (
            target.record_type if isinstance(target, Key) else schema.declaring(type(target))
        )
        if fields is not None:
            raise KeyEncodeError(
                f"{record_type.name}: give either a Key object or a RecordType with fields, "
                "not both",
                record=record_type.name,
                field="fields",
                value=fields,
            )
        if record_type not in schema:
            raise foreign_record_type(schema, record_type)
        return record_type, record_type.encode(*target)
    record_type = resolve(schema, target)
    if fields is None:
        raise KeyEncodeError(
            f"{record_type.name}: field values are missing (give a tuple, a mapping, or a Key)",
            record=record_type.name,
            field="fields",
        )
    if isinstance(fields, Mapping):
        return record_type, record_type.encode(**fields)
    if isinstance(fields, (str, bytes, bytearray)) or not isinstance(fields, Sequence):
        raise KeyEncodeError(
            f"{record_type.name}: fields must be a tuple or mapping, got {type(fields).__name__}"
            f" {fields!r} (a one-field key is ({fields!r},))",
            record=record_type.name,
            field="fields",
            value=fields,
        )
    return record_type, record_type.encode(*fields)


def put_args(target: Target, fields: Any, value: Any) -> tuple[Fields, Any]:
    """(fields, value) of a put: `put(key_obj, value)` or `put(record, fields, value)`; a
    missing value is an ArgumentTypeError (None is not stored by accident)."""
    if isinstance(target, tuple) and target.__class__ is not tuple:  # a Key or a declared key
        owner = target.record_type.name if isinstance(target, Key) else type(target).__name__
        if value is MISSING:
            if fields is MISSING:
                raise _no_value(owner)
            return None, fields
        if fields is MISSING:
            return None, value
        raise KeyEncodeError(
            f"{owner}: put(key, value) takes a Key and a value; "
            "fields belong with a RecordType or record name",
            record=owner,
            field="fields",
            value=fields,
        )
    if fields is MISSING:
        fields = None
    if value is MISSING:
        name = target if isinstance(target, str) else getattr(target, "name", repr(target))
        raise _no_value(name)
    return fields, value


def _no_value(name: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{name}: put needs a value: put(record, fields, value) or put(key, value)",
        record=name,
        field="value",
    )


def expire_at_of(ttl: TtlArg, check_expiry: bool = True) -> int | None:
    """The absolute expiry (Unix ms, the wall clock slatedb stamps with) of a put with `ttl`
    seconds (or a timedelta); None when no TTL is asked. Computed once per write, so a record
    and its index entries expire at the same instant (RFC 0010)."""
    if ttl is None:
        return None
    if not check_expiry:
        raise InvalidInputError(
            "this store was opened with check_expiry=False, so an expired record would stay "
            "visible; open it with check_expiry=True to write a ttl",
            field="ttl",
            value=ttl,
        )
    return now_ms() + ttl_ms(ttl)


def ttl_ms(ttl: float | datetime.timedelta) -> int:
    """A put's `ttl` checked (ttl_seconds) and in whole ms (at least 1); each distinct ttl
    is checked once (a batch of TTL puts repeats one: the check cost 1-2 us a record)."""
    try:
        return _checked_ttl_ms(ttl)
    except TypeError:  # unhashable: checked each time (ttl_seconds names what is wrong)
        return max(1, round(ttl_seconds(ttl) * 1000))


@functools.lru_cache(maxsize=64, typed=True)  # typed: True (refused) is not the 1 accepted
def _checked_ttl_ms(ttl: float | datetime.timedelta) -> int:
    return max(1, round(ttl_seconds(ttl) * 1000))


def options_at(expire_at: int | None) -> Any:
    """PutOptions expiring at `expire_at` (Unix ms); None for no expiry."""
    return None if expire_at is None else PutOptions(ttl=Ttl.EXPIRE_AT_MILLIS(expire_at))


def encode_put(
    schema: Schema,
    values: Values,
    check_expiry: bool,
    target: Target,
    fields: Any,
    value: Any,
    ttl: TtlArg,
) -> tuple[bytes, bytes, int | None, Any]:
    """(key, value bytes, absolute expiry in Unix ms or None, the value object): how Store,
    Batch and Transaction encode a put, each argument read once."""
    fields, value = put_args(target, fields, value)
    record_type, key = key_bytes(schema, target, fields)
    return key, values.encode(record_type, value, key), expire_at_of(ttl, check_expiry), value


#: where a point row (native.wire.PointRow) holds its value and its expiry (Unix ms or None)
VALUE: Final = 0
EXPIRE: Final = 1


class PutEncoders(NamedTuple):
    """How a put of one record type encodes, bound once (Batch.put's per-record path)."""

    #: key bytes of a field tuple, without the fallback: the accelerator's KeyEncoder
    #: (native/records.py key_encoder) or RecordType.fast_encode
    fast_key: Callable[..., bytes]
    #: the same with it (RecordType.encode): the error that names the field
    key: Callable[..., bytes]
    #: value bytes of (value, key)
    value: Callable[[Any, bytes], bytes]
    #: (max_len, max_depth) for the accelerator's pack_value (Values.packing), or None
    packing: tuple[int, int] | None = None


def put_encoders(schema: Schema, values: Values, target: Target) -> PutEncoders | None:
    """How a put addressed as `target` (a RecordType or record name) plus a field tuple
    encodes, bound once (Batch.put's per-record path, cached in values.put_encoders); None for
    any other target (a Key, a look-alike, an unknown name)."""
    record_type = _bindable(schema, values, target)
    if record_type is None:
        return None
    return PutEncoders(
        key_encoder(record_type) or record_type.fast_encode,
        record_type.encode,
        values.encoder(record_type),
        values.packing(record_type),
    )


class GetPlan(NamedTuple):
    """How a get of one record type encodes its key and decodes its value, bound once (the
    per-record get paths)."""

    #: key bytes of a field tuple, without the fallback (RecordType.fast_encode)
    fast_key: Callable[..., bytes]
    #: the same with it (RecordType.encode): the error that names the field
    key: Callable[..., bytes]
    #: the value of (data, key), upgraded (Values.decoder)
    value: Callable[[bytes, bytes], Any]


def get_plan(schema: Schema, values: Values, target: object) -> GetPlan | None:
    """The GetPlan of a get addressed as `target` (a RecordType or record name) plus a field
    tuple, cached in values.get_plans; None for any other target (key_bytes handles it)."""
    try:
        found: GetPlan | None = values.get_plans.get(target)
    except TypeError:  # an unhashable target: key_bytes names it
        return None
    if found is None:
        record_type = _bindable(schema, values, target)
        if record_type is None:
            return None
        found = GetPlan(record_type.fast_encode, record_type.encode, values.decoder(record_type))
        values.get_plans[target] = found
    return found


def _bindable(schema: Schema, values: Values, target: object) -> RecordType | None:
    """The schema's RecordType a per-record plan may be bound for: `target` itself or the
    newest of its name, with `values` the schema's own; None for anything else."""
    if values.schema is not schema:
        return None
    if target.__class__ is RecordType:
        return target if target in schema else None
    if target.__class__ is str:
        return schema.get(target) if target in schema.names() else None
    return None


def bound_bytes(bound: Bound, record_type: RecordType | None, what: str) -> bytes | None:
    """A scan bound as key bytes: bytes as given, a Key encoded, a field tuple as the prefix of
    `record_type` (so tuples compare as field tuples: start inclusive, end exclusive)."""
    if bound is None or isinstance(bound, bytes):
        return bound
    if isinstance(bound, Key):
        return bound.encode()
    if isinstance(bound, tuple):
        if record_type is None:
            raise ArgumentTypeError(
                f"{what}={bound!r}: a tuple of field values needs a record type; scan_all "
                "takes key bytes or a Key",
                field=what,
                value=bound,
            )
        return record_type.prefix(*bound)
    raise ArgumentTypeError(
        f"{what} must be key bytes, a Key or a tuple of leading field values, got "
        f"{type(bound).__name__} {bound!r}",
        field=what,
        value=bound,
    )


def narrow(span: KeySpan, prefix: bytes | None, start: bytes | None, end: bytes | None) -> KeySpan:
    """`span` intersected with the keys under `prefix` and with [start, end)."""
    bounds = (span.start, span.end)
    if prefix:
        bounds = intersect(bounds, prefix_range(prefix))
    return KeySpan(span.record_type, *intersect(bounds, (start, end)))


def _as_row(value: bytes | None) -> PointRow:
    """A value read with get (no expiry known) as a point row."""
    return None if value is None else (value, None)


T = TypeVar("T")

#: how many point reads get_many keeps in flight at once on object storage, where a read
#: may be a round trip
GET_MANY_WINDOW = 256
#: the same on a local directory or in memory, where a read is no round trip: fewer in
#: flight cost less each (9.3 µs a memtable get at 256 against 8.6 at 64, 3-6% less in SSTs
#: too; docs/performance.md, "Reads in flight, a local window")
LOCAL_READ_WINDOW = 64


def read_window(scheme: str) -> int:
    """How many point reads a store at a location of `scheme` keeps in flight at once."""
    return GET_MANY_WINDOW if scheme == "s3" else LOCAL_READ_WINDOW


async def in_windows(
    read: Callable[[list[bytes]], Awaitable[list[T]]],
    keys: list[bytes],
    window: int = GET_MANY_WINDOW,
) -> list[T]:
    """read(keys) made `window` keys at a time (reads in flight together, but an object store
    is never sent thousands of requests at once), the results in order."""
    out: list[T] = []
    for start in range(0, len(keys), window):
        out += await read(keys[start : start + window])
    return out


class ReadView:
    """get / exists / scan against a slatedb source (Db, DbReader, DbSnapshot, DbTransaction).

    Expired records are hidden here: slatedb 0.17 stamps each TTL'd row with `expire_ts` but
    its read path does not compare it with the clock (expired rows only vanish when a memtable
    flush or a compaction rewrites them), so reads fetch the row with its `expire_ts`
    (get_key_value) and drop rows whose `expire_ts` is at or before now. `check_expiry=False`
    (Store.open) skips that for stores that never write a TTL (reads call get). Every read is
    a native call (native.calls), so both faces drive the same code.
    """

    def _view_of(self, source: Any, store: ReadView, label: str) -> None:
        """Read through `source` with the schema, codecs and expiry policy of `store`."""
        self._source = source
        self.schema = store.schema
        self.values = store.values
        self.check_expiry = store.check_expiry
        self.read_window = store.read_window
        self.where = f"{label} {store.where}"
        self._indexes = store._indexes

    _source: Any
    schema: Schema
    values: Values
    where: str
    check_expiry: bool = True
    read_window: int = GET_MANY_WINDOW  # point reads in flight at once (views.read_window)
    _indexes: IndexSet | None = None  # secondary indexes (store/indexes), when the store has any
    _telemetry: Telemetry | None = None  # its metrics' instruments (store/metrics.py), when on
    #: the writer's record cache (store/record_cache.py), when on; never a reader's, a
    #: transaction's or a snapshot's (they read another view than the latest writes)
    _record_cache: RecordCache | None = None

    async def _fetch(self, key: bytes) -> bytes | None:
        """The live value under `key` (None when absent or expired)."""
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            if not self.check_expiry:
                return await calls.get(self._source, key)
            return live_value(await calls.get_row(self._source, key))
        except FOREIGN as exc:
            raise translate(exc, f"get on {self.where}") from exc

    async def _fetch_many(
        self, keys: list[bytes], expiries: dict[bytes, int] | None = None
    ) -> list[bytes | None]:
        """The live values under `keys`, in order, read_window reads in flight at once;
        `expiries` gets the expiry (Unix ms) of each value found that has one, read with it."""
        source = self._source
        with translating(f"get_many on {self.where}"):
            if not self.check_expiry and expiries is None:
                read = functools.partial(calls.get_values, source)
                return await in_windows(read, keys, self.read_window)
            read_rows = functools.partial(calls.get_rows, source)
            rows = await in_windows(read_rows, keys, self.read_window)
        if self.check_expiry:
            found = list(map(live_value, rows))
        else:
            found = [None if row is None else row[VALUE] for row in rows]
        if expiries is not None:
            for key, row, data in zip(keys, rows, found, strict=True):
                if data is not None and row is not None and row[EXPIRE] is not None:
                    expiries[key] = row[EXPIRE]
        return found

    async def get_raw(self, key: bytes) -> bytes | None:
        """The stored bytes under a raw key, or None (also once its TTL has passed)."""
        return await self._fetch(key)

    @overload
    async def get(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        *,
        default: None = None,
        upgrade: bool = True,
    ) -> V | None: ...

    @overload
    async def get(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        *,
        default: D,
        upgrade: bool = True,
    ) -> V | D: ...

    @overload
    async def get(
        self,
        target: RecordType[Key, V],
        fields: Fields,
        *,
        default: None = None,
        upgrade: bool = True,
    ) -> V | None: ...

    @overload
    async def get(
        self, target: RecordType[Key, V], fields: Fields, *, default: D, upgrade: bool = True
    ) -> V | D: ...

    @overload
    async def get(
        self,
        target: Key | tuple[Any, ...] | str,
        fields: Fields = None,
        *,
        default: Any = None,
        upgrade: bool = True,
    ) -> Any: ...

    async def get(
        self, target: Target, fields: Fields = None, *, default: Any = None, upgrade: bool = True
    ) -> Any:
        """The decoded value stored under the key, or `default` when there is none."""
        plan = get_plan(self.schema, self.values, target) if fields.__class__ is tuple else None
        if plan is None or not upgrade:
            record_type, key = key_bytes(self.schema, target, fields)
        else:  # the per-record path: encoders and decoder bound once per target
            try:
                key = plan.fast_key(*fields)  # type: ignore[misc]
            except Exception:  # redone with the fallback: the error that names the field
                key = plan.key(*fields)  # type: ignore[misc]
        cache = self._record_cache
        row = None if cache is None else cache.get(key)
        if row is None:
            generation = 0 if cache is None else cache.generation
            try:  # not `with translating`: ~0.3 us a call on a per-record path
                if self.check_expiry:
                    row = await calls.read_row(self._source, key)
                else:
                    row = _as_row(await calls.read_value(self._source, key))
            except FOREIGN as exc:
                raise translate(exc, f"get on {self.where}") from exc
            if cache is not None and row is not None:
                cache.fill(key, row, generation)
        if plan is None or not upgrade:
            return self._got(record_type, key, row, default, upgrade)
        if row is None:
            return default
        data, expire = row
        if expire is not None and expire <= now_ms():
            return default
        return plan.value(data, key)

    def _get_now(
        self, target: Target, fields: Fields = None, *, default: Any = None, upgrade: bool = True
    ) -> Any:
        """get for the sync face: the same steps (key_bytes, _got), the read driven on the
        calling thread without an awaitable (native.calls.get_row_now)."""
        plan = get_plan(self.schema, self.values, target) if fields.__class__ is tuple else None
        if plan is None or not upgrade:
            record_type, key = key_bytes(self.schema, target, fields)
        else:  # the per-record path: encoders and decoder bound once per target
            try:
                key = plan.fast_key(*fields)  # type: ignore[misc]
            except Exception:  # redone with the fallback: the error that names the field
                key = plan.key(*fields)  # type: ignore[misc]
        cache = self._record_cache
        row = None if cache is None else cache.get(key)
        if row is None:
            generation = 0 if cache is None else cache.generation
            try:  # not `with translating`: ~0.3 us a call on a per-record path
                if self.check_expiry:
                    row = calls.get_row_now(self._source, key)
                else:
                    row = _as_row(calls.get_now(self._source, key))
            except FOREIGN as exc:
                raise translate(exc, f"get on {self.where}") from exc
            if cache is not None and row is not None:
                cache.fill(key, row, generation)
        if plan is None or not upgrade:
            return self._got(record_type, key, row, default, upgrade)
        if row is None:  # _got inlined: two calls less on every get
            return default
        data, expire = row
        if expire is not None and expire <= now_ms():
            return default
        return plan.value(data, key)

    def _got(
        self, record_type: RecordType, key: bytes, row: PointRow, default: Any, upgrade: bool
    ) -> Any:
        """What get returns for the row read under `key`: `default` when there is none or
        its TTL has passed, else its decoded value."""
        if row is None:  # live_value inlined: two calls less on every get
            return default
        data, expire = row
        if expire is not None and expire <= now_ms():
            return default
        return self.values.decode(record_type, key, data, upgrade=upgrade)

    @overload
    async def get_with_expiry(
        self,
        target: Addressed[V, Unpack[Fs]],
        fields: tuple[Unpack[Fs]] | Mapping[str, Any],
        *,
        upgrade: bool = True,
    ) -> Entry[V] | None: ...

    @overload
    async def get_with_expiry(
        self, target: RecordType[Key, V], fields: Fields, *, upgrade: bool = True
    ) -> Entry[V] | None: ...

    @overload
    async def get_with_expiry(
        self, target: Key | tuple[Any, ...] | str, fields: Fields = None, *, upgrade: bool = True
    ) -> Entry[Any] | None: ...

    async def get_with_expiry(
        self, target: Target, fields: Fields = None, *, upgrade: bool = True
    ) -> Entry[Any] | None:
        """The record's value with its expiry in one point read: an Entry (`value`,
        `expires_at` an aware UTC datetime or None without a TTL), None when there is no live
        record (a record whose TTL has passed reads as absent, as get says)."""
        record_type, key = key_bytes(self.schema, target, fields)
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            row = await calls.read_row(self._source, key)
        except FOREIGN as exc:
            raise translate(exc, f"get on {self.where}") from exc
        return self._entry(record_type, key, row, upgrade)

    @overload
    async def get_many_with_expiry(
        self,
        target: Addressed[V, Unpack[Fs]],
        many: Iterable[tuple[Unpack[Fs]] | Mapping[str, Any]],
        *,
        upgrade: bool = True,
    ) -> list[Entry[V] | None]: ...

    @overload
    async def get_many_with_expiry(
        self, target: RecordType[Key, V], many: Iterable[Fields], *, upgrade: bool = True
    ) -> list[Entry[V] | None]: ...

    @overload
    async def get_many_with_expiry(
        self,
        target: str | Iterable[Key | tuple[Any, ...]],
        many: Iterable[Fields] | None = None,
        *,
        upgrade: bool = True,
    ) -> list[Entry[Any] | None]: ...

    async def get_many_with_expiry(
        self, target: ManyTarget, many: Iterable[Fields] | None = None, *, upgrade: bool = True
    ) -> list[Entry[Any] | None]:
        """get_with_expiry of many records, in the order asked (None for each one missing or
        expired), addressed as get_many addresses them; the reads are in flight together."""
        addressed = self._addressed(target, many)
        keys = [key for _, key in addressed]
        with translating(f"get_many on {self.where}"):
            read = functools.partial(calls.get_rows, self._source)
            rows = await in_windows(read, keys, self.read_window)
        entry = self._entry
        return [
            entry(record_type, key, row, upgrade)
            for (record_type, key), row in zip(addressed, rows, strict=True)
        ]

    def _entry(
        self, record_type: RecordType, key: bytes, row: PointRow, upgrade: bool
    ) -> Entry[Any] | None:
        """get_with_expiry's answer for the row read under `key`: None when there is none or
        its TTL has passed (the rule _got applies), else its value decoded with its expiry."""
        if row is None:
            return None
        data, expire = row
        if self.check_expiry and expire is not None and expire <= now_ms():
            return None
        value = self.values.decode(record_type, key, data, upgrade=upgrade)
        return Entry(value, expiry_datetime(expire), expire)

    async def distinct(self, record: RecordType | str, field: str, *leading: Any) -> list[Any]:
        """The distinct values of key field `field` among the records under `leading` (the
        values of the fields before it), in key order: a keys-only skip-scan that seeks past
        each long run of one value (store/distinct.py), so listing a store's repos or a
        collection's names reads about one window per value, not every key. `record`: a
        RecordType, or a record name for its newest version."""
        record_type = resolve(self.schema, record)
        position = field_position(record_type, field, leading)
        return await distinct_values(record_type, leading, position, self._keys_scan)

    def _keys_scan(
        self, record_type: RecordType, leading: tuple[Any, ...], start: bytes
    ) -> Scan[Any]:
        """A keys-only scan of `record_type` under `leading` from `start`, in batches of
        SEEK_AFTER keys, leaving the block cache alone (distinct's reads)."""
        scan = self.scan(
            record_type, *leading, start=start, batch_size=SEEK_AFTER, fill_cache=False
        )
        scan.keys()  # the rows' values are skipped, not decoded
        return scan

    @overload
    async def exists(
        self, target: Addressed[Any, Unpack[Fs]], fields: tuple[Unpack[Fs]] | Mapping[str, Any]
    ) -> bool: ...

    @overload
    async def exists(
        self, target: Key | tuple[Any, ...] | str | RecordType[Key, Any], fields: Fields = None
    ) -> bool: ...

    async def exists(self, target: Target, fields: Fields = None) -> bool:
        """True when a record is stored under the key."""
        _, key = key_bytes(self.schema, target, fields)
        return await self._fetch(key) is not None

    @overload
    async def get_many(
        self,
        target: Addressed[V, Unpack[Fs]],
        many: Iterable[tuple[Unpack[Fs]] | Mapping[str, Any]],
        *,
        default: None = None,
        upgrade: bool = True,
    ) -> list[V | None]: ...

    @overload
    async def get_many(
        self,
        target: Addressed[V, Unpack[Fs]],
        many: Iterable[tuple[Unpack[Fs]] | Mapping[str, Any]],
        *,
        default: D,
        upgrade: bool = True,
    ) -> list[V | D]: ...

    @overload
    async def get_many(
        self,
        target: RecordType[Key, V],
        many: Iterable[Fields],
        *,
        default: None = None,
        upgrade: bool = True,
    ) -> list[V | None]: ...

    @overload
    async def get_many(
        self,
        target: RecordType[Key, V],
        many: Iterable[Fields],
        *,
        default: D,
        upgrade: bool = True,
    ) -> list[V | D]: ...

    @overload
    async def get_many(
        self,
        target: str | Iterable[Key | tuple[Any, ...]],
        many: Iterable[Fields] | None = None,
        *,
        default: Any = None,
        upgrade: bool = True,
    ) -> list[Any]: ...

    async def get_many(
        self,
        target: ManyTarget,
        many: Iterable[Fields] | None = None,
        *,
        default: Any = None,
        upgrade: bool = True,
    ) -> list[Any]:
        """The decoded values of many records, in the order asked, `default` for each one that
        is missing: `get_many(record, [fields, ...])` or `get_many([key, ...])`. The reads are
        in flight together, so each costs a fraction of a single get."""
        addressed = self._addressed(target, many)
        found = await self._fetch_many([key for _, key in addressed])
        return self._decoded(addressed, found, default, upgrade)

    def _get_many_now(
        self,
        target: ManyTarget,
        many: Iterable[Fields] | None = None,
        *,
        default: Any = None,
        upgrade: bool = True,
    ) -> list[Any]:
        """get_many for the sync face: the same steps, the reads driven on this thread."""
        addressed = self._addressed(target, many)
        keys = [key for _, key in addressed]
        found: list[bytes | None] = []
        try:  # not `with translating`: ~0.3 us a call on a per-record path
            step = self.read_window
            for start in range(0, len(keys), step):
                window = keys[start : start + step]
                if self.check_expiry:
                    found += map(live_value, calls.get_rows_now(self._source, window))
                else:
                    found += calls.get_values_now(self._source, window)
        except FOREIGN as exc:
            raise translate(exc, f"get_many on {self.where}") from exc
        return self._decoded(addressed, found, default, upgrade)

    def _addressed(
        self,
        target: Any,  # a ManyTarget: checked here
        many: Iterable[Fields] | None,
    ) -> list[tuple[RecordType, bytes]]:
        """get_many's records as (RecordType, key bytes), in the order asked."""
        schema = self.schema
        if many is None:
            if isinstance(target, (RecordType, str)):
                raise ArgumentTypeError(
                    f"get_many({target!r}) needs a list of field values after the record "
                    "(or call get_many([key, ...]) with Key objects)",
                    field="many",
                )
            return [key_bytes(schema, key, None) for key in target]
        if not isinstance(target, (RecordType, str)):
            raise ArgumentTypeError(
                "get_many(record, many): the record must be a RecordType or a record name, "
                f"got {type(target).__name__}",
                field="record",
            )
        return [key_bytes(schema, target, fields) for fields in many]

    def _decoded(
        self,
        addressed: list[tuple[RecordType, bytes]],
        found: list[bytes | None],
        default: Any,
        upgrade: bool,
    ) -> list[Any]:
        """get_many's answer: each value found decoded, `default` for each one missing."""
        decode = self.values.decode
        return [
            default if data is None else decode(record_type, key, data, upgrade=upgrade)
            for (record_type, key), data in zip(addressed, found, strict=True)
        ]

    @overload
    def scan(
        self,
        record: RecordType[K, V] | str,
        *leading: Any,
        range: RangeArg = None,
        options: ScanOptions | None = None,
        on_error: Literal["raise", "skip"] | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record[K, V]]: ...

    @overload
    def scan(
        self,
        record: RecordType[K, V] | str,
        *leading: Any,
        range: RangeArg = None,
        options: ScanOptions | None = None,
        on_error: str,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record[K, V] | RawRecord]: ...

    def scan(
        self,
        record: RecordType | str,
        *leading: Any,
        range: RangeArg = None,
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record[Any, Any]] | Scan[Record[Any, Any] | RawRecord]:
        """Records of one RecordType (or every registered version of a record name), in key
        order, in a range: leading field values, then `range=ScanRange(...)` and/or its bounds
        as keywords (partial, version, prefix, start, end, after; see ScanRange), keywords
        winning.

        `start`/`end`: key bytes, a Key, or a tuple of leading field values (compared as field
        tuples: `end=("b",)` stops before every key whose first field is "b"). `after` (a
        scan's cursor, a raw key or a Key) resumes after that key; a cursor outside the
        scan's range, or malformed, is a CursorError. `limit=0` yields nothing. Versions are
        walked in version order (reversed when `reverse`), since the version byte leads the
        key.
        How it reads: `options=ScanOptions(...)` and/or the same settings as keywords
        (reverse, limit, batch_size, upgrade, fill_cache; see ScanOptions), keywords winning.
        `on_error`: a row whose key or value does not decode "raise"s (default), is "skip"ped
        and counted in `scan.failed`, or comes back "raw" as a RawRecord holding the error
        (so the scan's type is `Scan[Record | RawRecord]`). `scan(...).keys()` and
        `.values()` yield only keys (values are not decoded) or only values.
        """
        found, settings = scan_range(range, leading, keywords)
        spans = self._spans(record, found)
        return self._scan(
            spans, found.start, found.end, found.after, "raise", options, on_error, settings
        )

    @overload
    def scan_all(
        self,
        *,
        range: RangeArg = None,
        on_unknown: Literal["raise", "skip"] = "raise",
        options: ScanOptions | None = None,
        on_error: Literal["raise", "skip"] | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record]: ...

    @overload
    def scan_all(
        self,
        *,
        range: RangeArg = None,
        on_unknown: str = "raise",
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record | RawRecord]: ...

    def scan_all(
        self,
        *,
        range: RangeArg = None,
        on_unknown: str = "raise",
        options: ScanOptions | None = None,
        on_error: str | None = None,
        **keywords: Unpack[ScanArgs],
    ) -> Scan[Record] | Scan[Record | RawRecord]:
        """Every record (or those in a range of raw keys: prefix, start, end, after), each key
        decoded by the RecordType its prefix names. Keys no RecordType owns: on_unknown "raise"
        (default), "skip", or "raw" (yielded as RawRecord, so the scan's type is
        `Scan[Record | RawRecord]`). How it reads (`options`, keywords) and rows of a known
        RecordType that fail to decode (`on_error`): as for scan(). Secondary index keys (RFC
        0010) are left out unless `prefix` names them."""
        policy = check_policy(on_unknown)
        found, settings = scan_range(range, (), keywords, "scan_all")
        spans = self._spans(None, found)
        return self._scan(
            spans, found.start, found.end, found.after, policy, options, on_error, settings
        )

    async def count(
        self,
        record: RecordType | str | None = None,
        *leading: Any,
        range: RangeArg = None,
        **bounds: Unpack[RangeKeywords],
    ) -> int:
        """How many live records a scan with the same range would yield (no record: every
        key in the range of raw keys); keys and values are read but never decoded."""
        found, _ = scan_range(range, leading, bounds, "count")
        spans = self._spans(record, found)
        scan = self._scan(spans, found.start, found.end, found.after, "raw", None, "raw", {})
        return await scan.count()

    def _cursor(self, spans: list[KeySpan], after: After, where: str) -> bytes | None:
        """The raw key a range's `after` names (a cursor string, raw key or Key), checked to
        lie in `spans`; None for no cursor."""
        cursor = bound_bytes(
            decode_cursor(after) if isinstance(after, str) else after, None, "after"
        )
        if cursor is not None:
            check_cursor(spans, cursor, where)
        return cursor

    def _spans(self, record: RecordType | str | None, found: ScanRange) -> list[KeySpan]:
        """The key spans of a range before its start/end/after (_scan applies those): one per
        version of the record, narrowed to leading field values, a partial string and a raw
        prefix. No record: every key, index keys left out unless `prefix` names them."""
        leading, partial, version, prefix = (
            found.leading,
            found.partial,
            found.version,
            found.prefix,
        )
        if record is None:
            if leading or partial is not None or version is not None:
                raise ArgumentTypeError(
                    "leading fields, partial and version need a record type",
                    field="record",
                )
            span = narrow(KeySpan(None, None, None), prefix or None, None, None)
            if self._indexes is None or (prefix or b"").startswith(INDEX_ROOT):
                return [span]
            return without_index_keys(span)
        if isinstance(record, str):
            resolve(self.schema, record)  # SchemaError naming an unknown name
            if version is None:
                record_types = self.schema.versions(record)
            else:
                record_types = [self.schema.get(record, version)]
        else:
            record_type = resolve(self.schema, record)
            if version is not None and version != record_type.version:
                raise SchemaError(
                    f"{record_type.name} is version {record_type.version}; version={version} "
                    "contradicts it",
                    record=record_type.name,
                    field="version",
                    value=version,
                )
            record_types = [record_type]
        spans = []
        for record_type in record_types:
            lo, hi = record_type.range(*leading, partial=partial)
            spans.append(narrow(KeySpan(record_type, lo, hi), prefix, None, None))
        return spans

    def _bounded_spans(self, spans: list[KeySpan], start: Bound, end: Bound) -> list[KeySpan]:
        """`spans` narrowed to [start, end), each bound encoded for the span's record type."""
        return [
            narrow(
                span,
                None,
                bound_bytes(start, span.record_type, "start"),
                bound_bytes(end, span.record_type, "end"),
            )
            for span in spans
        ]

    def _scan(
        self,
        spans: list[KeySpan],
        start: Bound,
        end: Bound,
        after: After,
        on_unknown: Any,
        options: ScanOptions | None,
        on_error: str | None,
        keywords: Mapping[str, Any],
    ) -> Scan[Any]:
        """A Scan of `spans` (see _spans) narrowed to [start, end), from after the cursor
        `after`, read as `options` and `keywords` say."""
        where = f"scan on {self.where}"
        settings, policy = scan_settings(options, on_error, keywords)
        cursor = self._cursor(spans, after, where)
        narrowed = self._bounded_spans(spans, start, end)
        scan = Scan[Any](
            self._source,
            narrowed,
            schema=self.schema,
            values=self.values,
            reverse=settings.reverse,
            limit=settings.limit,
            after=cursor,
            on_unknown=on_unknown,
            on_error=check_error_policy(policy),
            batch_size=settings.batch_size,
            upgrade=settings.upgrade,
            fill_cache=settings.fill_cache,
            check_expiry=self.check_expiry,
            where=where,
        )
        scan.on_gone = self._on_gone(where)
        return scan

    def _on_gone(self, where: str) -> Callable[[int], Awaitable[None]] | None:
        """What a scan does when the garbage collector deleted an SST it reads (see Scan):
        nothing by default; a reader that pins nothing re-seeks (Store)."""
        return None
