"""A writer process for the reliability tests, and the checker of what it leaves behind.

Run as a script it opens the database as its writer, finds where the previous writer stopped
(the highest batch present), and appends batches forever:

    python tests/crash_writer.py URL [--settings JSON] [--max-batches N] [--delay S]
    python tests/crash_writer.py URL [--settings JSON] --fork-server

Each batch is ONE atomic write of several typed records (three record types, three value
codecs) whose content is a pure function of (batch id, record index), so a checker can tell
an intact record from a damaged one without any side channel. The protocol on stdout:

    open <next batch id>      the database is open; appending starts at this batch
    ack <batch id>            Store.flush() returned after that batch's write: acknowledged
    fenced <message>          another writer fenced this one (exit status 3)
    error <type> <message>    anything else (exit status 4)

A line is printed only after the event it reports, so a line the parent has read is a promise
and anything the writer was doing when it was killed is not.

With --fork-server it imports everything once, prints `ready`, and then for every line on
stdin (the path of a FIFO the parent reads) forks a writer whose stdout is that FIFO (stderr:
the path + ".err") and prints `child <pid>`. A round's writer then starts in milliseconds
instead of the second an interpreter and slatedb take to load.

Imported (tests/ is on sys.path under pytest) it offers SCHEMA/VALUES, `expected_batch` and
`check_database`, which the tests use to verify a database after each kill.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.values import Values


@dataclass
class Entry:
    """The dataclass-coded record: its own coordinates plus a digest and a payload."""

    batch: int
    idx: int
    digest: str
    payload: bytes


#: 0x01 0x10 | batch u64 | idx u16          value: Entry (dataclass codec)
ENTRY = RecordType("entry", 1, [("batch", F.u64), ("idx", F.u16)])
#: 0x01 0x20 | batch u64 | name string      value: msgpack dict summarising the batch
SUMMARY = RecordType("summary", 2, [("batch", F.u64), ("name", F.string)])
#: 0x01 0x30 | desc(batch u64)              value: raw bytes
BLOB = RecordType("blob", 3, [("batch", F.desc(F.u64))])

SCHEMA = Schema(ENTRY, SUMMARY, BLOB)
VALUES = Values(SCHEMA).register(ENTRY, Entry).register(BLOB, bytes)


def entry_count(batch: int) -> int:
    """How many Entry records batch `batch` holds (4..8, so batches differ in size)."""
    return 4 + batch % 5


def records_per_batch(batch: int) -> int:
    """Every record of a batch: its entries, one summary, one blob."""
    return entry_count(batch) + 2


def _digest(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


@functools.cache
def expected_entry(batch: int, idx: int) -> Entry:
    digest = _digest("entry", batch, idx)
    # Payload sizes vary from 0 to ~6 KiB (every 7th record), so WAL objects vary in size.
    size = 6000 if (batch + idx) % 7 == 0 else int(digest[:2], 16)
    seed = bytes.fromhex(digest)
    payload = (seed * (size // len(seed) + 1))[:size]
    return Entry(batch=batch, idx=idx, digest=digest, payload=payload)


@functools.cache
def expected_summary(batch: int) -> dict[str, Any]:
    count = entry_count(batch)
    digests = [expected_entry(batch, i).digest for i in range(count)]
    return {
        "batch": batch,
        "entries": count,
        "digest": _digest("summary", batch, *digests),
    }


@functools.cache
def expected_blob(batch: int) -> bytes:
    return hashlib.sha256(f"blob:{batch}".encode()).digest() * (1 + batch % 3)


def expected_batch(batch: int) -> Iterator[tuple[RecordType, tuple[Any, ...], Any]]:
    """(record type, key fields, value) of every record of batch `batch`."""
    for idx in range(entry_count(batch)):
        yield ENTRY, (batch, idx), expected_entry(batch, idx)
    yield SUMMARY, (batch, "summary"), expected_summary(batch)
    yield BLOB, (batch,), expected_blob(batch)


async def write_batch(store: Any, batch: int, *, durable: bool = False) -> None:
    """Batch `batch` as ONE atomic write (durable: waiting for it to be flushed)."""
    async with store.batch(durable=durable) as b:
        for record_type, key, value in expected_batch(batch):
            b.put(record_type, key, value)


@dataclass
class Check:
    """What check_database found: batch ids present, and how many records it verified."""

    batches: set[int] = dataclasses.field(default_factory=set)
    records: int = 0

    @property
    def next_batch(self) -> int:
        return max(self.batches) + 1 if self.batches else 0


def check_records(records: Iterable[Any]) -> Check:
    """Check every record of a database (a scan_all), raising AssertionError on the first
    problem: every key and value must decode, every value must equal what its batch
    prescribes, and every batch with any record must have all of them (one atomic write)."""
    found: dict[int, int] = {}
    count = 0
    for record in records:
        key = record.key
        rt = key.record_type
        batch = key.batch
        if rt is ENTRY:
            want: Any = expected_entry(batch, key.idx)
            assert key.idx < entry_count(batch), f"entry index out of range: {key!r}"
        elif rt is SUMMARY:
            assert key.name == "summary", f"unexpected summary key {key!r}"
            want = expected_summary(batch)
        else:
            assert rt is BLOB, f"record of an unexpected type: {key!r}"
            want = expected_blob(batch)
        assert record.value == want, f"damaged record {key!r}: {record.value!r:.200}"
        found[batch] = found.get(batch, 0) + 1
        count += 1
    for batch, n in found.items():
        assert n == records_per_batch(batch), (
            f"batch {batch} is half-written: {n} of {records_per_batch(batch)} records"
        )
    return Check(set(found), count)


async def check_database(store: Any) -> Check:
    """check_records over every record of an async Store (writer or reader)."""
    return check_records(await store.scan_all().to_list())


async def _last_batch(store: Any) -> int | None:
    async for record in store.scan(SUMMARY, reverse=True, limit=1):
        return int(record.key.batch)
    return None


def _say(*parts: object) -> None:
    print(*parts, flush=True)


async def run(url: str, settings: dict[str, Any], max_batches: int | None, delay: float) -> int:
    from opendata_kv.errors import FencedError
    from opendata_kv.store import Store

    try:
        async with Store.open(url, SCHEMA, values=VALUES, settings=settings) as store:
            last = await _last_batch(store)
            batch = 0 if last is None else last + 1
            _say("open", batch)
            written = 0
            while max_batches is None or written < max_batches:
                await write_batch(store, batch)
                await store.flush()
                _say("ack", batch)
                batch += 1
                written += 1
                if delay:
                    await asyncio.sleep(delay)
    except FencedError as exc:
        _say("fenced", str(exc).replace("\n", " "))
        return 3
    except Exception as exc:
        _say("error", type(exc).__name__, str(exc).replace("\n", " "))
        return 4
    return 0


def serve(url: str, settings: dict[str, Any]) -> int:
    """The --fork-server loop (see the module docstring)."""
    import os

    import opendata_kv.store  # noqa: F401  (the expensive import: slatedb's native library)

    _say("ready")
    for line in sys.stdin:
        out = line.strip()
        if not out:
            continue
        # The test holds the FIFO open for reading already: this open does not block, and the
        # writer owns its write end from its first instant, so a kill at any moment ends the
        # test's read with EOF.
        stdout = os.open(out, os.O_WRONLY)
        pid = os.fork()
        if pid == 0:  # the writer: nothing but the database work is left to do
            status = 4
            try:
                os.dup2(stdout, 1)
                os.close(stdout)
                os.dup2(os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
                status = asyncio.run(run(url, settings, None, 0.0))
            finally:
                os._exit(status)
        os.close(stdout)
        _say("child", pid)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:  # reap the writers already killed
                pass
        except ChildProcessError:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--settings", default="{}", help="slatedb Settings as a JSON object")
    parser.add_argument("--max-batches", type=int, default=None)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between batches")
    parser.add_argument("--fork-server", action="store_true", help="fork writers on request")
    args = parser.parse_args(argv)
    if args.fork_server:
        return serve(args.url, json.loads(args.settings))
    return asyncio.run(run(args.url, json.loads(args.settings), args.max_batches, args.delay))


if __name__ == "__main__":
    sys.exit(main())
