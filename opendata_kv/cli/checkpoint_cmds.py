"""`opendata-kv checkpoint create|list|delete` and `opendata-kv clone`.

checkpoint create pins the database's current state, also while a writer runs: the WAL files
holding acknowledged writes no SST has yet are copied beside the checkpoint (ops/checkpoints.py),
and a clone of it replays them. clone copies a database (at a checkpoint, or its latest state)
into a new location; an interrupted clone is marked incomplete and resumed by running it again.
--timeout bounds every call to the store (each open, read and write), so no command hangs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

from opendata_kv.cli.common import EXIT_OK, add_json_flag, aligned, emit_json
from opendata_kv.cli.db_args import database_arg, read_limit_args
from opendata_kv.cli.db_read import ReadLimits, open_reader
from opendata_kv.cli.progress import Progress

T = TypeVar("T")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"lifetime must be seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"lifetime must be > 0 seconds, got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `checkpoint` (create, list, delete) and `clone`."""
    checkpoint = subparsers.add_parser(
        "checkpoint",
        help="create, list or delete checkpoints (pinned database states)",
        description="Checkpoints pin a database state for readers (dump/stats --checkpoint) "
        "and clones.",
    )
    actions = checkpoint.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="pin the current state",
        description="Pin the database's current state as a checkpoint holding every write "
        "acknowledged before the command started, also while a writer runs (its WAL files are "
        "copied beside the checkpoint; read such a checkpoint through `clone --checkpoint`). "
        "Names are unique. Needs write access to the store.",
    )
    create.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    create.add_argument("--name", help="a name for the checkpoint")
    create.add_argument(
        "--lifetime", type=_seconds, metavar="SECONDS", help="expire after this long"
    )
    read_limit_args(create)
    add_json_flag(create)
    create.set_defaults(handler=run_create)
    listing = actions.add_parser(
        "list",
        help="list the checkpoints",
        description="List every checkpoint: id, name, manifest, creation and expiry times.",
    )
    listing.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    read_limit_args(listing)
    add_json_flag(listing)
    listing.set_defaults(handler=run_list)
    delete = actions.add_parser(
        "delete",
        help="delete a checkpoint",
        description="Delete a checkpoint (by id, or by its unique name) and what was copied "
        "for it; the garbage collector then frees what only it pinned.",
    )
    delete.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    delete.add_argument("id", metavar="ID", help="the checkpoint id (or its name, when unique)")
    read_limit_args(delete)
    add_json_flag(delete)
    delete.set_defaults(handler=run_delete)

    clone = subparsers.add_parser(
        "clone",
        help="copy a database into a new, independent one",
        description="Copy every live record of SRC (at --checkpoint, or its latest state) "
        "into a new database at DST, which must not hold one. SRC is only read; the clone "
        "shares nothing with it. DST is marked incomplete until the last record is written; "
        "running the same clone again resumes it, --replace starts over.",
    )
    clone.add_argument("src", metavar="SRC", type=database_arg, help="source database")
    clone.add_argument("dst", metavar="DST", type=database_arg, help="new database location")
    clone.add_argument(
        "--checkpoint", metavar="ID", help="copy this checkpoint's state (id, or unique name)"
    )
    clone.add_argument(
        "--replace",
        action="store_true",
        help="start an unfinished clone at DST over instead of resuming it",
    )
    read_limit_args(clone)
    add_json_flag(clone)
    clone.set_defaults(handler=run_clone)


def _text(obj: dict[str, Any]) -> str:
    return aligned((k, "-" if v is None else str(v)) for k, v in obj.items())


def _emit(args: argparse.Namespace, obj: dict[str, Any]) -> int:
    """Print one result: a JSON line with --json, else aligned `key value` lines."""
    if args.json:
        emit_json(obj)
    else:
        sys.stdout.write(_text(obj) + "\n")
    return EXIT_OK


def run_create(args: argparse.Namespace) -> int:
    async def create() -> dict[str, Any]:
        store = await open_reader(args.db, ReadLimits.from_args(args))
        try:
            made = await store.checkpoint(args.name, args.lifetime)
        finally:
            await store.close()
        return made.as_json()

    obj = asyncio.run(_bounded(args, create(), f"checkpoint create {args.db}"))
    return _emit(args, obj)


def run_list(args: argparse.Namespace) -> int:
    async def listing() -> list[dict[str, Any]]:
        store = await open_reader(args.db, ReadLimits.from_args(args))
        try:
            return [cp.as_json() for cp in await store.checkpoints()]
        finally:
            await store.close()

    found = asyncio.run(_bounded(args, listing(), f"checkpoint list {args.db}"))
    if args.json:
        for obj in found:
            emit_json(obj)
    elif not found:
        sys.stdout.write("(no checkpoints)\n")
    else:
        sys.stdout.write("\n\n".join(_text(obj) for obj in found) + "\n")
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    async def delete() -> str:
        store = await open_reader(args.db, ReadLimits.from_args(args))
        try:
            return (await store.delete_checkpoint(args.id)).id
        finally:
            await store.close()

    deleted = asyncio.run(_bounded(args, delete(), f"checkpoint delete {args.db}"))
    if args.json:
        emit_json({"id": deleted, "deleted": True})
    else:
        sys.stdout.write(f"deleted checkpoint {deleted}\n")
    return EXIT_OK


def run_clone(args: argparse.Namespace) -> int:
    from opendata_kv.store import clone

    limits = ReadLimits.from_args(args)
    bar = Progress(sys.stderr, "clone", quiet=args.json)

    def progress(records: int, phase: str) -> None:
        bar.step(records, "records copied" if phase == "copy" else "records, replaying the WAL")

    async def copy() -> dict[str, Any]:
        # a clear "no database" / "no such checkpoint" first
        source = await open_reader(args.src, limits, args.checkpoint)
        await source.close()
        result = await clone(
            args.src,
            args.dst,
            checkpoint=args.checkpoint,
            replace=args.replace,
            timeout=limits.timeout,  # each open, read and write round trip
            progress=progress,
        )
        return result.as_json()

    try:
        obj = asyncio.run(copy())
    finally:
        bar.done()
    return _emit(args, obj)


async def _bounded(args: argparse.Namespace, awaitable: Awaitable[T], doing: str) -> T:
    """The whole (small) command within --timeout: a refused or unanswered write or read
    ends it with an error instead of a wait."""
    return await ReadLimits.from_args(args).bound(awaitable, doing)
