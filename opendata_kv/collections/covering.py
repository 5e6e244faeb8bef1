"""Pages of covering backlinks (collections/backlinks.py): "who liked X" answered from the
index entries alone, with the work per page kept to what the page returns.

A covering entry's key is the index's entry prefix, then (subject, rkey, linking DID), then
the linking record's key; its value is a copy of the record's stored value. A page is one
scan of the subject's entries fetching limit + 1 rows in one native batch (the extra row
says whether a next page exists), decoded by a plan bound once per index: the C
accelerator's RecordDecoder turns the batch into (fields, copy, raw key) rows in one call
(native/records.py entry_decoder), else Python decodes each entry key and the copies as a
batch. The rows become the page's RepoRecords and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from opendata_kv.errors import OpendataKvError
from opendata_kv.keys import RecordType
from opendata_kv.keys.fields import Field
from opendata_kv.native import records as native_records
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.layout import decode_entry, entry_prefix
from opendata_kv.store.scan import Record
from opendata_kv.values import Values, batch_decoder

#: rows a page fetches per native batch at most (a page of up to this many minus one
#: records is one batch)
PAGE_BATCH: Final = 1024


class CoveringPlan:
    """How one covering index's rows become page rows, bound once per index (and values
    registry: Values.get_plans holds it, emptied when a codec is registered)."""

    __slots__ = ("fields", "head", "name", "native", "record", "row_bytes", "values")

    def __init__(
        self,
        name: str,
        fields: Sequence[tuple[str, Field]],
        head: bytes,
        record: RecordType,
        values: Values,
        native: Callable[[list[bytes], list[bytes], bool], list[Any] | None] | None,
    ) -> None:
        self.name = name
        self.fields = fields
        #: every entry of the index starts with it
        self.head = head
        self.record = record
        self.values = values
        #: the C decoder of a batch (None when the accelerator is off or declines the fields)
        self.native = native
        #: the mean bytes of a row (key and value) in the last batch decoded, 0 before one:
        #: what a page's read-ahead is sized by (store/scan.py sized_read_ahead)
        self.row_bytes = 0

    def read_ahead(self, rows: int) -> int:
        """The bytes `rows` rows take by the last batch's measure (0: not known yet), with a
        quarter more for rows longer than those."""
        return rows * self.row_bytes * 5 // 4

    def leading(self, subject: str) -> bytes:
        """The prefix of the entries of `subject`."""
        return self.head + self.fields[0][1].encode(subject)

    def rows(self, keys: list[bytes], data: list[bytes]) -> list[Record]:
        """Record((subject, rkey, did, record key), copy, entry key) per row, in C when the
        accelerator takes the batch, else in Python (which names a malformed row)."""
        if keys:
            self.row_bytes = (sum(map(len, keys)) + sum(map(len, data))) // len(keys)
        native = self.native
        if native is not None:
            built = native(keys, data, True)  # every key of the scan starts with `head`
            if built is not None:
                return built
        return self._python_rows(keys, data)

    def _python_rows(self, keys: list[bytes], data: list[bytes]) -> list[Record]:
        name, fields = self.name, self.fields
        entries: list[Any] = []  # (subject, rkey, did, record key) per row
        for key in keys:
            values, primary = decode_entry(name, fields, key)
            entries.append((*values, primary))
        try:
            copies = batch_decoder(self.values.plan(self.record).codec)(data)
        except OpendataKvError:
            raise
        except Exception:  # the batch path's bare failure: decode each for the precise error
            decode = self.values.decode
            copies = [
                decode(self.record, entry[-1], value, upgrade=False)
                for entry, value in zip(entries, data, strict=True)
            ]
        return [
            Record(entry, value, key)
            for entry, value, key in zip(entries, copies, keys, strict=True)
        ]


def covering_plan(values: Values, index: Index, record: RecordType) -> CoveringPlan:
    """The bound plan of `index` (covering, fields (subject, rkey, did)) for records of
    `record`, made on first use."""
    target = ("covering page", index.name, record.name)
    found: CoveringPlan | None = values.get_plans.get(target)
    if found is None or found.record is not record:
        head = entry_prefix(index.name)
        codec = values.plan(record).codec
        native = native_records.entry_decoder(
            head, [field for _, field in index.fields], codec, Record
        )
        found = CoveringPlan(index.name, index.fields, head, record, values, native)
        values.get_plans[target] = found
    return found
