"""How a store opens, as one frozen value: `OpenOptions`, accepted as `options=` by
Store.open and Store.open_reader (and their sync twins) beside the same settings as keywords.

Every setting is validated once, here, with the errors the keywords always gave; the openers
then read the value instead of passing a dozen positionals along.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError, check_count
from opendata_kv.objstore.deadline import READER_TIMEOUT
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.opening import (
    check_cache_bytes,
    check_cache_dir,
    check_retries,
    check_seconds,
)
from opendata_kv.store.ops.checkpoints import require_id

#: `timeout` left to the opener: Store.open waits as long as slatedb retries (None),
#: Store.open_reader gives up after READER_TIMEOUT seconds
DEFAULT_TIMEOUT: Final = "default"

#: the settings only the writer (Store.open) or only a reader (open_reader) reads
#: (a reader has no disk cache: slatedb 0.17's Python ReaderOptions cannot set one; nor a
#: record cache: the writer's writes would leave it stale)
WRITER_ONLY: Final = (
    "create_if_missing",
    "error_if_exists",
    "settings",
    "rebuild_later",
    "cache_dir",
    "record_cache_bytes",
)
READER_ONLY: Final = ("poll_interval", "checkpoint")


@dataclass(frozen=True)
class OpenOptions:
    """How Store.open / Store.open_reader open a database (everything but where and which
    schema). Each setting means what the keyword of the same name means (Store.open's
    docstring, docs/object-storage.md); `timeout="default"` is the opener's own default.
    `cache_dir` (no keyword): a local directory where the writer keeps the object-store parts
    it reads (slatedb's object_store_cache_options.root_folder), so a second read of the same
    range makes no request; None (default) keeps none."""

    create_if_missing: bool = True
    error_if_exists: bool = False
    timeout: float | Literal["default"] | None = DEFAULT_TIMEOUT
    object_store_max_retries: int | None = None
    settings: Mapping[str, Any] | None = None
    object_store_options: Mapping[str, str] | None = None
    check_expiry: bool = True
    cache_bytes: int | None = None
    indexes: Iterable[Index] = ()
    rebuild_later: Iterable[str] = ()
    poll_interval: float = 1.0
    checkpoint: str | None = None
    #: an OpenTelemetry MeterProvider the store records its metrics through; None: the
    #: global one, when an application set one (docs/operations.md, "Metrics")
    meter_provider: Any = None
    #: with metrics on, also install slatedb's own recorder and expose its metrics through the
    #: same meter (default, issue 42); False skips it, its per-operation counters cost ~3% of
    #: a memtable get (docs/performance.md, "What slatedb's recorder costs a get")
    slatedb_metrics: bool = True
    cache_dir: str | os.PathLike[str] | None = None
    #: the writer's record cache (store/record_cache.py), in bytes: recently read and written
    #: records kept by key for get; 0 (default) keeps none. Needs check_expiry (a store that
    #: does not check TTLs on reads has no cache). Never used by readers.
    record_cache_bytes: int = 0

    def __post_init__(self) -> None:
        check_cache_bytes(self.cache_bytes)
        check_count(self.record_cache_bytes, "record_cache_bytes", 0, hint=" (0: no cache)")
        self._set("cache_dir", check_cache_dir(self.cache_dir))
        check_retries(self.object_store_max_retries)
        if self.timeout != DEFAULT_TIMEOUT:
            self._set("timeout", check_seconds(self.timeout, "timeout"))
        self._set("poll_interval", check_seconds(self.poll_interval, "poll_interval") or 1.0)
        if self.checkpoint is not None:
            require_id(self.checkpoint)
        self._set("create_if_missing", bool(self.create_if_missing))
        self._set("error_if_exists", bool(self.error_if_exists))
        self._set("indexes", tuple(self.indexes))  # an iterator would be read once
        self._set("rebuild_later", tuple(self.rebuild_later))
        for name in ("settings", "object_store_options"):  # a copy: the caller's may change
            given = getattr(self, name)
            self._set(name, None if given is None else dict(given))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def timeout_for(self, reader: bool) -> float | None:
        """The open's bound in seconds (None: no bound), the opener's default when unset."""
        if self.timeout == DEFAULT_TIMEOUT:
            return READER_TIMEOUT if reader else None
        return self.timeout

    def but(self, **changes: Any) -> OpenOptions:
        """A copy with some settings changed: `options.but(timeout=5)`."""
        return dataclasses.replace(self, **changes)


_DEFAULTS: Final = {f.name: f.default for f in dataclasses.fields(OpenOptions)}


def open_options(
    options: OpenOptions | None, opener: str, keywords: Mapping[str, Any]
) -> OpenOptions:
    """The options an open runs with: `options` (default: none set) and the keywords that
    differ from their defaults (one left at its default defers to `options`). A keyword that
    disagrees with `options`, or a setting the `opener` ("Store.open" or "Store.open_reader")
    does not read, is an InvalidArgumentError naming it."""
    reader = opener == "Store.open_reader"
    timeout = READER_TIMEOUT if reader else None  # the `timeout` keyword's default
    given = {
        name: value
        for name, value in keywords.items()
        if value != (timeout if name == "timeout" else _DEFAULTS[name])
    }
    if options is None:
        options = OpenOptions(**given)
    elif not isinstance(options, OpenOptions):
        raise ArgumentTypeError(
            f"{opener}: options must be an OpenOptions, got {type(options).__name__} {options!r}",
            field="options",
            value=options,
        )
    else:
        for name, value in given.items():
            wanted = getattr(dataclasses.replace(options, **{name: value}), name)
            if wanted != getattr(options, name):
                raise InvalidArgumentError(
                    f"{opener}: {name}={value!r} conflicts with options.{name}="
                    f"{getattr(options, name)!r}; give it once (the keyword or the OpenOptions)",
                    field=name,
                    value=value,
                )
    foreign = WRITER_ONLY if reader else READER_ONLY
    for name in foreign:
        if getattr(options, name) != _DEFAULTS[name]:
            other = "Store.open" if reader else "Store.open_reader"
            raise InvalidArgumentError(
                f"{opener}: OpenOptions({name}={getattr(options, name)!r}) is a setting of "
                f"{other} only; {opener} does not read it",
                field=name,
                value=getattr(options, name),
            )
    return options
