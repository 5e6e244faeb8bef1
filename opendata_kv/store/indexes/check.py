"""Checking an index against its records (RFC 0010): every entry without a matching record,
every record missing an entry, every aggregate that differs from a recount, each a Problem
naming the index and key. Reads only; holds the index's expected entries in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from opendata_kv.checks.integrity import Problem
from opendata_kv.errors import OpendataKvError, StoreDataError, show_bytes
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.layout import (
    decode_entry,
    decode_sum,
    encode_fields,
    entry_prefix,
)
from opendata_kv.store.indexes.maintainers import show_key
from opendata_kv.store.indexes.sums import ZERO, Sum, add, amount_problem

if TYPE_CHECKING:
    from opendata_kv.store.views import ReadView


async def expected_entries(
    view: ReadView, index: Index, unsummable: list[Problem] | None = None
) -> dict[bytes, Any]:
    """entry key -> stored value (b"" / primary key) or exact sums.Sum, recounted from the
    records; a second holder of a unique value is kept as a list under the entry. A record
    whose amount no sum can take (written before sums refused it) is left out of its groups
    and named in `unsummable`."""
    out: dict[bytes, Any] = {}
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
                entry = encode_fields(index.name, index.fields, values)
                if index.aggregate:
                    out[entry] = add(out.get(entry, ZERO), 1, amount)
                elif index.kind == "unique":
                    if entry in out:
                        holders = out[entry] if isinstance(out[entry], list) else [out[entry]]
                        out[entry] = [*holders, row.raw_key]
                    else:
                        out[entry] = row.raw_key
                else:
                    out[entry + row.raw_key] = Copy(row.value) if index.covering else b""
    return out


class Copy(NamedTuple):
    """What a covering index's entry should hold: a copy of the record's value (compared
    decoded, as the record's codec reads both)."""

    value: Any


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
    seen: set[bytes] = set()
    async for row in view.scan_all(prefix=entry_prefix(index.name), on_unknown="raw"):
        key, data = row.raw_key, row.value
        seen.add(key)
        want = expected.get(key)
        if want is None and partial and _foreign(view, index, key, data):
            continue  # it points at a record type the schema lacks: not checkable here
        if want is None:
            problems.append(Problem(where, f"entry {show_bytes(key)} has no matching record"))
        elif index.aggregate:
            try:
                have = decode_sum(index.name, key, data)
            except StoreDataError as exc:
                problems.append(Problem(where, str(exc)))
                continue
            if have != want:
                problems.append(
                    Problem(
                        where,
                        f"aggregate {show_bytes(key)} holds count, sum {_shown(have)} but a "
                        f"recount gives {_shown(want)}",
                    )
                )
        elif isinstance(want, Copy):
            primary = decode_entry(index.name, index.fields, key)[1]
            try:
                copy = view.values.decode(view.schema.record_type_of(primary), primary, data)
            except OpendataKvError as exc:
                problems.append(
                    Problem(
                        where, f"entry {show_bytes(key)} holds a copy that does not decode: {exc}"
                    )
                )
                continue
            if copy != want.value and repr(copy) != repr(want.value):  # NaN != NaN
                problems.append(
                    Problem(
                        where,
                        f"entry {show_bytes(key)} holds a stale copy of "
                        f"{show_key(view.schema, primary)!r}: {copy!r} where the record holds "
                        f"{want.value!r}",
                    )
                )
        elif index.kind == "unique" and isinstance(want, list):
            shown = [show_key(view.schema, k) for k in want]
            problems.append(Problem(where, f"entry {show_bytes(key)} is claimed by {shown}"))
        elif index.kind == "unique" and data != want:
            problems.append(
                Problem(
                    where,
                    f"entry {show_bytes(key)} points to {show_bytes(data)}, but the record "
                    f"holding the value is {show_key(view.schema, want)!r}",
                )
            )
    for key, want in expected.items():
        if key in seen:
            continue
        if index.aggregate:
            problems.append(
                Problem(where, f"aggregate {show_bytes(key)} is missing (recount: {_shown(want)})")
            )
        else:
            problems.append(Problem(where, f"entry {show_bytes(key)} is missing"))
    return problems


def _shown(state: Sum) -> str:
    """(count, sum) as index_count / index_sum report them."""
    try:
        return repr((state.records, state.total()))
    except OverflowError:
        return repr((state.records, "a total past the float range"))


def _foreign(view: ReadView, index: Index, key: bytes, data: bytes) -> bool:
    """True when the entry points at a record type this view's schema does not define."""
    try:
        primary = data if index.kind == "unique" else decode_entry(index.name, index.fields, key)[1]
    except OpendataKvError:
        return False
    return view.schema.try_record_type_of(primary) is None
