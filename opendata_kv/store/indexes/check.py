"""Checking an index against its records (RFC 0010): every entry without a matching record,
every record missing an entry, every aggregate that differs from a recount, each a Problem
naming the index and key. Reads only; holds the index's expected entries in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opendata_kv.checks.integrity import Problem
from opendata_kv.errors import OpendataKvError, show_bytes
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.layout import decode_entry, encode_fields, entry_prefix
from opendata_kv.store.indexes.sums import amount_problem

if TYPE_CHECKING:
    from opendata_kv.store.views import ReadView


async def expected_entries(
    view: ReadView, index: Index, unsummable: list[Problem] | None = None
) -> dict[bytes, Any]:
    """entry key -> what its kind says the stored entry should hold (IndexKind.expect),
    recounted from the records. A record
    whose amount no sum can take (written before sums refused it) is left out of its groups
    and named in `unsummable`."""
    out: dict[bytes, Any] = {}
    expect = index.index_kind.expect
    for record in known_records(view, index):
        async for row in view.scan(record):
            groups = index.entries(row.key, row.value)
            if not groups:
                continue
            amount = index.amount_of(row.key, row.value) if index.aggregate else 0
            why = amount_problem(amount)
            if why is not None:
                if unsummable is not None:
                    unsummable.append(
                        Problem(
                            f"index {index.name}",
                            f"record {row.key!r}: its amount {amount!r} {why}, which no sum "
                            "can take: change the record, then rebuild the index",
                        )
                    )
                continue
            for values in groups:
                expect(index, out, encode_fields(index.name, index.fields, values), row, amount)
    return out


def known_records(view: ReadView, index: Index) -> list[str]:
    """The index's record names this view's schema defines (a picked-up stored index may name
    records the caller's schema lacks; their entries cannot be checked)."""
    names = set(view.schema.names())
    return [record for record in index.records if record in names]


async def check_index(view: ReadView, index: Index) -> list[Problem]:
    """The problems of one index (empty when it matches its live records). A problem is
    reported only when a second check finds it too: a record that expires between the scan
    of the records and the scan of the entries takes its entries with it, which is no
    disagreement (RFC 0010)."""
    problems = await _check(view, index)
    if problems:
        again = set(await _check(view, index))
        problems = [problem for problem in problems if problem in again]
    return problems


async def _check(view: ReadView, index: Index) -> list[Problem]:
    partial = len(known_records(view, index)) < len(index.records)
    if partial and index.aggregate:  # a group's recount needs every record it counts
        return []
    problems: list[Problem] = []
    expected = await expected_entries(view, index, problems)
    where = f"index {index.name}"
    kind = index.index_kind
    seen: set[bytes] = set()
    async for row in view.scan_all(prefix=entry_prefix(index.name), on_unknown="raw"):
        key, data = row.raw_key, row.value
        seen.add(key)
        want = expected.get(key)
        if want is None and partial and _foreign(view, index, key, data):
            continue  # it points at a record type the schema lacks: not checkable here
        if want is None:
            problems.append(Problem(where, f"entry {show_bytes(key)} has no matching record"))
            continue
        why = kind.difference(view, index, key, data, want)
        if why is not None:
            problems.append(Problem(where, why))
    for key, want in expected.items():
        if key not in seen:
            problems.append(Problem(where, kind.missing(key, want)))
    return problems


def _foreign(view: ReadView, index: Index, key: bytes, data: bytes) -> bool:
    """True when the entry points at a record type this view's schema does not define."""
    try:
        primary = index.index_kind.primary(decode_entry(index.name, index.fields, key)[1], data)
    except OpendataKvError:
        return False
    if primary is None:
        return False
    return view.schema.try_record_type_of(primary) is None
