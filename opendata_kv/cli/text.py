"""Text for a terminal or a pipe: every character a terminal would act on or hide escaped, by
one function for text and JSON alike; fitting text into table columns (hex shortened in the
middle, text cut at the end)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from opendata_kv.errors import printable

__all__ = ["EscapingStream", "cut", "human_bytes", "json_text", "printable", "shorten"]


def json_text(obj: Any, *, compact: bool = True) -> str:
    """`obj` as one line of JSON that stays readable (UTF-8 kept) yet holds no character a
    terminal acts on: what json.dumps leaves raw (DEL, C1 controls, U+2028, bidi overrides,
    lone surrogates from undecodable input) is written as \\uXXXX, so the line still parses
    and gives back the same strings."""
    separators = (", ", ": ") if compact else None
    return printable(json.dumps(obj, ensure_ascii=False, separators=separators), as_json=True)


class EscapingStream:
    """A text stream that passes each write through `printable`, keeping only the newlines
    and tabs commands lay their output out with: the last guard on stdout, so no command can
    write a raw control character even where a cell was not escaped on its own (cells escape
    their own newlines and tabs)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if not text.replace("\n", "").replace("\t", "").isprintable():
            text = "\n".join(
                "\t".join(printable(cell) for cell in line.split("\t")) for line in text.split("\n")
            )
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


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


def human_bytes(size: int) -> str:
    """`size` in B, KiB, MiB or GiB, one decimal past bytes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
