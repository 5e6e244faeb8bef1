"""The store of issue 37's import reproductions (tests/test_import_writer.py): items keyed by
a number, each in a group with an amount, under a count index and a sum index that need no
function, and a value index that does (`--schema importkit:SCHEMA`, `--indexes
importkit:INDEXES`; tests/ is on the path)."""

from __future__ import annotations

from typing import Any

from opendata_kv import Index, RecordType, Schema, fields
from opendata_kv.keys import Key

item = RecordType("item", 1, [("n", fields.u64)])
SCHEMA = Schema(item)

cnt = Index("cnt", "item", [("group", fields.string)], kind="count")
total = Index("total", "item", [("group", fields.string)], kind="sum", amount="amount")
PLAIN = [cnt, total]


def each_label(key: Key, value: Any) -> list[tuple[str]]:
    return [(label,) for label in value.get("labels", [])]


#: needs its function: an import must be given it (--indexes) or refuse
labels = Index("labels", "item", [("label", fields.string)], using=each_label)
INDEXES = [*PLAIN, labels]
