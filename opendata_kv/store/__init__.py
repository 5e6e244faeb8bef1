"""The typed store: records in and out of slatedb through the native layer (opendata_kv.native).

Store          async, typed SlateDB database: the writer (writer.py)
StoreReader    its read side, what Store.open_reader gives: no write methods (reader.py)
SyncStore      the same, blocking, driven on the calling thread (SyncStoreReader, ...)
Entry          a live record's value with its expiry (get_with_expiry, get_many_with_expiry)
Record         what scans yield: (key, value, raw_key), the key a typed Key
RawRecord      a row yielded undecoded: no RecordType owns it (scan_all(on_unknown="raw"))
               or it failed to decode (on_error="raw", with the error)
Change         what the change feed yields (Store.changes): a record's write, key a Key
RawChange      a feed row delivered undecoded (on_unknown="raw", on_error="raw")
IndexChange    a write of a secondary index (Store.changes(indexes=True))
ChangeBatch    one WAL file's changes (Store.change_batches); the first says what GC took
OpenOptions    how Store.open / open_reader open a database, as one value (options=)
Checkpoint     a pinned state (Store.checkpoint, Store.open_reader(checkpoint=...))
KeyRange       one split of a key range (Store.splits), a `range=` for every scan form
pinned         a store pinned at one checkpoint for a job (Pinned: `with`, picklable)
clone          copy a database (at a checkpoint) into a new, independent one
verify         check every object of a database; a VerifyReport of Problems (read-only);
               verify_sync blocks (verify_async: the deprecated old name of verify)
"""

from opendata_kv.checks.integrity import Problem
from opendata_kv.checks.verify import VerifyReport, verify, verify_async, verify_sync
from opendata_kv.store.batch import Batch, Snapshot, Transaction
from opendata_kv.store.entry import Entry
from opendata_kv.store.open_options import OpenOptions
from opendata_kv.store.ops.checkpoints import Checkpoint
from opendata_kv.store.ops.clone import CloneResult, clone, clone_sync
from opendata_kv.store.ops.feed import Change, ChangeBatch, IndexChange, RawChange
from opendata_kv.store.options import ScanOptions
from opendata_kv.store.pinned import Pinned, pinned
from opendata_kv.store.ranges import KeyRange, ScanRange
from opendata_kv.store.reader import Opening, StoreReader
from opendata_kv.store.scan import RawRecord, Record, Scan
from opendata_kv.store.sync import (
    SyncBatch,
    SyncChanges,
    SyncScan,
    SyncSnapshot,
    SyncStore,
    SyncStoreReader,
    SyncTransaction,
    SyncView,
)
from opendata_kv.store.writer import Store

__all__ = [
    "Batch",
    "Change",
    "ChangeBatch",
    "Checkpoint",
    "CloneResult",
    "Entry",
    "IndexChange",
    "KeyRange",
    "OpenOptions",
    "Opening",
    "Pinned",
    "Problem",
    "RawChange",
    "RawRecord",
    "Record",
    "Scan",
    "ScanOptions",
    "ScanRange",
    "Snapshot",
    "Store",
    "StoreReader",
    "SyncBatch",
    "SyncChanges",
    "SyncScan",
    "SyncSnapshot",
    "SyncStore",
    "SyncStoreReader",
    "SyncTransaction",
    "SyncView",
    "Transaction",
    "VerifyReport",
    "clone",
    "clone_sync",
    "pinned",
    "verify",
    "verify_async",
    "verify_sync",
]
