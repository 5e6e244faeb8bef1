"""Opening a slatedb Db (writer) or DbReader: existence checks, settings, and the time bound.

Bounds, by default (docs/object-storage.md has the figures):
- a reader's open gives up after READER_TIMEOUT seconds (StoreUnavailableError naming the
  location, bucket and endpoint): a reader is what tools and dashboards open, and they must not
  hang on a wrong bucket or a stopped endpoint;
- a writer's open waits as long as slatedb retries, which by default is forever: a service's
  writer should ride out an object-store outage rather than stop. Bound it with `timeout=` (the
  open) and `object_store_max_retries=` (every object-store call, also the background flushes).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from opendata_kv.checks.integrity import check_checkpoint_copy, check_open, opening_error
from opendata_kv.checks.remote_checks import shut_down as reader_shut_down
from opendata_kv.errors import (
    ArgumentTypeError,
    CheckpointError,
    InvalidArgumentError,
    StoreExistsError,
    StoreNotFoundError,
    StoreUnavailableError,
    check_count,
)
from opendata_kv.native import calls, driver
from opendata_kv.native.errors import FOREIGN, call, translating
from opendata_kv.native.opendata_compat import build_compatible
from opendata_kv.native.slatedb import (
    AdminBuilder,
    CloseReason,
    DbBuilder,
    DbCache,
    DbReaderBuilder,
    Error,
    MokaCacheOptions,
    ReaderMode,
    ReaderOptions,
)
from opendata_kv.objstore import deadline, sidecar
from opendata_kv.objstore.deadline import READER_SHUTDOWN, budget
from opendata_kv.objstore.location import Location, describe
from opendata_kv.store.ops.checkpoints import resolve as resolve_checkpoint
from opendata_kv.store.settings import slatedb_settings

T = TypeVar("T")

_NO_MANIFEST = "failed to find latest"
#: seconds between a checkpoint reader's manifest polls: nothing it reads ever changes
PINNED_POLL_INTERVAL = 3600.0


def check_retries(value: int | None) -> int | None:
    """None (slatedb's default: retry forever) or an int >= 0."""
    check_count(value, "object_store_max_retries", 0, none_ok=True, hint=" or None")
    return value


def check_seconds(value: float | None, what: str) -> float | None:
    """None (no bound) or a positive, finite number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InvalidArgumentError(
            f"{what} must be a positive number of seconds or None, got {value!r}",
            field=what,
            value=value,
        )
    return float(value)


async def bounded(
    awaitable: Awaitable[T],
    timeout: float | None,
    location: Location,
    options: Mapping[str, str] | None,
    what: str,
) -> T:
    """deadline.bounded, its message naming the location and what to check there."""
    return await deadline.bounded(
        awaitable,
        timeout,
        f"{what} {describe(location, options)}",
        "check the location, the bucket and that the endpoint is up",
        value=str(location),
    )


async def exists(location: Location, object_store: Any) -> bool:
    """True when a database (a manifest) is stored at `location`; reads only."""
    if location.scheme == "memory":
        return False  # every open of memory:// gets a new, empty store
    admin = AdminBuilder(location.db_path, object_store).build()
    manifest = await call(admin.read_manifest(None), f"look for a database at {location}")
    return manifest is not None


def check_cache_bytes(cache_bytes: object) -> int | None:
    """Validate a `cache_bytes` argument: None (slatedb's default cache) or an int >= 0."""
    check_count(cache_bytes, "cache_bytes", 0, none_ok=True, hint=" (0 disables it) or None")
    return cache_bytes  # type: ignore[return-value]


def check_cache_dir(cache_dir: object) -> str | None:
    """Validate a `cache_dir` argument: None or a path (str or os.PathLike), made absolute (a
    relative one would follow the process's working directory)."""
    if cache_dir is None:
        return None
    if isinstance(cache_dir, os.PathLike):
        cache_dir = os.fspath(cache_dir)
    if not isinstance(cache_dir, str) or not cache_dir or "\0" in cache_dir:
        raise ArgumentTypeError(
            f"cache_dir must be a local directory path (str or os.PathLike) or None, got "
            f"{type(cache_dir).__name__} {cache_dir!r}",
            field="cache_dir",
            value=cache_dir,
        )
    return os.path.abspath(cache_dir)


def with_cache_dir(settings: Mapping[str, Any], cache_dir: str | None) -> dict[str, Any]:
    """`settings` with slatedb's disk cache rooted at `cache_dir` (when given); a
    `settings` root_folder that names another directory is an InvalidArgumentError."""
    out = dict(settings)
    if cache_dir is None:
        return out
    group = out.get("object_store_cache_options")
    group = dict(group) if isinstance(group, Mapping) else {}
    given = group.get("root_folder")
    if given is not None and given != cache_dir:
        raise InvalidArgumentError(
            f"cache_dir={cache_dir!r} conflicts with settings object_store_cache_options."
            f"root_folder={given!r}; give the directory once",
            field="cache_dir",
            value=cache_dir,
        )
    group["root_folder"] = cache_dir
    out["object_store_cache_options"] = group
    return out


def set_block_cache(builder: Any, cache_bytes: int | None) -> None:
    """Give a DbBuilder/DbReaderBuilder an in-memory block and metadata cache of
    `cache_bytes` (slatedb's Moka cache, private to this database: id 0); 0 disables the
    cache, None keeps slatedb's default."""
    if cache_bytes is None:
        return
    if cache_bytes == 0:
        builder.with_db_cache_disabled()
        return
    options = MokaCacheOptions(max_capacity=cache_bytes, time_to_live=None, time_to_idle=None)
    builder.with_db_cache(DbCache.new_moka_cache(options), 0)


async def open_db(
    location: Location,
    options: Mapping[str, str] | None,
    settings: Mapping[str, Any],
    create_if_missing: bool,
    error_if_exists: bool,
    cache_bytes: int | None = None,
    recorder: Any = None,
) -> tuple[Any, Any]:
    """The slatedb Db, the writer of the database at `location` (checked for damage that
    slatedb would not notice first: see checks/integrity.py), and the ObjectStore it uses (admin
    and WAL reads share it: a memory:// store is private to one ObjectStore)."""
    where = f"open {location}"
    object_store = location.object_store(options, create=create_if_missing)

    async def writable() -> None:
        if location.scheme == "s3":  # slatedb retries a refused write forever: ask once first
            with contextlib.suppress(StoreUnavailableError):  # no answer: left to the bound
                await sidecar.Sidecar(location, options).check_writable()

    # independent reads (and the write probe): one round trip, failures in this order
    _, known, _, _ = await first_failure(
        sidecar.probe(location, options, None),
        check_open(
            location,
            object_store,
            where,
            writer=True,
            options=options,
            retries=settings.get("object_store_max_retries"),
        ),
        sidecar.check_not_cloning(location, options, object_store, where),
        writable(),
    )
    if error_if_exists or not create_if_missing:
        found = known if known is not None else await exists(location, object_store)
        if found and error_if_exists:
            raise StoreExistsError(
                f"{location}: a database already exists here (error_if_exists=True)",
                value=str(location),
            )
        if not found and not create_if_missing:
            raise StoreNotFoundError(
                f"{location}: there is no database here and create_if_missing=False"
                + (" (memory:// always starts empty)" if location.scheme == "memory" else ""),
                value=str(location),
            )
    builder = DbBuilder(location.db_path, object_store)
    builder.with_settings(slatedb_settings(settings))
    set_block_cache(builder, cache_bytes)
    if recorder is not None:  # slatedb's own metrics, bridged (store/metrics.py)
        builder.with_metrics_recorder(recorder)
    try:
        db = await builder.build()
    except FOREIGN as exc:
        raise await opening_error(exc, location, object_store, where) from exc
    await sidecar.remember(location, options, object_store, writer=True)
    return db, object_store


async def open_reader_db(
    location: Location,
    options: Mapping[str, str] | None,
    poll_interval: float,
    max_retries: int | None,
    checkpoint: str | None = None,
    cache_bytes: int | None = None,
    recorder: Any = None,
) -> tuple[Any, Any, str | None]:
    """A slatedb DbReader of the database at `location` (latest state, or the pinned state
    of `checkpoint`, an id or a unique name), its ObjectStore and the checkpoint id: creates
    and writes nothing."""
    where = f"open reader on {location}"
    object_store = location.object_store(options)
    # the probe, the clone marker and (but on s3://, where they run beside slatedb's open)
    # the damage checks are independent reads: one round trip for all of them. A reader at
    # a checkpoint never reads the database's WAL (the checkpoint's own copy holds the WAL
    # files it replays, or a plain checkpoint replays none), so its check leaves the WAL out:
    # reading the newest WAL file was most of such an open's CPU (docs/performance.md)
    wal = checkpoint is None
    await first_failure(
        sidecar.probe(location, options, None),
        sidecar.check_not_cloning(location, options, object_store, where),
        *(() if location.scheme == "s3" else (check_open(location, object_store, where, wal=wal),)),
    )
    if checkpoint is not None:  # a name is looked up (read-only)
        checkpoint = await resolve_checkpoint(location.db_path, object_store, checkpoint, where)
        copy = await sidecar.checkpoint_copy(location, options, object_store, checkpoint)
        if copy is not None:
            await check_checkpoint_copy(location, copy, options, where)
    else:
        copy = None

    def make_builder() -> Any:
        # a checkpoint made away from the writer is read through its own copy (a slatedb
        # clone of it with the WAL files it needs): nothing writes there, so following it is
        # pinned
        builder = DbReaderBuilder(location.db_path if copy is None else copy.db_path, object_store)
        # FOLLOW_LATEST and CHECKPOINT write nothing; the default mode writes manifests (it
        # creates and refreshes a checkpoint of its own), which a reader must never do.
        try:
            builder.with_reader_mode(
                ReaderMode.FOLLOW_LATEST()
                if checkpoint is None or copy is not None
                else ReaderMode.CHECKPOINT(checkpoint)
            )
        except Error as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise CheckpointError(
                f"{where}: {checkpoint!r} is not a checkpoint id (ids are UUIDs, as "
                f"`opendata-kv checkpoint list` shows them) [{message}]"
            ) from exc
        # a pinned version never changes: its reader polls (the copy's manifest) only
        # hourly, where each poll cost an idle reader ~2.5% of a core (docs/performance.md)
        poll = poll_interval if checkpoint is None else max(poll_interval, PINNED_POLL_INTERVAL)
        builder.with_options(
            ReaderOptions(
                manifest_poll_interval_ms=max(1, round(poll * 1000)),
                checkpoint_lifetime_ms=max(1000, round(poll_interval * 10_000)),
                max_memtable_bytes=64 << 20,
                skip_wal_replay=False,
                object_store_max_retries=max_retries,
            )
        )
        set_block_cache(builder, cache_bytes)
        if recorder is not None:  # slatedb's own metrics, bridged (store/metrics.py)
            builder.with_metrics_recorder(recorder)
        return builder

    try:
        # a database OpenData wrote is read with its segment extractor (opendata_compat)
        reader = await build_compatible(make_builder)
    except FOREIGN as exc:
        message = getattr(exc, "message", None) or str(exc)
        if isinstance(exc, Error.Data) and _NO_MANIFEST in message:
            # what a reader gets where no writer ever created the database
            raise StoreNotFoundError(
                f"{where}: there is no database here (no manifest); "
                f"a writer must create it first with Store.open [{message}]",
                value=str(location),
            ) from exc
        if checkpoint is not None and "checkpoint missing" in message.lower():
            raise CheckpointError(
                f"{where} at checkpoint {checkpoint!r}: no such checkpoint (list them with "
                f"store.checkpoints() or `opendata-kv checkpoint list`) [{message}]"
            ) from exc
        raise await opening_error(exc, location, object_store, where) from exc
    try:
        # on s3:// the damage checks run once slatedb opened the reader (it wrote nothing;
        # an endpoint that does not answer failed there, within the caller's bound), beside
        # the identity read
        await first_failure(
            *(
                (
                    check_open(
                        location,
                        object_store,
                        where,
                        writer=True,
                        options=options,
                        wal=wal,
                        retries=max_retries,
                    ),
                )
                if location.scheme == "s3"
                else ()
            ),
            sidecar.remember(location, options, object_store, writer=False),
        )
    except BaseException:
        await reader_shut_down(reader)
        raise
    return reader, object_store, checkpoint


async def first_failure(*steps: Awaitable[Any]) -> list[Any]:
    """Run independent `steps` together; their results, or the failure of the first step (in
    the order given) that failed, whichever finished first: a probe's error names the
    cause before a later step's."""
    results: list[Any] = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


async def shut_down(db: Any, where: str, readonly: bool) -> bool:
    """Shut a Db or DbReader down (the writer flushes what it buffered); True when slatedb
    said another writer fenced this one, before or during the shutdown (a fenced writer's
    shutdown cannot write its WAL: slatedb then reports the fence and calls the close clean).

    A database slatedb has already stopped (fenced, or after an object-store failure an
    earlier call reported) shuts down quietly: there is nothing left to flush, and raising
    again from `async with` would only hide the error that stopped it.
    """
    stopped = is_stopped(db)
    fenced_before = fenced(db)
    reported: list[BaseException] = []

    def quiet(exc: BaseException) -> bool:
        if getattr(exc, "reason", None) == CloseReason.FENCED:
            reported.append(exc)
        return stopped or isinstance(exc, Error.Closed)

    # a quiet failure passes translating untouched and is suppressed
    with contextlib.suppress(*FOREIGN), translating(f"close of {where}", unless=quiet):
        shutdown = calls.method(db, "shutdown")
        if readonly and not driver.syncing():
            # a reader has nothing to save: against a silent endpoint slatedb's shutdown
            # waits ~30 s for its requests, so it is abandoned after READER_SHUTDOWN
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_awaited(shutdown), budget(READER_SHUTDOWN))
        else:
            await shutdown
    return fenced_before or bool(reported) or fenced(db)


def durable_seq(db: Any) -> int | None:
    """slatedb's durable sequence number of a Db (also after it was shut down); None if it
    cannot say."""
    try:
        return int(db.status().durable_seq)
    except Exception:
        return None


def fenced(db: Any) -> bool:
    """True when slatedb says another writer fenced this Db (also after it was shut down)."""
    try:
        return bool(db.status().close_reason == CloseReason.FENCED)
    except Exception:
        return False


def is_stopped(db: Any) -> bool:
    """True when slatedb has closed the database underneath us (fenced, failed, ...)."""
    try:
        return db.status().close_reason is not None
    except Exception:
        return False


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
