"""Fitting text into table columns: hex shortened in the middle, text cut at the end."""

from __future__ import annotations


def shorten(text: str, width: int) -> str:
    """Hex cut to about `width` characters with a middle ellipsis that keeps both ends (and
    whole bytes on each side)."""
    if len(text) <= width:
        return text
    tail = max(2, (width // 3) & ~1)
    head = max(2, (width - tail - 1) & ~1)
    return text[:head] + "…" + text[-tail:]


def cut(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"
