"""The change feed: every write the WAL still holds, typed, in sequence order, resumable.

Built on slatedb's SlateDbWalReader. Its iterator reads the WAL files one at a time (a HEAD,
then a GET, per file), so the feed opens one iterator per file for up to _AHEAD files at once
and takes each one's first file: a read-through costs ~2 round trips per _AHEAD files. A cursor
names
a position between two WAL rows (see rfcs/0008-change-feed.md for the format):

    wal      the WAL file to start reading at
    skip     how many rows of that file were already delivered
    min_seq  rows with a smaller sequence number were already delivered (a checkpoint's
             cursor skips what its state holds this way)

A cursor also names the store it came from (its identity, kept beside the database and new
for each store and clone: objstore/sidecar.py); another store refuses it, and so does every
store for a position past what it has written.

WAL files are immutable and their ids contiguous, so (file, row index) is a stable position:
resuming from a cursor yields the next change after it, with no gap and no repeat, whatever
happened to the writer in between (restart, kill -9, a new writer fencing the old one).
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from opendata_kv.errors import (
    ChangeCursorError,
    ChangeCursorExpiredError,
    ChangeDecodeError,
    InvalidArgumentError,
    OpendataKvError,
    check_choice,
    check_count,
)
from opendata_kv.keys import Schema
from opendata_kv.native import calls
from opendata_kv.native.errors import call, translating
from opendata_kv.native.slatedb import (
    AdminBuilder,
    Error,
    SlateDbWalReader,
    SlateDbWalReaderOptions,
)
from opendata_kv.objstore.deadline import in_thread
from opendata_kv.store.indexes.layout import ENTRIES, ROOT
from opendata_kv.store.ops.feed_rows import (
    OPS,
    AnyChange,
    Change,
    Decoder,
    IndexChange,
    IndexShape,
    RawChange,
    UnknownKey,
    UnknownPolicy,
)
from opendata_kv.values import Values

__all__ = ["Change", "IndexChange", "RawChange"]  # re-exported: where the feed's types live
_VERSION = "2"
_TRUNCATED = "WAL was truncated"
#: the store part of a cursor made where the store's identity is not known
NO_STORE = "0"
#: how often the feed looks for a new start when the GC deletes the files it was about to read
_START_ATTEMPTS = 5
#: WAL files the feed reads at once, each through an iterator of its own (slatedb's iterator
#: reads one file after another): ~2 round trips per this many files; the feed holds at most
#: this many files' rows
_AHEAD = 16
#: slatedb's max_fetch_tasks for the feed's iterators: each reads one file (the feed reads
#: ahead itself), so opening more ahead only repeats the next iterator's requests
FETCH_TASKS = 1

ErrorPolicy = Literal["raise", "skip", "raw"]


class Position(NamedTuple):
    """A decoded cursor: start at WAL file `wal`, skip its first `skip` rows and every row
    with a sequence number below `min_seq`; `store` is the identity of the store it came from
    (NO_STORE when that was not known)."""

    wal: int
    skip: int
    min_seq: int
    store: str = NO_STORE

    def cursor(self) -> str:
        return encode_cursor(self.wal, self.skip, self.min_seq, self.store)


def _store_part(store: str | None) -> str:
    return store or NO_STORE


def encode_cursor(wal: int, skip: int, min_seq: int, store: str | None = None) -> str:
    """The opaque cursor string: "2-<store>-<wal>-<skip>-<min_seq>-<crc32>" (numbers in hex,
    store the store's identity)."""
    body = f"{_VERSION}-{_store_part(store)}-{wal:x}-{skip:x}-{min_seq:x}"
    return f"{body}-{zlib.crc32(body.encode()):08x}"


def decode_cursor(cursor: str) -> Position:
    """Parse a cursor made by encode_cursor; ChangeCursorError for anything else."""
    if not isinstance(cursor, str):
        raise ChangeCursorError(
            f"a change cursor is a string, got {type(cursor).__name__} {cursor!r}", cursor
        )
    parts = cursor.split("-")
    if parts[0] == "1" and len(parts) == 5:
        raise ChangeCursorError(
            f"change cursor {cursor[:80]!r} was made by an older opendata_kv and names no "
            "store, so it cannot be checked against this one: resync from a checkpoint "
            "(store.checkpoint(), then its cursor)",
            cursor,
        )
    if len(parts) != 6 or parts[0] != _VERSION:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: expected the string a Change's "
            "cursor holds (version 2, six dash-separated parts)",
            cursor,
        )
    body = cursor.rsplit("-", 1)[0]
    try:
        wal, skip, min_seq = (int(p, 16) for p in parts[2:5])
        check = int(parts[5], 16)
    except ValueError:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: its parts are not hex numbers", cursor
        ) from None
    if (
        any(not p.isalnum() or not p.isascii() or p != p.lower() for p in parts[1:])
        or len(parts[5]) != 8
        or len(parts[1]) > 64
        or any(len(p) > 16 for p in parts[2:5])
    ):
        raise ChangeCursorError(f"malformed change cursor {cursor[:80]!r}", cursor)
    if zlib.crc32(body.encode()) != check or wal < 1:
        raise ChangeCursorError(
            f"malformed change cursor {cursor[:80]!r}: its checksum does not match "
            "(was it edited or cut short?)",
            cursor,
        )
    return Position(wal, skip, min_seq, parts[1])


def check_store(position: Position, identity: str | None, cursor: str, where: str) -> None:
    """ChangeCursorError when the cursor came from another store than this one."""
    if identity is None or position.store == identity:
        return
    came = (
        "a store whose identity was not known"
        if position.store == NO_STORE
        else f"store {position.store}"
    )
    raise ChangeCursorError(
        f"{where}: change cursor {cursor[:80]!r} comes from {came}, not from this store "
        f"({identity}); a cursor resumes only the feed of the store that made it (a clone "
        "has an identity of its own: follow it from the checkpoint or clone's own cursor)",
        cursor,
    )


def past_end(cursor: str, where: str, what: str) -> ChangeCursorError:
    return ChangeCursorError(
        f"{where}: change cursor {cursor[:80]!r} points past what this store has written "
        f"({what}); it was not made by this store's feed",
        cursor,
    )


def _raw(row: Any, cursor: str, exc: Exception) -> RawChange | IndexChange:
    """The change of a row that failed to decode, delivered with its raw bytes (on_error
    "raw"); an index row stays an IndexChange, undecoded."""
    key, data = row.key, row.value
    if key.startswith(ROOT):
        return IndexChange(
            cursor,
            row.seq,
            OPS[row.kind],
            None,
            "entry",
            None,
            None,
            data,
            key,
            data,
            row.expire_ts,
            exc,
        )
    return RawChange(cursor, row.seq, OPS[row.kind], key, data, key, data, row.expire_ts, exc)


async def _learn_shapes(
    rows: Any,
    first: int,
    decoder: Decoder,
    shapes: Callable[[], Awaitable[dict[str, IndexShape]]],
    looked_up: set[bytes],
) -> None:
    """Read the index definitions again when this WAL file has entries of an index the
    decoder does not know (one registered after the feed started); once per name."""
    missing = set()
    known = decoder.shapes
    for index in range(first, len(rows)):
        key = rows[index].key
        if key.startswith(ENTRIES):
            end = key.find(b"\x00", len(ENTRIES))
            name = key[len(ENTRIES) : end]
            if end > 0 and name not in looked_up and name.decode(errors="replace") not in known:
                missing.add(name)
    if missing:
        looked_up.update(missing)
        for name, shape in (await shapes()).items():
            known.setdefault(name, shape)


def _undecodable(
    exc: OpendataKvError,
    row: Any,
    bad: str,
    last: str | None,
    where: str,
    policy: str = "on_error",
) -> ChangeDecodeError:
    return ChangeDecodeError(
        f"{where}: the change at seq {row.seq} (key {row.key.hex()}) does not decode: {exc}. "
        f"Resume after the last change delivered with cursor {last!r}; skip this one with "
        f"cursor {bad!r}, or read with {policy}='skip' or 'raw'",
        cursor=last,
        bad_cursor=bad,
        seq=row.seq,
        raw_key=row.key,
        record=getattr(exc, "record", None),
    )


def _message(exc: BaseException) -> str:
    return getattr(exc, "message", None) or str(exc)


def _truncated_at(exc: BaseException) -> bool:
    return isinstance(exc, Error) and _TRUNCATED in _message(exc)


def expired(cursor: str, wal: int, where: str) -> ChangeCursorExpiredError:
    return ChangeCursorExpiredError(
        f"{where}: change cursor {cursor!r} points into WAL file {wal}, which the garbage "
        "collector already deleted, so the changes after it are gone. Resync: take a "
        "checkpoint (store.checkpoint()), read its state with Store.open_reader(url, schema, "
        "checkpoint=<id>), then follow the feed from the checkpoint's cursor. Keep WAL files "
        "longer with the writer setting garbage_collector_options.wal_options.min_age.",
        cursor,
        wal,
    )


def overtaken(last: str | None, wal: int, where: str) -> ChangeCursorExpiredError:
    """The garbage collector deleted the next WAL file while the feed was reading."""
    return ChangeCursorExpiredError(
        f"{where}: the garbage collector deleted WAL file {wal} before the feed read it (the "
        f"feed fell behind the WAL retention); the last change delivered has cursor {last!r}. "
        "Resync from a checkpoint (store.checkpoint(), then its cursor), and keep WAL files "
        "longer with garbage_collector_options.wal_options.min_age.",
        last,
        wal,
    )


async def _exists(reader: Any, wal: int, where: str) -> bool:
    """Whether WAL file `wal` exists: slatedb's iterator refuses to start at a deleted one."""
    try:
        with translating(where, unless=_truncated_at):
            await reader.iterator(wal)
    except Error:  # only the "truncated at" refusal gets here
        return False
    return True


async def first_wal(reader: Any, floor: int, tail: int, ids: set[int] | None, where: str) -> int:
    """Where "from the start" begins: the first file of the oldest run of WAL files without a
    gap that reaches the live end. Files after the manifest's replay point `floor` are never
    collected; below it the GC deletes files by age, oldest first, but may keep an older one
    (slatedb keeps the first) past a gap. `ids`: a listing of the WAL files when there is one;
    else files are probed (galloping down, then halving: the run below the floor is searched
    as one contiguous block)."""
    top = min(floor + 1, tail + 1)
    if ids is not None:
        first = top
        while first - 1 >= 1 and first - 1 in ids:
            first -= 1
        return first
    good, step = top, 1
    while good > 1:
        probe = max(1, good - step)
        if not await _exists(reader, probe, where):
            low, high = probe + 1, good  # probe is gone, good exists
            while low < high:
                middle = (low + high) // 2
                if await _exists(reader, middle, where):
                    high = middle
                else:
                    low = middle + 1
            return low
        good, step = probe, step * 2
    return good


class _Window(NamedTuple):
    """A read of WAL files `first`..`last` under way (see _Feed._read)."""

    reads: asyncio.Future[list[Any]]
    first: int
    last: int


async def _discard(window: _Window | None) -> None:
    """Stop a read of WAL files the feed will not use."""
    if window is not None:
        window.reads.cancel()
        await asyncio.gather(window.reads, return_exceptions=True)


def wal_reader(db_path: str, object_store: Any) -> Any:
    """slatedb's WAL reader; its iterators open FETCH_TASKS files ahead."""
    options = SlateDbWalReaderOptions(max_fetch_tasks=FETCH_TASKS)
    return SlateDbWalReader.with_options(db_path, object_store, options)


def admin(db_path: str, object_store: Any, where: str) -> Any:
    """slatedb's Admin handle (manifest reads; checkpoints)."""
    with translating(f"admin of {where}"):
        return AdminBuilder(db_path, object_store).build()


C = TypeVar("C")


class ChangeBatch(list[C], Generic[C]):
    """One WAL file's changes (a list). `lost_before`, on the first batch of a feed read from
    the start: the sequence number of its first change when the garbage collector already
    deleted the WAL files before it, so every change before that number is gone from the
    feed (their effects are in the SSTs); None when nothing was lost, and on later batches.

    How far the feed is behind after this batch, as far as it knows (the files it listed and
    read ahead, the manifest): `lag`, the newest sequence number minus that of the batch's
    last change; `lag_seconds`, the newest change's write time minus the last change's (None
    when the WAL rows carry no time); `lag_files`, WAL files after this batch's up to the
    newest. All 0 when the feed has delivered everything it has seen. Store metrics record
    them as the `opendata_kv.feed.lag*` gauges (docs/operations.md)."""

    lost_before: int | None = None
    lag: int = 0
    lag_seconds: float | None = None
    lag_files: int = 0


async def flatten(batches: AsyncGenerator[list[Any], None]) -> AsyncGenerator[Any, None]:
    """The feed one Change at a time, from change_batches' lists; see Store.changes."""
    try:
        async for batch in batches:
            for change in batch:
                yield change
    finally:
        await batches.aclose()


@dataclass(frozen=True)
class FeedSource:
    """What the feed reads: the WAL reader and Admin of one store, its schema and codecs,
    `where` (for messages), its `identity` (cursors name it; another store's is refused),
    `list_wal` (a blocking function returning the WAL file ids present; None: no listing)
    and `shapes` (reads the index definitions entries decode with)."""

    reader: Any
    admin: Any
    schema: Schema
    values: Values
    where: str
    identity: str | None = None
    list_wal: Callable[[], Any] | None = None
    shapes: Callable[[], Awaitable[dict[str, IndexShape]]] | None = None


@dataclass(frozen=True)
class FeedOptions:
    """How the feed reads (see Store.changes): `follow`, `limit`, `poll_interval`,
    `on_error`, `on_unknown`, `indexes`. Checked when the feed starts (`check`), as the
    generator's first step, so a bad one fails where it always did."""

    follow: bool = False
    limit: int | None = None
    poll_interval: float = 0.1
    on_error: ErrorPolicy = "raise"
    on_unknown: UnknownPolicy = "raise"
    indexes: bool = False

    def check(self) -> None:
        check_count(self.limit, "limit", 0, none_ok=True)
        check_choice(self.on_error, ("raise", "skip", "raw"), "on_error")
        check_choice(self.on_unknown, ("raise", "skip", "raw"), "on_unknown")
        if not isinstance(self.indexes, bool):
            raise InvalidArgumentError(
                f"indexes must be True or False, got {self.indexes!r}",
                field="indexes",
                value=self.indexes,
            )
        if self.poll_interval <= 0:
            raise InvalidArgumentError(
                f"poll_interval must be > 0 seconds, got {self.poll_interval!r}",
                field="poll_interval",
                value=self.poll_interval,
            )


async def change_batches(
    source: FeedSource, since: str | None, options: FeedOptions
) -> AsyncGenerator[ChangeBatch[AnyChange], None]:
    """The feed a WAL file at a time: each list holds the changes of one file (never empty).

    `on_error`: a change whose key or value does not decode raises ChangeDecodeError ("raise",
    after delivering the good changes before it), is left out ("skip"), or is delivered with
    raw key and value bytes and the error ("raw"). `on_unknown`: the same for a key no
    RecordType owns ("raise" raises ChangeDecodeError whatever on_error says).
    `indexes`: deliver the rows of the secondary-index key space as IndexChanges (else they
    are left out); `source.shapes` is called at the start and again when an entry of an
    index not known yet comes.
    """
    options.check()
    position = None if since is None else decode_cursor(since)
    if options.limit == 0:
        return
    feed = _Feed(source, since, position, options)
    await feed.start()
    remaining = options.limit
    while True:
        rows = await feed.next_file()
        if rows is None:
            return
        out, failure = await feed.changes(rows, remaining)
        if out:
            yield out
            if remaining is not None:
                remaining -= len(out)
                if remaining <= 0:
                    return
        if failure is not None:
            raise failure


class _Feed:
    """One read of the feed, step by step: where it starts (`start`), the rows of each next
    WAL file (`next_file`, waiting for one when following) and their changes (`changes`)."""

    def __init__(
        self,
        source: FeedSource,
        since: str | None,
        position: Position | None,
        options: FeedOptions,
    ) -> None:
        self.source = source
        self.since = since
        self.position = position
        self.options = options
        self.where = f"change feed of {source.where}"
        if position is not None:
            assert since is not None
            check_store(position, source.identity, since, self.where)
        self.store = _store_part(source.identity)
        self.looked_up: set[bytes] = set()  # index names the definitions were read again for
        self.last: str | None = since  # the cursor after the last change delivered
        self.decoder: Decoder | None = None
        self.ready: deque[Any] = deque()  # outcomes of the files read ahead, in order
        self.start_id = self.skip = self.min_seq = self.tail = self.top_seq = 0
        self.consumed = 0  # the last WAL file read
        self.lost = False
        self.checked_seq = True
        # the newest sequence number and write time (ms) seen: the manifest's, the rows read
        self.newest_seq = 0
        self.newest_ts: int | None = None

    async def start(self) -> None:
        """Find the first WAL file to read and open an iterator there; a start the GC
        overtook before anything came is redone (up to _START_ATTEMPTS times)."""
        source, options, where = self.source, self.options, self.where
        reader, position = source.reader, self.position
        known = {} if source.shapes is None or not options.indexes else await source.shapes()
        self.decoder = Decoder(
            source.schema,
            source.values,
            on_unknown=options.on_unknown,
            indexes=options.indexes,
            shapes=known,
        )
        attempts = 0
        while True:
            # WAL files up to the manifest's replay_after_wal_id are in SSTs already and are
            # the ones the garbage collector deletes; asking for the tail after an older one
            # fails. The manifest read, the WAL listing and (guessed from the listing) the
            # first files' reads overlap
            manifest, ids, guess = await self._look()
            floor = 0 if manifest is None else manifest.replay_after_wal_id
            self.top_seq = 0 if manifest is None else manifest.last_l0_seq
            self.newest_seq = max(self.newest_seq, self.top_seq)
            self._set_tail(floor, ids)
            if ids is None:
                self.tail = await call(reader.last_wal_file_id(floor), where, others=True)
            if position is None:
                self.start_id = await first_wal(reader, floor, self.tail, ids, where)
                self.skip = self.min_seq = 0
            else:
                self.start_id, self.skip, self.min_seq, _ = position
                if self.start_id > self.tail + 1:
                    await _discard(guess)
                    assert self.since is not None
                    raise past_end(
                        self.since, where, f"WAL file {self.start_id}, the newest is {self.tail}"
                    )
            failed = await self._first_files(guess)
            if failed is not None:  # WAL file `start` is gone
                if position is not None:
                    assert self.since is not None
                    raise expired(self.since, self.start_id, where) from failed
                attempts += 1
                if attempts >= _START_ATTEMPTS:
                    raise overtaken(None, self.start_id, where) from failed
                continue
            break
        self.consumed = self.start_id - 1
        # from the start, and WAL file 1 (the first a store writes) is gone: changes were lost
        self.lost = position is None and self.start_id > 1
        self.checked_seq = position is None or self.min_seq == 0

    async def _look(self) -> tuple[Any, set[int] | None, _Window | None]:
        """The manifest, the WAL listing (None where the store cannot be listed) and, started
        as soon as the listing came and while the manifest is still being read, the read of
        the files the feed most likely starts at (see _guess)."""
        source = self.source
        manifest = asyncio.ensure_future(
            call(source.admin.read_manifest(None), self.where, others=True)
        )
        guess: _Window | None = None
        try:
            listed = source.list_wal
            ids: set[int] | None = None if listed is None else await in_thread(listed)
            if ids is not None:
                guess = self._guess(ids)
            return await manifest, ids, guess
        except BaseException:
            manifest.cancel()
            await _discard(guess)
            raise

    def _guess(self, ids: set[int]) -> _Window | None:
        """Start reading the files the feed starts at, judged from the listing alone: the
        cursor's file, or the bottom of the run of listed files without a gap that ends at
        the newest (where first_wal lands unless a gap lies above the replay point)."""
        if self.position is not None:
            first = self.position.wal
        elif ids:
            first = max(ids)
            while first - 1 in ids:
                first -= 1
        else:
            return None
        last = first - 1
        while last + 1 in ids and last + 1 < first + _AHEAD:
            last += 1
        return None if last < first else _Window(self._read(first, last), first, last)

    def _set_tail(self, floor: int, ids: set[int] | None) -> None:
        """`tail`, the newest WAL file after the replay point `floor` (or `floor`), from the
        listing (the files after `floor` are never collected, so the newest listed is the
        tail); without one, start() asks slatedb's probe (HEADs, galloping: 3-4 round trips)."""
        if ids is not None:
            self.tail = max((wal for wal in ids if wal > floor), default=floor)

    async def _first_files(self, guess: _Window | None) -> Error | None:
        """Read the first files (the guess when it starts at `start_id`), or check that the
        start exists when it is past the tail; the error when WAL file `start_id` is gone."""
        start, last = self.start_id, min(self.tail, self.start_id + _AHEAD - 1)
        if guess is not None and (guess.first != start or guess.last > self.tail):
            await _discard(guess)
            guess = None
        if start > self.tail:
            await _discard(guess)
            try:
                with translating(self.where, unless=_truncated_at):
                    await self.source.reader.iterator(start)
            except Error as exc:
                return exc
            return None
        outcomes = await (guess.reads if guess is not None else self._read(start, last))
        first = outcomes[0]
        if isinstance(first, Error):
            return first
        self.ready = deque(outcomes)
        self._note_newest(outcomes)
        return None

    def _note_newest(self, outcomes: list[Any]) -> None:
        """Keep the newest sequence number and write time of the files just read (rows of a
        file come in sequence order): the feed's lag is measured against them."""
        for outcome in outcomes:
            rows = getattr(outcome, "rows", None)
            if rows:
                last = rows[-1]
                self.newest_seq = max(self.newest_seq, last.seq)
                if last.create_ts is not None:
                    self.newest_ts = max(self.newest_ts or last.create_ts, last.create_ts)

    def _read(self, first: int, last: int) -> asyncio.Future[list[Any]]:
        """Read WAL files `first`..`last` at once, each through an iterator of its own: the
        outcome of each (its rows, or the error reading it) in order."""
        reader, where = self.source.reader, self.where

        async def one(wal: int) -> Any:
            try:
                with translating(where, unless=_truncated_at):
                    iterator = await reader.iterator(wal)
                    return await calls.wal_next(iterator)
            except Exception as exc:  # delivered in its turn, after the files before it
                return exc

        return asyncio.gather(*(one(wal) for wal in range(first, last + 1)))

    async def next_file(self) -> Any:
        """The next WAL file's rows (slatedb's batch), waiting for it when following; None
        at the end of the feed."""
        where, since = self.where, self.since
        if not self.ready and self.consumed >= self.tail:
            if not self.checked_seq:
                self.checked_seq = True
                if self.min_seq > self.top_seq + 1:
                    assert since is not None
                    raise past_end(
                        since,
                        where,
                        f"sequence number {self.min_seq}, the newest is {self.top_seq}",
                    )
            if not self.options.follow:
                return None
            await self._wait_for_file()
            waited = True
        else:
            waited = False
        if not self.ready:
            # the files up to the tail, _AHEAD at once (a live iterator at the tail only
            # notices new files on its own ~1 s poll; one starting at a file returns it at once)
            last = min(self.tail, self.consumed + _AHEAD)
            outcomes = await self._read(self.consumed + 1, last)
            self.ready = deque(outcomes)
            self._note_newest(outcomes)
        rows = self.ready.popleft()
        if isinstance(rows, Error):  # the next WAL file is gone
            self.ready.clear()
            if waited:  # the GC deleted it first
                raise overtaken(self.last, self.consumed + 1, where) from rows
            raise self._gone() from rows
        if isinstance(rows, Exception):
            self.ready.clear()
            raise rows
        if rows is None:
            return None
        if rows.last_consumed_wal_file_id != self.consumed + 1:
            # the file we were to read next is gone: the GC deleted it between our calls
            self.ready.clear()
            raise self._gone()
        self.consumed = rows.last_consumed_wal_file_id
        return rows

    async def _wait_for_file(self) -> None:
        """Poll the writer's WAL file id until a new file comes: one listing a poll where the
        store can be listed (the newest file listed), else slatedb's probe (galloping HEADs)."""
        reader, where, listed = self.source.reader, self.where, self.source.list_wal
        while True:
            if listed is None:
                self.tail = await call(reader.last_wal_file_id(self.consumed), where, others=True)
            else:
                ids = await in_thread(listed)
                self.tail = max(ids, default=self.consumed) if ids else self.consumed
            if self.tail > self.consumed:
                break
            await asyncio.sleep(self.options.poll_interval)

    def _gone(self) -> ChangeCursorExpiredError:
        """The error for a next WAL file that is gone: the cursor expired when it was the
        cursor's own file, else the feed was overtaken."""
        if self.since is not None and self.consumed == self.start_id - 1:
            return expired(self.since, self.start_id, self.where)
        return overtaken(self.last, self.consumed + 1, self.where)

    async def changes(
        self, rows: Any, remaining: int | None
    ) -> tuple[ChangeBatch[AnyChange], ChangeDecodeError | None]:
        """The changes of one WAL file's `rows` (at most `remaining`), and the error that
        ends the feed after them (a change that does not decode, under "raise")."""
        where, decoder, on_error = self.where, self.decoder, self.options.on_error
        assert decoder is not None
        file_id = self.consumed
        batch = rows.rows
        if batch:
            self.top_seq = max(self.top_seq, batch[-1].seq, batch[0].seq)
        first_index = self.skip if file_id == self.start_id else 0
        if file_id == self.start_id and self.position is not None and self.skip > len(batch):
            assert self.since is not None
            raise past_end(
                self.since, where, f"row {self.skip} of WAL file {file_id}, which has {len(batch)}"
            )
        if self.options.indexes and self.source.shapes is not None:
            await _learn_shapes(batch, first_index, decoder, self.source.shapes, self.looked_up)
        out: ChangeBatch[AnyChange] = ChangeBatch()
        crc32 = zlib.crc32
        change = decoder.change
        min_seq = self.min_seq
        head = f"{_VERSION}-{self.store}-{file_id:x}-"
        failure: ChangeDecodeError | None = None
        last_row = None  # the row of the last change delivered
        for index in range(first_index, len(batch)):
            row = batch[index]
            seq = row.seq
            if seq < min_seq:
                continue
            body = f"{head}{index + 1:x}-{seq:x}"
            cursor = f"{body}-{crc32(body.encode()):08x}"
            try:
                item = change(row, cursor)
            except UnknownKey as unknown:
                prior = out[-1].cursor if out else self.last
                failure = _undecodable(unknown.error, row, cursor, prior, where, "on_unknown")
                break
            except OpendataKvError as exc:
                if on_error == "skip":
                    continue
                if on_error == "raw":
                    item = _raw(row, cursor, exc)
                else:
                    prior = out[-1].cursor if out else self.last
                    failure = _undecodable(exc, row, cursor, prior, where)
                    break
            if item is None:  # an index row, or an unknown key being skipped
                continue
            out.append(item)
            last_row = row
            if remaining is not None and len(out) >= remaining:
                break
        if out:
            self.last = out[-1].cursor
            assert last_row is not None
            self._lag(out, last_row, file_id)
            if self.lost:
                out.lost_before, self.lost = out[0].seq, False
        return out, failure

    def _lag(self, out: ChangeBatch[Any], last: Any, file_id: int) -> None:
        """Set `out`'s lag (see ChangeBatch) after its last change's row `last`."""
        out.lag = max(0, self.newest_seq - last.seq)
        out.lag_files = max(0, self.tail - file_id)
        if self.newest_ts is not None and last.create_ts is not None:
            out.lag_seconds = max(0, self.newest_ts - last.create_ts) / 1000
