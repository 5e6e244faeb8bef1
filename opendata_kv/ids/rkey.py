"""AT Protocol record keys and the Lexicon key types that constrain them.

A record key is 1..512 characters of `A-Za-z0-9._:~-`, case-sensitive, and neither `.` nor
`..`. A Lexicon record may narrow that with a key type: `any`, `tid`, `nsid` or
`literal:<value>`. See rfcs/0003-record-keys-and-tids.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard

from opendata_kv.errors import RkeyError, show_text
from opendata_kv.ids import nsid, tid

MAX_LENGTH = 512
ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:~-")
_PATTERN = re.compile(r"[A-Za-z0-9._:~-]{1,512}")

KEY_TYPE_NAMES = ("any", "tid", "nsid", "literal:<value>")


def is_valid(s: object) -> TypeGuard[str]:
    """True when `s` is a str that is a syntactically valid record key (any key type)."""
    return isinstance(s, str) and _PATTERN.fullmatch(s) is not None and s != "." and s != ".."


def _explain(s: object) -> str:
    if not isinstance(s, str):
        return f"record key must be a str, got {type(s).__name__}"
    if not s:
        return "record key is empty (it needs 1 to 512 characters)"
    for position, char in enumerate(s):
        if char not in ALLOWED:
            return (
                f"record key {show_text(s)}: character {char!r} at position {position} is not "
                "allowed (only A-Z a-z 0-9 . _ : ~ -)"
            )
    if len(s) > MAX_LENGTH:
        return f"record key {show_text(s)} is {len(s)} characters long (at most {MAX_LENGTH})"
    return f"record key {s!r} is not allowed ('.' and '..' are reserved)"


@dataclass(frozen=True)
class KeyType:
    """A Lexicon record key type: kind is 'any', 'tid', 'nsid' or 'literal' (with value)."""

    kind: str
    value: str | None = None

    @classmethod
    def parse(cls, spec: str | KeyType) -> KeyType:
        """Parse 'any', 'tid', 'nsid' or 'literal:<value>'; anything else raises RkeyError."""
        if isinstance(spec, KeyType):
            return spec
        if not isinstance(spec, str):
            raise RkeyError(f"record key type must be a str, got {type(spec).__name__}")
        if spec in ("any", "tid", "nsid"):
            return cls(spec)
        if spec.startswith("literal:"):
            value = spec[len("literal:") :]
            if not is_valid(value):
                raise RkeyError(
                    f"record key type {spec!r}: the literal value is not a valid record key: "
                    f"{_explain(value)}"
                )
            return cls("literal", value)
        raise RkeyError(
            f"unknown record key type {spec!r}: expected one of {', '.join(KEY_TYPE_NAMES)}"
        )

    def __str__(self) -> str:
        return self.kind if self.value is None else f"{self.kind}:{self.value}"

    def check(self, s: str) -> str | None:
        """None if the (already syntactically valid) key fits this type, else the reason."""
        if self.kind == "any":
            return None
        if self.kind == "tid":
            if tid.is_valid(s):
                return None
            return f"record key {show_text(s)} is not a TID (key type 'tid'): {tid.explain(s)}"
        if self.kind == "nsid":
            reason = nsid.explain(s)
            if reason is None:
                return None
            return f"record key {show_text(s)} is not an NSID (key type 'nsid'): {reason}"
        if s == self.value:
            return None
        return (
            f"record key {show_text(s)} does not equal the literal {self.value!r} "
            f"(key type '{self}')"
        )


def validate(s: object, key_type: str | KeyType = "any") -> str:
    """Return `s` if it is a valid record key of `key_type`, else raise RkeyError saying why."""
    kind = KeyType.parse(key_type)
    if not is_valid(s):
        raise RkeyError(_explain(s))
    reason = kind.check(s)
    if reason is not None:
        raise RkeyError(reason)
    return s


def is_valid_for(s: object, key_type: str | KeyType = "any") -> bool:
    """True when `s` is a valid record key of `key_type` (an unknown key type still raises)."""
    kind = KeyType.parse(key_type)
    return is_valid(s) and kind.check(s) is None
