"""AT Protocol NSID syntax (reverse-domain authority + name), used by the rkey key type 'nsid'.

Rules, as the reference implementation and the interop vectors apply them: only ASCII
letters, digits, '-' and '.'; at most 317 characters; at least three '.'-separated segments,
each 1..63 characters, none starting or ending with '-'; the first segment does not start with
a digit; the last segment (the name) is a letter followed by letters and digits.
See rfcs/0003-record-keys-and-tids.md for where the published texts differ.
"""

from __future__ import annotations

import re
from typing import TypeGuard

from opendata_kv.errors import show_text

MAX_LENGTH = 317
MAX_SEGMENT = 63
_CHARS = re.compile(r"[A-Za-z0-9.-]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def explain(s: object) -> str | None:
    """None when `s` is a syntactically valid NSID, else one sentence naming the broken rule."""
    if not isinstance(s, str):
        return f"NSID must be a str, got {type(s).__name__}"
    if len(s) > MAX_LENGTH:
        return f"NSID is {len(s)} characters long (at most {MAX_LENGTH})"
    if _CHARS.fullmatch(s) is None:
        position, char = next((i, c) for i, c in enumerate(s) if _CHARS.fullmatch(c) is None)
        return (
            f"NSID character {char!r} at position {position} is not allowed "
            "(only ASCII letters, digits, '-' and '.')"
        )
    segments = s.split(".")
    if len(segments) < 3:
        return f"NSID {show_text(s)} has {len(segments)} segment(s); at least 3 are needed"
    for index, segment in enumerate(segments):
        if not segment:
            return f"NSID {show_text(s)} has an empty segment (number {index + 1})"
        if len(segment) > MAX_SEGMENT:
            return f"NSID segment {index + 1} is {len(segment)} characters (at most {MAX_SEGMENT})"
        if segment[0] == "-" or segment[-1] == "-":
            return f"NSID segment {show_text(segment)} starts or ends with '-'"
    if segments[0][0].isdigit():
        return f"NSID first segment {show_text(segments[0])} starts with a digit"
    if _NAME.fullmatch(segments[-1]) is None:
        return (
            f"NSID name {show_text(segments[-1])} must be a letter followed by letters and digits "
            "(no '-', no leading digit)"
        )
    return None


def is_valid(s: object) -> TypeGuard[str]:
    """True when `s` is a syntactically valid NSID."""
    return explain(s) is None
