"""Text for a terminal: control characters escaped; fitting text into table columns (hex
shortened in the middle, text cut at the end)."""

from __future__ import annotations


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character a terminal would act on or hide escaped as \\xNN /
    \\uNNNN: C0 and C1 controls (escape sequences, newlines, carriage returns), DEL, line
    and paragraph separators, bidi overrides and other format characters. Stored names and
    values cannot then move the cursor, recolour the terminal or forge output lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


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
