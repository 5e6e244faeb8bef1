"""AT Protocol DID syntax: `did:<method>:<identifier>`, at most 2048 characters.

The method is lower-case ASCII letters; the identifier is ASCII letters, digits and `._:%-`
and does not end with `:` or `%`. This checks syntax only: it never resolves a DID.
"""

from __future__ import annotations

import re
from typing import TypeGuard

MAX_LENGTH = 2048
_DID = re.compile(r"did:[a-z]+:[A-Za-z0-9._:%-]*[A-Za-z0-9._-]")


def explain(s: object) -> str | None:
    """None when `s` is a syntactically valid DID, else why not (naming the value)."""
    if not isinstance(s, str):
        return f"must be a DID string, got {type(s).__name__}"
    if len(s) > MAX_LENGTH or _DID.fullmatch(s) is None:
        shown = repr(s) if len(s) <= 80 else f"{s[:64]!r}... ({len(s)} characters)"
        return f"{shown} is not a DID (did:<method>:<identifier>, at most {MAX_LENGTH} characters)"
    return None


def is_valid(s: object) -> TypeGuard[str]:
    """True when `s` is a syntactically valid DID."""
    return explain(s) is None
