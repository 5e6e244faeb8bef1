"""What the collections share: layouts (their RecordTypes), store checks, time helpers, and a
small async result iterator."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from opendata_kv.errors import (
    ArgumentTypeError,
    InvalidInputError,
    ReadOnlyError,
    SchemaError,
    ValueDecodeError,
    ValueEncodeError,
    check_count,
)
from opendata_kv.ids import micros as micros_ids
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.store import Record, Store, StoreReader, SyncStoreReader
from opendata_kv.values import MsgpackCodec, ValueCodec, Values, pack, unpack

T = TypeVar("T")

if TYPE_CHECKING:  # a TypeVar default (PEP 696) for the type checker only: no runtime dependency
    from typing_extensions import TypeVar as DefaultingTypeVar

    #: what a collection reads through: a Store (reads and writes, the default) or a
    #: StoreReader (reads only: mypy flags its write methods, typed `self: ...[Store]`)
    StoreT = DefaultingTypeVar("StoreT", bound=StoreReader, default=Store)
    #: a record's value type: what a typed view (RecordCollection.typed) reads and writes;
    #: Any for the untyped collection, so a bare RepoRecord is RepoRecord[Any]
    ValueT = DefaultingTypeVar("ValueT", default=Any)
else:
    StoreT = TypeVar("StoreT", bound=StoreReader)
    ValueT = TypeVar("ValueT")

Instant = int | datetime.datetime


class Layout:
    """The RecordTypes one collection stores, ready to be added to a Schema.

    A collection never builds its own Schema: add `layout.record_types` to yours (next to your
    own record types) and open the Store with it; the collection checks on construction that
    every one of its RecordTypes is in the store's schema. Change the record type nibbles or
    give a keyspace when the defaults clash with your own types.
    """

    #: what the collection is, for error messages
    kind = "collection"
    #: RecordTypes whose values the collection builds itself: they need the msgpack codec
    _owned_values: tuple[RecordType, ...] = ()

    @property
    def record_types(self) -> tuple[RecordType, ...]:
        """Every RecordType of this layout (add them all to your Schema)."""
        raise NotImplementedError

    def register(self, values: Values) -> Values:
        """Register the value codecs the collection relies on (msgpack) in `values`.

        Only needed when your Values has a default codec other than msgpack.
        """
        for record_type in self._owned_values:
            values.register(record_type, MsgpackCodec())
        return values

    def check(self, store: StoreReader) -> None:
        """SchemaError unless `store` can hold this layout's records; ArgumentTypeError unless it
        is an async Store or StoreReader (a SyncStore wraps one: pass `sync_store.store`, or
        use the collection's sync face, collections/sync.py)."""
        given: object = store  # typed as StoreReader, but callers pass what they have
        if isinstance(given, SyncStoreReader) or not isinstance(
            getattr(given, "schema", None), Schema
        ):
            raise ArgumentTypeError(
                f"{self.kind} needs an async opendata_kv Store or StoreReader, got "
                f"{type(store).__name__}"
                + (
                    "; a SyncStore wraps one as its .store, or use the sync face "
                    "(SyncRecordCollection, SyncChangeLog, SyncPageStore take a SyncStore "
                    "or SyncStoreReader)"
                    if isinstance(given, SyncStoreReader)
                    else ""
                ),
                field="store",
                value=store,
            )
        schema = store.schema
        missing = [t.name for t in self.record_types if t not in schema]
        if missing:
            raise SchemaError(
                f"{self.kind}: the store's schema lacks the record types {missing}; build it "
                "with the layout's RecordTypes, e.g. Schema(*your_types, "
                "*layout.record_types), or use opendata_kv.collections.default_schema()"
            )
        for record_type in self._owned_values:
            codec = store.values.plan(record_type).codec
            if not isinstance(codec, MsgpackCodec):
                raise SchemaError(
                    f"{self.kind}: record type {record_type.name!r} needs the msgpack value "
                    f"codec, but the store's Values gives it {codec.name!r}; call "
                    "layout.register(values) before opening the store"
                )

    def __repr__(self) -> str:
        inner = ", ".join(f"{t.name}=0x{t.record_type:X}" for t in self.record_types)
        return f"{type(self).__name__}({inner})"


def writer_of(store: StoreReader, kind: str) -> Store:
    """`store` when it can write; ReadOnlyError for a collection opened on a StoreReader (mypy
    already flags the call: write methods take `self` over a Store)."""
    if is_reader_only(store):
        raise ReadOnlyError(
            f"{kind} on {store.where} was given a StoreReader: it reads only (open the "
            "store with Store.open to write)"
        )
    return cast(Store, store)  # a Store, or something standing in for one (tests' proxies)


def is_reader_only(store: StoreReader) -> bool:
    """Whether `store` is a StoreReader that cannot write (not a Store)."""
    return isinstance(store, StoreReader) and not isinstance(store, Store)


def to_plain(codec: ValueCodec[Any], value: Any, what: str, record: str) -> Any:
    """The plain msgpack data `codec` stores for a typed `value` (a collection keeps typed
    values inside values it builds, or under keys of one shared record type);
    ValueEncodeError naming `what` and `record` for a value the codec refuses."""
    try:
        return unpack(codec.encode(value))
    except ValueEncodeError as exc:
        raise ValueEncodeError(
            f"{what}: {exc}", record=record, field=exc.field, value=exc.value
        ) from None


def from_plain(codec: ValueCodec[Any], plain: Any, what: str, record: str) -> Any:
    """`plain` (stored by to_plain) as `codec`'s type; ValueDecodeError naming `what`."""
    try:
        return codec.decode(pack(plain))
    except ValueDecodeError as exc:
        raise ValueDecodeError(
            f"{what}: {exc}", record=record, field=exc.field, value=plain
        ) from None


def combined_schema(layouts: Iterable[Layout], *extra: RecordType) -> Schema:
    """One Schema holding `extra` (your own record types) and every layout's record types."""
    schema = Schema(*extra)
    for layout in layouts:
        for record_type in layout.record_types:
            schema.add(record_type)
    return schema


def key_of(record: Record) -> Key:
    """The decoded key of a scanned record (scans of one RecordType always decode it)."""
    return record.key


def to_micros(value: Instant, what: str) -> int:
    """Microseconds since the Unix epoch of an int (µs) or an aware datetime."""
    if isinstance(value, datetime.datetime):
        if micros_ids.is_naive(value):
            raise InvalidInputError(f"{what} {value.isoformat()!r} is naive: give it a time zone")
        return micros_ids.from_datetime(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            f"{what} must be microseconds (int) or an aware datetime, got {type(value).__name__}"
        )
    return value


def check_limit(limit: int | None) -> int | None:
    """None or an int >= 0 (0: nothing, as for Store.scan), else InvalidArgumentError."""
    check_count(limit, "limit", 0, none_ok=True, hint=" or None")
    return limit


class Results(Generic[T]):
    """`async for item in results`, or `await results.to_list()`: one pass over a query."""

    def __init__(self, source: AsyncIterator[T]) -> None:
        self._source = source

    def __aiter__(self) -> Results[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        return self._source.__anext__()

    async def to_list(self) -> list[T]:
        """Every remaining item."""
        return [item async for item in self._source]
