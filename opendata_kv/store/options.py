"""How a scan reads, as one frozen value: `ScanOptions`, accepted as `options=` by every scan
(async and sync) beside the same settings as keywords, which override it.

The settings are declared here once (the dataclass, and the TypedDict that types them as
keywords); every scan signature takes `options=`, `on_error=` and `**keywords` instead of
repeating them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError, check_count

#: on_error policies a ScanOptions may hold; "raw" changes what a scan yields (RawRecords),
#: so it is given as scan(on_error="raw"), where the type checker sees it
OptionErrorPolicy = Literal["raise", "skip"]


@dataclass(frozen=True)
class ScanOptions:
    """How a scan reads (everything but which keys it reads).

    `reverse`: descending key order. `limit`: at most that many records (0 yields nothing).
    `batch_size`: rows fetched per native call (the first batches are smaller). `upgrade`:
    values of older record versions come back in the newest model. `fill_cache=False`: blocks
    read are kept out of slatedb's block cache (bulk scans). `on_error`: a row that does not
    decode "raise"s or is "skip"ped and counted in `scan.failed`.
    """

    reverse: bool = False
    limit: int | None = None
    batch_size: int = 1024
    upgrade: bool = True
    fill_cache: bool = True
    on_error: OptionErrorPolicy = "raise"

    def __post_init__(self) -> None:
        check_count(self.limit, "limit", 0, none_ok=True, hint=" (0 yields nothing) or None")
        check_count(self.batch_size, "batch_size", 1)
        if self.on_error not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"ScanOptions(on_error={self.on_error!r}): a ScanOptions holds 'raise' or "
                "'skip'; pass on_error='raw' to the scan itself (it changes what the scan "
                "yields: Record | RawRecord)",
                field="on_error",
                value=self.on_error,
            )

    def but(self, **changes: Any) -> ScanOptions:
        """A copy with some settings changed: `options.but(limit=10)`."""
        return dataclasses.replace(self, **changes)


class ScanKeywords(TypedDict, total=False):
    """ScanOptions' settings as scan keywords (on_error is a keyword of its own)."""

    reverse: bool
    limit: int | None
    batch_size: int
    upgrade: bool
    fill_cache: bool


DEFAULT_SCAN = ScanOptions()
_NAMES = frozenset(ScanKeywords.__annotations__)


def scan_settings(
    options: ScanOptions | None, on_error: str | None, keywords: Mapping[str, Any]
) -> tuple[ScanOptions, str]:
    """(the scan's options, its on_error policy): `options` (default DEFAULT_SCAN) with the
    keywords laid over it; an unknown keyword is an ArgumentTypeError naming it."""
    if options is None:
        options = DEFAULT_SCAN
    elif not isinstance(options, ScanOptions):
        raise ArgumentTypeError(
            f"options must be a ScanOptions, got {type(options).__name__} {options!r}",
            field="options",
            value=options,
        )
    if keywords:
        unknown = sorted(set(keywords) - _NAMES)
        if unknown:
            raise ArgumentTypeError(
                f"unknown scan option {unknown[0]!r}; the options are {sorted(_NAMES)} and "
                "on_error",
                field=unknown[0],
            )
        options = dataclasses.replace(options, **keywords)
    return options, options.on_error if on_error is None else on_error
