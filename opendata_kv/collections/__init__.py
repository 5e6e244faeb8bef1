"""Ready-made collections: AT Protocol records, a Gink-style change log, web pages by URL key.

Record type nibbles (key version 1, no keyspace, by default):

    0xA  atproto_record        RecordCollection   (repo, collection, rkey)
    0xB  change                ChangeLog          (muid)
    0xC  change_by_medallion   ChangeLog index    (medallion, muid)
    0xD  page                  PageStore          (url_key of the canonical URL)
    0xE  page_id               PageStore id_map   (url_key of the cleaned requested URL)

0x1..0x9 and 0xF are left to your own record types. A collection does not own the database:
it is bound to a Store whose Schema holds its layout's RecordTypes next to yours.

    from opendata_kv import RecordType, Schema, Store, fields
    from opendata_kv.collections import RECORDS, CHANGELOG, RecordCollection, ChangeLog

    mine = RecordType("session", 1, [("id", fields.string)])
    schema = Schema(mine, *RECORDS.record_types, *CHANGELOG.record_types)
    async with Store.open("./data", schema) as store:
        repo, log = RecordCollection(store), ChangeLog(store)

`default_schema(*your_types)` builds a Schema with all three collections (and your types).
When the default nibbles clash with your types, build a layout with other ones (or a
keyspace), add its record_types to your Schema and pass it on: `layout =
RecordsLayout(0x5)`, `RecordCollection(store, layout=layout)`. The nibbles are part of the
stored data: pick them once per database.
"""

from __future__ import annotations

from opendata_kv.collections._common import Layout, Results, combined_schema
from opendata_kv.collections.backlinks import Backlink, Backlinks
from opendata_kv.collections.changelog import (
    CHANGELOG,
    Change,
    ChangeLog,
    ChangeLogLayout,
    ChangeTransaction,
)
from opendata_kv.collections.pages import PAGES, Page, PagesLayout, PageStore
from opendata_kv.collections.records import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    RECORDS,
    BacklinkPage,
    RecordCollection,
    RecordList,
    RecordsLayout,
    RepoRecord,
)
from opendata_kv.keys import RecordType, Schema
from opendata_kv.values import Values

#: The default layouts of every collection.
DEFAULT_LAYOUTS: tuple[Layout, ...] = (RECORDS, CHANGELOG, PAGES)


def default_schema(*extra: RecordType) -> Schema:
    """A Schema with the default layouts of all three collections and `extra` (your own
    record types, which must not use nibbles 0xA..0xE without a keyspace)."""
    return combined_schema(DEFAULT_LAYOUTS, *extra)


def default_values(schema: Schema, default: object = None) -> Values:
    """Values for `schema` with the codecs every default layout relies on registered."""
    values = Values(schema, default)
    for layout in DEFAULT_LAYOUTS:
        layout.register(values)
    return values


__all__ = [
    "BACKLINKS",
    "BSKY_KEY_TYPES",
    "CHANGELOG",
    "DEFAULT_LAYOUTS",
    "PAGES",
    "RECORDS",
    "Backlink",
    "BacklinkPage",
    "Backlinks",
    "Change",
    "ChangeLog",
    "ChangeLogLayout",
    "ChangeTransaction",
    "Layout",
    "Page",
    "PageStore",
    "PagesLayout",
    "RecordCollection",
    "RecordList",
    "RecordsLayout",
    "RepoRecord",
    "Results",
    "combined_schema",
    "default_schema",
    "default_values",
]
