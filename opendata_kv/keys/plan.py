"""Compile a field list into one encode and one decode function (like collections.namedtuple).

Runs of fixed-width integer fields become one precompiled struct.Struct; terminated strings and
bytes are inlined; every other codec is called through its bound method. The generated code
only handles valid input quickly: on any failure it raises, and RecordType re-walks the key
codec by codec to produce an error that names the field. Tests check both paths agree.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from opendata_kv.keys.codecs import Field, TerminatedBytes, TerminatedStr, escape, unescape


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
    key_class: type[tuple[Any, ...]],
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
    head: bytes, fields: Sequence[Field], key_class: type[tuple[Any, ...]], decode: DecodeFn
) -> DecodeManyFn:
    """decode_many(keys) -> [decode(k) for k in keys], with the per-key Python call removed
    where it can be: when every field is a fixed-width integer taken as is (u64, i32 ...:
    struct codes with no conversion), one struct with the prefix as pad bytes unpacks each
    key in C (its exact size is the length check), after one C pass that checks every
    prefix (skipped when the caller knows every key starts with it: `prefixed=True`, e.g. the
    keys of a range scan inside this prefix). Any failure re-decodes key by key through
    `decode`, whose error names the key.
    """
    if not fields or not all(f.struct_code is not None and f.raw_identity for f in fields):
        def decode_each(keys: list[bytes], prefixed: bool = False) -> list[Any]:
            return list(map(decode, keys))

        return decode_each
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
