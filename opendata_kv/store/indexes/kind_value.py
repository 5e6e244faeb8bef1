"""The value index kind: an entry per field value and record (the record key ends the entry
key, the value is empty, or a copy of the record's stored value when covering=True)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from opendata_kv.errors import OpendataKvError, show_bytes
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.layout import decode_entry
from opendata_kv.store.indexes.maintainers import (
    CoveringMaintainer,
    Maintainer,
    ValueMaintainer,
    show_key,
)

if TYPE_CHECKING:
    from opendata_kv.store.indexes.declare import Index
    from opendata_kv.store.scan import Record
    from opendata_kv.store.views import ReadView


class Copy(NamedTuple):
    """What a covering index's entry should hold: a copy of the record's value (compared
    decoded, as the record's codec reads both)."""

    value: Any


class ValueKind(IndexKind):
    """kind="value" (the default): records in field order, several per value."""

    name = "value"
    takes_covering = True

    def maintainer(self, index: Index) -> type[Maintainer]:
        return CoveringMaintainer if index.covering else ValueMaintainer

    def expect(
        self, index: Index, out: dict[bytes, Any], entry: bytes, record: Record, amount: Any
    ) -> None:
        out[entry + record.raw_key] = Copy(record.value) if index.covering else b""

    def difference(
        self, view: ReadView, index: Index, key: bytes, data: bytes, want: Any
    ) -> str | None:
        if not isinstance(want, Copy):
            return None  # an entry's presence is all a plain value index holds
        primary = decode_entry(index.name, index.fields, key)[1]
        try:
            copy = view.values.decode(view.schema.record_type_of(primary), primary, data)
        except OpendataKvError as exc:
            return f"entry {show_bytes(key)} holds a copy that does not decode: {exc}"
        if copy != want.value and repr(copy) != repr(want.value):  # NaN != NaN
            return (
                f"entry {show_bytes(key)} holds a stale copy of "
                f"{show_key(view.schema, primary)!r}: {copy!r} where the record holds "
                f"{want.value!r}"
            )
        return None


VALUE = ValueKind()
