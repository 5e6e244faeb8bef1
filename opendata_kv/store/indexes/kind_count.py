"""The count and sum index kinds: one row per group (its fields' values) holding the group's
live record count and, for a sum index, the exact total of their amounts (sums.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opendata_kv.errors import StoreDataError, show_bytes
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.layout import decode_sum
from opendata_kv.store.indexes.maintainers import CountMaintainer, Maintainer, SumMaintainer
from opendata_kv.store.indexes.sums import ZERO, Sum, add

if TYPE_CHECKING:
    from opendata_kv.store.indexes.declare import Index
    from opendata_kv.store.scan import Record
    from opendata_kv.store.views import ReadView


class CountKind(IndexKind):
    """kind="count": index_count(index, *group) is one point read."""

    name = "count"
    aggregate = True
    key_in_entry = False
    takes_ttl = False
    needs_fields = False

    def maintainer(self, index: Index) -> type[Maintainer]:
        return CountMaintainer

    def expect(
        self, index: Index, out: dict[bytes, Any], entry: bytes, record: Record, amount: Any
    ) -> None:
        out[entry] = add(out.get(entry, ZERO), 1, amount)

    def difference(
        self, view: ReadView, index: Index, key: bytes, data: bytes, want: Any
    ) -> str | None:
        try:
            have = decode_sum(index.name, key, data)
        except StoreDataError as exc:
            return str(exc)
        if have != want:
            return (
                f"aggregate {show_bytes(key)} holds count, sum {shown(have)} but a recount "
                f"gives {shown(want)}"
            )
        return None

    def missing(self, key: bytes, want: Any) -> str:
        return f"aggregate {show_bytes(key)} is missing (recount: {shown(want)})"


class SumKind(CountKind):
    """kind="sum": a count index whose rows also total each record's `amount` exactly."""

    name = "sum"
    takes_amount = True

    def maintainer(self, index: Index) -> type[Maintainer]:
        return SumMaintainer


def shown(state: Sum) -> str:
    """(count, sum) as index_count / index_sum report them."""
    try:
        return repr((state.records, state.total()))
    except OverflowError:
        return repr((state.records, "a total past the float range"))


COUNT = CountKind()
SUM = SumKind()
