"""IndexKind: everything one index kind decides, in one object (RFC 0010, "Index kinds").

A kind says which declarations it takes, how its entries are laid out (one entry per record,
the record key ending the entry key or held as its value; or one row per group holding an
aggregate), whether the records it covers may take a TTL, which Maintainer keeps its entries
current, how a stored entry decodes for index_scan, the change feed and the CLI, and what
check_indexes expects of its entries and says when one differs. Each kind is one module
(kind_value.py, kind_unique.py, ...) registered in kinds.py; the surfaces ask the kind, never
compare kind names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opendata_kv.errors import SchemaError, show_bytes
from opendata_kv.store.indexes.layout import decode_aggregate

if TYPE_CHECKING:
    from opendata_kv.store.indexes.declare import Index
    from opendata_kv.store.indexes.maintainers import Maintainer
    from opendata_kv.store.scan import Record
    from opendata_kv.store.views import ReadView


class IndexKind:
    """One index kind (see the module docstring). Subclasses set the class attributes and
    implement `maintainer`, `expect` and `difference`; the defaults describe a kind with one
    entry per record whose key ends with the record key (a value index)."""

    #: the `kind=` a declaration names it by, stored in the index's definition
    name: str = ""
    #: entry layout: one row per group holding (count, sum), read as IndexEntry only
    aggregate: bool = False
    #: entry layout: the record key ends the entry key (else the entry's value holds it)
    key_in_entry: bool = True
    #: lookup reads it: one record per entry value
    unique: bool = False
    #: TTL policy: the records it covers may be written with a TTL (their entries expire
    #: with them); an aggregate keeps no expiry, so its kind refuses it (IndexTtlError)
    takes_ttl: bool = True
    #: declaration rules: at least one field; an amount=; covering=True
    needs_fields: bool = True
    takes_amount: bool = False
    takes_covering: bool = False

    def __repr__(self) -> str:
        return f"<index kind {self.name!r}>"

    def check_declaration(self, index: Index) -> None:
        """SchemaError when `index` (its common rules already checked) breaks this kind's."""
        name, kind = index.name, self.name
        if self.needs_fields and not index.fields:
            raise SchemaError(f"index {name!r}: a {kind} index needs at least one field")
        if self.takes_amount != (index.amount is not None):
            raise SchemaError(
                f"index {name!r}: a {kind} index {'needs' if self.takes_amount else 'takes no'} "
                f"amount= (what a sum index adds up), got amount={index.amount!r}",
                field="amount",
                value=index.amount,
            )
        if index.covering and not self.takes_covering:
            raise SchemaError(
                f"index {name!r}: covering=True keeps a copy of each record's value in its "
                f"entries, which a {kind} index does not (a value index does)",
                field="covering",
                value=True,
            )

    def maintainer(self, index: Index) -> type[Maintainer]:
        """The Maintainer class that keeps `index`'s entries current on each write."""
        raise NotImplementedError

    # -- entry layout, as the readers decode it (index_scan, the feed, the CLI) --

    def primary(self, rest: bytes, data: bytes | None) -> bytes | None:
        """The record key an entry points at, from what follows its fields in the entry key
        (`rest`) and its stored value (`data`, None for a deletion); None for an aggregate."""
        if self.aggregate:
            return None
        return rest if self.key_in_entry else data

    def entry_part(self, entry: bytes, record_key: bytes) -> bytes:
        """An entry key without the record key it ends with (when the layout has it there)."""
        return entry[: len(entry) - len(record_key)] if self.key_in_entry else entry

    def counts(self, name: str, key: bytes, data: bytes) -> tuple[int, int | float] | None:
        """An aggregate row's (count, sum) as index_scan's IndexEntry, index_count and
        index_sum give it; None for a kind whose entries point at records."""
        return decode_aggregate(name, key, data) if self.aggregate else None

    def shown_value(self, name: str, key: bytes, data: bytes) -> dict[str, Any] | None:
        """An entry's stored value as the tools show it (dump's `value`, by field name), or
        None when it only points at a record (shown as the record key instead)."""
        found = self.counts(name, key, data)
        return None if found is None else {"count": found[0], "sum": found[1]}

    # -- check_indexes: the recount and how a stored entry differs from it --

    def expect(
        self, index: Index, out: dict[bytes, Any], entry: bytes, record: Record, amount: Any
    ) -> None:
        """Add what `record` gives the entry key `entry` (its fields' part) to the recount
        `out` (entry key -> what the stored entry should hold)."""
        raise NotImplementedError

    def difference(
        self, view: ReadView, index: Index, key: bytes, data: bytes, want: Any
    ) -> str | None:
        """Why the stored entry (`key`, `data`) differs from the recount's `want`, or None."""
        raise NotImplementedError

    def missing(self, key: bytes, want: Any) -> str:
        """The problem of an entry the recount expects and the database lacks."""
        return f"entry {show_bytes(key)} is missing"
