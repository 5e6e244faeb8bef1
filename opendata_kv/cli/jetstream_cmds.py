"""`opendata-kv jetstream URL --db DB`: consume a Jetstream websocket into a database's AT
Protocol records (atproto/jetstream.py), the cursor kept in the same atomic batches, until
interrupted, --max-events or --until. Run again, it resumes from the stored cursor."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from opendata_kv.atproto import JETSTREAM, IngestReport, IngestState, Jetstream, consume
from opendata_kv.cli.common import EXIT_OK, CliError, add_json_flag, emit_json
from opendata_kv.cli.db_args import count_arg, database_arg, timeout_arg
from opendata_kv.collections import (
    BACKLINKS,
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RecordCollection,
    default_schema,
)
from opendata_kv.errors import JetstreamEventError, OpendataKvError
from opendata_kv.store import Store

#: --backlinks: which backlink indexes the database keeps
BACKLINK_SETS = {"covering": COVERING_BACKLINKS, "plain": BACKLINKS, "none": None}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `jetstream`."""
    parser = subparsers.add_parser(
        "jetstream",
        help="consume a Jetstream websocket into a database's AT Protocol records",
        description=(
            "Read Jetstream's JSON events from URL (ws:// or wss://, with any query Jetstream "
            "takes, such as wantedCollections=) and apply them to the AT Protocol records of "
            "--db in atomic batches, each holding its records, their backlink indexes and the "
            "cursor (time_us). Run again, it resumes from the stored cursor (cursor= in the "
            "URL): nothing is lost or applied twice. Malformed events and deletes of unknown "
            "records are counted (and printed on stderr), never fatal. A dropped connection is "
            "opened again from the cursor (--retries times in a row without an event). Ends at "
            "Ctrl-C, --max-events or --until, printing the consumer's counts. Needs the "
            "jetstream extra (pip install 'opendata-kv[jetstream]')."
        ),
    )
    parser.add_argument("url", metavar="URL", help="the Jetstream subscribe URL")
    parser.add_argument(
        "--db", required=True, type=database_arg, metavar="DB", help="database directory or URL"
    )
    parser.add_argument(
        "--name", default="default", help="the consumer's name: its cursor (default: default)"
    )
    parser.add_argument(
        "--backlinks",
        choices=list(BACKLINK_SETS),
        default="covering",
        help="backlink indexes kept (default covering: pages read no record)",
    )
    parser.add_argument("--max-events", type=count_arg, metavar="N", help="stop after N events")
    parser.add_argument(
        "--until", type=count_arg, metavar="TIME_US", help="stop after an event at or past it"
    )
    parser.add_argument(
        "--batch-size", type=_positive, default=500, metavar="N", help="events per atomic batch"
    )
    parser.add_argument(
        "--queue-size", type=_positive, default=2000, metavar="N", help="events read ahead"
    )
    parser.add_argument(
        "--retries", type=count_arg, default=5, metavar="N", help="failed connections in a row"
    )
    parser.add_argument(
        "--open-timeout", type=timeout_arg, default=10.0, metavar="SECONDS", help="to connect"
    )
    parser.add_argument(
        "--idle-timeout",
        type=timeout_arg,
        default=60.0,
        metavar="SECONDS",
        help="longest wait for a message before the connection is opened again",
    )
    parser.add_argument("--durable", action="store_true", help="flush every batch before the next")
    parser.add_argument(
        "--progress", action="store_true", help="print the state (JSON) after every batch"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print malformed events")
    add_json_flag(parser)
    parser.set_defaults(handler=run_jetstream)


def _positive(text: str) -> int:
    number = count_arg(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return number


def run_jetstream(args: argparse.Namespace) -> int:
    report = asyncio.run(_consume(args))
    shown = summary(report)
    if args.json:
        emit_json(shown)
    else:
        state = report.state
        print(
            f"{report.taken} events taken ({report.skipped} replayed ones skipped) in "
            f"{report.batches} batches, stopped at {report.stopped}; cursor {state.cursor}; "
            f"{state.creates} creates, {state.updates} updates, {state.deletes} deletes "
            f"({state.unknown_deletes} of unknown records), {state.identities} identity, "
            f"{state.accounts} account, {state.malformed} malformed events in all"
        )
    return EXIT_OK


def summary(report: IngestReport) -> dict[str, Any]:
    """The report as the JSON output gives it."""
    return {
        "taken": report.taken,
        "skipped": report.skipped,
        "batches": report.batches,
        "stopped": report.stopped,
        "state": report.state.to_plain(),
    }


async def _consume(args: argparse.Namespace) -> IngestReport:
    backlinks = BACKLINK_SETS[args.backlinks]
    try:
        store = await Store.open(
            args.db,
            default_schema(*JETSTREAM.record_types),
            indexes=() if backlinks is None else backlinks.indexes,
        )
    except OpendataKvError as exc:
        raise CliError(f"cannot open {args.db}: {exc}") from None
    async with store:
        records = RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=backlinks)
        ingest = Jetstream(
            records,
            name=args.name,
            batch_size=args.batch_size,
            queue_size=args.queue_size,
            durable=args.durable,
            on_error=None if args.quiet else _print_error,
            on_written=_print_state if args.progress else None,
        )
        return await consume(
            ingest,
            args.url,
            max_events=args.max_events,
            until=args.until,
            retries=args.retries,
            open_timeout=args.open_timeout,
            idle_timeout=args.idle_timeout,
        )


def _print_error(error: JetstreamEventError) -> None:
    sys.stderr.write(f"opendata-kv jetstream: skipped: {error}\n")


def _print_state(state: IngestState) -> None:
    emit_json({"batch": state.to_plain()})
    sys.stdout.flush()
