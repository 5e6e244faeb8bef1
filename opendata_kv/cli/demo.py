"""`opendata-kv demo [DIR]`: write a sample of every collection to a local database, then dump it.

The demo writes AT Protocol records (profiles, posts, likes, a follow), two change-log
transactions and a sentinel container, and a few web pages (one reached through an id_map
redirect, one expired) into DIR, flushes and closes it, then reopens it read-only and prints
every record: an aligned table, or with --json the JSON lines `dump DIR --values --json`
prints for the collections' schema.

DIR gets a marker file; rerunning the demo into a directory holding that marker wipes it
first. A non-empty directory without the marker is refused (exit 1): the demo never deletes
data it did not write.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opendata_kv.cli.common import EXIT_OK, CliError, add_json_flag, emit_json, jsonable
from opendata_kv.cli.rows import Decoder
from opendata_kv.cli.text import json_text
from opendata_kv.collections import (
    BSKY_KEY_TYPES,
    ChangeLog,
    PageStore,
    RecordCollection,
    default_schema,
    default_values,
)
from opendata_kv.ids.muid import Muid, MuidGenerator
from opendata_kv.ids.tid import TidGenerator
from opendata_kv.keys import Key, Schema, record_type_text
from opendata_kv.store import Record, Store

DEFAULT_DIR = "./opendata-kv-demo"
MARKER = ".opendata-kv-demo"
MARKER_TEXT = (
    "This directory holds a sample database written by `opendata-kv demo`.\n"
    "Rerunning the demo into it deletes everything here first.\n"
)

#: The demo's fixed clock (records and changes are the same on every run).
BASE = datetime.datetime(2024, 11, 5, 12, 0, tzinfo=datetime.timezone.utc)
_BASE_NS = int(BASE.timestamp()) * 1_000_000_000

ALICE = "did:plc:4q2vy7fjsmu4xkzrsjbtwpoe"
BOB = "did:web:bob.example.com"
VALUE_WIDTH = 64


def register(subparsers: Any) -> None:
    """Add `demo [DIR] [--json]`."""
    parser = subparsers.add_parser(
        "demo",
        help="write sample records of every collection to a local database and dump them",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        default=DEFAULT_DIR,
        help=f"local directory of the demo database (default {DEFAULT_DIR})",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    try:
        prepare(directory)
    except OSError as exc:
        raise CliError(f"cannot prepare {directory}: {exc.strerror or exc}") from None
    schema = default_schema()
    rows = asyncio.run(_write_and_read(directory, schema))
    if args.json:
        # the rows `dump DIR --values --json` prints with this schema: one shape for both
        decoder = Decoder(schema, default_values(schema), None)
        for key, value in asyncio.run(_read_raw(directory)):
            emit_json(decoder.row(key, value, with_values=True).obj)
    else:
        _print_table(rows, directory)
    return EXIT_OK


# --- the directory -------------------------------------------------------------------------------


def prepare(directory: Path) -> None:
    """Make `directory` an empty demo directory: create it, or wipe a previous demo's.

    CliError when it exists and is not a directory, or holds anything but a demo database.
    """
    if directory.exists() or directory.is_symlink():
        if not directory.is_dir():
            raise CliError(f"{directory} exists and is not a directory")
        entries = list(directory.iterdir())
        if entries and not (directory / MARKER).is_file():
            raise CliError(
                f"{directory} exists and is not a demo database (no {MARKER} marker); "
                "refusing to touch it: pick another DIR"
            )
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text(MARKER_TEXT, encoding="utf-8")


# --- the sample ----------------------------------------------------------------------------------


def _fixed_clock(step_us: int) -> Any:
    """A clock starting at BASE that moves `step_us` on every reading."""
    state = {"ns": _BASE_NS}

    def time_ns() -> int:
        state["ns"] += step_us * 1000
        return state["ns"]

    return time_ns


async def write_sample(store: Store) -> None:
    """The sample data of every collection."""
    records = RecordCollection(
        store,
        key_types=BSKY_KEY_TYPES,
        tids=TidGenerator(clock_id=7, time_ns=_fixed_clock(90_000_000)),
    )
    post = "app.bsky.feed.post"
    await records.create(
        ALICE, "app.bsky.actor.profile", {"$type": "app.bsky.actor.profile", "displayName": "Alice"}
    )
    await records.create(
        BOB, "app.bsky.actor.profile", {"$type": "app.bsky.actor.profile", "displayName": "Bob"}
    )
    created: list[str] = []
    for author, text in (
        (ALICE, "hello from the opendata_kv demo"),
        (BOB, "SlateDB keeps it all in object storage"),
        (ALICE, "TID record keys sort by time"),
    ):
        rec = await records.create(
            author,
            post,
            {"$type": post, "text": text, "createdAt": BASE.isoformat().replace("+00:00", "Z")},
        )
        created.append(rec.uri)
    for author, uri in ((BOB, created[0]), (ALICE, created[1])):
        await records.create(
            author,
            "app.bsky.feed.like",
            {"$type": "app.bsky.feed.like", "subject": {"uri": uri}},
        )
    await records.create(BOB, "app.bsky.graph.follow", {"subject": ALICE})

    log = ChangeLog(
        store, generator=MuidGenerator(medallion=0x1D3A5C7E9B2, time_ns=_fixed_clock(1_000_000))
    )
    await log.put(Muid(-1, -1, 4), {"container": "root directory", "behavior": "directory"})
    async with log.transaction() as tx:
        tx.add({"op": "set", "container": "root", "key": "greeting", "value": "hello"})
        tx.add({"op": "set", "container": "root", "key": "count", "value": 1})
    async with log.transaction() as tx:
        tx.add({"op": "set", "container": "root", "key": "count", "value": 2})

    pages = PageStore(store, default_ttl=datetime.timedelta(days=7))
    now = datetime.datetime.now(datetime.timezone.utc)
    await pages.save(
        "https://example.com/blog/slatedb?utm_source=demo&ref=feed",
        "https://example.com/blog/slatedb-on-object-storage",
        "SlateDB is an embedded LSM tree on object storage...",
        metadata={"title": "SlateDB on object storage", "status": 200},
        fetched_at=now,
    )
    await pages.save(
        "https://example.org/",
        "https://example.org/",
        "Example Domain",
        metadata={"title": "Example Domain", "status": 200},
        fetched_at=now,
    )
    await pages.save(
        "https://news.example.net/2024/11/05/story",
        "https://news.example.net/2024/11/05/story",
        "An old story whose cache entry has expired",
        ttl=datetime.timedelta(hours=1),
        metadata={"title": "Old story", "status": 200},
        fetched_at=now - datetime.timedelta(days=2),
    )
    await store.flush()


async def _write_and_read(directory: Path, schema: Schema) -> list[Record]:
    async with Store.open(directory, schema) as store:
        await write_sample(store)
    async with Store.open_reader(directory, schema) as reader:
        return await reader.scan_all().to_list()


async def _read_raw(directory: Path) -> list[tuple[bytes, bytes]]:
    """Every stored (key, value) pair, undecoded."""
    async with Store.open_reader(directory, Schema()) as reader:
        return [(r.raw_key, r.value) for r in await reader.scan_all(on_unknown="raw").to_list()]


# --- output --------------------------------------------------------------------------------------


def _key_of(record: Record) -> Key:
    return record.key


def _key_text(key: Key) -> str:
    parts = []
    for name, value in key.asdict().items():
        if name == "url_key":
            parts.append(f"0x{value:016x}")
        elif name == "medallion":
            parts.append(f"0x{value:X}")
        else:
            parts.append(str(value))
    return " ".join(parts)


def _short(value: Any, width: int = VALUE_WIDTH) -> str:
    text = "-" if value is None else json_text(jsonable(value), compact=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(rows: list[Record]) -> Iterator[tuple[str, str, str]]:
    yield ("RECORD TYPE", "KEY", "VALUE")
    for record in rows:
        key = _key_of(record)
        record_type = key.record_type
        yield (
            f"{record_type.name} ({record_type_text(record_type.record_type)})",
            _key_text(key),
            _short(record.value),
        )


def _print_table(rows: list[Record], directory: Path) -> None:
    lines = list(_table(rows))
    widths = [max(len(line[i]) for line in lines) for i in range(2)]
    out = sys.stdout
    for kind, key, value in lines:
        out.write(f"{kind:<{widths[0]}}  {key:<{widths[1]}}  {value}\n")
    counts: dict[str, int] = {}
    for record in rows:
        name = _key_of(record).record_type.name
        counts[name] = counts.get(name, 0) + 1
    summary = ", ".join(f"{name} {n}" for name, n in counts.items())
    out.write(f"\n{len(rows)} records in {directory} ({summary})\n")
