"""AT Protocol repository records: (repo DID, collection NSID, record key) -> record value.

Key layout (record type 0xA by default, version 1; see rfcs/0007-collections.md):

    [keyspace][0x01][0xA0] repo:string  collection:rkey(nsid)  rkey:rkey
                           "did:plc:x\\0"  "app.bsky.feed.post\\0"  "3kabc...\\0"

Every record of one repo sits under one prefix, every record of one collection under a longer
one, and record keys sort as strings: TID record keys (13 base32-sortable characters) sort by
time, so `list(..., reverse=True)` is newest first.

    schema = Schema(*my_types, *RECORDS.record_types)       # or collections.default_schema()
    async with Store.open(path, schema) as store:
        repo = RecordCollection(store, key_types=BSKY_KEY_TYPES)
        rec = await repo.create("did:plc:abc", "app.bsky.feed.post", {"text": "hi"})
        page = await repo.list("did:plc:abc", "app.bsky.feed.post", reverse=True, limit=50)
        more = await repo.list(..., cursor=page.cursor)

Each collection NSID has a Lexicon record key type (`tid`, `nsid`, `literal:<value>`, `any`),
from `key_types` or `default_key_type`; create, put and delete refuse keys of the wrong type.
`create` never overwrites: it reads and writes in one serializable transaction, so of two
concurrent creates of one key exactly one succeeds and the other raises RecordExistsError.

Backlinks (collections/backlinks.py): opened with `indexes=BACKLINKS.indexes`, a store keeps
likes and reposts by subject URI and follows by subject DID as secondary indexes, and
`likes`, `reposts`, `followers` and `like_count`, `repost_count`, `follower_count` read them.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import heapq
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, overload

from opendata_kv.collections._common import (
    Layout,
    Results,
    StoreT,
    ValueT,
    check_limit,
    from_plain,
    key_of,
    to_plain,
    writer_of,
)
from opendata_kv.collections.backlinks import Backlink, Backlinks
from opendata_kv.collections.covering import PAGE_BATCH, covering_plan
from opendata_kv.collections.typed_records import TypedRecords
from opendata_kv.errors import (
    CursorError,
    IdError,
    InvalidInputError,
    RecordExistsError,
    TransactionConflictError,
    check_count,
)
from opendata_kv.ids import did as did_ids
from opendata_kv.ids import nsid as nsid_ids
from opendata_kv.ids import rkey as rkey_ids
from opendata_kv.ids.rkey import KeyType
from opendata_kv.ids.tid import TidGenerator
from opendata_kv.keys import RecordType, fields
from opendata_kv.store import Batch, Store
from opendata_kv.store.cursor import decode_cursor, encode_cursor, is_cursor
from opendata_kv.store.distinct import SEEK_AFTER  # noqa: F401  (its home before; tests read it)
from opendata_kv.store.indexes.layout import encode_leading
from opendata_kv.store.scan import Record, decode_rows_with, sized_read_ahead
from opendata_kv.values import UnknownFields, ValueCodec, as_codec

V = TypeVar("V")

#: Default record type nibble of AT Protocol records.
RECORD_TYPE = 0xA

#: Lexicon record key types of common Bluesky collections (pass as key_types=...).
BSKY_KEY_TYPES: Mapping[str, str] = {
    "app.bsky.actor.profile": "literal:self",
    "app.bsky.feed.generator": "any",
    "app.bsky.feed.like": "tid",
    "app.bsky.feed.post": "tid",
    "app.bsky.feed.repost": "tid",
    "app.bsky.feed.threadgate": "tid",
    "app.bsky.graph.block": "tid",
    "app.bsky.graph.follow": "tid",
    "app.bsky.graph.list": "tid",
    "app.bsky.graph.listitem": "tid",
}


class TidSource(Protocol):
    """Anything that hands out TID strings (a TidGenerator, or a fake in tests)."""

    def next(self) -> str: ...


def check_did(repo: object) -> str:
    """`repo` if it is a syntactically valid DID (AT Protocol rules), else IdError."""
    reason = did_ids.explain(repo)
    if reason is not None:
        raise IdError(f"repo {reason}", field="repo", value=repo)
    assert isinstance(repo, str)
    return repo


def check_nsid(collection: object) -> str:
    """`collection` if it is a syntactically valid NSID, else IdError."""
    reason = nsid_ids.explain(collection)
    if reason is not None:
        raise IdError(f"collection: {reason}")
    assert isinstance(collection, str)
    return collection


class RecordsLayout(Layout):
    """The one RecordType of AT Protocol records: (repo, collection, rkey)."""

    kind = "RecordCollection"

    def __init__(
        self,
        record_type: int = RECORD_TYPE,
        *,
        version: int = 1,
        keyspace: bytes = b"",
        name: str = "atproto_record",
    ) -> None:
        self.record = RecordType(
            name,
            record_type,
            [
                ("repo", fields.string),
                ("collection", fields.rkey("nsid")),
                ("rkey", fields.rkey("any")),
            ],
            version=version,
            keyspace=keyspace,
        )

    @property
    def record_types(self) -> tuple[RecordType, ...]:
        return (self.record,)


#: The default layout (record type 0xA, version 1, no keyspace).
RECORDS = RecordsLayout()

#: The backlink indexes of the default layout: Store.open(..., indexes=BACKLINKS.indexes).
BACKLINKS = Backlinks(RECORDS)
#: Covering backlinks of the default layout: pages of likes, reposts and followers read no
#: record (RecordCollection(..., backlinks=COVERING_BACKLINKS); collections/backlinks.py).
COVERING_BACKLINKS = Backlinks(RECORDS, covering=True)


@dataclass(frozen=True)
class RepoRecord(Generic[ValueT]):
    """One stored record and where it lives; `value` is its collection's value type (Any
    unless read through a typed view, RecordCollection.typed)."""

    repo: str
    collection: str
    rkey: str
    value: ValueT

    @property
    def uri(self) -> str:
        """`at://repo/collection/rkey`."""
        return f"at://{self.repo}/{self.collection}/{self.rkey}"


@dataclass(frozen=True)
class RecordList(Generic[ValueT]):
    """One page of `RecordCollection.list`: the records and the cursor of the next page.

    `cursor` is the page cursor (a printable str, store/cursor.py) of the last record returned
    when more records follow, None when the listing is complete. Pass it back as `cursor=`
    (with the same `reverse`).
    `has_more`: whether records follow (with `limit=0`, an empty page, whether any exist).
    """

    records: list[RepoRecord[ValueT]]
    cursor: str | None
    has_more: bool = False

    def __iter__(self) -> Iterator[RepoRecord[ValueT]]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


@dataclass(frozen=True)
class BacklinkPage(Generic[ValueT]):
    """One page of backlinks: the linking records (a like's `repo` is the liker) in index
    order, and the page cursor of the next page (a printable str, store/cursor.py; None when
    the listing is complete). Pass it back as `cursor=` with the same `reverse`."""

    records: list[RepoRecord[ValueT]]
    cursor: str | None
    has_more: bool = False

    def __iter__(self) -> Iterator[RepoRecord[ValueT]]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


#: a put_many record: (repo, collection, rkey, value)
PutItem = tuple[str, str, str, Any]
#: a create_many record: (repo, collection, value) or (repo, collection, value, rkey or None)
CreateItem = tuple[str, str, Any] | tuple[str, str, Any, str | None]

_ABSENT = object()


class _NewRecord(NamedTuple):
    """A create_many record past create's checks; rkey None: a fresh TID per attempt."""

    repo: str
    collection: str
    value: Any  # as given
    stored: Any  # as stored (_stored_value)
    rkey: str | None
    key_type: KeyType


def _fields(item: object, count: int, what: str, shape: str) -> tuple[Any, ...]:
    """`item` as a tuple of `count` fields, else InvalidInputError naming `what` takes."""
    if not isinstance(item, tuple) or len(item) != count:
        raise InvalidInputError(
            f"{what}: each record is a tuple {shape}, got {_shown(item)}", value=item
        )
    return item


def _shown(item: object) -> str:
    text = repr(item)
    return text if len(text) <= 80 else f"{text[:77]}..."


class _BulkChecks:
    """The repo and collection checks of put and create for a bulk write: each distinct repo
    DID and collection NSID is checked once (bulk writes repeat them), up to _REMEMBERED."""

    def __init__(self, owner: RecordCollection) -> None:
        self.owner = owner
        self.repos: set[str] = set()
        self.key_types: dict[str, KeyType] = {}

    def repo(self, repo: object) -> None:
        if type(repo) is str and repo in self.repos:
            return
        self.repos.add(check_did(repo))
        if len(self.repos) > _REMEMBERED:
            self.repos.clear()

    def key_type(self, collection: object) -> KeyType:
        found = self.key_types.get(collection) if type(collection) is str else None
        if found is None:
            nsid = check_nsid(collection)
            found = self.owner.key_type(nsid)
            if len(self.key_types) > _REMEMBERED:
                self.key_types.clear()
            self.key_types[nsid] = found
        return found


#: how many distinct repos (and collections) a bulk write remembers as checked
_REMEMBERED = 65536


class RecordCollection(Generic[StoreT]):
    """AT Protocol repository records in a Store (see the module docstring).

    key_types: collection NSID -> Lexicon record key type ("tid", "nsid", "literal:self",
        "any"); collections not in it get `default_key_type`.
    tids: where `create` gets TID record keys (a TidGenerator with a random clock id unless
        given; one per process, or one clock id per writer, keeps TIDs unique).
    max_attempts: how often `create` runs its transaction before it gives up on conflicts.
    backlinks: the backlink indexes the backlink reads use (those of `layout` by default);
        the store must have been opened with their `indexes`.
    value_types: collection NSID -> the type of its values (a dataclass, TypedDict,
        msgspec.Struct or pydantic model, or a value codec): written through its codec's
        checks, stored as the plain msgpack map, read back as that type (stored fields the
        type does not declare kept); other collections hold any msgpack value. `typed(nsid,
        Post)` gives the same to mypy, as a view of one collection.
    store: a Store, or a StoreReader for the read methods only.
    """

    def __init__(
        self,
        store: StoreT,
        *,
        key_types: Mapping[str, str | KeyType] | None = None,
        default_key_type: str | KeyType = "any",
        tids: TidSource | None = None,
        max_attempts: int = 8,
        layout: RecordsLayout = RECORDS,
        backlinks: Backlinks | None = None,
        value_types: Mapping[str, Any] | None = None,
    ) -> None:
        layout.check(store)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidInputError(f"max_attempts must be a positive int, got {max_attempts!r}")
        self.store: StoreT = store
        self.layout = layout
        self.record = layout.record
        self.default_key_type = KeyType.parse(default_key_type)
        self.key_types: dict[str, KeyType] = {
            check_nsid(nsid): KeyType.parse(key_type)
            for nsid, key_type in (key_types or {}).items()
        }
        self.tids: TidSource = tids if tids is not None else TidGenerator()
        self.value_codecs: dict[str, ValueCodec[Any]] = {
            check_nsid(nsid): as_codec(spec) for nsid, spec in (value_types or {}).items()
        }
        self.max_attempts = max_attempts
        if backlinks is None and layout is RECORDS:
            backlinks = BACKLINKS
        self._backlinks = backlinks

    def __repr__(self) -> str:
        return f"<RecordCollection on {self.store.where} {self.layout!r}>"

    def _writer(self) -> Store:
        """The store, for a write (ReadOnlyError when this collection was given a reader)."""
        return writer_of(self.store, "RecordCollection")

    @property
    def backlinks(self) -> Backlinks:
        """The backlink indexes the backlink reads use (made on first use for a layout of
        your own, so a record name that is no valid index name only matters then)."""
        if self._backlinks is None:
            self._backlinks = Backlinks(self.layout)
        return self._backlinks

    @overload
    def typed(
        self, collection: str, value_type: type[V], *, unknown: UnknownFields = "keep"
    ) -> TypedRecords[V, StoreT]: ...

    @overload
    def typed(
        self, collection: str, value_type: ValueCodec[V], *, unknown: UnknownFields = "keep"
    ) -> TypedRecords[V, StoreT]: ...

    def typed(
        self, collection: str, value_type: Any, *, unknown: UnknownFields = "keep"
    ) -> TypedRecords[Any, StoreT]:
        """A typed view of one collection: its get, list, scan and backlink pages give
        `value_type` (RepoRecord[Post] to mypy) and its writes take one. `value_type`: a
        dataclass, TypedDict, msgspec.Struct or pydantic model type, or a value codec.
        `unknown`: "keep" (stored fields the type does not declare are kept and written back
        by put) or "forbid" (ValueDecodeError naming the record and field), for a type
        given as a class (a codec says its own)."""
        nsid = check_nsid(collection)
        view = copy.copy(self)
        view.value_codecs = {**self.value_codecs, nsid: as_codec(value_type, unknown=unknown)}
        return TypedRecords(view, nsid)

    # --- key checks -----------------------------------------------------------------------------

    def key_type(self, collection: str) -> KeyType:
        """The Lexicon record key type enforced for `collection`."""
        return self.key_types.get(collection, self.default_key_type)

    def _check_write(self, repo: str, collection: str, rkey: str) -> None:
        check_did(repo)
        check_nsid(collection)
        rkey_ids.validate(rkey, self.key_type(collection))

    def _stored_value(self, collection: str, value: Any) -> Any:
        """What is stored for `value` in `collection`: the plain data of its value type's
        codec (value_types; ValueEncodeError for a value the codec refuses), else the value
        itself; InvalidInputError for a `$type` that is not the collection."""
        codec = self.value_codecs.get(collection)
        if codec is not None:
            value = to_plain(codec, value, collection, self.record.name)
        self._check_value(collection, value)
        return value

    def _typed_value(self, repo: str, collection: str, rkey: str, value: Any) -> Any:
        """A stored value as its collection's value type (value_types), else as stored."""
        codec = self.value_codecs.get(collection)
        if codec is None or value is None:
            return value
        return from_plain(codec, value, f"at://{repo}/{collection}/{rkey}", self.record.name)

    @staticmethod
    def _check_value(collection: str, value: Any) -> None:
        if isinstance(value, Mapping):
            declared = value.get("$type")
            if declared is not None and declared != collection:
                raise InvalidInputError(
                    f"record $type {declared!r} does not match its collection {collection!r}"
                )

    def _record(self, record: Record) -> RepoRecord:
        key = key_of(record)
        repo, collection, rkey = key.repo, key.collection, key.rkey
        return RepoRecord(
            repo, collection, rkey, self._typed_value(repo, collection, rkey, record.value)
        )

    # --- writes ---------------------------------------------------------------------------------

    async def create(
        self: RecordCollection[Store],
        repo: str,
        collection: str,
        value: Any,
        *,
        rkey: str | None = None,
    ) -> RepoRecord:
        """Store a new record and return it; never overwrites.

        The record key is `rkey` if given, the literal for a `literal:<value>` collection,
        else a fresh TID (`nsid` collections need an explicit rkey). The existence check and
        the write run in one serializable transaction: if the key holds a record (even one
        written concurrently) this raises RecordExistsError and writes nothing. A transaction
        conflict is retried, with a fresh TID when the key was generated, up to
        `max_attempts` runs; then the last TransactionConflictError is raised.
        """
        check_did(repo)
        check_nsid(collection)
        stored = self._stored_value(collection, value)
        key_type = self.key_type(collection)
        generated = False
        if rkey is None:
            rkey, generated = self._made_rkey(collection, key_type)
        conflict: TransactionConflictError | None = None
        for _attempt in range(self.max_attempts):
            key = self.tids.next() if generated else rkey
            assert key is not None
            rkey_ids.validate(key, key_type)
            fields_ = (repo, collection, key)
            try:
                async with self._writer().transaction("serializable") as tx:
                    if await tx.exists(self.record, fields_):
                        raise RecordExistsError(
                            f"at://{repo}/{collection}/{key} already exists; create never "
                            "overwrites (use put to replace a record)"
                        )
                    await tx.put(self.record, fields_, stored)
            except TransactionConflictError as exc:
                conflict = exc
                continue
            return RepoRecord(repo, collection, key, value)
        assert conflict is not None
        raise TransactionConflictError(
            f"create in at://{repo}/{collection} gave up after {self.max_attempts} conflicting "
            f"attempts: {conflict}"
        ) from conflict

    def prepared(self, collection: str, value: Any) -> Any:
        """What `put` stores for a value of `collection`, after put's value checks
        (ValueEncodeError, InvalidInputError for a `$type` of another collection), for a
        writer that batches records itself (atproto/jetstream.py, which checks the key)."""
        return self._stored_value(collection, value)

    async def put(
        self: RecordCollection[Store], repo: str, collection: str, rkey: str, value: Any
    ) -> RepoRecord:
        """Store `value` under the key, replacing any record there (putRecord)."""
        self._check_write(repo, collection, rkey)
        stored = self._stored_value(collection, value)
        await self._writer().put(self.record, (repo, collection, rkey), stored)
        return RepoRecord(repo, collection, rkey, value)

    async def put_many(
        self: RecordCollection[Store],
        records: Iterable[PutItem] | AsyncIterable[PutItem],
        *,
        batch_size: int = 1000,
        durable: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Put `(repo, collection, rkey, value)` records, replacing any there, `batch_size` per
        atomic batch (store.put_many); returns how many were put. Every record passes the
        checks `put` makes, with its errors: a refused record's batch is not written (the
        batches before it are; `progress(total_so_far)` is called after each one)."""

        checks = _BulkChecks(self)

        def checked(item: PutItem) -> tuple[RecordType, tuple[str, str, str], Any]:
            repo, collection, rkey, value = _fields(
                item, 4, "put_many", "(repo, collection, rkey, value)"
            )
            checks.repo(repo)
            rkey_ids.validate(rkey, checks.key_type(collection))
            return self.record, (repo, collection, rkey), self._stored_value(collection, value)

        source: Iterable[Any] | AsyncIterable[Any]
        if isinstance(records, AsyncIterable):
            source = (checked(item) async for item in records)
        else:
            source = map(checked, records)
        return await self._writer().put_many(
            source, batch_size=batch_size, durable=durable, progress=progress
        )

    async def create_many(
        self: RecordCollection[Store],
        records: Iterable[CreateItem] | AsyncIterable[CreateItem],
        *,
        batch_size: int = 1000,
        durable: bool = False,
    ) -> builtins.list[RepoRecord]:
        """Create `(repo, collection, value)` or `(repo, collection, value, rkey)` records, as
        `create` does (the rkey made as `create` makes it when absent or None) but `batch_size`
        per atomic batch of creates (Batch.create); returns the records made. Never overwrites:
        a key that holds a record, or that the same batch names twice, raises
        RecordExistsError and the batch writes nothing (the batches before it are written).
        Every record passes the checks `create` makes, with its errors, before its batch is
        written. The existence check and the write are atomic under the store's write lock
        (docs/collections.md, "Bulk writes")."""
        check_count(batch_size, "batch_size", 1)
        checks = _BulkChecks(self)
        made: builtins.list[RepoRecord] = []
        batch: builtins.list[_NewRecord] = []
        if isinstance(records, AsyncIterable):
            async for item in records:
                batch.append(self._new_record(item, checks))
                if len(batch) >= batch_size:
                    made += await self._create_batch(batch)
                    batch = []
        else:
            for item in records:
                batch.append(self._new_record(item, checks))
                if len(batch) >= batch_size:
                    made += await self._create_batch(batch)
                    batch = []
        if batch:
            made += await self._create_batch(batch)
        if durable:
            await self._writer().flush()
        return made

    def _new_record(self, item: CreateItem, checks: _BulkChecks) -> _NewRecord:
        """The checks `create` makes before its transaction, for one create_many record."""
        if isinstance(item, tuple) and len(item) == 3:
            repo, collection, value = item
            rkey = None
        else:
            repo, collection, value, rkey = _fields(
                item, 4, "create_many", "(repo, collection, value[, rkey])"
            )
        checks.repo(repo)
        key_type = checks.key_type(collection)
        stored = self._stored_value(collection, value)
        generated = False
        if rkey is None:
            rkey, generated = self._made_rkey(collection, key_type)
        if not generated:
            assert rkey is not None
            rkey_ids.validate(rkey, key_type)
        return _NewRecord(repo, collection, value, stored, None if generated else rkey, key_type)

    def _made_rkey(self, collection: str, key_type: KeyType) -> tuple[str | None, bool]:
        """(the literal rkey, False) or (None, True: a TID per attempt) for a record given
        no rkey; InvalidInputError for a collection whose rkeys must be given."""
        if key_type.kind == "literal":
            assert key_type.value is not None
            return key_type.value, False
        if key_type.kind in ("tid", "any"):
            return None, True
        raise InvalidInputError(
            f"collection {collection!r} has record key type {key_type}: create needs "
            "an explicit rkey"
        )

    async def _create_batch(self, batch: builtins.list[_NewRecord]) -> builtins.list[RepoRecord]:
        """One atomic batch of creates (Batch.create: refused whole, nothing written, when a
        key holds a record), each generated rkey a fresh TID checked as `create` checks it."""
        store = self._writer()
        made = [
            RepoRecord(r.repo, r.collection, r.rkey or self.tids.next(), r.value) for r in batch
        ]
        keys = [(r.repo, r.collection, r.rkey) for r in made]
        if len(set(keys)) != len(keys):
            twice = next(k for i, k in enumerate(keys) if k in keys[:i])
            raise RecordExistsError(
                "at://{}/{}/{} is named twice in one create_many batch; create never "
                "overwrites, so nothing of the batch was written".format(*twice),
                record=self.record.name,
                value="at://{}/{}/{}".format(*twice),
            )
        writes = Batch(store)
        create = writes.create
        record_type = self.record
        for key, new in zip(keys, batch, strict=True):
            if new.rkey is None:
                rkey_ids.validate(key[2], new.key_type)
            create(record_type, key, new.stored)
        try:
            await store.write(writes)
        except RecordExistsError as exc:
            key = exc.value
            uri = f"at://{key.repo}/{key.collection}/{key.rkey}"
            raise RecordExistsError(
                f"{uri} already exists; create never overwrites (use put to replace a "
                "record), so nothing of the batch was written",
                record=self.record.name,
                value=uri,
            ) from exc
        return made

    async def delete(self: RecordCollection[Store], repo: str, collection: str, rkey: str) -> None:
        """Remove the record (no error when there is none). The key type is enforced here too."""
        self._check_write(repo, collection, rkey)
        await self._writer().delete(self.record, (repo, collection, rkey))

    # --- reads ----------------------------------------------------------------------------------

    async def get(self, repo: str, collection: str, rkey: str, default: Any = None) -> Any:
        """The record value (as its collection's value type), or `default` when there is none."""
        value = await self.store.get(self.record, (repo, collection, rkey), default=_ABSENT)
        if value is _ABSENT:
            return default
        return self._typed_value(repo, collection, rkey, value)

    async def exists(self, repo: str, collection: str, rkey: str) -> bool:
        """True when the record exists."""
        return await self.store.exists(self.record, (repo, collection, rkey))

    async def list(
        self,
        repo: str,
        collection: str,
        reverse: bool = False,
        limit: int | None = None,
        cursor: str | bytes | None = None,
    ) -> RecordList:
        """Records of one collection in record key order (reverse: descending; for TID keys,
        newest first), at most `limit`, starting after `cursor` (a previous page's cursor, or
        the record key an older release gave as one; with reverse, records before it)."""
        limit = check_limit(limit)
        after = None if cursor is None else self._list_position(repo, collection, cursor)
        scan = self.store.scan(
            self.record,
            repo,
            collection,
            reverse=reverse,
            limit=limit,
            after=after,
        )
        records = [self._record(r) for r in await scan.to_list()]
        more = limit is not None and await scan.has_more()
        return RecordList(records, scan.cursor if more else None, more)

    def _list_position(self, repo: str, collection: str, cursor: object) -> bytes:
        """The key a `list` cursor resumes after: a page cursor's (one of another listing is
        then the scan's CursorError), else (an older release's cursor) a record key's; raw
        key bytes as given. A record key shaped like a page cursor ("k1." and canonical
        base64) is read as a page cursor: that one case of the old form is refused."""
        if isinstance(cursor, bytes):
            return cursor
        if isinstance(cursor, str) and is_cursor(cursor):
            with contextlib.suppress(CursorError):  # not base64: an older record key
                return decode_cursor(cursor, "cursor")
        if not isinstance(cursor, str):
            return decode_cursor(cursor, "cursor")  # type: ignore[arg-type]  # CursorError
        try:
            rkey_ids.validate(cursor)
        except IdError as exc:  # the older release's error, naming the cursor
            raise type(exc)(
                f"cursor: {exc} (a cursor is a page's cursor or, from an older release, a "
                f"record key of {repo} {collection})",
                field="cursor",
                value=cursor,
            ) from None
        return self.record.encode(repo, collection, cursor)

    def scan(
        self, repo: str | None = None, collection: str | None = None, *, reverse: bool = False
    ) -> Results[RepoRecord]:
        """Stream records: all of them, one repo's, or one collection's, in key order."""
        if repo is None and collection is not None:
            raise InvalidInputError("scan: a collection needs its repo")
        leading = tuple(v for v in (repo, collection) if v is not None)
        rows = self.store.scan(self.record, *leading, reverse=reverse)

        async def records() -> AsyncIterator[RepoRecord]:
            async for row in rows:
                yield self._record(row)

        return Results(records())

    async def collections(self, repo: str) -> builtins.list[str]:
        """The distinct collection NSIDs holding records of `repo`, sorted (the store's
        distinct: a keys-only skip-scan, store/distinct.py)."""
        return [str(value) for value in await self.store.distinct(self.record, "collection", repo)]

    async def repos(self) -> builtins.list[str]:
        """The distinct repo DIDs holding records, sorted (the store's distinct)."""
        return [str(value) for value in await self.store.distinct(self.record, "repo")]

    async def count(self, repo: str, collection: str | None = None) -> int:
        """How many records `repo` holds (in one collection, or in all)."""
        leading = (repo,) if collection is None else (repo, collection)
        scan = self.store.scan(self.record, *leading, batch_size=4096)
        total = 0
        while chunk := await scan.next_chunk():
            total += len(chunk)
        return total

    # --- backlinks (secondary indexes: collections/backlinks.py) ----------------------------------

    async def likes(
        self,
        uri: str,
        *,
        limit: int | None = None,
        cursor: str | bytes | None = None,
        reverse: bool = False,
    ) -> BacklinkPage:
        """The like records of the post (or other record) at `uri`, oldest record key first
        (`reverse`: newest first), at most `limit`, after `cursor` (a page's cursor)."""
        return await self.backlink_page(self.backlinks.likes, uri, limit, cursor, reverse)

    async def reposts(
        self,
        uri: str,
        *,
        limit: int | None = None,
        cursor: str | bytes | None = None,
        reverse: bool = False,
    ) -> BacklinkPage:
        """The repost records of the record at `uri` (as `likes`)."""
        return await self.backlink_page(self.backlinks.reposts, uri, limit, cursor, reverse)

    async def followers(
        self,
        did: str,
        *,
        limit: int | None = None,
        cursor: str | bytes | None = None,
        reverse: bool = False,
    ) -> BacklinkPage:
        """The follow records whose subject is `did` (their `repo` is the follower)."""
        check_did(did)
        return await self.backlink_page(self.backlinks.follows, did, limit, cursor, reverse)

    async def like_count(self, uri: str) -> int:
        """How many likes the record at `uri` has (one read of a count index, no scan)."""
        return await self.backlink_count(self.backlinks.likes, uri)

    async def repost_count(self, uri: str) -> int:
        """How many reposts the record at `uri` has (one read)."""
        return await self.backlink_count(self.backlinks.reposts, uri)

    async def follower_count(self, did: str) -> int:
        """How many follow records have `did` as subject (one read)."""
        check_did(did)
        return await self.backlink_count(self.backlinks.follows, did)

    async def backlink_page(
        self,
        link: Backlink,
        subject: str,
        limit: int | None = None,
        cursor: str | bytes | None = None,
        reverse: bool = False,
    ) -> BacklinkPage:
        """One page of the records of one backlink kind pointing at `subject`."""
        _check_subject(subject)
        limit = check_limit(limit)
        if cursor is not None:
            cursor = decode_cursor(cursor, "cursor")
        if link.covering:
            return await self._covering_page(link, subject, limit, cursor, reverse)
        scan = self.store.index_scan(
            link.entries.name, subject, reverse=reverse, limit=limit, after=cursor
        )
        records = [self._record(record) for record in await scan.to_list()]
        more = limit is not None and await scan.has_more()
        return BacklinkPage(records, scan.cursor if more else None, more)

    def _check_readable(self, name: str) -> None:
        """IndexStateError unless the index `name` is declared and readable, as index_scan
        says it (an in-memory check: a page must not pay for building a scan to learn it)."""
        indexes = self.store._indexes
        if indexes is None:
            self.store.index_scan(name, limit=0)  # raises, naming the missing declaration
        else:
            indexes.readable(name, f"index_scan on {self.store.where}")

    async def _covering_page(
        self, link: Backlink, subject: str, limit: int | None, after: bytes | None, reverse: bool
    ) -> BacklinkPage:
        """backlink_page from covering entries (collections/covering.py): one scan of the
        subject's entries, limit + 1 rows fetched in one native batch and decoded by the
        index's bound plan; each entry's fields name the linking record (subject, rkey, DID)
        and its value is the record's copy, so no record is read. The index's state is
        checked as index_scan checks it."""
        index = link.entries
        self._check_readable(index.name)
        plan = covering_plan(self.store.values, index, self.record)
        prefix = plan.leading(subject)
        want = None if limit is None else limit + 1
        batch = PAGE_BATCH if want is None else min(want, PAGE_BATCH)
        scan = decode_rows_with(
            self.store.scan_all(
                prefix=prefix, reverse=reverse, after=after, limit=want, batch_size=batch
            ),
            plan.rows,
        )
        if want is not None and plan.row_bytes:  # a window the size of the page
            sized_read_ahead(scan, plan.read_ahead(want))
        rows: builtins.list[Record] = await scan.next_chunk()
        while rows and (want is None or len(rows) < want):  # a page over one batch: more
            chunk = await scan.next_chunk()
            if not chunk:
                break
            rows += chunk
        more = limit is not None and len(rows) > limit
        if more:
            del rows[limit:]
        cursor = encode_cursor(rows[-1].raw_key) if more else None
        collection = link.collection
        if self.value_codecs.get(collection) is not None:
            typed = self._typed_value
            records = [
                RepoRecord(did, collection, rkey, typed(did, collection, rkey, value))
                for (_, rkey, did, _), value, _ in rows
            ]
        else:
            records = _repo_records(collection, rows)
        return BacklinkPage(records, cursor, more)

    async def top(
        self, n: int, *, link: Backlink | None = None, partial: str | None = None
    ) -> builtins.list[tuple[str, int]]:
        """The `n` subjects with the most links of one kind (likes by default: the most-liked
        posts), as (subject, count), most first (ties by subject). A bounded scan of the
        count index (rfcs/0007-collections.md, "top"): every group it holds, or those whose
        subject starts with `partial` (say "at://did:plc:x/" for one author's posts), read
        in batches, n kept; no record is read."""
        check_count(n, "n", 0)
        counts = (link or self.backlinks.likes).counts
        scan = self.store.index_scan(counts.name, partial=partial, records=False, batch_size=4096)
        best: builtins.list[tuple[int, str]] = []
        while chunk := await scan.next_chunk():
            best = heapq.nsmallest(n, [*best, *((-(e.records or 0), e.values[0]) for e in chunk)])
        return [(subject, -negated) for negated, subject in best]

    async def distinct_likers(self, uri: str) -> int:
        """How many distinct DIDs like the record at `uri` (see distinct_linkers)."""
        return await self.distinct_linkers(self.backlinks.likes, uri)

    async def distinct_linkers(self, link: Backlink, subject: str) -> int:
        """How many distinct DIDs hold a link of one kind to `subject`: exact, from a scan of
        the subject's entries (keys only: covering entries name the DID; plain ones through
        their record key), so it costs one entry per link (rfcs/0007-collections.md)."""
        _check_subject(subject)
        if not link.covering:
            entries = self.store.index_scan(link.entries.name, subject, records=False)
            return len({entry.key.repo async for entry in entries if entry.key is not None})
        index = link.entries
        self._check_readable(index.name)
        prefix = encode_leading(index.name, index.fields, (subject,), None)
        scan = self.store.scan_all(prefix=prefix, batch_size=4096).undecoded()
        head = len(prefix)
        seen: set[bytes] = set()
        while chunk := await scan.next_chunk():
            for row in chunk:  # prefix, rkey 00, did 00, record key: the DID's bytes suffice
                key = row.raw_key
                end = key.find(b"\x00", head) + 1
                seen.add(key[end : key.find(b"\x00", end)])
        return len(seen)

    async def backlink_count(self, link: Backlink, subject: str) -> int:
        """How many records of one backlink kind point at `subject`."""
        _check_subject(subject)
        return await self.store.index_count(link.counts.name, subject)


_new = object.__new__


def _repo_records(collection: str, rows: builtins.list[Record]) -> builtins.list[RepoRecord]:
    """RepoRecord(did, collection, rkey, value) of each covering row ((subject, rkey, did,
    record key), value, entry key). A frozen dataclass's __init__ sets each field through
    object.__setattr__ (about half of the time a page spent on its records, measured);
    filling the new instance's __dict__ makes the same objects, compared equal in the
    tests."""
    out: builtins.list[RepoRecord] = []
    append = out.append
    for (_, rkey, did, _), value, _ in rows:
        record = _new(RepoRecord)
        record.__dict__.update(repo=did, collection=collection, rkey=rkey, value=value)
        append(record)
    return out


def _check_subject(subject: object) -> None:
    if not isinstance(subject, str) or not subject:
        raise InvalidInputError(
            f"a backlink subject is a non-empty string (a URI or DID), got {subject!r}"
        )
