"""Compile a field list into one encode and one decode function (like collections.namedtuple).

Runs of fixed-width integer fields become one precompiled struct.Struct; terminated strings and
bytes are inlined; every other codec is called through its bound method. The generated code
only handles valid input quickly: on any failure it raises, and RecordType re-walks the key
codec by codec to produce an error that names the field. Tests check both paths agree.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from opendata_kv.keys.codecs import Field, TerminatedBytes, TerminatedStr, escape, unescape

#: builds a key object from its tuple of field values: a Key class, called with the tuple
KeyMaker = Callable[[Any], tuple[Any, ...]]


class PlanMismatch(Exception):
    """Raised inside generated code when the input is not valid; never escapes RecordType."""


EncodeFn = Callable[..., bytes]
DecodeFn = Callable[[bytes], Any]
DecodeManyFn = Callable[..., list[Any]]


def _family(field: Field) -> str:
    if field.struct_code is not None:
        return "struct"
    # Exact types: a validating subclass (e.g. rkey) must go through its own decode.
    if type(field) in (TerminatedStr, TerminatedBytes):
        return "terminated"
    return "codec"


def _runs(fields: Sequence[Field]) -> list[list[int]]:
    """Group field indexes: consecutive struct-packable fields share one struct.Struct, and
    consecutive terminated fields share one split; every other codec stands alone."""
    groups: list[list[int]] = []
    for i, field in enumerate(fields):
        family = _family(field)
        if family != "codec" and groups and _family(fields[groups[-1][0]]) == family:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _anchor(fields: Sequence[Field], groups: list[list[int]]) -> tuple[int | None, int]:
    """(index of the last terminated run, total width after it) when every field after that
    run has a fixed width, else (None, 0). Such a run is read up to `len - width`, and the
    fields behind it at offsets counted from the end: no remainder buffer, no length check."""
    for g in range(len(groups) - 1, -1, -1):
        if _family(fields[groups[g][0]]) == "terminated":
            after = [fields[i] for grp in groups[g + 1 :] for i in grp]
            if all(f.width is not None for f in after):
                return g, sum(f.width or 0 for f in after)
            return None, 0
    return None, 0


def _anchored_run(
    fields: Sequence[Field], group: list[int], names: list[str], start: str, tail: int
) -> list[str]:
    """Decode lines for the anchor run: its bytes are exactly k[start:len-tail] and must split
    into len(group) terminated parts. Without an escape byte (the usual case) a run of strings
    is decoded as one UTF-8 text and split on NUL: a 0x00 byte is never inside a multi-byte
    UTF-8 sequence, so this equals splitting first and decoding each part."""
    run = f"k[{start}:-{tail}]" if tail else f"k[{start}:]"
    targets = "".join(f"{names[i]}, " for i in group) + "e"
    strings = [type(fields[i]) is TerminatedStr for i in group]
    lines = [f"    r = {run}", "    if 1 in r:", f"        {targets} = r.split(b'\\x00')"]
    for i, is_str in zip(group, strings, strict=True):
        v = names[i]
        lines += [f"        {v} = _unescape({v})", f"        if {v} is None: raise _Bad"]
        if is_str:
            lines.append(f"        {v} = {v}.decode()")
    lines.append("    else:")
    if all(strings):
        lines.append(f"        {targets} = r.decode().split('\\x00')")
    else:
        lines.append(f"        {targets} = r.split(b'\\x00')")
        lines += [
            f"        {names[i]} = {names[i]}.decode()"
            for i, is_str in zip(group, strings, strict=True)
            if is_str
        ]
    # The run must end with its last terminator: nothing between it and the tail fields.
    lines.append("    if e: raise _Bad")
    return lines


def compile_plan(
    head: bytes,
    fields: Sequence[Field],
    key_class: KeyMaker,
    fallback: DecodeFn,
    errors: tuple[type[BaseException], ...],
) -> tuple[EncodeFn, DecodeFn]:
    """Generate encode(*values) -> bytes and decode(key) -> key_class instance.

    decode hands any input it cannot take (wrong type, malformed bytes) to `fallback`, which
    either returns the key or raises the error that names the field.
    """
    ns: dict[str, Any] = {
        "_head": head,
        "_hlen": len(head),
        "_escape": escape,
        "_unescape": unescape,
        "_Bad": PlanMismatch,
        "_Key": key_class,
        "_fallback": fallback,
        "_errors": errors,
        "_bool": bool,
    }
    names = [f"v{i}" for i in range(len(fields))]
    enc_lines: list[str] = []
    enc_parts: list[str] = []
    bool_guards: list[str] = []
    dec_lines = [
        f"    if key.__class__ is not bytes or key[:{len(head)}] != _head: raise _Bad",
        "    k = key",
    ]
    # While every field so far had a fixed width, offsets are constants in the generated code.
    # Once the anchor run (below) is read, offsets are negative: counted from the end.
    at: int | None = len(head)
    groups = _runs(fields)
    anchor, tail = _anchor(fields, groups)

    def pos() -> str:
        return "p" if at is None else str(at)

    for g, group in enumerate(groups):
        first = fields[group[0]]
        if first.struct_code is not None:
            j = group[0]
            fmt = struct.Struct(">" + "".join(fields[i].struct_code or "" for i in group))
            ns[f"_pack{j}"], ns[f"_unpack{j}"] = fmt.pack, fmt.unpack_from
            args = []
            for i in group:
                if fields[i].raw_identity:
                    # struct.pack takes True as 1; the codecs reject bools, so must this path.
                    bool_guards.append(f"{names[i]}.__class__ is _bool")
                    args.append(names[i])
                else:
                    ns[f"_to{i}"], ns[f"_from{i}"] = fields[i].to_raw, fields[i].from_raw
                    args.append(f"_to{i}({names[i]})")
            enc_parts.append(f"_pack{j}({', '.join(args)})")
            if fmt.format == ">B" and fields[j].raw_identity:
                dec_lines.append(f"    {names[j]} = k[{pos()}]")
            else:
                targets = "".join(f"{names[i]}, " for i in group)
                dec_lines.append(f"    {targets}= _unpack{j}(k, {pos()})")
            dec_lines.extend(
                f"    {names[i]} = _from{i}({names[i]})"
                for i in group
                if not fields[i].raw_identity
            )
            if at is None:
                dec_lines.append(f"    p += {fmt.size}")
            else:
                at += fmt.size
            continue
        if _family(first) == "terminated":
            for i in group:
                # `0 in b` scans in C; most values need no escaping at all.
                if type(fields[i]) is TerminatedStr:
                    enc_lines.append(f"    b{i} = {names[i]}.encode()")
                else:
                    # Only exact bytes here: `0 in` on an array or a memoryview of wider
                    # items tests items, not bytes, and would let a raw 0x00 through.
                    enc_lines += [
                        f"    if {names[i]}.__class__ is not bytes: raise _Bad",
                        f"    b{i} = {names[i]}",
                    ]
                enc_lines.append(f"    if 0 in b{i} or 1 in b{i}: b{i} = _escape(b{i})")
                enc_parts += [f"b{i}", 'b"\\x00"']
            if g == anchor:
                dec_lines += _anchored_run(fields, group, names, pos(), tail)
                at = -tail
                continue
            # One C-level split finds every terminator of the run; the rest becomes the buffer,
            # so the offsets that follow are constants again.
            targets = "".join(f"{names[i]}, " for i in group)
            dec_lines.append(f"    {targets}k = k[{pos()}:].split(b'\\x00', {len(group)})")
            for i in group:
                v = names[i]
                dec_lines += [
                    f"    if 1 in {v}:",
                    f"        {v} = _unescape({v})",
                    f"        if {v} is None: raise _Bad",
                ]
                if type(fields[i]) is TerminatedStr:
                    dec_lines.append(f"    {v} = {v}.decode()")
            at = 0
            continue
        (i,) = group
        field, v = fields[i], names[i]
        ns[f"_enc{i}"], ns[f"_dec{i}"] = field.encode, field.decode
        enc_parts.append(f"_enc{i}({v})")
        if at is not None and at < 0:  # a fixed-width codec inside the tail
            dec_lines.append(f"    {v}, _ = _dec{i}(k, len(k) - {-at})")
            at += field.width or 0
            continue
        dec_lines.append(f"    {v}, p = _dec{i}(k, {pos()})")
        at = None
    if bool_guards:
        enc_lines.insert(0, f"    if {' or '.join(bool_guards)}: raise _Bad")
    body = "".join(part + ", " for part in enc_parts)
    enc_lines.append(f"    return _head + b''.join(({body}))")
    enc_src = f"def encode({', '.join(names)}):\n" + "\n".join(enc_lines) + "\n"
    values = "".join(n + ", " for n in names)
    if anchor is None:
        dec_lines.append(f"    if {pos()} != len(k): raise _Bad")
    # Key((...)) goes through tuple's own constructor: ~30 ns less than tuple.__new__(Key, ...)
    dec_lines.append(f"    return _Key(({values}))")
    dec_src = (
        "def decode(key):\n  try:\n"
        + "\n".join("  " + line for line in dec_lines)
        + "\n  except _errors:\n    return _fallback(key)\n"
    )
    exec(compile(enc_src + dec_src, "<opendata_kv.keys.plan>", "exec"), ns)
    return ns["encode"], ns["decode"]


def compile_decode_many(
    head: bytes, fields: Sequence[Field], key_class: KeyMaker, decode: DecodeFn
) -> DecodeManyFn:
    """decode_many(keys) -> [decode(k) for k in keys], with the per-key Python call removed
    where it can be:

    - every field a fixed-width integer taken as is (u64, i32 ...: struct codes with no
      conversion): one struct with the prefix as pad bytes unpacks each key in C (its exact
      size is the length check);
    - every field a struct field, some converted (desc, tid, signed ...): one unpack over the
      joined keys, the conversions a column at a time (Field.from_raw_many);
    - one run of terminated strings/bytes between fixed-width struct fields (e.g. string then
      desc(tid)): see _compile_run_many.

    Each checks every prefix in one C pass, skipped when the caller knows every key starts
    with it (`prefixed=True`, e.g. the keys of a range scan inside this prefix). Any failure
    re-decodes key by key through `decode`, whose error names the key.
    """
    if fields and all(f.struct_code is not None and f.raw_identity for f in fields):
        return _compile_struct_many(head, fields, key_class, decode)
    if fields and all(f.struct_code is not None for f in fields):
        return _chunked(_compile_struct_columns(head, fields, key_class), decode)
    groups = _runs(fields)
    families = [_family(fields[group[0]]) for group in groups]
    if families.count("terminated") == 1 and families.count("codec") == 0:
        return _chunked(_compile_run_many(head, fields, groups, families, key_class), decode)

    def decode_each(keys: list[bytes], prefixed: bool = False) -> list[Any]:
        return list(map(decode, keys))

    return decode_each


def _compile_struct_many(
    head: bytes, fields: Sequence[Field], key_class: KeyMaker, decode: DecodeFn
) -> DecodeManyFn:
    unpack = struct.Struct(f">{len(head)}x" + "".join(f.struct_code or "" for f in fields)).unpack
    starts = bytes.startswith

    def decode_many(keys: list[bytes], prefixed: bool = False) -> list[Any]:
        try:
            if prefixed or all(map(starts, keys, repeat(head))):
                return list(map(key_class, map(unpack, keys)))
        except (struct.error, TypeError):
            pass
        return [decode(key) for key in keys]

    return decode_many


#: keys per columnar pass (bounds the size of the cached structs)
_CHUNK = 1024


@functools.lru_cache(maxsize=256)
def _repeated(fmt: str, count: int) -> Callable[[bytes], tuple[Any, ...]]:
    """unpack of `count` consecutive `fmt` records (big-endian) in one call."""
    return struct.Struct(">" + fmt * count).unpack


def _compile_run_many(
    head: bytes,
    fields: Sequence[Field],
    groups: list[list[int]],
    families: list[str],
    key_class: KeyMaker,
) -> Callable[[list[bytes], bool], list[Any]]:
    """Columns for [struct fields] terminated run [struct fields], for _chunked.

    Each key is cut at constant offsets (from the start before the run, from the end after
    it) with one C-level map of slices per part: the struct fields of every key unpack from
    one joined buffer (the run's last terminator rides with the tail fields as a byte that
    must be 0), the run bodies are joined with NUL and decoded and split at once, and the
    struct fields' conversions run a whole column at a time (Field.from_raw_many: desc, tid).
    The same checks as decode's (prefix, lengths, terminator count, escapes, UTF-8) are made
    over the batch; any failure raises, and _chunked decodes the chunk key by key.
    """
    run_at = families.index("terminated")
    lead = [i for group in groups[:run_at] for i in group]
    run = groups[run_at]
    tail = [i for group in groups[run_at + 1 :] for i in group]
    lead_fmt = "".join(fields[i].struct_code or "" for i in lead)
    tail_fmt = "B" + "".join(fields[i].struct_code or "" for i in tail)
    start = len(head) + struct.calcsize(">" + lead_fmt)
    tail_width = struct.calcsize(">" + tail_fmt)
    # a key shorter than this would make the slices below overlap
    min_length = start + len(run) - 1 + tail_width
    lead_part, body_part = slice(len(head), start), slice(start, -tail_width)
    tail_part = slice(-tail_width, None)
    strings = [type(fields[i]) is TerminatedStr for i in run]
    width = len(run)
    convert = {i: fields[i].from_raw_many for i in lead + tail if not fields[i].raw_identity}
    starts = bytes.startswith
    getitem: Callable[[bytes, slice], bytes] = operator.getitem  # type: ignore[assignment]
    count: Callable[[bytes, bytes], int] = bytes.count
    decode_str = bytes.decode

    def columns(keys: list[bytes], prefixed: bool) -> list[Any]:
        n = len(keys)
        if not prefixed and not all(map(starts, keys, repeat(head))):
            raise PlanMismatch
        if min(map(len, keys)) < min_length:
            raise PlanMismatch
        out: list[Any] = []
        if lead:
            flat = _repeated(lead_fmt, n)(b"".join(map(getitem, keys, repeat(lead_part))))
            out += [flat[j :: len(lead)] for j in range(len(lead))]
        bodies = list(map(getitem, keys, repeat(body_part)))
        joined = b"\x00".join(bodies)
        if width == 1:
            if joined.count(b"\x00") != n - 1:
                raise PlanMismatch
        elif list(map(count, bodies, repeat(b"\x00"))).count(width - 1) != n:
            raise PlanMismatch
        parts: list[Any]
        if 1 in joined:
            parts = list(map(unescape, joined.split(b"\x00")))
            if None in parts:
                raise PlanMismatch
            out += [
                list(map(decode_str, parts[j::width])) if is_str else parts[j::width]
                for j, is_str in enumerate(strings)
            ]
        elif all(strings):
            parts = joined.decode().split("\x00")
            out += [parts[j::width] for j in range(width)]
        else:
            parts = joined.split(b"\x00")
            out += [
                list(map(decode_str, parts[j::width])) if is_str else parts[j::width]
                for j, is_str in enumerate(strings)
            ]
        flat = _repeated(tail_fmt, n)(b"".join(map(getitem, keys, repeat(tail_part))))
        stride = len(tail) + 1
        if any(flat[0::stride]):  # the run's last terminator
            raise PlanMismatch
        out += [flat[j + 1 :: stride] for j in range(len(tail))]
        for column, i in enumerate(lead + run + tail):
            if i in convert:
                out[column] = convert[i](out[column])
        return list(map(key_class, zip(*out, strict=True)))

    return columns


def _compile_struct_columns(
    head: bytes, fields: Sequence[Field], key_class: KeyMaker
) -> Callable[[list[bytes], bool], list[Any]]:
    """Columns of keys made of struct fields only: every key exactly head + the fields."""
    fmt = "".join(f.struct_code or "" for f in fields)
    width = len(head) + struct.calcsize(">" + fmt)
    convert = {i: f.from_raw_many for i, f in enumerate(fields) if not f.raw_identity}
    m = len(fields)
    starts = bytes.startswith

    def columns(keys: list[bytes], prefixed: bool) -> list[Any]:
        if not prefixed and not all(map(starts, keys, repeat(head))):
            raise PlanMismatch
        if min(map(len, keys)) != width:  # and the unpack takes exactly n * width bytes
            raise PlanMismatch
        flat = _repeated(f"{len(head)}x{fmt}", len(keys))(b"".join(keys))
        out: list[Any] = [flat[j::m] for j in range(m)]
        for i, to_values in convert.items():
            out[i] = to_values(out[i])
        return list(map(key_class, zip(*out, strict=True)))

    return columns


def _chunked(columns: Callable[[list[bytes], bool], list[Any]], decode: DecodeFn) -> DecodeManyFn:
    """decode_many over a columnar decoder: _CHUNK keys at a time; a chunk that fails any
    check is decoded key by key by `decode`, which raises the first bad key's error."""

    def decode_chunk(keys: list[bytes], prefixed: bool) -> list[Any]:
        try:
            return columns(keys, prefixed)
        except Exception:  # any bad input: decode tells which key and why
            pass
        return [decode(key) for key in keys]

    def decode_many(keys: list[bytes], prefixed: bool = False) -> list[Any]:
        if not keys:
            return []
        if len(keys) <= _CHUNK:
            return decode_chunk(keys, prefixed)
        out: list[Any] = []
        for at in range(0, len(keys), _CHUNK):
            out += decode_chunk(keys[at : at + _CHUNK], prefixed)
        return out

    return decode_many
