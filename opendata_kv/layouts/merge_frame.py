"""The frame in which opendata_kv's read-side merge operator (native/opendata_compat.py) hands
back a key's base value and merge operands, or the reason it could not (RFC 0009).

A frame is MERGE_FRAME, this process's TOKEN (16 bytes from `secrets.token_bytes`, drawn at
import and never stored), a kind byte (00: operands only, 01: a base value first, 02: the
merge failed), then each part as a u32 BE length and its bytes (kind 02: one UTF-8 reason).
Only bytes carrying the token are read as a frame: a stored value that starts with the marker
cannot carry a token drawn after it was written, so it is shown as the plain bytes it is.
"""

from __future__ import annotations

import secrets
import struct

from opendata_kv.errors import ValueDecodeError, show_bytes

#: the marker a frame starts with (readable in a hex dump); the token follows it
MERGE_FRAME = b"\xffopendata-kv:operands\x00"
#: this process's secret: only frames built here carry it
TOKEN = secrets.token_bytes(16)
_HEAD = MERGE_FRAME + TOKEN
_OPERANDS, _WITH_BASE, _FAILED = 0, 1, 2
_U32 = struct.Struct(">I")


def frame(base: bytes | None, operands: list[bytes]) -> bytes:
    """The frame of a base value (or None) and the operands after it, in order."""
    parts = ([base] if base is not None else []) + operands
    body = b"".join(_U32.pack(len(p)) + p for p in parts)
    return _HEAD + bytes((_WITH_BASE if base is not None else _OPERANDS,)) + body


def failed(reason: str) -> bytes:
    """The frame saying the merge of a key failed, and why."""
    raw = reason.encode("utf-8", "backslashreplace")
    return _HEAD + bytes((_FAILED,)) + _U32.pack(len(raw)) + raw


def is_frame(data: bytes) -> bool:
    """True only for bytes this process's merge operator built."""
    return data.startswith(_HEAD)


def shown(data: bytes) -> bytes:
    """The bytes to print for `data`: a frame without the token (which never leaves the
    process, so no output can teach it to a value), anything else as it is."""
    return MERGE_FRAME + data[len(_HEAD) :] if is_frame(data) else data


def failure(data: bytes) -> str | None:
    """The reason of a failed-merge frame; None for anything else."""
    if not is_frame(data) or data[len(_HEAD) : len(_HEAD) + 1] != bytes((_FAILED,)):
        return None
    return data[len(_HEAD) + 1 + _U32.size :].decode("utf-8", "replace")


def split(data: bytes) -> tuple[bytes | None, list[bytes]]:
    """(base value or None, operands) of a frame (is_frame(data) must hold); ValueDecodeError
    for a failed merge or a malformed frame."""
    reason = failure(data)
    if reason is not None:
        raise ValueDecodeError(f"the merge failed for this key: {reason}", value=data)
    pos = len(_HEAD) + 1
    kind = data[pos - 1] if len(data) >= pos else -1
    parts: list[bytes] = []
    while pos < len(data):
        if len(data) - pos < _U32.size:
            break
        (size,) = _U32.unpack_from(data, pos)
        pos += _U32.size + size
        parts.append(data[pos - size : pos])
    if pos != len(data) or kind not in (_OPERANDS, _WITH_BASE) or (kind and not parts):
        raise ValueDecodeError(f"malformed merge frame {show_bytes(shown(data))}", value=data)
    return (parts[0] if kind else None), parts[kind:]
