"""`opendata-kv dump` and `opendata-kv stats`: read a database, read-only.

Both open the database through slatedb's DbReader, which never fences the writer: a service
can keep writing while you look. They see what the writer has flushed. The database must
exist: a missing one is an error, and nothing is ever created.

Keys are read raw and decoded here, record by record, so that a key the schema does not know
(or a value that does not decode) is shown raw with the reason instead of ending the dump.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TextIO

from opendata_kv.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    CliError,
    SchemaSpec,
    add_json_flag,
    emit_json,
    jsonable,
    load_schema,
    parse_hex,
)
from opendata_kv.errors import (
    KeyDecodeError,
    StoreDataError,
    UnknownRecordError,
    ValueDecodeError,
    show_bytes,
)
from opendata_kv.keys import RecordType, Schema, parse_prefix, prefix_successor
from opendata_kv.values import Values, unpack

if TYPE_CHECKING:
    from opendata_kv.store import Store

Bounds = tuple[bytes | None, bytes | None]  # [start, end): None = unbounded

# --- arguments ---------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dump` and `stats`."""
    dump = subparsers.add_parser(
        "dump",
        help="print the records of a database (read-only)",
        description=(
            "Print records of a SlateDB database, read-only (never fences the writer). "
            "DB is a directory, file:///abs/path or s3://bucket/prefix (AWS_* variables). "
            "Filters combine: --type/--version select by the key prefix, --prefix/--start/"
            "--end bound the raw key bytes. Keys the schema cannot decode are shown raw with "
            "the reason; if any record had an error the exit status is 1."
        ),
    )
    dump.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    _schema_args(dump)
    dump.add_argument(
        "--type", type=nibble_arg, metavar="N", help="only record type N (1..15, e.g. 3 or 0x3)"
    )
    dump.add_argument(
        "--version", type=version_arg, metavar="V", help="only key version V (1..255)"
    )
    dump.add_argument("--prefix", metavar="HEX", help="only keys starting with these bytes")
    dump.add_argument("--start", metavar="HEX", help="first key (inclusive)")
    dump.add_argument("--end", metavar="HEX", help="end key (exclusive)")
    dump.add_argument("--reverse", action="store_true", help="descending key order")
    dump.add_argument("--limit", type=count_arg, metavar="N", help="at most N records")
    dump.add_argument(
        "--values",
        action="store_true",
        help="decode values (msgpack, or the codecs of a --schema Values) instead of hex",
    )
    add_json_flag(dump)
    dump.set_defaults(handler=run_dump)

    stats = subparsers.add_parser(
        "stats",
        help="count records and bytes per version and record type (read-only)",
        description=(
            "Count records, key bytes and value bytes per (version, record type), with the "
            "first and last key of each; read-only, never fences the writer. Shows progress on "
            "stderr during long scans when stderr is a terminal."
        ),
    )
    stats.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    _schema_args(stats)
    add_json_flag(stats)
    stats.set_defaults(handler=run_stats)


def _schema_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--schema",
        metavar="MODULE:ATTR",
        help="name records and decode fields with this Schema (or Values, or a callable)",
    )
    parser.add_argument(
        "--keyspace",
        metavar="HEX",
        help="only keys in this keyspace; the version byte follows it",
    )


def database_arg(text: str) -> str:
    """argparse type for DB: memory:// databases live inside one process, so they are usage."""
    if text.lower().startswith("memory:"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a memory:// database exists only inside the process that made it; "
            "give a directory, file:///abs/path or s3://bucket/prefix"
        )
    if not text:
        raise argparse.ArgumentTypeError("empty database location")
    return text


def _int_arg(text: str, low: int, high: int | None, what: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        top = "" if high is None else f"..{high}"
        raise argparse.ArgumentTypeError(f"{what} must be in {low}{top}, got {value}")
    return value


def nibble_arg(text: str) -> int:
    return _int_arg(text, 1, 15, "record type (0 is reserved)")


def version_arg(text: str) -> int:
    return _int_arg(text, 1, 255, "version (0 is reserved)")


def count_arg(text: str) -> int:
    return _int_arg(text, 0, None, "limit")


# --- decoding one stored record ----------------------------------------------------------------


@dataclass
class Decoder:
    """Turns raw (key, value) pairs into dump rows with the schema, if any."""

    schema: Schema | None
    values: Values | None
    keyspace: bytes | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Decoder:
        spec: SchemaSpec | None = load_schema(args.schema) if args.schema else None
        keyspace = parse_hex(args.keyspace, "keyspace") if args.keyspace else None
        if spec is None:
            return cls(None, None, keyspace)
        return cls(spec.schema, spec.values or Values(spec.schema), keyspace)

    def classify(self, key: bytes) -> tuple[bytes, RecordType | None, Any, str | None]:
        """(keyspace, owner, RecordPrefix or None, prefix error or None) of one key."""
        owner = self.schema.try_record_type_of(key) if self.schema is not None else None
        if self.keyspace is not None:
            keyspace = self.keyspace
        elif owner is not None:
            keyspace = owner.keyspace
        else:
            keyspace = b""
        try:
            return keyspace, owner, parse_prefix(key, keyspace), None
        except KeyDecodeError as exc:
            return keyspace, owner, None, str(exc)

    def row(self, key: bytes, data: bytes, *, with_values: bool) -> Row:
        """One record decoded as far as it goes; the reasons it went no further."""
        keyspace, owner, prefix, key_error = self.classify(key)
        short: str | None = None  # a shorter reason for the table, where it has one
        record: str | None = None
        fields: dict[str, Any] | None = None
        if self.schema is not None and key_error is None:
            try:
                # record_type_of raises UnknownRecordError naming the prefix nobody owns
                decoded = (owner or self.schema.record_type_of(key)).decode(key)
            except UnknownRecordError as exc:
                key_error = str(exc)
                short = "prefix not in the schema"
            except KeyDecodeError as exc:
                key_error = str(exc)
            else:
                record = decoded.record_type.name
                fields = {n: jsonable(v) for n, v in decoded.asdict().items()}
        obj: dict[str, Any] = {
            "key_hex": key.hex(),
            "version": prefix.version if prefix else None,
            "record_type": prefix.record_type if prefix else None,
            "reserved": prefix.reserved if prefix else None,
            "record": record,
            "fields": fields,
        }
        if keyspace:
            obj["keyspace_hex"] = keyspace.hex()
        value_error: str | None = None
        if with_values:
            value, value_error = self.value(owner if record else None, key, data)
            if value_error is None and not isinstance(value, bytes):
                obj["value"] = jsonable(value)
            else:
                obj["value_hex"] = data.hex()
        else:
            obj["value_hex"] = data.hex()
        obj["value_size"] = len(data)
        errors = [e for e in (key_error, value_error) if e is not None]
        obj["error"] = "; ".join(errors) if errors else None
        note = "" if prefix is not None else prefix_note(key, keyspace)
        return Row(obj, key_error, value_error, short, note)

    def value(self, owner: RecordType | None, key: bytes, data: bytes) -> tuple[Any, str | None]:
        """(decoded value, None) or (None, why it does not decode)."""
        try:
            if owner is not None and self.values is not None:
                return self.values.decode(owner, key, data, upgrade=False), None
            return unpack(data), None
        except ValueDecodeError as exc:
            return None, f"value: {exc}"


def prefix_note(key: bytes, keyspace: bytes) -> str:
    """A few words on why `key` has no valid record prefix (for the table)."""
    k = len(keyspace)
    if len(key) < k + 2:
        return "too short"
    if not key.startswith(keyspace):
        return "not in keyspace"
    return "version 0" if key[k] == 0 else "record type 0"


@dataclass(frozen=True)
class Row:
    """One dump row: its JSON object and, apart, why the key or the value did not decode."""

    obj: dict[str, Any]
    key_error: str | None
    value_error: str | None
    short_key_error: str | None = None
    prefix_note: str = ""

    def reason(self, message: str) -> str:
        """`message` without the bytes the row already shows (key and value hex)."""
        key = show_bytes(bytes.fromhex(self.obj["key_hex"]))
        for noise in (f"key {key}: ", f"key {key} ", f"{key}: "):
            message = message.replace(noise, "")
        if self.obj["record"]:  # the RECORD column names it already
            message = message.removeprefix(f"value: {self.obj['record']} v{self.obj['version']} ")
        if "value_hex" in self.obj:
            data = show_bytes(bytes.fromhex(self.obj["value_hex"]))
            for noise in (f": {data}", f" in {data}"):
                message = message.replace(noise, "")
        return message


# --- opening the database and walking key ranges -----------------------------------------------


_NO_DATABASE = "failed to find latest transactional object"


async def open_reader(db: str) -> Store:
    """A read-only Store on `db` (an empty Schema: keys come back raw); CliError if missing.

    slatedb's reader creates nothing: on a path without a database it fails with a Data
    error ("failed to find latest transactional object (e.g. manifest)"). A local path is
    checked first so the message can say what is wrong.
    """
    from opendata_kv.store import Store
    from opendata_kv.store.location import parse_location

    location = parse_location(db)
    if location.scheme == "file":
        path = location.path
        if not os.path.exists(path):
            raise CliError(f"no database at {db}: {path} does not exist")
        if not os.path.isdir(path):
            raise CliError(f"no database at {db}: {path} is not a directory")
    try:
        store: Store = await Store.open_reader(db, Schema())
    except StoreDataError as exc:
        if _NO_DATABASE in str(exc):
            raise CliError(f"no SlateDB database at {db} (no manifest found)") from None
        raise
    return store


def intersect(a: Bounds, b: Bounds) -> Bounds:
    lo = a[0] if b[0] is None else b[0] if a[0] is None else max(a[0], b[0])
    hi = a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])
    return lo, hi


def prefix_bounds(prefix: bytes) -> Bounds:
    return (prefix or None), prefix_successor(prefix)


def is_empty(bounds: Bounds) -> bool:
    lo, hi = bounds
    return lo is not None and hi is not None and lo >= hi


@dataclass
class Walk:
    """What to read: overall raw-key bounds and the prefix filters inside them."""

    bounds: Bounds
    keyspace: bytes
    version: int | None
    record_type: int | None
    reverse: bool
    limit: int | None

    def type_bounds(self, version: int) -> Bounds:
        """Keys of record type `record_type` (any reserved bits) under `version`."""
        assert self.record_type is not None
        first = self.keyspace + bytes((version, self.record_type << 4))
        last = self.keyspace + bytes((version, self.record_type << 4 | 0xF))
        return first, prefix_successor(last)

    async def chunks(self, store: Store) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        """Raw (key, value) pairs in order, a batch at a time, honouring every filter."""
        remaining = [self.limit]
        if self.version is not None:
            span = (
                self.type_bounds(self.version)
                if self.record_type is not None
                else prefix_bounds(self.keyspace + bytes((self.version,)))
            )
            async for chunk in self._scan(store, intersect(self.bounds, span), remaining):
                yield chunk
        elif self.record_type is not None:
            async for chunk in self._by_type(store, remaining):
                yield chunk
        else:
            async for chunk in self._scan(store, self.bounds, remaining):
                yield chunk

    async def _by_type(
        self, store: Store, remaining: list[int | None]
    ) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        """One range per version present: find each by seeking to the next (or previous)
        version byte instead of reading the keys in between."""
        lowest = intersect(self.bounds, (self.keyspace + b"\x01", None))
        at = len(self.keyspace)
        seek = lowest
        while remaining[0] != 0 and not is_empty(seek):
            found = await store.scan_all(
                start=seek[0], end=seek[1], reverse=self.reverse, limit=1, on_unknown="raw"
            ).to_list()
            if not found:
                return
            version = found[0].raw_key[at]
            span = intersect(self.bounds, self.type_bounds(version))
            async for chunk in self._scan(store, span, remaining):
                yield chunk
            if self.reverse:
                if version <= 1:
                    return
                seek = intersect(seek, (None, self.keyspace + bytes((version,))))
            else:
                if version == 0xFF:
                    return
                seek = intersect(seek, (self.keyspace + bytes((version + 1,)), None))

    async def _scan(
        self, store: Store, bounds: Bounds, remaining: list[int | None]
    ) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        if is_empty(bounds) or remaining[0] == 0:
            return
        scan = store.scan_all(
            start=bounds[0],
            end=bounds[1],
            reverse=self.reverse,
            limit=remaining[0],
            on_unknown="raw",
        )
        while chunk := await scan.next_chunk():
            if remaining[0] is not None:
                remaining[0] -= len(chunk)
            yield [(r.raw_key, r.value) for r in chunk]


def walk_from_args(args: argparse.Namespace, keyspace: bytes | None) -> Walk:
    bounds: Bounds = (None, None)
    if keyspace:
        bounds = prefix_bounds(keyspace)
    if args.prefix is not None:
        bounds = intersect(bounds, prefix_bounds(parse_hex(args.prefix, "--prefix")))
    if args.start is not None:
        bounds = intersect(bounds, (parse_hex(args.start, "--start"), None))
    if args.end is not None:
        bounds = intersect(bounds, (None, parse_hex(args.end, "--end")))
    return Walk(bounds, keyspace or b"", args.version, args.type, args.reverse, args.limit)


# --- dump --------------------------------------------------------------------------------------


def run_dump(args: argparse.Namespace) -> int:
    """Print every selected record: a table, or one JSON object per line with --json:
    key_hex, version, record_type, reserved, record, fields, value | value_hex, value_size,
    error (and keyspace_hex under a keyspace)."""
    decoder = Decoder.from_args(args)
    walk = walk_from_args(args, decoder.keyspace)
    return asyncio.run(_dump(args, decoder, walk))


async def _dump(args: argparse.Namespace, decoder: Decoder, walk: Walk) -> int:
    table = None if args.json else DumpTable(sys.stdout, with_fields=decoder.schema is not None)
    printer: Callable[[list[Row]], None] = table.rows if table is not None else _json_rows
    total = failed = 0
    store = await open_reader(args.db)
    try:
        async for chunk in walk.chunks(store):
            rows = [decoder.row(k, v, with_values=args.values) for k, v in chunk]
            total += len(rows)
            failed += sum(1 for r in rows if r.obj["error"])
            printer(rows)
    finally:
        await store.close()
    if table is not None:
        table.footer(total, failed)
    if failed:
        sys.stdout.flush()
        sys.stderr.write(
            f"opendata-kv: error: {failed} of {total} records did not decode "
            "(shown raw with the reason)\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


def _json_rows(rows: list[Row]) -> None:
    for row in rows:
        emit_json(row.obj)


def shorten(text: str, width: int) -> str:
    """Hex cut to about `width` characters with a middle ellipsis that keeps both ends (and
    whole bytes on each side)."""
    if len(text) <= width:
        return text
    tail = max(2, (width // 3) & ~1)
    head = max(2, (width - tail - 1) & ~1)
    return text[:head] + "…" + text[-tail:]


def cut(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def key_cell(row: Row) -> str:
    """Key hex with the prefix set apart: `0110 6469643a…0000`."""
    obj = row.obj
    key = str(obj["key_hex"])
    head = len(obj.get("keyspace_hex", "")) + 4 if obj["version"] is not None else 0
    if not head:
        return key
    rest = key[head:]
    return f"{key[:head]} {rest}" if rest else key[:head]


def fit_key(cell: str, width: int) -> str:
    """A key cell cut to `width`, the prefix kept whole and the rest shortened."""
    if len(cell) <= width:
        return cell
    head, _, rest = cell.rpartition(" ")
    if not head:
        return shorten(cell, width)
    return f"{head} {shorten(rest, max(8, width - len(head) - 1))}"


def record_cell(row: Row) -> str:
    obj = row.obj
    if obj["version"] is None:
        return f"! {row.prefix_note}"
    where = f"v{obj['version']} t{obj['record_type']}"
    if obj["reserved"]:
        where += f" r{obj['reserved']}"
    return f"{obj['record']} {where}" if obj["record"] else where


def fields_cell(row: Row) -> str:
    if row.key_error is not None:
        return f"! {row.short_key_error or row.reason(row.key_error)}"
    fields = row.obj["fields"]
    if fields is None:
        return ""
    return " ".join(f"{name}={field_text(value)}" for name, value in fields.items())


def field_text(value: Any) -> str:
    if isinstance(value, str) and value and value.isprintable() and not any(
        c in value for c in ' "='
    ):
        return value
    return json.dumps(value, ensure_ascii=False)


def value_cell(row: Row) -> str:
    obj = row.obj
    if "value" in obj:
        return json.dumps(obj["value"], ensure_ascii=False, separators=(", ", ": "))
    text = obj["value_hex"] or "(empty)"
    if row.value_error is not None:
        reason = row.reason(row.value_error).removeprefix("value: ").replace(": )", ")")
        reason = reason.replace("not a msgpack value", "not msgpack")
        return f"{text}  ! {reason}"
    return text


VALUE_WIDTH = 80


@dataclass
class DumpTable:
    """The plain-text dump: aligned columns sized on the first batch, streamed after it.

    Columns: KEY (prefix set apart, long keys shortened in the middle), RECORD (name, version,
    type), FIELDS (only with a schema), VALUE. Long cells are cut with an ellipsis; --json
    shows everything.
    """

    out: TextIO
    with_fields: bool
    widths: list[int] | None = None

    def rows(self, rows: list[Row]) -> None:
        cells = [self._cells(r) for r in rows]
        headers = self._cells(None)
        if self.widths is None:
            caps = (34, 30, 60, VALUE_WIDTH) if self.with_fields else (34, 30, VALUE_WIDTH)
            self.widths = [
                min(cap, max([len(h)] + [len(c[i]) for c in cells]))
                for i, (h, cap) in enumerate(zip(headers, caps, strict=True))
            ]
            self._line(headers)
        for c in cells:
            self._line(c)

    def _cells(self, row: Row | None) -> tuple[str, ...]:
        if row is None:
            return ("KEY", "RECORD", "FIELDS", "VALUE") if self.with_fields else (
                "KEY", "RECORD", "VALUE"
            )
        if self.with_fields:
            return key_cell(row), record_cell(row), fields_cell(row), value_cell(row)
        return key_cell(row), record_cell(row), value_cell(row)

    def _line(self, cells: tuple[str, ...]) -> None:
        assert self.widths is not None
        w = self.widths
        parts = [f"{fit_key(cells[0], w[0]):<{w[0]}}"]
        middle = zip(cells[1:-1], w[1:-1], strict=True)
        parts += [f"{cut(c, width):<{width}}" for c, width in middle]
        parts.append(cut(cells[-1], VALUE_WIDTH))  # the last column is not padded
        self.out.write("  ".join(parts).rstrip() + "\n")

    def footer(self, total: int, failed: int) -> None:
        if self.widths is None:
            self.out.write("(no records)\n")
            return
        plural = "record" if total == 1 else "records"
        extra = f", {failed} with errors" if failed else ""
        self.out.write(f"({total} {plural}{extra})\n")


# --- stats -------------------------------------------------------------------------------------


@dataclass
class Group:
    """Counters of one (keyspace, version, record type)."""

    keyspace: bytes
    version: int | None
    record_type: int | None
    records: set[str] = field(default_factory=set)
    count: int = 0
    key_bytes: int = 0
    value_bytes: int = 0
    first_key: bytes = b""
    last_key: bytes = b""

    def add(self, key: bytes, value: bytes) -> None:
        if not self.count:
            self.first_key = key
        self.last_key = key
        self.count += 1
        self.key_bytes += len(key)
        self.value_bytes += len(value)

    def as_json(self) -> dict[str, Any]:
        return {
            "keyspace_hex": self.keyspace.hex(),
            "version": self.version,
            "record_type": self.record_type,
            "record": ", ".join(sorted(self.records)) or None,
            "count": self.count,
            "key_bytes": self.key_bytes,
            "value_bytes": self.value_bytes,
            "first_key_hex": self.first_key.hex(),
            "last_key_hex": self.last_key.hex(),
        }


class Progress:
    """`scanned N records` on a terminal's stderr, only once a scan has run for `delay`
    seconds, redrawn at most every `every` seconds, erased at the end."""

    def __init__(
        self,
        stream: IO[str],
        *,
        delay: float = 1.0,
        every: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.every = every
        self.clock = clock
        self.enabled = stream.isatty()
        self.next_draw = clock() + delay
        self.drawn = False

    def update(self, records: int, size: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now < self.next_draw:
            return
        self.next_draw = now + self.every
        self.stream.write(f"\r\x1b[Kscanned {records:,} records, {human_bytes(size)}")
        self.stream.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def run_stats(args: argparse.Namespace) -> int:
    """Per (version, record type): count, key bytes, value bytes, first and last key."""
    decoder = Decoder.from_args(args)
    walk = Walk(
        prefix_bounds(decoder.keyspace) if decoder.keyspace else (None, None),
        decoder.keyspace or b"",
        None,
        None,
        False,
        None,
    )
    groups = asyncio.run(_stats(args.db, decoder, walk))
    ordered = sorted(
        groups.values(),
        key=lambda g: (g.keyspace, g.version is None, g.version or 0, g.record_type or 0),
    )
    totals = {
        "count": sum(g.count for g in ordered),
        "key_bytes": sum(g.key_bytes for g in ordered),
        "value_bytes": sum(g.value_bytes for g in ordered),
    }
    if args.json:
        emit_json({"database": args.db, **totals, "groups": [g.as_json() for g in ordered]})
    else:
        sys.stdout.write(stats_table(ordered, totals, show_keyspace=decoder.keyspace is None))
    return EXIT_OK


async def _stats(db: str, decoder: Decoder, walk: Walk) -> dict[Any, Group]:
    groups: dict[Any, Group] = {}
    progress = Progress(sys.stderr)
    seen = size = 0
    store = await open_reader(db)
    try:
        async for chunk in walk.chunks(store):
            for key, value in chunk:
                keyspace, owner, prefix, _error = decoder.classify(key)
                if prefix is None:
                    group_key: Any = (keyspace, None, None)
                else:
                    group_key = (keyspace, prefix.version, prefix.record_type)
                group = groups.get(group_key)
                if group is None:
                    group = groups[group_key] = Group(*group_key)
                group.add(key, value)
                if owner is not None:
                    group.records.add(owner.name)
                size += len(key) + len(value)
            seen += len(chunk)
            progress.update(seen, size)
    finally:
        progress.done()
        await store.close()
    return groups


def stats_table(groups: list[Group], totals: dict[str, int], *, show_keyspace: bool) -> str:
    """The plain-text stats: one line per group, numbers right-aligned, then the totals."""
    if not groups:
        return "(no records)\n"
    keyspaces = show_keyspace and any(g.keyspace for g in groups)
    headers = ["KEYSPACE"] if keyspaces else []
    headers += ["VERSION", "TYPE", "RECORD", "COUNT", "KEY BYTES", "VALUE BYTES"]
    headers += ["FIRST KEY", "LAST KEY"]
    table = [headers]
    for g in groups:
        line = [g.keyspace.hex() or "-"] if keyspaces else []
        line += [
            "?" if g.version is None else str(g.version),
            "?" if g.record_type is None else str(g.record_type),
            ", ".join(sorted(g.records)) or "-",
            f"{g.count:,}",
            f"{g.key_bytes:,}",
            f"{g.value_bytes:,}",
            shorten(g.first_key.hex(), 24),
            shorten(g.last_key.hex(), 24),
        ]
        table.append(line)
    total = ["total"] + [""] * (len(headers) - 6)
    total += [f"{totals['count']:,}", f"{totals['key_bytes']:,}", f"{totals['value_bytes']:,}"]
    table.append([*total, "", ""])
    numeric = {"COUNT", "KEY BYTES", "VALUE BYTES", "VERSION", "TYPE"}
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    out = []
    for n, row in enumerate(table):
        cells = [
            f"{c:>{w}}" if h in numeric and not (n == len(table) - 1 and i == 0) else f"{c:<{w}}"
            for i, (c, w, h) in enumerate(zip(row, widths, headers, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"
