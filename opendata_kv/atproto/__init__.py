"""AT Protocol appview pieces over the collections: Jetstream ingest into a RecordCollection
(atproto/jetstream.py), with its cursor kept in the same database (docs/appview.md).

    schema = default_schema(*JETSTREAM.record_types)
    async with Store.open(url, schema, indexes=BACKLINKS.indexes) as store:
        ingest = Jetstream(RecordCollection(store, key_types=BSKY_KEY_TYPES))
        await ingest.run(events)                   # an async iterator of Jetstream messages
        await consume(ingest, "wss://jetstream2.us-east.bsky.network/subscribe")
"""

from __future__ import annotations

from opendata_kv.atproto.events import Account, Commit, Event, Identity, Other, parse_event
from opendata_kv.atproto.jetstream import IngestReport, IngestState, Jetstream, consume
from opendata_kv.atproto.layout import JETSTREAM, JetstreamLayout

__all__ = [
    "JETSTREAM",
    "Account",
    "Commit",
    "Event",
    "Identity",
    "IngestReport",
    "IngestState",
    "Jetstream",
    "JetstreamLayout",
    "Other",
    "consume",
    "parse_event",
]
