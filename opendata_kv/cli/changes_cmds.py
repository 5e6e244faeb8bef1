"""`opendata-kv changes`: print a database's change feed (read-only), or follow it.

One line (or JSON object) per change, in sequence order. Each carries its cursor: pass the
last one to --since to continue exactly after it. --follow waits for new changes until
Ctrl-C, which stops cleanly and prints the cursor to resume from on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from opendata_kv.cli.common import EXIT_BAD_INPUT, EXIT_OK, add_json_flag, emit_json, jsonable
from opendata_kv.cli.db_args import (
    count_arg,
    database_arg,
    poll_arg,
    read_limit_args,
    schema_args,
)
from opendata_kv.cli.db_read import ReadLimits, open_reader
from opendata_kv.cli.layout_arg import layout_arg
from opendata_kv.cli.rows import Decoder
from opendata_kv.cli.text import printable, shorten
from opendata_kv.store.ops.feed_rows import IndexChange


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `changes`."""
    changes = subparsers.add_parser(
        "changes",
        help="print the change feed of a database (read-only)",
        description=(
            "Print every write still in the database's WAL, in sequence order, read-only. "
            "Each change has a cursor: --since CURSOR continues exactly after it. A cursor "
            "whose WAL files were already garbage-collected is an error that says how to "
            "resync. --follow keeps waiting for new changes until Ctrl-C."
        ),
    )
    changes.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    schema_args(changes)
    changes.add_argument("--since", metavar="CURSOR", help="start right after this change")
    changes.add_argument(
        "--follow", action="store_true", help="keep waiting for new changes (stop: Ctrl-C)"
    )
    changes.add_argument("--limit", type=count_arg, metavar="N", help="at most N changes")
    changes.add_argument(
        "--indexes",
        action="store_true",
        help="also print the writes of secondary indexes (left out by default), each naming "
        "its index",
    )
    changes.add_argument(
        "--poll",
        type=poll_arg,
        default=0.1,
        metavar="SECONDS",
        help="with --follow: how often to look for new WAL files (default 0.1)",
    )
    read_limit_args(changes)
    layout_arg(changes)
    add_json_flag(changes)
    changes.set_defaults(handler=run_changes)


def change_object(decoder: Decoder, change: Any) -> dict[str, Any]:
    """The JSON object of one change: cursor, seq, op, key_hex, record, key, value (or
    value_hex: bytes, or a value that did not decode, as dump shows them), error (and, for an
    index write, index and part)."""
    key: bytes = change.raw_key
    if isinstance(change, IndexChange):
        return _index_change(decoder, change)
    if decoder.is_opendata(key):
        return _opendata_change(decoder, change)
    _keyspace, owner, _prefix, _error = decoder.classify(key)
    record: str | None = None
    fields: dict[str, Any] | None = None
    if owner is not None:
        try:
            decoded = owner.decode(key)
        except Exception:  # a malformed key under a known prefix: shown raw
            owner = None
        else:
            record = owner.name
            fields = {n: jsonable(v) for n, v in decoded.asdict().items()}
    head = {
        "cursor": change.cursor,
        "seq": change.seq,
        "op": change.op,
        "key_hex": key.hex(),
        "record": record,
        "key": fields,
    }
    data = change.raw_value
    if change.op == "delete" or data is None:
        return {**head, "value": None, "error": None}
    return {**head, **value_members(data, *decoder.value(owner, key, data))}


def value_members(data: bytes, value: Any, error: str | None) -> dict[str, Any]:
    """value (decoded) or value_hex (bytes, or what did not decode), and error: as a dump row
    shows them, so an undecodable value never reads as a string."""
    if error is None and not isinstance(value, bytes):
        return {"value": jsonable(value), "error": None}
    return {"value_hex": data.hex(), "error": error}


def _index_change(decoder: Decoder, change: IndexChange) -> dict[str, Any]:
    """change_object for a write of a secondary index: its name, part, decoded entry fields
    and the record it points at (raw where its definition is not known)."""
    target = change.record_key
    record: dict[str, Any] | None = None
    if isinstance(target, bytes):
        _keyspace, owner, _prefix, _error = decoder.classify(target)
        try:
            decoded = None if owner is None else owner.decode(target)
        except Exception:  # a malformed key under a known prefix: shown raw
            decoded = None
        record = (
            {"key_hex": target.hex()}
            if decoded is None
            else {"record": decoded.record_type.name, "key": jsonable(decoded.asdict())}
        )
    elif target is not None:
        record = {"record": target.record_type.name, "key": jsonable(target.asdict())}
    return {
        "cursor": change.cursor,
        "seq": change.seq,
        "op": change.op,
        "key_hex": change.raw_key.hex(),
        "record": None,
        "index": change.index,
        "part": change.part,
        "key": None if change.fields is None else jsonable(change.fields),
        "target": record,
        "value": jsonable(change.value),
        "error": None,
    }


def _opendata_change(decoder: Decoder, change: Any) -> dict[str, Any]:
    """change_object for an OpenData key: the record and fields of its built-in layout."""
    key: bytes = change.raw_key
    obj, error = decoder.opendata_key(key)
    head = {
        "cursor": change.cursor,
        "seq": change.seq,
        "op": change.op,
        "key_hex": key.hex(),
        "record": obj["record"],
        "key": obj["fields"],
    }
    data = change.raw_value
    if change.op == "delete" or data is None:
        return {**head, "value": None, "error": None}
    if error is not None:  # no layout to read the value with: its bytes, and no value error
        return {**head, "value_hex": data.hex(), "error": None}
    return {**head, **value_members(data, *decoder.opendata_value(obj, data))}


def change_line(obj: dict[str, Any]) -> str:
    """The text form: seq, op, record and key fields (or key hex), value, cursor."""
    if obj.get("index") is not None or obj.get("part") is not None:
        key = _index_text(obj)
    elif obj["record"] is not None:
        fields = ", ".join(f"{k}={v!r}" for k, v in obj["key"].items())
        key = f"{obj['record']}({fields})"
    else:
        key = f"0x{obj['key_hex']}"
    if obj["op"] == "delete":
        value = ""
    elif "value_hex" in obj:  # bytes, unquoted as in dump (a decoded string is quoted)
        value = " " + shorten(obj["value_hex"] or "(empty)", 60)
        if obj["error"] is not None:
            value += "  ! " + shorten(obj["error"].removeprefix("value: "), 100)
    else:
        value = " " + shorten(repr(obj["value"]), 60)
    line = f"{obj['seq']:>6}  {obj['op']:<6}  {key}{value}  [{obj['cursor']}]"
    return printable(line)  # stored names and values cannot drive the terminal


def _index_text(obj: dict[str, Any]) -> str:
    """`index <name> <part>(fields) -> record(fields)` (key hex where not decoded)."""
    head = f"index {obj['index']}" if obj["index"] is not None else "index"
    if obj["part"] != "entry":
        return f"{head} {obj['part']}"
    if obj["key"] is None:
        return f"{head} 0x{obj['key_hex']}"
    fields = ", ".join(f"{k}={v!r}" for k, v in obj["key"].items())
    text = f"{head}({fields})"
    target = obj["target"]
    if target is not None:
        if "record" in target:
            inner = ", ".join(f"{k}={v!r}" for k, v in target["key"].items())
            text += f" -> {target['record']}({inner})"
        else:
            text += f" -> 0x{target['key_hex']}"
    return text


def run_changes(args: argparse.Namespace) -> int:
    """Print the changes; exit 1 (after them all) if a value did not decode."""
    decoder = Decoder.from_args(args)
    last: list[str] = []
    counts = [0, 0]  # changes printed, of which with an error
    try:
        asyncio.run(_changes(args, decoder, last, counts))
    except KeyboardInterrupt:
        sys.stdout.flush()
        resume = f"; resume with --since {last[0]}" if last else ""
        sys.stderr.write(f"opendata-kv: stopped{resume}\n")
    if counts[1]:
        sys.stdout.flush()
        sys.stderr.write(
            f"opendata-kv: error: {counts[1]} of {counts[0]} changes did not decode "
            "(shown raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


async def _changes(
    args: argparse.Namespace, decoder: Decoder, last: list[str], counts: list[int]
) -> None:
    limits = ReadLimits.from_args(args)
    store = await open_reader(args.db, limits, follow=args.follow)
    try:
        # the CLI decodes keys itself (--schema, built-in layouts): every row comes raw
        batches = store.change_batches(
            args.since,
            follow=args.follow,
            limit=args.limit,
            poll_interval=args.poll,
            on_unknown="raw",
            on_error="raw",
            indexes=args.indexes,
        )
        while True:
            # a finite read bounds each WAL file's read by --timeout; --follow waits for new
            # changes as long as it takes, until Ctrl-C (the point of following)
            step = batches.__anext__()
            try:
                if args.follow:
                    batch = await step
                else:
                    batch = await limits.bound(step, f"read the change feed of {store.where}")
            except StopAsyncIteration:
                break
            lost = getattr(batch, "lost_before", None)
            if lost is not None:  # from the start, but the GC took the WAL before it
                sys.stderr.write(
                    f"opendata-kv: note: the feed starts at sequence number {lost}: the WAL "
                    "files before it were collected, so earlier changes are gone (their effect "
                    "is in the data; keep the WAL longer with the garbage collector's "
                    "wal_options min_age)\n"
                )
                sys.stderr.flush()
            out = sys.stdout
            for change in batch:
                obj = change_object(decoder, change)
                counts[0] += 1
                counts[1] += obj["error"] is not None
                if args.json:
                    emit_json(obj)
                else:
                    out.write(change_line(obj) + "\n")
            out.flush()
            last[:] = [batch[-1].cursor]
        await batches.aclose()
    finally:
        await store.close()
