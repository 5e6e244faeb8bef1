"""The Jetstream consumer's fast paths against its checked ones, by hypothesis: commits read
into msgspec Structs (plain_commit) against the checked reader over mutated messages; each
collection's route (its rkey check, the key bytes it builds) against rkey validation and the
record type's encoder; Batch.put_encoded against Batch.put; and whole streams, malformed and
mutated messages among them, applied with the fast paths and without: the same rows, the
same counts."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jetstreamkit import generate

from opendata_kv import Index, Store
from opendata_kv.atproto import JETSTREAM, Jetstream
from opendata_kv.atproto import jetstream as jetstream_module
from opendata_kv.atproto.events import Commit, _Reader, parse_event, plain_commit
from opendata_kv.atproto.jetstream import _fits, _Route
from opendata_kv.collections import (
    BSKY_KEY_TYPES,
    COVERING_BACKLINKS,
    RecordCollection,
    default_schema,
)
from opendata_kv.errors import InvalidInputError, JetstreamEventError
from opendata_kv.ids import rkey as rkey_ids
from opendata_kv.ids import tid
from opendata_kv.keys import Schema, fields
from opendata_kv.keys.record import RecordType
from opendata_kv.store import Batch

SCHEMA = default_schema(*JETSTREAM.record_types)
_names = itertools.count()


def _memory() -> str:
    return f"memory://js-routes-{next(_names)}"


# --- plain_commit against the checked reader, over mutated messages ----------------------------

BASE = {
    "did": "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa",
    "time_us": 1725000000000001,
    "kind": "commit",
    "commit": {
        "rev": "3kaaaaaaaaa22",
        "operation": "create",
        "collection": "app.bsky.feed.like",
        "rkey": "3kaaaaaaaaa22",
        "record": {"$type": "app.bsky.feed.like", "subject": {"uri": "at://x", "cid": "b"}},
        "cid": "bafy",
    },
}


def _reference(message: str | bytes) -> tuple[str, Any]:
    """The event by json.loads and the checked reader alone (the path before any fast one)."""
    try:
        data = json.loads(message)
    except (ValueError, UnicodeDecodeError):
        return "error", None
    if not isinstance(data, dict) or type(data.get("time_us")) is not int or data["time_us"] < 0:
        return "error", None
    try:
        return "ok", _Reader(data, data["time_us"]).event()
    except JetstreamEventError as exc:
        return "error", (str(exc), exc.field, exc.time_us)


MISSING = object()  # the record left as BASE has it
MUTATION = st.tuples(
    st.integers(0, 400),
    st.sampled_from(["insert", "delete", "replace"]),
    st.sampled_from([*'{}[]",:0123456789-.etfnul \\x\u00e9\ud800', "null", '""', "{}"]),
)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(["create", "update", "delete"]),
    st.one_of(*[st.just(MISSING)] * 3, st.none(), st.just(""), st.integers(0, 1), st.just([])),
    st.lists(MUTATION, max_size=3),
    st.booleans(),
)
def test_plain_commit_reads_what_the_checked_reader_reads(
    operation: str, record: Any, mutations: list[tuple[int, str, str]], as_bytes: bool
) -> None:
    event = json.loads(json.dumps(BASE))
    event["commit"]["operation"] = operation
    if record is not MISSING:
        event["commit"]["record"] = record
    text = json.dumps(event)
    for at, how, piece in mutations:
        at %= len(text) + 1
        if how == "insert":
            text = text[:at] + piece + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + len(piece) :]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
    message: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    found = plain_commit(message)
    outcome, want = _reference(message)
    if found is not None:  # taken by the Structs: exactly the commit the checked reader reads
        assert outcome == "ok" and isinstance(want, Commit)
        body = found.commit
        assert (found.did, found.time_us) == (want.did, want.time_us)
        assert (body.operation, body.collection, body.rkey) == (
            want.operation,
            want.collection,
            want.rkey,
        )
        assert (body.record, body.cid, body.rev) == (want.record, want.cid, want.rev)
        assert type(body.record) is type(want.record)
    try:
        got: tuple[str, Any] = "ok", parse_event(message)
    except JetstreamEventError as exc:
        got = "error", (str(exc), exc.field, exc.time_us)
    if outcome == "ok" or want is not None:  # refused before the reader: any wording
        assert got == (outcome, want)
    else:
        assert got[0] == "error"


# --- routes: the rkey check and the key bytes ---------------------------------------------------

RKEY_TEXT = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz234567ABZ019._:~-", min_size=0, max_size=16),
    st.builds(lambda n, c: tid.from_parts(n, c), st.integers(0, 2**53 - 1), st.integers(0, 1023)),
    st.sampled_from([".", "..", "self", "app.bsky.feed.post", "x" * 513, "a\x00b", "é", ""]),
    st.text(max_size=6),
)


@settings(max_examples=800, deadline=None)
@given(st.sampled_from(["any", "tid", "nsid", "literal:self", "literal:a.b"]), RKEY_TEXT)
def test_a_route_fits_exactly_the_keys_validate_takes(key_type: str, rkey: str) -> None:
    kind = rkey_ids.KeyType.parse(key_type)
    assert _fits(kind)(rkey) == rkey_ids.is_valid_for(rkey, kind)


DIDS = st.one_of(
    st.from_regex(r"did:plc:[a-z2-7]{24}", fullmatch=True),
    st.from_regex(r"did:web:[a-z0-9.%:-]{1,30}[a-z0-9]", fullmatch=True),
)
COLLECTIONS = st.one_of(
    st.sampled_from(
        ["app.bsky.feed.post", "app.bsky.feed.like", "app.bsky.actor.profile", "com.x-y.z9"]
    ),
    st.from_regex(r"[a-z]{1,8}(\.[a-z0-9-]{1,8}){1,3}\.[a-zA-Z]{1,12}", fullmatch=True),
)


def _collection_store() -> tuple[Any, RecordCollection[Store]]:
    async def open_it() -> Any:
        return await Store.open(_memory(), SCHEMA, indexes=COVERING_BACKLINKS.indexes)

    store = asyncio.run(open_it())
    return store, RecordCollection(store, key_types=BSKY_KEY_TYPES)


def test_a_route_builds_the_key_the_encoder_does() -> None:
    # one store for every example: the consumer only builds keys here, it never writes
    _, records = _collection_store()

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(DIDS, COLLECTIONS, RKEY_TEXT)
    def check(did: str, collection: str, rkey: str) -> None:
        ingest = Jetstream(records)
        try:
            head = ingest._head(did)
            route = ingest._route(collection)
        except InvalidInputError:
            return  # a DID or NSID check_did / check_nsid refuse: counted malformed
        if not route.fits(rkey):
            return
        assert route.part is not None
        built = head + route.part + rkey.encode() + b"\x00"
        assert built == records.record.encode(did, collection, rkey)

    check()


def test_a_record_type_whose_key_a_route_cannot_build_gets_none() -> None:
    """A record type whose rkey field is not last: the probe finds the built key differs,
    and the consumer leaves the encoding to Batch.put."""
    _, records = _collection_store()
    odd = RecordType(
        "odd",
        9,
        (("repo", fields.string), ("collection", fields.rkey("nsid")), ("rkey", fields.rkey())),
        suffix=b"!",
    )
    records.record = odd
    route = _Route(records, "app.bsky.feed.like")
    assert route.part is None


# --- Batch.put_encoded against Batch.put --------------------------------------------------------

REC = RecordType(
    "rec", 3, (("a", fields.string), ("collection", fields.rkey("nsid")), ("b", fields.rkey()))
)


def _by_a(key: Any, value: Any) -> list[tuple[str]]:
    return [(key.a,)]


BY_A = Index("by_a", "rec", [("a", fields.string)], using=_by_a)
VALUES = st.one_of(
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=6) | st.none()),
    st.just({"x": {1, 2}}),  # a set: the codec refuses it
    st.just({"big": 2**70}),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["d1", "d2"]), st.sampled_from(["a.b.c", "x.y.z"]), VALUES),
        max_size=12,
    ),
    st.booleans(),
)
def test_put_encoded_queues_what_put_queues(rows: list[tuple[str, str, Any]], keep: bool) -> None:
    async def main() -> None:
        indexes = [BY_A] if keep else []
        async with Store.open(_memory(), Schema(REC), indexes=indexes) as store:
            one, many = Batch(store), Batch(store)
            refused_one = []
            fields_list = [(a, c, f"k{n}") for n, (a, c, _) in enumerate(rows)]
            for at, (row, (_, _, value)) in enumerate(zip(fields_list, rows, strict=True)):
                try:
                    one.put(REC, row, value)
                except InvalidInputError as exc:
                    refused_one.append((at, type(exc), str(exc)))
            refused = many.put_encoded(
                REC,
                [REC.encode(*row) for row in fields_list],
                fields_list,
                [value for _, _, value in rows],
            )
            assert [(at, type(exc), str(exc)) for at, exc in refused] == refused_one
            assert one.columns() == many.columns()
            # (put's first put of a record type binds its plan and keeps no fields)
            assert one.key_fields().items() <= many.key_fields().items()
            if keep:
                kept = {REC.encode(*row): row for at, row in enumerate(fields_list)}
                gone = {at for at, _, _ in refused_one}
                assert many.key_fields() == {
                    k: r for at, (k, r) in enumerate(kept.items()) if at not in gone
                }
            assert list(one) == list(many)
            await store.write(many)
            gone = {at for at, _, _ in refused_one}
            for at, (row, (_, _, value)) in enumerate(zip(fields_list, rows, strict=True)):
                assert await store.get(REC, row) == (None if at in gone else value)
            assert await store.check_indexes() == []

    asyncio.run(main())


# --- whole streams: fast paths and checked paths store the same ------------------------------


class _Checked(Jetstream):
    """A consumer whose routes build no key (Batch.put encodes each)."""

    def _route(self, collection: str) -> _Route:
        found = super()._route(collection)
        found.part = None
        return found


@contextmanager
def _no_plain_commits() -> Iterator[None]:
    saved = jetstream_module.plain_commit
    jetstream_module.plain_commit = lambda message: None  # type: ignore[assignment]
    try:
        yield
    finally:
        jetstream_module.plain_commit = saved


async def _source(messages: list[str]) -> AsyncIterator[str]:
    for message in messages:
        yield message


async def _rows(store: Any) -> list[tuple[bytes, bytes]]:
    from opendata_kv.native.slatedb import KeyRange
    from opendata_kv.store.scan import scan_options

    everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
    iterator = await store._source.scan_with_options(everything, scan_options(False))
    rows: list[tuple[bytes, bytes]] = []
    while batch := await iterator.next_batch(1000):
        rows += [(kv.key, kv.value) for kv in batch]
    return rows


async def _ingest(messages: list[str], checked: bool, batch_size: int) -> tuple[Any, Any]:
    async with Store.open(_memory(), SCHEMA, indexes=COVERING_BACKLINKS.indexes) as store:
        records = RecordCollection(store, key_types=BSKY_KEY_TYPES, backlinks=COVERING_BACKLINKS)
        kind = _Checked if checked else Jetstream
        errors: list[tuple[str, Any, Any]] = []
        ingest = kind(
            records,
            batch_size=batch_size,
            on_error=lambda e: errors.append((str(e), e.field, e.time_us)),
        )
        if checked:
            with _no_plain_commits():
                report = await ingest.run(_source(messages))
        else:
            report = await ingest.run(_source(messages))
        assert await store.check_indexes() == []
        return (report.state, report.batches, errors), await _rows(store)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**16),
    st.integers(5, 120),
    st.integers(1, 40),
    st.lists(st.tuples(st.integers(0, 10**6), MUTATION), max_size=8),
)
def test_fast_and_checked_consumers_store_the_same(
    seed: int, size: int, batch_size: int, mutations: list[tuple[int, tuple[int, str, str]]]
) -> None:
    messages = list(generate(seed, size).messages)
    for which, (at, how, piece) in mutations:  # some messages mutated, as a network might
        n = which % len(messages)
        text = messages[n]
        at %= len(text) + 1
        if how == "insert":
            text = text[:at] + piece + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + len(piece) :]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
        messages[n] = text
    fast = asyncio.run(_ingest(messages, False, batch_size))
    checked = asyncio.run(_ingest(messages, True, batch_size))
    assert fast == checked


@pytest.mark.parametrize("checked", [False, True])
def test_a_value_the_codec_refuses_is_malformed_not_stored(checked: bool) -> None:
    """A record holding what msgpack cannot carry past its limits (an integer of 70 bits)
    counts as malformed, with the record named, and the rest of the batch is written."""
    good = json.loads(json.dumps(BASE))
    bad = json.loads(json.dumps(BASE))
    bad["time_us"] += 1
    bad["commit"]["rkey"] = "3kaaaaaaaaa23"
    bad["commit"]["record"]["n"] = 2**70
    state, rows = asyncio.run(_ingest([json.dumps(good), json.dumps(bad)], checked, 10))
    assert state[0].malformed == 1 and state[0].creates == 1
    assert "3kaaaaaaaaa23" in state[2][0][0]
    assert sum(b"3kaaaaaaaaa23" in key for key, _ in rows) == 0


@pytest.mark.parametrize("checked", [False, True])
def test_lone_surrogates_are_malformed_and_the_run_goes_on(checked: bool) -> None:
    """A JSON escape of a lone surrogate (valid JSON in a valid UTF-8 frame) in a DID, a
    handle, an account status or a record: each counts as malformed, and the state stored
    with the cursor still encodes (its last_error was the DID's text, which stopped the run)."""
    escaped = "\\ud800"
    did = BASE["did"]
    messages = [
        json.dumps(BASE).replace(str(did), escaped + str(did)),
        json.dumps(
            {"did": did, "time_us": 2, "kind": "identity", "identity": {"handle": "\ud800"}}
        ),
        json.dumps(
            {
                "did": did,
                "time_us": 3,
                "kind": "account",
                "account": {"active": False, "status": "\ud800"},
            }
        ),
        json.dumps(BASE).replace('"b"}}', '"b"}, "text": "\\ud800"}'),
        json.dumps(BASE),
    ]
    assert all(escaped in message for message in messages[:4])
    (state, _, errors), rows = asyncio.run(_ingest(messages, checked, 1))  # a state each
    assert (state.events, state.malformed, state.creates) == (5, 4, 1)
    assert state.last_error is not None and state.last_error.encode()  # UTF-8, stored
    assert len(errors) == 4
    assert rows
