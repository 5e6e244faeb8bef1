"""Compile a field list into one encode and one decode function (like collections.namedtuple).

Runs of fixed-width integer fields become one precompiled struct.Struct; terminated strings and
bytes are inlined; every other codec is called through its bound method. The generated code
only handles valid input quickly: on any failure it raises, and RecordType re-walks the key
codec by codec to produce an error that names the field. Tests check both paths agree.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from opendata_kv.keys.fields import Field, _TerminatedBytes, _TerminatedStr, escape, unescape


class PlanMismatch(Exception):
    """Raised inside generated code when the input is not valid; never escapes RecordType."""


EncodeFn = Callable[..., bytes]
DecodeFn = Callable[[bytes], Any]



def _family(field: Field) -> str:
    if field.struct_code is not None:
        return "struct"
    if isinstance(field, (_TerminatedStr, _TerminatedBytes)):
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
        "_new": tuple.__new__,
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
        "    if key.__class__ is not bytes or not key.startswith(_head): raise _Bad",
        "    k = key",
    ]
    # While every field so far had a fixed width, offsets are constants in the generated code.
    at: int | None = len(head)

    def pos() -> str:
        return "p" if at is None else str(at)

    for group in _runs(fields):
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
                if type(fields[i]) is _TerminatedStr:
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
                if type(fields[i]) is _TerminatedStr:
                    dec_lines.append(f"    {v} = {v}.decode()")
            at = 0
            continue
        (i,) = group
        field, v = fields[i], names[i]
        ns[f"_enc{i}"], ns[f"_dec{i}"] = field.encode, field.decode
        enc_parts.append(f"_enc{i}({v})")
        dec_lines.append(f"    {v}, p = _dec{i}(k, {pos()})")
        at = None
    if bool_guards:
        enc_lines.insert(0, f"    if {' or '.join(bool_guards)}: raise _Bad")
    body = "".join(part + ", " for part in enc_parts)
    enc_lines.append(f"    return _head + b''.join(({body}))")
    enc_src = f"def encode({', '.join(names)}):\n" + "\n".join(enc_lines) + "\n"
    values = "".join(n + ", " for n in names)
    dec_lines += [f"    if {pos()} != len(k): raise _Bad", f"    return _new(_Key, ({values}))"]
    dec_src = (
        "def decode(key):\n  try:\n"
        + "\n".join("  " + line for line in dec_lines)
        + "\n  except _errors:\n    return _fallback(key)\n"
    )
    exec(compile(enc_src + dec_src, "<opendata_kv.keys.plan>", "exec"), ns)
    return ns["encode"], ns["decode"]
