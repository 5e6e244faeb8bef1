"""opendata_kv: typed record keys, identifiers and a store layer over SlateDB.

`opendata_kv.ids` and `opendata_kv.keys` never load the native slatedb library; `Store` and
`SyncStore` are imported lazily here so that `import opendata_kv.keys` stays pure Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opendata_kv import errors
from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import RecordType, Schema, fields

if TYPE_CHECKING:
    from opendata_kv.store import KeyRange, Pinned, Store, SyncStore, pinned
    from opendata_kv.store.indexes import Index

__version__ = "0.1.0"

_LAZY = {
    "Index": "opendata_kv.store.indexes",
    "KeyRange": "opendata_kv.store",
    "Pinned": "opendata_kv.store",
    "pinned": "opendata_kv.store",
    "Store": "opendata_kv.store",
    "SyncStore": "opendata_kv.store",
}


def __getattr__(name: str) -> Any:
    """Load the store layer (and with it slatedb) only when Store, SyncStore, Index,
    KeyRange, Pinned or pinned is asked for."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'opendata_kv' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


__all__ = [
    "Index",
    "KeyRange",
    "OpendataKvError",
    "Pinned",
    "RecordType",
    "Schema",
    "Store",
    "SyncStore",
    "__version__",
    "errors",
    "fields",
    "pinned",
]
