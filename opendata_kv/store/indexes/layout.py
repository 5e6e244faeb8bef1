"""Where index metadata and entries live in the database, and their byte encodings (RFC 0010).

    ROOT + b"c"                               catalog: the names of all indexes (msgpack list)
    ROOT + b"m" + name                        metadata of one index (msgpack map)
    ROOT + b"e" + name + 00 + fields + pk     a value index entry (value: empty)
    ROOT + b"e" + name + 00 + fields          a unique entry (value: the primary key) or an
                                              aggregate (value: msgpack [count, sum], or
                                              [count, ints, floats, m, e]: sums.py)

ROOT starts with 0x00, a byte no record type's version may take (RFC 0001); Store.open also
refuses a schema with a keyspace or subsystem that would overlap it (check_schema).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack

from opendata_kv.errors import KeyDecodeError, SchemaError, StoreDataError, show_bytes
from opendata_kv.keys import Schema, intersect, is_empty, prefix_successor
from opendata_kv.keys.fields import Field
from opendata_kv.store.indexes.sums import FINE, Sum, total_problem
from opendata_kv.store.scan import KeySpan

ROOT = b"\x00\xf1"
META = ROOT + b"m"
#: the names of every stored index (msgpack list): one point read tells an open whether
#: the database has any index before it scans their metadata
CATALOG = ROOT + b"c"
ENTRIES = ROOT + b"e"


def check_schema(schema: Schema) -> None:
    """SchemaError when a record type's keys could share a prefix with index keys."""
    for record_type in schema:
        head = record_type.head
        if head.startswith(ROOT) or ROOT.startswith(head):
            raise SchemaError(
                f"{record_type.name}: its key prefix {show_bytes(head)} overlaps the index key "
                f"space {show_bytes(ROOT)} (RFC 0010); pick another keyspace or subsystem",
                record=record_type.name,
                value=head,
            )


def without_index_keys(span: KeySpan) -> list[KeySpan]:
    """`span` with the index key space cut out (the non-empty parts below and above it)."""
    out = []
    for bounds in ((None, ROOT), (prefix_successor(ROOT), None)):
        part = intersect((span.start, span.end), bounds)
        if not is_empty(part):
            out.append(KeySpan(span.record_type, *part))
    return out


def is_index_key(key: bytes) -> bool:
    """True for keys of the index key space (metadata or entries)."""
    return key.startswith(ROOT)


def owned_part(key: bytes) -> str | None:
    """What of the index key space `key` falls in ("the index catalog", "the metadata of index
    'x'", "an entry of index 'x'"), None outside it: the library's own rows, which a writer of
    records (import, load_pairs) must never write as data."""
    if not key.startswith(ROOT):
        return None
    if key == CATALOG:
        return "the index catalog"
    if key.startswith(META):
        return f"the metadata of index {key[len(META) :].decode(errors='replace')!r}"
    name = index_name_of(key)
    if name is not None:
        return f"an entry of index {name!r}"
    return "the index key space"


def meta_key(name: str) -> bytes:
    return META + name.encode()


def entry_prefix(name: str) -> bytes:
    """The bytes every entry of index `name` starts with."""
    return ENTRIES + name.encode() + b"\x00"


def entry_span(name: str) -> tuple[bytes, bytes]:
    prefix = entry_prefix(name)
    end = prefix_successor(prefix)
    assert end is not None
    return prefix, end


def index_name_of(key: bytes) -> str | None:
    """The name of the index an entry key belongs to (None for other keys)."""
    if not key.startswith(ENTRIES):
        return None
    end = key.find(b"\x00", len(ENTRIES))
    return None if end < 0 else key[len(ENTRIES) : end].decode(errors="replace")


def encode_fields(name: str, fields: Sequence[tuple[str, Field]], values: Sequence[Any]) -> bytes:
    """The order-preserving bytes of an entry's field values (RFC 0002 codecs)."""
    parts = [entry_prefix(name)]
    for (_, field), value in zip(fields, values, strict=True):
        parts.append(field.encode(value))
    return b"".join(parts)


def encode_leading(
    name: str, fields: Sequence[tuple[str, Field]], values: Sequence[Any], partial: Any = None
) -> bytes:
    """The prefix of the entries whose leading fields equal `values` (and whose next field
    starts with `partial`)."""
    if len(values) > len(fields):
        raise KeyDecodeError(
            f"index {name!r} has {len(fields)} fields, got {len(values)} leading values",
            field=name,
            value=tuple(values),
        )
    out = encode_fields(name, fields[: len(values)], values)
    if partial is not None:
        field = fields[len(values)][1]
        if not field.partial_ok:
            raise KeyDecodeError(
                f"index {name!r}: field {fields[len(values)][0]!r} takes no partial value",
                field=fields[len(values)][0],
                value=partial,
            )
        out += field.encode_partial(partial)
    return out


def decode_entry(
    name: str, fields: Sequence[tuple[str, Field]], key: bytes
) -> tuple[tuple[Any, ...], bytes]:
    """(field values, the rest of the key: the primary key of a value entry, else b"")."""
    pos = len(ENTRIES) + len(name) + 1  # names are ASCII (check_index_name)
    values = []
    for field_name, field in fields:
        try:
            value, pos = field.decode(key, pos)
        except KeyDecodeError as exc:
            raise StoreDataError(
                f"index {name!r}: entry {show_bytes(key)} field {field_name!r} at offset {pos} "
                f"does not decode: {exc}",
                field=field_name,
                value=key,
                offset=pos,
            ) from None
        values.append(value)
    return tuple(values), key[pos:]


#: the bytes of [count, 0] (a count index's rows) for counts below COUNTS_KEPT, made once
_COUNTS: dict[int, bytes] = {}
COUNTS_KEPT = 1 << 16


def encode_aggregate(count: int, total: int) -> bytes:
    """The row of a group of `count` records whose amounts are integers totalling `total`."""
    return encode_sum(Sum(count, total, 0, 0))


def encode_sum(state: Sum) -> bytes:
    """An aggregate row (RFC 0010, "Exact sums"): msgpack [count, total] while the group has
    no float amount (a count index's rows, sum 0, remembered by count), else
    [count, ints, floats, m, e]: the integer amounts' total, how many amounts are floats, and
    their exact total m * 2**e (m a signed big-endian bin, odd, or 0 with e 0)."""
    count, ints, floats, fine = state
    if not floats:
        if ints == 0 and 0 <= count < COUNTS_KEPT:
            found = _COUNTS.get(count)
            if found is None:
                found = _COUNTS[count] = msgpack.packb([count, 0])
            return found
        return msgpack.packb([count, ints])  # type: ignore[no-any-return]
    shift = (fine & -fine).bit_length() - 1 if fine else FINE
    mantissa = fine >> shift
    packed = [count, ints, floats, _signed_bytes(mantissa), shift - FINE]
    return msgpack.packb(packed)  # type: ignore[no-any-return]


def _signed_bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def decode_sum(name: str, key: bytes, data: bytes) -> Sum:
    """The exact state of an aggregate entry; StoreDataError naming it when damaged, or when
    it holds a float total an earlier version wrote (inexact: a rebuild recounts it)."""
    try:
        row = msgpack.unpackb(data)
        if not isinstance(row, list):
            raise ValueError("not a list")
        if len(row) == 2 and type(row[0]) is int and type(row[1]) is float:
            raise StoreDataError(
                f"index {name!r}: aggregate entry {show_bytes(key)} holds the float sum "
                f"{row[1]!r}, written before sums were exact (it may have drifted or hold NaN); "
                f"rebuild the index (Store.rebuild_index({name!r}) or `opendata-kv index "
                "rebuild`) to recount it",
                field=name,
                value=data,
            )
        if not all(type(x) is int for x in row[:3]):
            raise ValueError("not [int, int, ...]")
        if len(row) == 2:
            count, ints = row
            floats = 0
            state = Sum(count, ints, 0, 0)
        elif len(row) == 5 and type(row[3]) is bytes and type(row[4]) is int:
            count, ints, floats, raw, exponent = row
            mantissa = int.from_bytes(raw, "big", signed=True)
            canonical = (mantissa == 0 and exponent == 0) or (
                mantissa & 1 and exponent >= -FINE and len(raw) == len(_signed_bytes(mantissa))
            )
            if not (canonical and 0 < floats <= count):
                raise ValueError("not a canonical exact sum")
            state = Sum(count, ints, floats, mantissa << (exponent + FINE) if mantissa else 0)
        else:
            raise ValueError("not [count, sum] nor [count, ints, floats, m, e]")
        if count < 1:
            raise ValueError("a count below 1")
        if floats and total_problem(state) is not None:
            raise ValueError("a total past the float range")
    except StoreDataError:
        raise
    except Exception as exc:
        raise StoreDataError(
            f"index {name!r}: aggregate entry {show_bytes(key)} holds {show_bytes(data)}, not "
            f"[count, sum] ({exc})",
            field=name,
            value=data,
        ) from None
    return state


def decode_aggregate(name: str, key: bytes, data: bytes) -> tuple[int, int | float]:
    """(count, sum) of an aggregate entry, the sum as index_sum reports it; StoreDataError
    naming it when damaged (decode_sum)."""
    state = decode_sum(name, key, data)
    return state.records, state.total()


def encode_meta(meta: dict[str, Any]) -> bytes:
    return msgpack.packb(meta)  # type: ignore[no-any-return]


def decode_meta(key: bytes, data: bytes) -> dict[str, Any]:
    """An index's stored metadata; StoreDataError naming the key when it does not decode."""
    try:
        meta = msgpack.unpackb(data)
        if not isinstance(meta, dict) or not isinstance(meta.get("definition"), dict):
            raise ValueError("not an index metadata map")
    except Exception as exc:
        raise StoreDataError(
            f"index metadata {show_bytes(key)} does not decode: {exc}", value=key
        ) from None
    return meta
