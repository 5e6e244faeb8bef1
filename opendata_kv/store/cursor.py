"""Page cursors: one printable type for every page of every scan and collection.

A cursor is a str, "k1." followed by the URL-safe base64 (no padding) of the position's key
bytes: it round-trips, and a web service can put it in a URL as it is. Every `after=` (and
the collections' `cursor=`) takes it; the raw key bytes older releases gave as cursors are
still accepted.
"""

from __future__ import annotations

import base64
import binascii

from opendata_kv.errors import CursorError, show_text

#: the version tag every cursor starts with
TAG = "k1."


def encode_cursor(position: bytes) -> str:
    """The cursor naming the key `position` (a scan resumes right after it)."""
    return TAG + base64.urlsafe_b64encode(position).rstrip(b"=").decode("ascii")


def is_cursor(value: object) -> bool:
    """True when `value` is a str shaped like a cursor (tag and base64 alphabet)."""
    return isinstance(value, str) and value.startswith(TAG)


def decode_cursor(cursor: str | bytes, field: str = "after") -> bytes:
    """The key bytes a cursor names; bytes (an older release's cursor) pass as they are.
    CursorError naming `field` and the cursor for anything else."""
    if isinstance(cursor, bytes):
        return cursor
    if not isinstance(cursor, str) or not cursor.startswith(TAG):
        raise CursorError(
            f"{field}={_show(cursor)} is not a page cursor: a cursor is the str a scan's or "
            f"page's `cursor` holds ({TAG!r} and URL-safe base64), or an older release's key "
            "bytes",
            field=field,
            value=cursor,
        )
    body = cursor[len(TAG) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or encode_cursor(raw) != cursor:
        raise CursorError(
            f"{field}={_show(cursor)} is a malformed page cursor: its body is not the "
            "URL-safe base64 a cursor holds (edited or truncated?)",
            field=field,
            value=cursor,
        )
    return raw


def _show(value: object) -> str:
    return (
        show_text(value, 80) if isinstance(value, str) else f"{type(value).__name__} {value!r}"[:80]
    )
