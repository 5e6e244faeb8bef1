"""The store layer: the only place that talks to slatedb.

    Store          async, typed SlateDB database (writer, or read-only reader)
    SyncStore      the same, blocking, on a private event loop
    Record         what scans yield: (key, value, raw_key)
"""

from opendata_kv.store.scan import Record, Scan
from opendata_kv.store.store import Batch, Snapshot, Store, Transaction
from opendata_kv.store.sync import SyncScan, SyncStore, SyncTransaction, SyncView, SyncWriteView

__all__ = [
    "Batch",
    "Record",
    "Scan",
    "Snapshot",
    "Store",
    "SyncScan",
    "SyncStore",
    "SyncTransaction",
    "SyncView",
    "SyncWriteView",
    "Transaction",
]
