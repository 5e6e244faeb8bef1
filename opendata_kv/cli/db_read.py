"""Opening a database read-only and walking its key ranges (dump, stats).

The database is opened through slatedb's DbReader, which never fences the writer: a service
can keep writing while you look. It sees what the writer has flushed. The database must
exist: a missing one is an error, and nothing is ever created.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from opendata_kv.cli.common import CliError, parse_hex
from opendata_kv.cli.db_args import DEFAULT_RETRIES, DEFAULT_TIMEOUT
from opendata_kv.errors import (
    CheckpointError,
    SchemaError,
    StoreDataError,
    StoreError,
    StoreUnavailableError,
    show_text,
)
from opendata_kv.keys import (
    UNBOUNDED,
    Bounds,
    Schema,
    intersect,
    is_empty,
    prefix_range,
    record_type_range,
    version_range,
)

if TYPE_CHECKING:
    from opendata_kv.objstore.location import Location
    from opendata_kv.store import StoreReader
    from opendata_kv.values import Values

T = TypeVar("T")

_NO_DATABASE = "failed to find latest transactional object"
#: seconds between a one-shot command's manifest polls: longer than any command runs, so it
#: reads the one state it opened on and sends no request while it reads but its own (a
#: reader polls the manifest and probes the WAL at each tick; once a second, `stats` of 320k
#: records on S3 sent hundreds of HEADs besides its reads)
ONE_SHOT_POLL = 86_400.0
#: bytes of block cache a one-shot command keeps: it reads each block once, and slatedb's
#: default cache (512 MiB) filled with every block a scan passed (stats of 10M records
#: peaked at 655 MiB); index and filter blocks still fit
ONE_SHOT_CACHE = 32 << 20
#: rows a walk gathers before it hands them on when a range is read in parts (dump sizes its
#: columns on the first rows it gets)
JOIN_BELOW = 256


def checkpoint_arg(parser: argparse.ArgumentParser) -> None:
    """--checkpoint ID, for the read-only commands (dump, stats)."""
    parser.add_argument(
        "--checkpoint",
        metavar="ID",
        help="read this checkpoint's pinned state instead of the latest one: its id, or its "
        "name when unique (see `opendata-kv checkpoint list`)",
    )


@dataclass(frozen=True)
class ReadLimits:
    """How long a read-only command waits for the database (--timeout, --retries).

    `timeout` bounds opening the database and each read round trip (None: no bound); for
    S3 it is also the limit of one request. `retries` is SlateDB's object_store_max_retries.
    """

    timeout: float | None = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReadLimits:
        timeout = getattr(args, "timeout", DEFAULT_TIMEOUT)
        return cls(timeout or None, getattr(args, "retries", DEFAULT_RETRIES))

    def object_store_options(self, location: Location) -> dict[str, str] | None:
        if location.scheme != "s3" or self.timeout is None:
            return None
        return {"timeout": f"{self.timeout:g}s", "connect_timeout": f"{self.timeout:g}s"}

    async def bound(self, awaitable: Awaitable[T], doing: str) -> T:
        """`awaitable`, or a CliError naming the endpoint and bucket when it overruns."""
        from opendata_kv.objstore.deadline import bounded

        return await bounded(
            awaitable,
            self.timeout,
            doing,
            "raise --timeout (0 waits as long as it takes) or check that the object store is up",
            option="",
            error=CliError,
        )


def endpoint_text(location: Location) -> str:
    """` (endpoint E, bucket B)` for an s3:// location, naming where requests go; "" else."""
    if location.scheme != "s3":
        return ""
    from opendata_kv.objstore.location import s3_config

    config = s3_config(location.bucket or "")
    endpoint = config.get("endpoint") or "the AWS default (AWS_ENDPOINT_URL is not set)"
    return f" (endpoint {endpoint}, bucket {location.bucket})"


async def open_reader(
    db: str,
    limits: ReadLimits | None = None,
    checkpoint: str | None = None,
    schema: Schema | None = None,
    values: Values | None = None,
    *,
    check_expiry: bool = True,
    follow: bool = False,
) -> StoreReader:
    """A read-only Store on `db` (keys come back raw unless a `schema` is given, with its
    `values`); CliError if missing, reading the one state it opens on (polling every second
    for a newer one only when it must `follow` the writer: `changes --follow`),
    and within `limits` a CliError naming the endpoint and bucket when nothing answers.
    It follows the latest state, or reads the pinned state of `checkpoint`; either way it
    writes nothing to the store. `check_expiry=False` reads rows whose TTL passed too.

    slatedb's reader creates nothing: on a path without a database it fails with a Data
    error ("failed to find latest transactional object (e.g. manifest)"). A local path is
    checked first so the message can say what is wrong.
    """
    from opendata_kv.objstore.location import parse_location
    from opendata_kv.objstore.s3http import code_in
    from opendata_kv.store import Store

    limits = limits or ReadLimits()
    location = parse_location(db)
    if location.scheme == "file":
        path = location.path
        if not os.path.exists(path):
            raise CliError(f"no database at {db}: {path} does not exist")
        if not os.path.isdir(path):
            raise CliError(f"no database at {db}: {path} is not a directory")
    where = endpoint_text(location)
    opening = Store.open_reader(
        db,
        Schema() if schema is None else schema,
        values=values,
        checkpoint=checkpoint,
        check_expiry=check_expiry,
        poll_interval=1.0 if follow else ONE_SHOT_POLL,
        cache_bytes=None if follow else ONE_SHOT_CACHE,
        timeout=None,  # bounded here by --timeout (0: not at all), with the CLI's message
        object_store_options=limits.object_store_options(location),
        object_store_max_retries=limits.retries,
    )
    try:
        store: StoreReader = await limits.bound(opening, f"open {db}" + where)
    except StoreDataError as exc:
        if _NO_DATABASE in str(exc):
            raise CliError(f"no SlateDB database at {db}{where} (no manifest found)") from None
        raise
    except StoreUnavailableError as exc:
        detail = str(exc).partition("[")[2].rpartition("]")[0] or str(exc)
        reason = show_text(" ".join(detail.split()), 300, quote=False)
        code = code_in(detail)  # the XML body's one useful word survives the cut
        reason = f"S3 error code {code}: {reason}" if code else reason
        raise CliError(
            f"cannot open {db}{where}: the object store failed after {limits.retries} "
            f"retries (--retries): {reason}"
        ) from None
    except CheckpointError as exc:  # it already says "open reader on DB": no second prefix
        raise CliError(str(exc)) from None
    except StoreError as exc:  # refused access, damaged data, ...: say where it happened
        raise CliError(f"cannot open {db}{where}: {exc}") from None
    store.where = str(location) + where  # later errors name the endpoint and bucket too
    return store


@dataclass
class Walk:
    """What to read: overall raw-key bounds and the prefix filters inside them."""

    bounds: Bounds
    keyspace: bytes
    version: int | None
    record_type: int | None
    reverse: bool
    limit: int | None
    limits: ReadLimits = field(default_factory=ReadLimits)
    #: exact record prefixes to read (dump --type NAME: every version of one record)
    heads: tuple[bytes, ...] | None = None
    #: the index key space (RFC 0010): "inline" in key order (stats), "skip" it, or "last":
    #: after every record (dump --indexes)
    index_rows: str = "inline"
    #: set to a dict to collect the expiry (Unix ms) of each row read that has one, by raw
    #: key (export pops them as it writes the rows)
    expiries: dict[bytes, int] | None = None
    #: read with the lean window (store/scan.py lean_read_ahead), not the bulk one: a walk over
    #: a whole store that keeps nothing it reads (stats), whose memory must not grow with the
    #: bulk window (dump and export keep it: fewer, larger requests on object storage)
    lean: bool = False

    def type_bounds(self, version: int) -> Bounds:
        """Keys of record type `record_type` (any reserved bits) under `version`."""
        assert self.record_type is not None
        return record_type_range(version, self.record_type, self.keyspace)

    async def chunks(self, store: StoreReader) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        """Raw (key, value) pairs in order, a batch at a time, honouring every filter."""
        remaining = [self.limit]
        later: list[tuple[Bounds, bytes]] = []  # index key space parts, for index_rows="last"
        if self.heads is not None:
            for head in sorted(self.heads, reverse=self.reverse):
                span = intersect(self.bounds, prefix_range(head))
                async for chunk in self._scan(store, span, remaining, later):
                    yield chunk
        elif self.version is not None:
            span = (
                self.type_bounds(self.version)
                if self.record_type is not None
                else version_range(self.version, self.keyspace)
            )
            async for chunk in self._scan(store, intersect(self.bounds, span), remaining, later):
                yield chunk
        elif self.record_type is not None:
            async for chunk in self._by_type(store, remaining, later):
                yield chunk
        else:
            async for chunk in self._scan(store, self.bounds, remaining, later):
                yield chunk
        async for chunk in self._scan_parts(store, later, remaining):
            yield chunk

    async def _by_type(
        self, store: StoreReader, remaining: list[int | None], later: list[tuple[Bounds, bytes]]
    ) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        """One range per version present: find each by seeking to the next (or previous)
        version byte instead of reading the keys in between."""
        lowest = intersect(self.bounds, (version_range(1, self.keyspace)[0], None))
        at = len(self.keyspace)
        seek = lowest
        while remaining[0] != 0 and not is_empty(seek):
            found = await self.limits.bound(
                store.scan_all(
                    start=seek[0], end=seek[1], reverse=self.reverse, limit=1, on_unknown="raw"
                ).to_list(),
                f"read {store.where}",
            )
            if not found:
                return
            version = found[0].raw_key[at]
            span = intersect(self.bounds, self.type_bounds(version))
            async for chunk in self._scan(store, span, remaining, later):
                yield chunk
            if self.reverse:
                if version <= 1:
                    return
                seek = intersect(seek, (None, version_range(version, self.keyspace)[0]))
            else:
                if version == 0xFF:
                    return
                seek = intersect(seek, (version_range(version + 1, self.keyspace)[0], None))

    async def _scan(
        self,
        store: StoreReader,
        bounds: Bounds,
        remaining: list[int | None],
        later: list[tuple[Bounds, bytes]],
    ) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        parts = []
        for part, prefix in index_space_parts(bounds, self.reverse):
            if prefix and self.index_rows != "inline":  # the index key space
                if self.index_rows == "last":
                    later.append((part, prefix))
                continue
            parts.append((part, prefix))
        async for chunk in self._scan_parts(store, parts, remaining):
            yield chunk

    async def _scan_parts(
        self, store: StoreReader, parts: list[tuple[Bounds, bytes]], remaining: list[int | None]
    ) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        pending: list[tuple[bytes, bytes]] = []  # short parts join the next one's rows
        for part, prefix in parts:
            if is_empty(part) or remaining[0] == 0:
                continue
            scan = store.scan_all(
                prefix=prefix,
                start=part[0],
                end=part[1],
                reverse=self.reverse,
                limit=remaining[0],
                on_unknown="raw",
                fill_cache=False,  # a long one-shot read: the bulk read-ahead, no caching
            )
            scan.expiries = self.expiries
            if self.lean:
                from opendata_kv.store.scan import lean_read_ahead

                lean_read_ahead(scan)
            while chunk := await self.limits.bound(scan.next_chunk(), f"read {store.where}"):
                if remaining[0] is not None:
                    remaining[0] -= len(chunk)
                pending += [(r.raw_key, r.value) for r in chunk]
                if len(pending) >= JOIN_BELOW:
                    yield pending
                    pending = []
        if pending:
            yield pending


def index_space_parts(bounds: Bounds, reverse: bool) -> list[tuple[Bounds, bytes]]:
    """`bounds` cut around the index key space (RFC 0010) in reading order, each part with
    the prefix to scan it under: a store that holds indexes leaves their keys out of a scan
    unless its prefix names them, and the inspection commands show every key."""
    from opendata_kv.store.indexes.layout import ROOT

    index_span = prefix_range(ROOT)
    parts = [
        (intersect(bounds, (None, index_span[0])), b""),
        (intersect(bounds, index_span), ROOT),
        (intersect(bounds, (index_span[1], None)), b""),
    ]
    return parts[::-1] if reverse else parts


def walk_from_args(
    args: argparse.Namespace, keyspace: bytes | None, schema: Schema | None = None
) -> Walk:
    bounds: Bounds = UNBOUNDED
    if keyspace:
        bounds = prefix_range(keyspace)
    if args.prefix is not None:
        bounds = intersect(bounds, prefix_range(parse_hex(args.prefix, "--prefix")))
    if args.start is not None:
        bounds = intersect(bounds, (parse_hex(args.start, "--start"), None))
    if args.end is not None:
        bounds = intersect(bounds, (None, parse_hex(args.end, "--end")))
    if args.start is not None and args.end is not None and args.start.lower() != args.end.lower():
        start, end = parse_hex(args.start, "--start"), parse_hex(args.end, "--end")
        if start > end:
            raise CliError(
                f"--start {args.start} is after --end {args.end}: the range is empty (--end is "
                "exclusive; use --reverse to print in descending order)"
            )
    record_type: int | None = args.type
    heads: tuple[bytes, ...] | None = None
    if isinstance(args.type, str):
        record_type = None
        heads = record_heads(args.type, args.version, schema)
    return Walk(
        bounds,
        keyspace or b"",
        args.version,
        record_type,
        args.reverse,
        args.limit,
        ReadLimits.from_args(args),
        heads,
    )


def record_heads(name: str, version: int | None, schema: Schema | None) -> tuple[bytes, ...]:
    """The key prefixes of record `name` in `schema` (of one version, if given)."""
    if schema is None:
        raise CliError(f"--type {show_text(name)}: a record name needs --schema (or give 1..15)")
    try:
        record_types = schema.versions(name)
    except SchemaError as exc:
        import difflib

        names = sorted(schema.names())
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise CliError(f"--type {show_text(name)}: {exc}{hint}") from None
    if version is not None:
        record_types = [t for t in record_types if t.version == version]
        if not record_types:
            raise CliError(
                f"--type {name} --version {version}: the schema has no version {version} of "
                f"{name!r} (it has {[t.version for t in schema.versions(name)]})"
            )
    return tuple(t.head for t in record_types)
