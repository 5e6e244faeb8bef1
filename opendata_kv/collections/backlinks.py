"""AT Protocol backlinks as secondary indexes (RFC 0010) over RecordCollection's records: who
liked or reposted a post (by subject URI), who follows a DID (by subject DID), and how many.

    links = BACKLINKS                                     # for the default layout RECORDS
    async with Store.open(url, schema, indexes=links.indexes) as store:
        repo = RecordCollection(store, backlinks=links)
        page = await repo.likes("at://did:plc:x/app.bsky.feed.post/3k...", limit=50)
        total = await repo.like_count("at://did:plc:x/app.bsky.feed.post/3k...")

Likes and reposts point at a strong ref, `subject: {"uri": ..., "cid": ...}`; follows at a
DID, `subject: "did:..."`. Each kind has a value index on (subject, rkey), so the linking
records of one subject come in record key order (TIDs: oldest first, `reverse` for newest),
and a count index on (subject). A record without a usable subject has no entry. The indexes
are kept in the same atomic write as the records, by the store, for every write path.

Covering backlinks (`Backlinks(layout, covering=True)`, `COVERING_BACKLINKS` for the default
layout) keep what a page of likes shows in the entries themselves: their fields are (subject,
rkey, linking DID) and each holds a copy of the linking record's value (its createdAt), so a
page of `likes()`, `reposts()` or `followers()` reads no record and decodes no record key.
Their entry indexes are named `<prefix>.<kind>_links` (beside `_by_subject`, so a database can
move from one to the other with an online build); the count indexes are the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from opendata_kv.keys import Key, RecordType, fields
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.library import index_function, index_route

LIKE = "app.bsky.feed.like"
REPOST = "app.bsky.feed.repost"
FOLLOW = "app.bsky.graph.follow"

#: an entry: the subject, then the linking record's key (TIDs sort by time)
ENTRY_FIELDS = (("subject", fields.string), ("rkey", fields.string))
#: a count group: the subject
COUNT_FIELDS = (("subject", fields.string),)
#: a covering entry: the subject, the linking record's key, its repo (the linking DID)
LINK_FIELDS = (("subject", fields.string), ("rkey", fields.string), ("did", fields.string))


def strong_ref_uri(value: Any) -> str | None:
    """`value["subject"]["uri"]` when it is a non-empty string (likes, reposts), else None."""
    # `.__class__ is dict` first: a JSON record is a dict, and the Mapping ABC check is slow
    is_map = value.__class__ is dict or isinstance(value, Mapping)
    subject: Any = value.get("subject") if is_map else None
    is_map = subject.__class__ is dict or isinstance(subject, Mapping)
    uri = subject.get("uri") if is_map else None
    return uri if isinstance(uri, str) and uri else None


def subject_did(value: Any) -> str | None:
    """`value["subject"]` when it is a non-empty string (follows), else None."""
    is_map = value.__class__ is dict or isinstance(value, Mapping)
    subject: Any = value.get("subject") if is_map else None
    return subject if isinstance(subject, str) and subject else None


# The index functions are module-level so that their stored names (module.qualname) are the
# same in every process (RFC 0010: a declaration must match the stored definition), and marked
# @index_function so that a writer or tool that did not declare them finds them by that name;
# @index_route tells the writer each reads one collection's records only (the `key.collection`
# test each makes), so it hands each only those.


@index_function
@index_route("collection", LIKE)
def like_entries(key: Key, value: Any) -> list[tuple[str, str]]:
    uri = strong_ref_uri(value) if key.collection == LIKE else None
    return [] if uri is None else [(uri, key.rkey)]


@index_function
@index_route("collection", LIKE)
def like_groups(key: Key, value: Any) -> list[tuple[str]]:
    uri = strong_ref_uri(value) if key.collection == LIKE else None
    return [] if uri is None else [(uri,)]


@index_function
@index_route("collection", REPOST)
def repost_entries(key: Key, value: Any) -> list[tuple[str, str]]:
    uri = strong_ref_uri(value) if key.collection == REPOST else None
    return [] if uri is None else [(uri, key.rkey)]


@index_function
@index_route("collection", REPOST)
def repost_groups(key: Key, value: Any) -> list[tuple[str]]:
    uri = strong_ref_uri(value) if key.collection == REPOST else None
    return [] if uri is None else [(uri,)]


@index_function
@index_route("collection", FOLLOW)
def follow_entries(key: Key, value: Any) -> list[tuple[str, str]]:
    did = subject_did(value) if key.collection == FOLLOW else None
    return [] if did is None else [(did, key.rkey)]


@index_function
@index_route("collection", FOLLOW)
def follow_groups(key: Key, value: Any) -> list[tuple[str]]:
    did = subject_did(value) if key.collection == FOLLOW else None
    return [] if did is None else [(did,)]


@index_function
@index_route("collection", LIKE)
def like_links(key: Key, value: Any) -> list[tuple[str, str, str]]:
    uri = strong_ref_uri(value) if key.collection == LIKE else None
    return [] if uri is None else [(uri, key.rkey, key.repo)]


@index_function
@index_route("collection", REPOST)
def repost_links(key: Key, value: Any) -> list[tuple[str, str, str]]:
    uri = strong_ref_uri(value) if key.collection == REPOST else None
    return [] if uri is None else [(uri, key.rkey, key.repo)]


@index_function
@index_route("collection", FOLLOW)
def follow_links(key: Key, value: Any) -> list[tuple[str, str, str]]:
    did = subject_did(value) if key.collection == FOLLOW else None
    return [] if did is None else [(did, key.rkey, key.repo)]


@dataclass(frozen=True)
class Backlink:
    """One kind of backlink: the records of `collection` pointing at a subject; `entries`
    lists them per subject, `counts` counts them."""

    collection: str
    entries: Index
    counts: Index

    @property
    def covering(self) -> bool:
        """Whether the entries hold (subject, rkey, DID) and a copy of the record's value."""
        return self.entries.covering


class HasRecord(Protocol):
    """A RecordsLayout: the one RecordType of (repo, collection, rkey) records."""

    @property
    def record(self) -> RecordType: ...


class Backlinks:
    """The backlink indexes of one RecordsLayout (likes, reposts, follows); pass `indexes` to
    Store.open. Index names start with `prefix` (the layout's record name by default), so
    two layouts in one database keep separate indexes. `BACKLINKS` (in collections) are those
    of the default layout. `covering=True`: entries that hold what a page shows (see the
    module docstring), `COVERING_BACKLINKS` for the default layout."""

    def __init__(
        self, layout: HasRecord, *, prefix: str | None = None, covering: bool = False
    ) -> None:
        record = layout.record.name
        head = record if prefix is None else prefix
        self.covering = covering

        def kind(name: str, collection: str, using: tuple[Any, Any, Any]) -> Backlink:
            entries, links, groups = using
            listed = (
                Index(f"{head}.{name}_links", record, LINK_FIELDS, using=links, covering=True)
                if covering
                else Index(f"{head}.{name}_by_subject", record, ENTRY_FIELDS, using=entries)
            )
            return Backlink(
                collection,
                listed,
                Index(f"{head}.{name}_count", record, COUNT_FIELDS, kind="count", using=groups),
            )

        self.likes = kind("likes", LIKE, (like_entries, like_links, like_groups))
        self.reposts = kind("reposts", REPOST, (repost_entries, repost_links, repost_groups))
        self.follows = kind("follows", FOLLOW, (follow_entries, follow_links, follow_groups))

    def __iter__(self) -> Iterator[Backlink]:
        return iter((self.likes, self.reposts, self.follows))

    @property
    def indexes(self) -> tuple[Index, ...]:
        """Every index to declare (Store.open(..., indexes=...))."""
        return tuple(index for link in self for index in (link.entries, link.counts))

    def __repr__(self) -> str:
        return f"Backlinks({[index.name for index in self.indexes]!r})"
