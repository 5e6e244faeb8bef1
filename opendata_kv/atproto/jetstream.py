"""Jetstream ingest: apply Jetstream's JSON events to a RecordCollection in atomic batches that
also hold the consumer's cursor, so that a restart resumes where the last batch ended.

    records = RecordCollection(store, key_types=BSKY_KEY_TYPES)
    ingest = Jetstream(records)                         # the store's schema holds JETSTREAM's type
    report = await ingest.run(events)                   # any async iterator of str/bytes messages
    report = await consume(records, "wss://jetstream2.us-east.bsky.network/subscribe")

Each batch (up to `batch_size` messages, as many as are waiting) is one store write holding the
records it creates, replaces and deletes, their index entries (backlinks, counts), the latest
identity and account of each DID it names, and the cursor: the `time_us` of its last message
and how many messages of that time it took (IngestState). Killed at any moment, the database
holds whole batches, each with its cursor. A run reads the stored cursor first and skips the
messages it already took (Jetstream replays from `cursor=` inclusive), so nothing is lost or
applied twice; `subscribe_url` puts the cursor into the URL.

A message that is no valid event, or whose record the collection refuses (a bad DID, NSID or
rkey, a `$type` of another collection), counts as `malformed` (`last_error` says why) and
takes its place in the cursor; a delete of a record the store does not hold counts as
`unknown_deletes`; neither stops the run. At most `queue_size` messages wait between the
source and the writer (which takes up to a batch of them at once): when the writer falls
behind, the reader stops reading (backpressure, and the websocket's own flow control behind
it) instead of buffering without bound. time_us is taken to increase (Jetstream's does); an
older one counts at the cursor.

Per event, a commit is read into msgspec Structs with its checks done by the decoder
(events.plain_commit), routed by its collection's plan (_Route: the rkey check, the key
bytes) and queued with the batch's other puts in one Batch.put_encoded call; anything else
goes the checked way (parse_event, Batch.put), with the same outcome (test_jetstream_routes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from opendata_kv.atproto.events import (
    Account,
    Commit,
    Identity,
    Other,
    parse_event,
    plain_commit,
)
from opendata_kv.atproto.layout import JETSTREAM, JetstreamLayout
from opendata_kv.atproto.websocket import messages
from opendata_kv.collections import RecordCollection
from opendata_kv.collections._common import writer_of
from opendata_kv.collections.records import check_did, check_nsid
from opendata_kv.errors import (
    InvalidInputError,
    JetstreamConnectionError,
    JetstreamEventError,
    StoreDataError,
    check_count,
)
from opendata_kv.ids import rkey as rkey_ids
from opendata_kv.ids import tid as tid_ids
from opendata_kv.ids.rkey import KeyType
from opendata_kv.store import Batch, Store

#: why a run ended: its source ended, it took max_events, or it reached `until`
Stopped = Literal["end", "max_events", "until"]
#: a Jetstream message as a websocket gives it
Message = str | bytes

#: how many distinct DIDs (and collections) a consumer remembers as checked
REMEMBERED = 65536


@dataclass(frozen=True)
class IngestState:
    """What a consumer stored with its last batch: the cursor and the counts of every message
    it took. `cursor` is the time_us of the last message taken (None before the first),
    `at_cursor` how many messages of that time it took. `events` counts every message taken;
    `creates`, `updates`, `deletes` the valid commits of each operation (`unknown_updates` and
    `unknown_deletes` of them named a record the store did not hold); `identities`,
    `accounts` and `others` (kinds this version does not know) the rest; `malformed` the
    messages that held no valid event, `last_error` why the last one did not."""

    cursor: int | None = None
    at_cursor: int = 0
    events: int = 0
    creates: int = 0
    updates: int = 0
    deletes: int = 0
    identities: int = 0
    accounts: int = 0
    others: int = 0
    malformed: int = 0
    unknown_updates: int = 0
    unknown_deletes: int = 0
    last_error: str | None = None

    def to_plain(self) -> dict[str, Any]:
        """The stored form (a msgpack map)."""
        return asdict(self)

    @classmethod
    def from_plain(cls, plain: Any, where: str) -> IngestState:
        """The state stored as `plain`; StoreDataError naming `where` when it is none."""
        names = {f.name for f in fields(cls)}
        if not isinstance(plain, dict) or not set(plain) <= names:
            raise StoreDataError(f"{where}: not a Jetstream consumer state: {plain!r}")
        return cls(**plain)


@dataclass(frozen=True)
class IngestReport:
    """One run: the state stored after it, the messages it took (`taken`) and skipped as
    taken before (`skipped`, replayed after a resume), its batches and why it stopped."""

    state: IngestState
    taken: int
    skipped: int
    batches: int
    stopped: Stopped


class _End:
    """The source ended (with `error` when it raised)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class _Position:
    """Where the messages of one run stand against the stored cursor: the first messages a
    resumed source replays are skipped up to it (time_us below the cursor, then `at_cursor`
    messages at it). A message without a readable time_us stands at the time of the one
    before it."""

    def __init__(self, state: IngestState) -> None:
        self.cursor = state.cursor
        self.at = state.at_cursor
        self.skipping = state.cursor is not None
        self.seen = 0
        self.previous = state.cursor or 0

    def time(self, time_us: int | None) -> int:
        """The time a message stands at (its own, never before the cursor's)."""
        at = self.previous if time_us is None else time_us
        if self.cursor is not None and at < self.cursor and not self.skipping:
            at = self.cursor
        self.previous = at
        return at

    def skip(self, at: int) -> bool:
        """True for a message taken before (replayed after a resume)."""
        if not self.skipping:
            return False
        assert self.cursor is not None
        if at < self.cursor:
            return True
        if at == self.cursor and self.seen < self.at:
            self.seen += 1
            return True
        self.skipping = False
        return False

    def took(self, at: int) -> tuple[int, int]:
        """Take a message at `at`: the new (cursor, at_cursor)."""
        if self.cursor is not None and at <= self.cursor:
            self.at += 1
        else:
            self.cursor, self.at = at, 1
        return self.cursor, self.at


class Jetstream:
    """A Jetstream consumer writing into `records` (see the module docstring).

    name: the consumer's name, so that several consumers (say, of different collections) keep
        their own cursors in one database.
    layout: where its state lives (JETSTREAM: record type 0xF); the store's schema must hold
        `layout.record_types`.
    batch_size: the most messages one atomic write takes (fewer when fewer are waiting).
    queue_size: the most messages read ahead of the writer (backpressure beyond it).
    durable: flush each batch before taking the next (slower; without it a crash loses the
        last unflushed batches whole, with their cursor, and a restart takes them again).
    on_error: called with each malformed message's JetstreamEventError (besides counting it).
    on_written: called with the state stored by each batch, once it is written.
    """

    def __init__(
        self,
        records: RecordCollection[Store],
        *,
        name: str = "default",
        layout: JetstreamLayout = JETSTREAM,
        batch_size: int = 500,
        queue_size: int = 2000,
        durable: bool = False,
        on_error: Callable[[JetstreamEventError], None] | None = None,
        on_written: Callable[[IngestState], None] | None = None,
    ) -> None:
        self.store = writer_of(records.store, "Jetstream")
        layout.check(self.store)
        check_count(batch_size, "batch_size", 1)
        check_count(queue_size, "queue_size", 1)
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"name must be a non-empty str, got {name!r}", value=name)
        self.records = records
        self.name = name
        self.layout = layout
        self.batch_size = batch_size
        self.queue_size = queue_size
        self.durable = durable
        self.on_error = on_error
        self.on_written = on_written
        self._state: IngestState | None = None  # stored by the last acknowledged batch
        #: the state the last batch handed to the store will store (its counts go on from it)
        self._planned: IngestState | None = None
        #: the write of the last batch, running while the next batch is parsed (_send)
        self._writing: asyncio.Future[None] | None = None
        #: each DID's key head (the record type's prefix and the DID), the DID checked
        self._heads: dict[str, bytes] = {}
        self._routes: dict[str, _Route] = {}  # each collection's route, its NSID checked

    def __repr__(self) -> str:
        return f"<Jetstream {self.name!r} into {self.records!r}>"

    # --- state ----------------------------------------------------------------------------------

    async def state(self) -> IngestState:
        """The state stored with the last batch (IngestState() before the first)."""
        plain = await self.store.get(self.layout.state, ("cursor", self.name))
        where = f"{self.layout.state.name} cursor {self.name!r}"
        self._state = IngestState() if plain is None else IngestState.from_plain(plain, where)
        self._planned = self._state
        return self._state

    async def identity(self, did: str) -> dict[str, Any] | None:
        """The latest identity event taken for `did` (handle, seq, time, time_us), or None."""
        found = await self.store.get(self.layout.state, ("identity", check_did(did)))
        return found if isinstance(found, dict) else None

    async def account(self, did: str) -> dict[str, Any] | None:
        """The latest account event taken for `did` (active, status, seq, time, time_us)."""
        found = await self.store.get(self.layout.state, ("account", check_did(did)))
        return found if isinstance(found, dict) else None

    @staticmethod
    def subscribe_url(url: str, state: IngestState) -> str:
        """`url` with `cursor=` set to the state's cursor (as Jetstream takes it: replay from
        that time_us on), unchanged before the first batch."""
        if state.cursor is None:
            return url
        parts = urlsplit(url)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cursor"]
        query.append(("cursor", str(state.cursor)))
        return urlunsplit(parts._replace(query=urlencode(query)))

    # --- the run --------------------------------------------------------------------------------

    async def run(
        self,
        source: AsyncIterable[Message],
        *,
        max_events: int | None = None,
        until: int | None = None,
    ) -> IngestReport:
        """Take the messages of `source` until it ends, `max_events` messages were taken, or
        a message at or past time_us `until` was taken; returns what the run did. A source
        that raises has what it gave before applied, then its error raised."""
        check_count(max_events, "max_events", 0, none_ok=True)
        check_count(until, "until", 0, none_ok=True)
        position = _Position(await self.state())
        inbox = _Inbox(self.queue_size)
        reader = asyncio.create_task(_read(source, inbox))
        taken = skipped = batches = 0
        stopped: Stopped = "end"
        end: _End | None = None
        try:
            while end is None:
                if max_events is not None and taken >= max_events:
                    stopped = "max_events"
                    break
                pending = await inbox.take(self.batch_size)  # as many as wait, one handoff
                if not pending:
                    end = inbox.end
                    continue
                left = None if max_events is None else max_events - taken
                took, passed, reached = await self._apply(pending, position, left, until)
                taken, skipped = taken + took, skipped + passed
                batches += took > 0
                if reached:
                    stopped = "until"
                    break
            await self._acknowledged()
        except BaseException as exc:
            await self._abandon(exc)
            raise
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            close = getattr(source, "aclose", None)  # an async generator: its socket closed now
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        if end is not None and end.error is not None:
            raise end.error
        if stopped == "end" and max_events is not None and taken >= max_events:
            stopped = "max_events"
        state = self._state if self._state is not None else IngestState()
        return IngestReport(state, taken, skipped, batches, stopped)

    async def apply(self, messages: Sequence[Message]) -> IngestReport:
        """Take `messages` in one atomic batch (as a run of them would, skipping those taken
        before the stored cursor)."""
        position = _Position(await self.state())
        try:
            taken, skipped, _ = await self._apply(list(messages), position, None, None)
            await self._acknowledged()
        except BaseException as exc:
            await self._abandon(exc)
            raise
        assert self._state is not None
        return IngestReport(self._state, taken, skipped, int(taken > 0), "end")

    async def _apply(
        self,
        messages: list[Message],
        position: _Position,
        limit: int | None,
        until: int | None,
    ) -> tuple[int, int, bool]:
        """Take messages in one batch: (taken, skipped, whether `until` was reached)."""
        assert self._planned is not None
        counts = asdict(self._planned)
        commits: list[_Queued] = []
        states: dict[tuple[str, str], dict[str, Any]] = {}
        taken = skipped = 0
        reached = False
        take_commit = self._take_commit
        for message in messages:
            if limit is not None and taken >= limit:
                break
            plain = plain_commit(message)  # a well-formed commit, read by msgspec's Structs
            event: Commit | Identity | Account | Other | None = None
            error: JetstreamEventError | None = None
            if plain is not None:
                at = position.time(plain.time_us)
            else:
                try:
                    event = parse_event(message)
                    at = position.time(event.time_us)
                except JetstreamEventError as exc:
                    error, at = exc, position.time(exc.time_us)
            if position.skip(at):
                skipped += 1
                continue
            taken += 1
            counts["cursor"], counts["at_cursor"] = position.took(at)
            counts["events"] += 1
            if plain is not None:
                body = plain.commit
                error = take_commit(
                    plain.did,
                    plain.time_us,
                    body.operation,
                    body.collection,
                    body.rkey,
                    body.record,
                    commits,
                )
            elif event is not None:
                error = self._take(event, commits, states, counts)
            if error is not None:
                self._malformed(error, counts)
            if until is not None and at >= until:
                reached = True
                break
        if taken:
            await self._write(commits, states, counts)
        return taken, skipped, reached

    def _take(
        self,
        event: Commit | Identity | Account | Other,
        commits: list[_Queued],
        states: dict[tuple[str, str], dict[str, Any]],
        counts: dict[str, Any],
    ) -> JetstreamEventError | None:
        """Check one event parse_event read and queue what it writes; the error when it is
        refused."""
        if isinstance(event, Commit):
            return self._take_commit(
                event.did,
                event.time_us,
                event.operation,
                event.collection,
                event.rkey,
                event.record,
                commits,
            )
        try:
            self._head(event.did)
            if isinstance(event, Identity | Account):
                _storable(event)
            if isinstance(event, Identity):
                counts["identities"] += 1
                states["identity", event.did] = {
                    "handle": event.handle,
                    "seq": event.seq,
                    "time": event.time,
                    "time_us": event.time_us,
                }
            elif isinstance(event, Account):
                counts["accounts"] += 1
                states["account", event.did] = {
                    "active": event.active,
                    "status": event.status,
                    "seq": event.seq,
                    "time": event.time,
                    "time_us": event.time_us,
                }
            else:
                counts["others"] += 1
        except InvalidInputError as exc:
            return _refused(event, exc)
        return None

    def _take_commit(
        self,
        did: str,
        time_us: int,
        operation: str,
        collection: str,
        rkey: str,
        record: dict[str, Any] | None,
        commits: list[_Queued],
    ) -> JetstreamEventError | None:
        """Check one commit (its DID, NSID, rkey of the collection's key type, value) and
        queue it with its key, built by the collection's route; the error when refused."""
        try:
            head = self._heads.get(did)
            if head is None:
                head = self._head(did)
            route = self._routes.get(collection)
            if route is None:
                route = self._route(collection)
            if not route.fits(rkey):
                rkey_ids.validate(rkey, route.key_type)  # raises, saying why
            if record is None:
                stored = None
            elif route.plain:  # no value type: the value as given, its `$type` checked
                declared = record.get("$type")
                if declared is not None and declared != collection:
                    RecordCollection._check_value(collection, record)  # raises
                stored = record
            else:
                stored = self.records.prepared(collection, record)
        except InvalidInputError as exc:
            return _refused_commit(did, time_us, operation, collection, rkey, exc)
        part = route.part
        key = None if part is None else head + part + rkey.encode() + b"\x00"
        commits.append((operation, key, (did, collection, rkey), stored, time_us))
        return None

    def _head(self, did: str) -> bytes:
        """The key bytes of the record type and `did` (check_did'd), each distinct DID once
        (up to REMEMBERED of them)."""
        found = self._heads.get(did)
        if found is None:
            found = self.records.record.prefix(check_did(did))
            if len(self._heads) >= REMEMBERED:
                self._heads.clear()
            self._heads[did] = found
        return found

    def _route(self, collection: str) -> _Route:
        """The collection's route, its NSID checked once (check_nsid)."""
        found = _Route(self.records, check_nsid(collection))
        if len(self._routes) >= REMEMBERED:
            self._routes.clear()
        self._routes[collection] = found
        return found

    def _malformed(self, error: JetstreamEventError, counts: dict[str, Any]) -> None:
        counts["malformed"] += 1
        # stored with the cursor: a lone surrogate (a JSON escape such as "\\ud800" in a
        # DID) kept as its escape, or the state could not be encoded and the run would stop
        counts["last_error"] = str(error).encode("utf-8", "backslashreplace").decode("utf-8")
        if self.on_error is not None:
            self.on_error(error)

    async def _write(
        self,
        commits: list[_Queued],
        states: dict[tuple[str, str], dict[str, Any]],
        counts: dict[str, Any],
    ) -> None:
        """One atomic write: the commits (deletes and updates checked against what the store
        and the batch's earlier commits hold), the identity and account states, the cursor."""
        record = self.records.record
        batch = Batch(self.store)
        # every commit queued in order, deletes too (one of a record the store does not hold
        # leaves a tombstone of nothing), runs of puts in one put_encoded call each, then
        # every key read once, with the keys the puts encoded: the counts follow from what
        # was there, and the write's index upkeep takes the same read instead of reading
        # again (Batch.replacing)
        taken: list[tuple[str, bytes]] = []  # (operation, key) in the batch's order
        run: list[_Queued] = []
        keys = batch.columns()[0]
        for queued in commits:
            operation, key = queued[0], queued[1]
            if operation != "delete" and key is not None:
                run.append(queued)
                continue
            if run:
                self._put_run(batch, run, taken, counts)
                run = []
            if operation == "delete":
                if key is None:
                    batch.delete(record, queued[2])
                else:
                    batch.delete_raw(key)
            else:  # a collection whose key the route does not build: put() encodes it
                try:
                    batch.put(record, queued[2], queued[3])
                except InvalidInputError as exc:  # a value the codec cannot store
                    self._malformed(_refused_queued(queued, exc), counts)
                    continue
            taken.append((operation, keys[-1]))
        if run:
            self._put_run(batch, run, taken, counts)
        await self._acknowledged()  # the batch before: its writes are what this one reads
        if taken:
            known = await self.store.read_before_write(list(dict.fromkeys(k for _, k in taken)))
            batch.replacing(known)
            present = {written_key: known.live(written_key) for written_key in known.values}
            for operation, written_key in taken:
                held = present[written_key]
                if operation == "delete":
                    counts["deletes"] += 1
                    counts["unknown_deletes"] += not held
                    present[written_key] = False
                    continue
                if operation == "create":
                    counts["creates"] += 1
                else:
                    counts["updates"] += 1
                    counts["unknown_updates"] += not held
                present[written_key] = True
        for key_fields, value in states.items():
            batch.put(self.layout.state, key_fields, value)
        state = IngestState(**counts)
        batch.put(self.layout.state, ("cursor", self.name), state.to_plain())
        self._planned = state
        self._writing = asyncio.ensure_future(self._send(batch, state))
        # one turn of the loop: the write is planned and handed to slatedb now, and slatedb
        # writes it while the next batch is parsed and encoded (its reads wait for the ack)
        await asyncio.sleep(0)

    async def _send(self, batch: Batch, state: IngestState) -> None:
        """Write one batch; once acknowledged, its state is the stored one."""
        await self.store.write(batch, durable=self.durable)
        self._state = state
        if self.on_written is not None:
            self.on_written(state)

    async def _acknowledged(self) -> None:
        """Wait for the write in flight, if any (its error raised here)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing

    async def _abandon(self, error: BaseException) -> None:
        """On the way out of a run that raised `error`: the write in flight is let finish
        (its own error, if any, left behind `error`), or cancelled when the run was (then its
        outcome is the store's uncertain write: a restart takes the batch again if it was
        lost); the next run goes on from the state last stored."""
        writing, self._writing = self._writing, None
        if writing is not None:
            if isinstance(error, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                writing.cancel()
            with contextlib.suppress(BaseException):
                await writing
        self._planned = self._state

    def _put_run(
        self,
        batch: Batch,
        run: list[_Queued],
        taken: list[tuple[str, bytes]],
        counts: dict[str, Any],
    ) -> None:
        """Queue a run of puts whose keys their routes built, in one Batch.put_encoded call;
        a value the codec refuses counts as malformed."""
        keys = [queued[1] for queued in run]
        refused = batch.put_encoded(
            self.records.record,
            keys,  # type: ignore[arg-type]  # a run holds only built keys
            [queued[2] for queued in run],
            [queued[3] for queued in run],
        )
        skip = dict(refused)
        for at, queued in enumerate(run):
            error = skip.get(at)
            if error is not None:
                self._malformed(_refused_queued(queued, error), counts)
            else:
                taken.append((queued[0], queued[1]))  # type: ignore[arg-type]


#: a commit queued for its batch: (operation, key bytes or None when its collection's route
#: builds none, key fields, the value stored or None for a delete, time_us)
_Queued = tuple[str, bytes | None, tuple[str, str, str], Any, int]

#: a TID, valid for every probe of a route's key plan
_PROBE_TID = "3jzfcijpj2z2a"
_PROBE_DID = "did:plc:probe"


class _Route:
    """One collection's compiled plan, built once: its record key type and a check of it
    (`fits`: True exactly when rkey_ids.validate would take the key), whether its values go
    as given (`plain`: no value type), and `part`, the bytes the record type's key encoder
    puts between a DID's and the rkey's (None when a probe finds the key not so built, then
    Batch.put encodes each key)."""

    __slots__ = ("fits", "key_type", "part", "plain")

    def __init__(self, records: RecordCollection[Store], collection: str) -> None:
        self.key_type = records.key_type(collection)
        self.fits = _fits(self.key_type)
        self.plain = collection not in records.value_codecs
        self.part = _middle(records, collection, self.key_type)


def _fits(key_type: KeyType) -> Callable[[str], bool]:
    """A check equal to rkey_ids.is_valid_for(s, key_type) for a str, with less per call."""
    if key_type.kind == "any":
        return rkey_ids.is_valid
    if key_type.kind == "tid":
        return tid_ids.is_valid  # a TID's characters are a record key's, 13 of them
    if key_type.kind == "literal":
        value = key_type.value
        return lambda rkey: rkey == value  # the literal was checked as a record key
    return lambda rkey: rkey_ids.is_valid_for(rkey, key_type)


def _middle(records: RecordCollection[Store], collection: str, key_type: KeyType) -> bytes | None:
    """What the record type's key puts between a DID's bytes and an rkey's (a record key,
    no 0x00 or 0x01 in it, is its UTF-8 then 0x00), taken from its own encoder; None when a
    probe key built so differs from the encoder's."""
    record = records.record
    head = record.prefix(_PROBE_DID)
    part = record.prefix(_PROBE_DID, collection)[len(head) :]
    probe = {"literal": key_type.value, "tid": _PROBE_TID, "nsid": collection}.get(key_type.kind)
    probe = probe or _PROBE_TID
    built = head + part + probe.encode() + b"\x00"
    return part if built == record.encode(_PROBE_DID, collection, probe) else None


def _storable(event: Identity | Account) -> None:
    """InvalidInputError naming the field when a text of the event is no UTF-8 (a lone
    surrogate, from a JSON escape): its state could not be stored, and the run would stop."""
    kind = type(event).__name__.lower()
    for name in ("handle", "status", "time"):
        text = getattr(event, name, None)
        if text is None:
            continue
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"{kind}.{name} {text!r} has a lone surrogate at index {exc.start}",
                field=f"{kind}.{name}",
                value=text,
            ) from None


def _refused(event: Identity | Account | Other, exc: InvalidInputError) -> JetstreamEventError:
    """A checked event's refusal as a JetstreamEventError naming the event."""
    return JetstreamEventError(
        f"Jetstream event at time_us {event.time_us}: "
        f"{type(event).__name__.lower()} of {event.did!r}: {exc}",
        field=exc.field or "did",
        value=exc.value,
        time_us=event.time_us,
    )


def _refused_commit(
    did: str, time_us: int, operation: str, collection: str, rkey: str, exc: InvalidInputError
) -> JetstreamEventError:
    """A checked commit's refusal as a JetstreamEventError naming the record."""
    return JetstreamEventError(
        f"Jetstream event at time_us {time_us}: at://{did}/{collection}/{rkey} ({operation}): "
        f"{exc}",
        field=exc.field or "commit.record",
        value=exc.value,
        time_us=time_us,
    )


def _refused_queued(queued: _Queued, exc: InvalidInputError) -> JetstreamEventError:
    did, collection, rkey = queued[2]
    return _refused_commit(did, queued[4], queued[0], collection, rkey, exc)


class _Inbox:
    """The messages read ahead of the writer, at most `limit` of them: the reader waits for
    room beyond it (backpressure), the writer takes up to a batch of what waits in one
    handoff (not one queue get each)."""

    __slots__ = ("_ready", "_room", "end", "items", "limit")

    def __init__(self, limit: int) -> None:
        self.items: list[Message] = []
        self.limit = limit
        self.end: _End | None = None  # the source ended (after every message in items)
        self._ready = asyncio.Event()  # set while items or end wait for the writer
        self._room = asyncio.Event()

    def add(self, message: Message) -> bool:
        """Keep a message for the writer; True when the inbox is then full."""
        items = self.items
        items.append(message)
        self._ready.set()
        return len(items) >= self.limit

    async def room(self) -> None:
        """Wait until the writer has taken some: the inbox is below its limit again."""
        while len(self.items) >= self.limit:
            self._room.clear()
            await self._room.wait()

    def close(self, end: _End) -> None:
        self.end = end
        self._ready.set()

    async def take(self, most: int) -> list[Message]:
        """Up to `most` of the waiting messages, oldest first, waiting for one when none
        waits; [] once the source ended and every message was taken."""
        while not self.items and self.end is None:
            self._ready.clear()
            await self._ready.wait()
        items = self.items
        if len(items) <= most:
            self.items = []
        else:
            items, self.items = items[:most], items[most:]
        self._room.set()
        return items


async def _read(source: AsyncIterable[Message], inbox: _Inbox) -> None:
    """Move the source's messages into the bounded inbox (waiting while it is full)."""
    add = inbox.add
    try:
        async for message in source:
            if add(message):
                await inbox.room()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # handed to the writer, raised after what came before
        inbox.close(_End(exc))
        return
    inbox.close(_End())


async def consume(
    ingest: Jetstream,
    url: str,
    *,
    max_events: int | None = None,
    until: int | None = None,
    retries: int = 5,
    open_timeout: float = 10.0,
    idle_timeout: float = 60.0,
    on_batch: Callable[[IngestReport], None] | None = None,
) -> IngestReport:
    """Run `ingest` on the Jetstream websocket at `url` (with `cursor=` from its stored state)
    until `max_events` messages were taken, `until` was reached, or the connection failed
    `retries` times in a row without a message taken (then JetstreamConnectionError). A
    closed or failed connection is opened again from the stored cursor after a pause of
    1, 2, 4... s (at most 30 s); `on_batch` sees the report of each connection's run."""
    check_count(retries, "retries", 0)
    taken = skipped = batches = 0
    failures = 0
    while True:
        left = None if max_events is None else max_events - taken
        state = await ingest.state()
        source = messages(
            Jetstream.subscribe_url(url, state),
            open_timeout=open_timeout,
            idle_timeout=idle_timeout,
        )
        error: JetstreamConnectionError | None = None
        try:
            report = await ingest.run(source, max_events=left, until=until)
        except JetstreamConnectionError as exc:  # what it took before the drop still counts
            error = exc
            after = await ingest.state()
            report = IngestReport(after, after.events - state.events, 0, 0, "end")
        taken, skipped = taken + report.taken, skipped + report.skipped
        batches += report.batches
        if on_batch is not None:
            on_batch(report)
        if report.stopped != "end":
            return IngestReport(report.state, taken, skipped, batches, report.stopped)
        failures = 0 if report.taken else failures + 1
        if failures > retries:
            if error is not None:
                raise error
            raise JetstreamConnectionError(
                f"Jetstream at {url}: {failures} connections in a row gave no event", value=url
            )
        await asyncio.sleep(min(30.0, 2.0 ** max(0, failures - 1)))
