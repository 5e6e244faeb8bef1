"""Reading databases that OpenData wrote (RFC 0009): its segment extractors and its merge
operands, read-only.

A database created with a segment extractor records the extractor's name in its manifest,
and slatedb refuses a reader without an extractor of that name ("segment extractor
configuration mismatch"). build_compatible() opens a reader as usual and, when slatedb names
one of OpenData's extractors, opens it again with a same-named extractor that routes keys as
OpenData's does, and a merge operator that keeps the operands apart instead of merging them
(OpenData's timeseries and vector databases hold merge operands; without any merge operator
slatedb fails with "merge operator missing" on the first read of one).

The merge operator is read-side only: a reader never compacts, so what it returns is only
ever shown. It frames the base value (if any) and every operand (layouts.merge_frame, whose
per-process token no stored value can carry); the dump decodes each part with the record's
value layout. slatedb calls these objects from Rust, where a Python exception becomes a panic
that ends the read: they catch everything and answer with something well-defined instead.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from opendata_kv.errors import StoreError
from opendata_kv.layouts import merge_frame
from opendata_kv.layouts.opendata import EXTRACTORS, Extractor
from opendata_kv.native.errors import FOREIGN
from opendata_kv.native.slatedb import MergeOperator, PrefixExtractor

_MISMATCH = re.compile(r'segment extractor configuration mismatch \(persisted: Some\("([^"]*)"\)')


class OpendataExtractor(PrefixExtractor):  # type: ignore[misc]
    """A slatedb prefix extractor with the name and routing of one of OpenData's."""

    def __init__(self, spec: Extractor) -> None:
        self.spec = spec

    def name(self) -> str:
        return self.spec.name

    def prefix_len(self, target: Any) -> int | None:
        try:
            key: Any = getattr(target, "key", None)
            if key is None:
                key = getattr(target, "prefix", b"")
            return self.spec.routing_prefix_len(bytes(key))
        except Exception:  # never into Rust; a key without OpenData's prefix routes as none
            return None


class ShowOperands(MergeOperator):  # type: ignore[misc]
    """A merge operator that keeps the base value and the operands, in order, apart; if that
    fails (it should not: only MemoryError-like failures remain), it returns
    merge_frame.failed(reason), which the dump shows as the key's error row."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        try:
            return keep_apart(existing_value, operand)
        except BaseException as exc:  # anything raised here would panic in Rust
            return merge_frame.failed(f"{type(exc).__name__}: {exc}")


def keep_apart(existing_value: bytes | None, operand: bytes) -> bytes:
    """The frame of `existing_value` (a plain base, an earlier frame or None) then `operand`;
    a failed merge stays failed."""
    base: bytes | None = None
    operands: list[bytes] = []
    for part in (existing_value, operand):
        if part is not None and merge_frame.failure(part) is not None:
            return part
    if existing_value is not None:
        if merge_frame.is_frame(existing_value):
            base, operands = merge_frame.split(existing_value)
        else:  # a plain value under the operands: the base they apply to
            base = existing_value
    if merge_frame.is_frame(operand):  # operands slatedb already merged among themselves
        operands += merge_frame.split(operand)[1]
    else:
        operands.append(operand)
    return merge_frame.frame(base, operands)


def persisted_extractor(exc: BaseException) -> str | None:
    """The extractor name slatedb says a database was created with, from its mismatch error."""
    message = getattr(exc, "message", None) or str(exc)
    found = _MISMATCH.search(message)
    return found.group(1) if found else None


def configure(builder: Any, name: str) -> None:
    """Give a DbReaderBuilder OpenData's extractor `name` and the operand-showing merge
    operator; StoreError when opendata_kv does not know the extractor."""
    spec = EXTRACTORS.get(name)
    if spec is None:
        raise StoreError(
            f"the database was created with the segment extractor {name!r}, which opendata_kv "
            f"does not know (it reads {sorted(EXTRACTORS)})",
            value=name,
        )
    builder.with_segment_extractor(OpendataExtractor(spec))
    builder.with_merge_operator(ShowOperands())


async def build_compatible(
    make_builder: Callable[[], Any], wait: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None
) -> Any:
    """`make_builder().build()`; when slatedb refuses for want of an OpenData extractor, a
    second builder configured with it. Any other error propagates unchanged."""
    first = make_builder()
    try:
        return await (wait(first.build()) if wait else first.build())
    except FOREIGN as exc:
        name = persisted_extractor(exc)
        if name is None:
            raise
        second = make_builder()
        configure(second, name)
        return await (wait(second.build()) if wait else second.build())
