"""`opendata-kv export URL --format parquet --output DIR --parallel N`: a Parquet dataset, one
file per split (RFC 0014), written by N worker processes at once.

The export is pinned first (a detached checkpoint, opendata_kv.pinned; or the --checkpoint
given), so every worker reads one version whatever a writer does meanwhile; the checkpoint's
lifetime is renewed while the workers run and it is deleted at the end (a coordinator that
dies leaves it to expire after PIN_LIFETIME). The range is cut by Store.splits (one split per
SPLIT_BYTES, at least N); each worker opens its own reader at the checkpoint and writes
`part-NNNNN.parquet` for its split, in the form of cli/export_parquet.py. All files share the
value columns taken from the first rows of the whole range, so DuckDB reads
`DIR/*.parquet` as one table.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import multiprocessing
import os
import sys
from dataclasses import dataclass
from typing import Any

from opendata_kv.cli.common import EXIT_BAD_INPUT, EXIT_OK, CliError
from opendata_kv.cli.db_read import Walk, open_reader
from opendata_kv.cli.export_parquet import SAMPLE_ROWS, ParquetFile, ParquetRows, record_types_of
from opendata_kv.cli.rows import Decoder
from opendata_kv.keys import intersect, prefix_range
from opendata_kv.store import KeyRange, Pinned, StoreReader

#: how long the export's checkpoint lives without a renewal (seconds); renewed every third
PIN_LIFETIME = 600.0
#: one split per this many bytes (as the manifest estimates them), and at least --parallel
SPLIT_BYTES = 64 << 20
#: the argparse names a worker rebuilds its Decoder from
_DECODER_ARGS = ("schema", "layout", "keyspace")


@dataclass(frozen=True)
class Part:
    """One worker's job: a split of the export written to `path` (picklable)."""

    db: str
    checkpoint: str
    decoder_args: dict[str, Any]
    record: str | None
    walk: Walk
    sample: list[tuple[bytes, bytes]]
    path: str


@dataclass(frozen=True)
class Written:
    """What a worker wrote: rows, rows that did not decode, key and value bytes."""

    rows: int
    failed: int
    size: int


def walk_hull(walk: Walk) -> tuple[bytes, bytes | None]:
    """[lo, hi) of every key `walk` may read (its bounds, narrowed to its record prefixes)."""
    bounds = walk.bounds
    if walk.heads:
        spans = [intersect(bounds, prefix_range(head)) for head in walk.heads]
        los = [lo or b"" for lo, _ in spans]
        his = [hi for _, hi in spans]
        bounds = (min(los), None if None in his else max(h for h in his if h is not None))
    return bounds[0] or b"", bounds[1]


def part_path(directory: str, index: int) -> str:
    return os.path.join(directory, f"part-{index:05d}.parquet")


def prepare_directory(directory: str) -> None:
    """Create DIR (and its parents); CliError when it holds Parquet files already (a dataset
    mixing two exports would read as one) or is not a directory."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CliError(f"--parallel writes a directory of Parquet files: {directory} is a file")
    try:
        os.makedirs(directory, exist_ok=True)
        present = sorted(name for name in os.listdir(directory) if name.endswith(".parquet"))
    except OSError as exc:
        raise CliError(f"cannot write {directory}: {exc.strerror}") from None
    if present:
        raise CliError(
            f"{directory} already holds Parquet files ({present[0]}, ...): give an empty or "
            "new directory, so the dataset is this export's alone"
        )


def export_part(part: Part) -> Written:
    """Write one split (in a worker process, or inline for --parallel 1)."""
    return asyncio.run(_export_part(part))


async def _export_part(part: Part) -> Written:
    decoder = Decoder.from_args(argparse.Namespace(**part.decoder_args))
    walk = dataclasses.replace(part.walk, expiries={})
    rows = ParquetRows(decoder, record_types_of(decoder, part.record), part.sample)
    out = ParquetFile(rows, part.path)
    size = 0
    store = await open_reader(part.db, walk.limits, part.checkpoint)
    try:
        async for chunk in walk.chunks(store):
            out.write(chunk, walk.expiries or {})
            size += sum(len(k) + len(v) for k, v in chunk)
    finally:
        out.close()
        await store.close()
    return Written(out.count, out.failed, size)


async def _sample(store: StoreReader, walk: Walk) -> list[tuple[bytes, bytes]]:
    """The first SAMPLE_ROWS rows of the whole range: every file's value columns."""
    taken: list[tuple[bytes, bytes]] = []
    sampler = dataclasses.replace(walk, limit=SAMPLE_ROWS, expiries=None)
    async for chunk in sampler.chunks(store):
        taken += chunk
    return taken[:SAMPLE_ROWS]


async def plan(
    args: argparse.Namespace, walk: Walk, checkpoint: str, parallel: int
) -> tuple[list[KeyRange], list[tuple[bytes, bytes]]]:
    """(the splits, the sample rows) of the export at `checkpoint`."""
    store = await open_reader(args.db, walk.limits, checkpoint)
    try:
        lo, hi = walk_hull(walk)
        if hi is not None and hi <= lo:
            return [], []
        target = KeyRange(lo, hi)
        ranges = await walk.limits.bound(
            store.splits(target, target_bytes=SPLIT_BYTES, timeout=None), f"split {args.db}"
        )
        if len(ranges) < parallel:
            ranges = await walk.limits.bound(
                store.splits(target, n=parallel, timeout=None), f"split {args.db}"
            )
        sample = await _sample(store, walk)
    finally:
        await store.close()
    return ranges, sample


async def _pin(args: argparse.Namespace, walk: Walk) -> tuple[Pinned | None, str]:
    """(the Pinned made for this export, None for --checkpoint; the checkpoint id)."""
    if args.checkpoint is not None:  # resolved (a name to its id) by opening a reader on it
        store = await open_reader(args.db, walk.limits, args.checkpoint)
        try:
            assert store.checkpoint_id is not None
            return None, store.checkpoint_id
        finally:
            await store.close()
    from opendata_kv.objstore.location import parse_location

    options = {
        "object_store_options": walk.limits.object_store_options(parse_location(args.db)),
        "object_store_max_retries": walk.limits.retries,
        "timeout": walk.limits.timeout,
    }
    pin = Pinned(args.db, PIN_LIFETIME, options)
    await walk.limits.bound(pin.pin(), f"pin {args.db} for the export")
    return pin, pin.checkpoint_id


def run_parallel(args: argparse.Namespace, decoder: Decoder, walk: Walk) -> int:
    """The --parallel export: pin, split, write the parts N at once, unpin."""
    prepare_directory(args.output)
    parallel = int(args.parallel)
    pin, checkpoint = asyncio.run(_pin(args, walk))
    try:
        ranges, sample = asyncio.run(plan(args, walk, checkpoint, parallel))
        decoder_args = {name: getattr(args, name, None) for name in _DECODER_ARGS}
        parts = [
            Part(
                args.db,
                checkpoint,
                decoder_args,
                args.record,
                dataclasses.replace(
                    walk, bounds=intersect(walk.bounds, (split.start or None, split.end))
                ),
                sample,
                part_path(args.output, i),
            )
            for i, split in enumerate(ranges or [KeyRange(b"", None)])
        ]
        if not ranges:  # an empty range: one file with the schema alone
            parts = [dataclasses.replace(parts[0], walk=dataclasses.replace(walk, limit=0))]
        written = _run_parts(parts, parallel, pin)
    finally:
        if pin is not None:
            asyncio.run(pin.release())
    failed = sum(w.failed for w in written)
    total = sum(w.rows for w in written)
    if failed:
        sys.stderr.write(
            f"opendata-kv: error: {failed} of {total} records did not decode "
            "(written raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


def _run_parts(parts: list[Part], parallel: int, pin: Pinned | None) -> list[Written]:
    """Every part written, `parallel` at once in worker processes (inline for 1); the
    checkpoint renewed every third of its lifetime meanwhile."""
    if parallel <= 1:
        out = []
        for part in parts:
            out.append(export_part(part))
            if pin is not None:
                pin.refresh()
        return out
    context = multiprocessing.get_context("spawn")  # no fork of slatedb's runtime threads
    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=context) as pool:
        futures = [pool.submit(export_part, part) for part in parts]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(
                pending, timeout=PIN_LIFETIME / 3, return_when=concurrent.futures.FIRST_EXCEPTION
            )
            for future in futures:
                if future.done() and future.exception() is not None:
                    for other in pending:
                        other.cancel()
                    raise future.exception()  # type: ignore[misc]
            if pending and pin is not None:
                pin.refresh()
        return [future.result() for future in futures]
