"""A per-record test that a sequence holds exactly n str values (no subclass): the common
case of index entries and key fields, which then take the compiled encoders. It answers what
`tuple(map(type, s)) == (str,) * n` answers at about a third of the cost (that builds a map
and a tuple: ~0.57 µs for three fields on CPython 3.11, this ~0.22)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def all_str(width: int) -> Callable[[Sequence[Any]], bool]:
    """The test for sequences of `width` values."""
    if width == 1:
        return lambda s: len(s) == 1 and type(s[0]) is str
    if width == 2:
        return lambda s: len(s) == 2 and type(s[0]) is str and type(s[1]) is str
    if width == 3:
        return lambda s: (
            len(s) == 3 and type(s[0]) is str and type(s[1]) is str and type(s[2]) is str
        )
    strings = (str,) * width
    return lambda s: tuple(map(type, s)) == strings
