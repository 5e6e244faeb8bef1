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
ever shown. It frames the base value (if any) and every operand (layouts.opendata_values
MERGE_FRAME); the dump decodes each part with the record's value layout.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from opendata_kv.errors import StoreError
from opendata_kv.layouts.opendata import EXTRACTORS, Extractor
from opendata_kv.layouts.opendata_values import MERGE_FRAME, split_operands
from opendata_kv.store.native.errors import FOREIGN
from opendata_kv.store.native.slatedb import MergeOperator, PrefixExtractor

_MISMATCH = re.compile(r'segment extractor configuration mismatch \(persisted: Some\("([^"]*)"\)')
_U32 = struct.Struct(">I")


class OpendataExtractor(PrefixExtractor):  # type: ignore[misc]
    """A slatedb prefix extractor with the name and routing of one of OpenData's."""

    def __init__(self, spec: Extractor) -> None:
        self.spec = spec

    def name(self) -> str:
        return self.spec.name

    def prefix_len(self, target: Any) -> int | None:
        key: Any = getattr(target, "key", None)
        if key is None:
            key = getattr(target, "prefix", b"")
        return self.spec.routing_prefix_len(bytes(key))


def frame(base: bytes | None, operands: list[bytes]) -> bytes:
    """MERGE_FRAME, the base flag, then each part as u32 BE length + bytes."""
    parts = ([base] if base is not None else []) + operands
    body = b"".join(_U32.pack(len(p)) + p for p in parts)
    return MERGE_FRAME + bytes((base is not None,)) + body


class ShowOperands(MergeOperator):  # type: ignore[misc]
    """A merge operator that keeps the base value and the operands, in order, apart."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        base: bytes | None = None
        operands: list[bytes] = []
        if existing_value is not None:
            if existing_value.startswith(MERGE_FRAME):
                base, operands = split_operands(existing_value)
            else:  # a plain value under the operands: the base they apply to
                base = existing_value
        if operand.startswith(MERGE_FRAME):
            _, more = split_operands(operand)
            operands += more
        else:
            operands.append(operand)
        return frame(base, operands)


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
