"""The unique index kind: one entry per field value (the entry's value is the record key of
its one holder); a value held by another live record refuses the write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opendata_kv.errors import show_bytes
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.maintainers import Maintainer, UniqueMaintainer, show_key

if TYPE_CHECKING:
    from opendata_kv.store.indexes.declare import Index
    from opendata_kv.store.scan import Record
    from opendata_kv.store.views import ReadView


class UniqueKind(IndexKind):
    """kind="unique": lookup(index, *values) reads the one record holding them."""

    name = "unique"
    key_in_entry = False
    unique = True

    def maintainer(self, index: Index) -> type[Maintainer]:
        return UniqueMaintainer

    def expect(
        self, index: Index, out: dict[bytes, Any], entry: bytes, record: Record, amount: Any
    ) -> None:
        held = out.get(entry)
        if held is None:
            out[entry] = record.raw_key
        else:  # a second holder: kept as a list, which the check reports
            out[entry] = [*(held if isinstance(held, list) else [held]), record.raw_key]

    def difference(
        self, view: ReadView, index: Index, key: bytes, data: bytes, want: Any
    ) -> str | None:
        if isinstance(want, list):
            return (
                f"entry {show_bytes(key)} is claimed by {[show_key(view.schema, k) for k in want]}"
            )
        if data != want:
            return (
                f"entry {show_bytes(key)} points to {show_bytes(data)}, but the record "
                f"holding the value is {show_key(view.schema, want)!r}"
            )
        return None


UNIQUE = UniqueKind()
