"""Distinct leading-field values: the skip-scan behind ReadView.distinct (and the collections'
repos() / collections()).

The keys are read in one keys-only bulk scan (its read-ahead window fetched in one round trip
on object storage); a run of one value that reaches SEEK_AFTER keys is left with a seek on the
scan's iterator to the successor of its prefix, free within the window already fetched. Like
renting skis until their price is paid, this costs at most about twice a keys-only scan
whatever the runs, about one seek per value where runs are long, and on S3 about one round
trip per window (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opendata_kv.errors import InvalidArgumentError
from opendata_kv.keys import RecordType, prefix_successor
from opendata_kv.store.scan import Scan

#: keys of one value read before the skip-scan seeks past the rest of its run: a seek (a new
#: scan) cost about as much as 330 keys read in a keys-only scan on S3 (moto: 2.3 ms vs 7 us
#: a key, tools/bench_listing.py) and locally
SEEK_AFTER = 256

#: how distinct opens a scan: (record type, leading values, start key) -> a keys-only Scan
ScanFrom = Callable[[RecordType, tuple[Any, ...], bytes], Scan[Any]]


def field_position(record_type: RecordType, field: str, leading: tuple[Any, ...]) -> int:
    """Where `field` sits in the key: it must be the field right after the `leading` values
    (a skip-scan lists the values of one field under a fixed prefix); InvalidArgumentError
    naming the record and the field otherwise."""
    names = record_type.field_names
    position = len(leading)
    if position >= len(names) or names[position] != field:
        expected = names[position] if position < len(names) else None
        raise InvalidArgumentError(
            f"{record_type.name}: distinct lists the key field after the {position} leading "
            f"value(s) given, which is {expected!r}, not {field!r} (fields: {list(names)})",
            record=record_type.name,
            field=field,
            value=field,
        )
    return position


async def distinct_values(
    record_type: RecordType, leading: tuple[Any, ...], position: int, scan_from: ScanFrom
) -> list[Any]:
    """The distinct values of key field `position` under `leading`, in key order (see the
    module docstring for how the runs are skipped)."""
    start: bytes | None = record_type.prefix(*leading)
    found: list[Any] = []
    while start is not None:
        # batches of SEEK_AFTER keys: a run is left after that many fetched, no more
        scan = scan_from(record_type, leading, start)
        start, run, skip = None, 0, None
        while chunk := await scan.next_chunk():
            for record in chunk:
                if skip is not None:  # the rest of a long run, passed by raw key
                    if record.raw_key < skip:
                        continue
                    skip = None
                value = record.key[position]
                if found and found[-1] == value:
                    run += 1
                    if run >= SEEK_AFTER:
                        run = 0
                        skip = prefix_successor(record_type.prefix(*leading, value))
                        if skip is None:  # the run reaches the end of the key space
                            return found
                else:
                    found.append(value)
                    run = 0
            if skip is not None and not await scan.seek(skip):
                start = skip
                break
            skip = None
    return found
