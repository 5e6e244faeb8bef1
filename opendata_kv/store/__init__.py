"""The store layer: the only place that talks to slatedb.

    Store          async, typed SlateDB database (writer, or read-only reader)
    SyncStore      the same, blocking, on a private event loop
    Record         what scans yield: (key, value, raw_key), the key a typed Key
    RawRecord      a row no RecordType owns (scan_all(on_unknown="raw")): key and value bytes
"""

from opendata_kv.store.scan import RawRecord, Record, Scan
from opendata_kv.store.store import Batch, Snapshot, Store, Transaction
from opendata_kv.store.sync import SyncScan, SyncStore, SyncTransaction, SyncView, SyncWriteView

__all__ = [
    "Batch",
    "RawRecord",
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
