"""The schema, the model and the read checks of the index state machine (issue 27,
tests/test_index_model.py), and the two faces (sync and async) it drives the store through.

The model is a dict of the live records; every index read is compared with what a recount of
it gives, ordered by the entry bytes (fields encoded with their key codecs, then the primary
key), so floats are told apart as the bytes they encode to (-0.0 is not 0.0, NaN is a value).
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from opendata_kv import Index, RecordType, fields
from opendata_kv.errors import OpendataKvError, UniqueIndexError
from opendata_kv.keys import Key
from opendata_kv.native import calls
from opendata_kv.store import OpenOptions, ScanRange, Store, SyncStore

user = RecordType("user", 1, [("id", fields.string)])
post = RecordType("post", 2, [("author", fields.string), ("n", fields.u32)])
SCHEMA = [user, post]
TYPES = {"user": user, "post": post}


def each_tag(key: Key, value: Any) -> list[tuple[str]]:
    return [(tag,) for tag in value.get("tags", [])]


by_team = Index("by_team", "user", [("team", fields.string)])
handle = Index("handle", "user", [("handle", fields.string)], kind="unique")
by_ratio = Index("by_ratio", "user", [("ratio", fields.f64)])
users_cov = Index("users_cov", "user", [("team", fields.string)], covering=True)
tags = Index("tags", ["user", "post"], [("tag", fields.string)], using=each_tag)
by_author = Index("by_author", "post", [("author", fields.string), ("team", fields.string)])
team_count = Index("team_count", "post", [("team", fields.string)], kind="count")
likes_sum = Index("likes_sum", "post", [("author", fields.string)], kind="sum", amount="likes")
#: issue 37: float, tiny and huge amounts (the machine's score rules), summed exactly
score_sum = Index("score_sum", "post", [("author", fields.string)], kind="sum", amount="score")
#: declared later (online build), dropped and declared again by the machine
late = Index("late_team", ["user", "post"], [("team", fields.string)])
BASE = [by_team, handle, by_ratio, users_cov, tags, by_author, team_count, likes_sum, score_sum]

TEAMS = ["a", "ab", "b"]
HANDLES = ["h1", "h2", "h3"]
RATIOS = [-0.0, 0.0, math.nan, math.inf, -math.inf, 1.5]
AUTHORS = ["a", "ab", "b"]
TAGS = ["p", "q"]
#: the leading values each index is read with (a value nobody holds included)
DOMAIN: dict[str, list[Any]] = {
    "by_team": [*TEAMS, "zz"],
    "users_cov": [*TEAMS, "zz"],
    "late_team": [*TEAMS, "zz"],
    "handle": [*HANDLES, "hx"],
    "by_ratio": [*RATIOS, 2.5],
    "tags": [*TAGS, "r"],
    "by_author": [*AUTHORS, "zz"],
    "team_count": [*TEAMS, "zz"],
    "likes_sum": [*AUTHORS, "zz"],
    "score_sum": [*AUTHORS, "zz"],
}
#: (start, end) bounds each index is read with
BOUNDS: dict[str, list[tuple[Any, Any]]] = {
    "by_team": [(("ab",), ("b",)), (("a",), None), (None, ("ab",))],
    "users_cov": [(("ab",), None)],
    "late_team": [(None, ("b",))],
    "handle": [(("h2",), ("h3",))],
    "by_ratio": [((0.0,), (math.inf,)), ((-0.0,), (0.0,)), (None, (-0.0,)), ((math.inf,), None)],
    "tags": [(("q",), None)],
    "by_author": [(("ab",), ("b",)), (("a", "ab"), ("a", "b"))],
}

MKey = tuple[Any, ...]  # ("user", id) or ("post", author, n)


def mkey(key: Key) -> MKey:
    return (key.record_type.name, *key)


def pk(k: MKey) -> bytes:
    return TYPES[k[0]].encode(*k[1:])


def canon(value: Any) -> Any:
    """A comparable form: floats by their bits (NaN equals NaN, -0.0 differs from 0.0)."""
    if isinstance(value, float):
        return ("f64", struct.pack(">d", value))
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    return value


def field(k: MKey, value: Any, name: str) -> Any:
    """A field from the key first, then the value (None when absent)."""
    names = TYPES[k[0]].field_names
    if name in names:
        return k[1 + list(names).index(name)]
    return value.get(name)


def entries_of(index: Index, k: MKey, value: Any) -> set[tuple[Any, ...]]:
    """The field tuples a record is indexed under, written out by hand from docs/indexes.md."""
    if k[0] not in index.records:
        return set()
    if index.using is not None:
        return {(t,) for t in value.get("tags", [])}
    values = tuple(field(k, value, name) for name, _ in index.fields)
    return set() if None in values else {values}


def encode(index: Index, values: Iterable[Any]) -> bytes:
    return b"".join(codec.encode(v) for (_, codec), v in zip(index.fields, values, strict=False))


class Model:
    """The live records: key -> value."""

    def __init__(self) -> None:
        self.live: dict[MKey, Any] = {}

    def copy(self) -> Model:
        other = Model()
        other.live = dict(self.live)
        return other

    def holder(self, h: str, other_than: MKey | None = None) -> MKey | None:
        for k, v in self.live.items():
            if k[0] == "user" and v.get("handle") == h and k != other_than:
                return k
        return None

    def clash(self, k: MKey, value: Any) -> MKey | None:
        """Who holds the handle a put of `value` under `k` would take (None: free)."""
        if k[0] != "user" or value.get("handle") is None:
            return None
        return self.holder(value["handle"], k)

    def duplicate_handle(self) -> bool:
        seen = [v["handle"] for k, v in self.live.items() if k[0] == "user" and "handle" in v]
        return len(seen) != len(set(seen))

    def apply(self, op: tuple[Any, ...]) -> None:
        if op[0] == "put":
            self.live[op[1]] = op[2]
        else:
            self.live.pop(op[1], None)

    def value_entries(self, index: Index) -> list[tuple[bytes, tuple[Any, ...], MKey, Any]]:
        """(entry bytes, field values, key, value) of a value or unique index, in entry order."""
        out = []
        for k, v in self.live.items():
            for values in entries_of(index, k, v):
                tail = b"" if index.kind == "unique" else pk(k)
                out.append((encode(index, values) + tail, values, k, v))
        return sorted(out, key=lambda e: e[0])

    def groups(self, index: Index) -> dict[bytes, tuple[tuple[Any, ...], int, Any]]:
        """Encoded group -> (values, count, sum) of a count or sum index."""
        amounts: dict[bytes, tuple[tuple[Any, ...], list[Any]]] = {}
        for k, v in self.live.items():
            for values in entries_of(index, k, v):
                amount = field(k, v, index.amount) if isinstance(index.amount, str) else 0
                enc = encode(index, values)
                amounts.setdefault(enc, (values, []))[1].append(0 if amount is None else amount)
        out = {enc: (values, len(a), exact_sum(a)) for enc, (values, a) in amounts.items()}
        return dict(sorted(out.items()))

    def group_amounts(self, index: Index, group: Any, but: MKey | None = None) -> list[Any]:
        """The amounts of a one-field group's live records (but the record `but`)."""
        return [
            0 if field(k, v, index.amount) is None else field(k, v, index.amount)
            for k, v in self.live.items()
            if k != but and (group,) in entries_of(index, k, v) and isinstance(index.amount, str)
        ]


def exact_sum(amounts: list[Any]) -> Any:
    """A sum index's total as docs/indexes.md defines it: Python's sum while every amount is an
    int, else the exact total (fractions) rounded once to a float."""
    if not any(isinstance(a, float) for a in amounts):
        return sum(amounts)
    return float(sum((Fraction(a) for a in amounts), Fraction(0)))


# --- the faces -----------------------------------------------------------------------------------

Op = tuple[Any, ...]  # ("put", key, value, ttl) | ("delete", key)
Outcome = OpendataKvError | None


class Abort(Exception):
    """Raised inside a batch or transaction block to abort it."""


class SyncFace:
    """The machine's writes and reads through a SyncStore."""

    name = "sync"

    def __init__(self, url: str, indexes: list[Index]) -> None:
        self.db = SyncStore.open(url, SCHEMA, indexes=indexes)

    def close(self) -> None:
        self.db.close()

    def put(self, k: MKey, value: Any, ttl: float | None) -> None:
        self.db.put(TYPES[k[0]], k[1:], value, ttl=ttl)

    def delete(self, k: MKey) -> None:
        self.db.delete(TYPES[k[0]], k[1:])

    def get(self, k: MKey) -> Any:
        return self.db.get(TYPES[k[0]], k[1:])

    def delete_range(self, record: str, *leading: Any) -> int:
        return self.db.delete_range(record, *leading)

    def put_many(self, items: list[tuple[MKey, Any]], batch_size: int) -> int:
        return self.db.put_many(((TYPES[k[0]], k[1:], v) for k, v in items), batch_size=batch_size)

    def batch(self, ops: list[Op], abort: bool) -> None:
        with self.db.batch() as batch:
            for op in ops:
                if op[0] == "put":
                    batch.put(TYPES[op[1][0]], op[1][1:], op[2], ttl=op[3])
                else:
                    batch.delete(TYPES[op[1][0]], op[1][1:])
            if abort:
                raise Abort

    def transaction(self, ops: list[Op], rollback: bool, isolation: str) -> list[Outcome]:
        """Each op's outcome (a refused op is skipped and the transaction goes on)."""
        outcomes: list[Outcome] = []
        with self.db.transaction(isolation) as tx:
            for op in ops:
                try:
                    if op[0] == "put":
                        tx.put(TYPES[op[1][0]], op[1][1:], op[2], ttl=op[3])
                    else:
                        tx.delete(TYPES[op[1][0]], op[1][1:])
                    outcomes.append(None)
                except OpendataKvError as exc:
                    outcomes.append(exc)
            if rollback:
                raise Abort
        return outcomes

    def flush(self) -> None:
        self.db.flush()

    def build(self, name: str, rebuild: bool, batch_size: int, writes: list[Op]) -> list[Outcome]:
        """Build (or rebuild) an index, making one of `writes` after each step it reports (the
        rest after it ends); returns each write's outcome."""
        pending = list(writes)
        outcomes: list[Outcome] = []

        def step(done: int, what: str) -> None:
            if pending:
                outcomes.append(self._write(pending.pop(0)))

        run = self.db.rebuild_index if rebuild else self.db.build_index
        run(name, batch_size=batch_size, progress=step)
        outcomes += [self._write(op) for op in pending]
        return outcomes

    def _write(self, op: Op) -> Outcome:
        try:
            if op[0] == "put":
                self.put(op[1], op[2], op[3])
            else:
                self.delete(op[1])
        except OpendataKvError as exc:
            return exc
        return None

    def drop(self, name: str) -> None:
        self.db.drop_index(name)

    def scan(self, index: Index, *leading: Any, **kw: Any) -> tuple[list[Any], bool, Any]:
        scan = self.db.index_scan(index, *leading, **kw)
        items = scan.to_list()
        return items, scan.has_more(), scan.cursor

    def lookup(self, index: Index, *values: Any) -> Any:
        return self.db.lookup(index, *values)

    def count(self, index: Index, *group: Any) -> int:
        return self.db.index_count(index, *group)

    def sum(self, index: Index, *group: Any) -> Any:
        return self.db.index_sum(index, *group)

    def check(self) -> list[Any]:
        return self.db.check_indexes()

    def info(self) -> dict[str, dict[str, Any]]:
        return self.db.index_info()


class AsyncFace(SyncFace):
    """The same through the async Store, each call run on a loop the face keeps; an online
    build runs as a task beside a task making one write after each step the build reports."""

    name = "async"

    def __init__(self, url: str, indexes: list[Index]) -> None:
        self.loop = asyncio.new_event_loop()
        self.store: Store = self.run(Store.open(url, SCHEMA, indexes=indexes))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.loop.close()

    def put(self, k: MKey, value: Any, ttl: float | None) -> None:
        self.run(self.store.put(TYPES[k[0]], k[1:], value, ttl=ttl))

    def delete(self, k: MKey) -> None:
        self.run(self.store.delete(TYPES[k[0]], k[1:]))

    def get(self, k: MKey) -> Any:
        return self.run(self.store.get(TYPES[k[0]], k[1:]))

    def delete_range(self, record: str, *leading: Any) -> int:
        deleted: int = self.run(self.store.delete_range(record, *leading))
        return deleted

    def put_many(self, items: list[tuple[MKey, Any]], batch_size: int) -> int:
        gen = ((TYPES[k[0]], k[1:], v) for k, v in items)
        done: int = self.run(self.store.put_many(gen, batch_size=batch_size))
        return done

    def batch(self, ops: list[Op], abort: bool) -> None:
        async def go() -> None:
            async with self.store.batch() as batch:
                for op in ops:
                    if op[0] == "put":
                        batch.put(TYPES[op[1][0]], op[1][1:], op[2], ttl=op[3])
                    else:
                        batch.delete(TYPES[op[1][0]], op[1][1:])
                if abort:
                    raise Abort

        self.run(go())

    def transaction(self, ops: list[Op], rollback: bool, isolation: str) -> list[Outcome]:
        async def go() -> list[Outcome]:
            outcomes: list[Outcome] = []
            async with self.store.transaction(isolation) as tx:
                for op in ops:
                    try:
                        if op[0] == "put":
                            await tx.put(TYPES[op[1][0]], op[1][1:], op[2], ttl=op[3])
                        else:
                            await tx.delete(TYPES[op[1][0]], op[1][1:])
                        outcomes.append(None)
                    except OpendataKvError as exc:
                        outcomes.append(exc)
                if rollback:
                    raise Abort
            return outcomes

        result: list[Outcome] = self.run(go())
        return result

    def flush(self) -> None:
        self.run(self.store.flush())

    def build(self, name: str, rebuild: bool, batch_size: int, writes: list[Op]) -> list[Outcome]:
        async def write(op: Op) -> Outcome:
            try:
                if op[0] == "put":
                    await self.store.put(TYPES[op[1][0]], op[1][1:], op[2], ttl=op[3])
                else:
                    await self.store.delete(TYPES[op[1][0]], op[1][1:])
            except OpendataKvError as exc:
                return exc
            return None

        stepped = asyncio.Event()  # set by each build step reported (and by the build's end)
        ended = False

        async def writer() -> list[Outcome]:
            outcomes = []
            for op in writes:  # one write after each step, in the build's next pause
                if not ended:
                    await stepped.wait()
                    stepped.clear()
                outcomes.append(await write(op))
            return outcomes

        async def builder() -> None:
            nonlocal ended
            run = self.store.rebuild_index if rebuild else self.store.build_index
            try:
                await run(name, batch_size=batch_size, progress=lambda *_: stepped.set())
            finally:
                ended = True
                stepped.set()

        async def go() -> list[Outcome]:
            _, outcomes = await asyncio.gather(builder(), writer())
            return outcomes

        result: list[Outcome] = self.run(go())
        return result

    def drop(self, name: str) -> None:
        self.run(self.store.drop_index(name))

    def scan(self, index: Index, *leading: Any, **kw: Any) -> tuple[list[Any], bool, Any]:
        async def go() -> tuple[list[Any], bool, Any]:
            scan = self.store.index_scan(index, *leading, **kw)
            items = await scan.to_list()
            return items, await scan.has_more(), scan.cursor

        result: tuple[list[Any], bool, Any] = self.run(go())
        return result

    def lookup(self, index: Index, *values: Any) -> Any:
        return self.run(self.store.lookup(index, *values))

    def count(self, index: Index, *group: Any) -> int:
        found: int = self.run(self.store.index_count(index, *group))
        return found

    def sum(self, index: Index, *group: Any) -> Any:
        return self.run(self.store.index_sum(index, *group))

    def check(self) -> list[Any]:
        found: list[Any] = self.run(self.store.check_indexes())
        return found

    def info(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self.run(self.store.index_info())
        return found


class CachedSyncFace(SyncFace):
    """The SyncStore face with a record cache small enough to evict (issue 40 point 3)."""

    name = "cached"
    CACHE_BYTES = 1_500

    def __init__(self, url: str, indexes: list[Index]) -> None:
        options = OpenOptions(indexes=indexes, record_cache_bytes=self.CACHE_BYTES)
        self.db = SyncStore.open(url, SCHEMA, options=options)

    def cache_agrees(self) -> int:
        """Check every cached row against the store read without the cache; how many."""
        cache = self.db.record_cache
        assert cache is not None
        assert cache.size <= cache.limit
        rows = dict(cache._rows)
        for key, row in rows.items():
            assert calls.get_row_now(self.db.store._source, key) == row, key
        return len(rows)


FACES: dict[str, Callable[[str, list[Index]], SyncFace]] = {
    "sync": SyncFace,
    "async": AsyncFace,
    "cached": CachedSyncFace,
}


# --- every read form against the model ------------------------------------------------------------


def _records(items: list[Any]) -> list[tuple[MKey, Any]]:
    return [(mkey(r.key), canon(r.value)) for r in items]


def _entries(items: list[Any]) -> list[tuple[Any, MKey]]:
    return [(canon(e.values), mkey(e.key)) for e in items]


def _bound(index: Index, bound: Any) -> bytes | None:
    return None if bound is None else encode(index, bound)


def check_value_index(face: SyncFace, model: Model, index: Index) -> None:
    """Every index_scan form of a value or unique index against the model's entries."""
    want = model.value_entries(index)
    records = [(k, canon(v)) for _, _, k, v in want]
    entries = [(canon(values), k) for _, values, k, _ in want]
    items, more, _ = face.scan(index)
    assert _records(items) == records, f"{index.name}: index_scan"
    assert not more
    items, _, _ = face.scan(index, records=False)
    assert _entries(items) == entries, f"{index.name}: records=False"
    items, more, _ = face.scan(index, reverse=True)
    assert _records(items) == records[::-1], f"{index.name}: reverse"
    for reverse in (False, True):  # pages of 2 (forward) and 1 (reverse) through cursors
        size = 1 if reverse else 2
        got: list[Any] = []
        after = None
        while True:
            items, more, after = face.scan(
                index, records=False, reverse=reverse, limit=size, after=after
            )
            assert len(items) == min(size, len(entries) - len(got)), f"{index.name}: limit"
            got += _entries(items)
            assert more == (len(got) < len(entries)), f"{index.name}: has_more ({reverse=})"
            if not more:
                break
        assert got == (entries[::-1] if reverse else entries), f"{index.name}: paging"
    for value in DOMAIN[index.name]:
        enc = encode(index, (value,))
        items, more, _ = face.scan(index, value)
        narrowed = [r for r, e in zip(records, want, strict=True) if e[0].startswith(enc)]
        assert _records(items) == narrowed, f"{index.name}: index_scan({value!r})"
        assert not more
    if index.fields[0][1] is fields.string:  # a partial first field, as a range value
        items, _, _ = face.scan(index, range=ScanRange(partial="a"), records=False)
        assert _entries(items) == [
            e for e, w in zip(entries, want, strict=True) if str(w[1][0]).startswith("a")
        ], f"{index.name}: prefix"
    for start, end in BOUNDS.get(index.name, []):
        lo, hi = _bound(index, start), _bound(index, end)
        items, _, _ = face.scan(index, start=start, end=end, records=False)
        assert _entries(items) == [
            e
            for e, w in zip(entries, want, strict=True)
            if (lo is None or w[0] >= lo) and (hi is None or w[0] < hi)
        ], f"{index.name}: start={start!r} end={end!r}"
    if index.kind == "unique":
        for value in DOMAIN[index.name]:
            found = face.lookup(index, value)
            held = [(k, canon(v)) for _, values, k, v in want if values == (value,)]
            got_one = [] if found is None else [(mkey(found.key), canon(found.value))]
            assert got_one == held, f"{index.name}: lookup({value!r})"


def check_aggregate(face: SyncFace, model: Model, index: Index) -> None:
    groups = model.groups(index)
    items, more, _ = face.scan(index, records=False)
    got = [
        (canon(e.values), e.records, canon(e.sum) if index.kind == "sum" else None) for e in items
    ]
    want = [
        (canon(values), count, canon(total) if index.kind == "sum" else None)
        for values, count, total in groups.values()
    ]
    assert got == want, f"{index.name}: aggregate entries"
    assert not more
    by_values = {canon(values): (count, total) for values, count, total in groups.values()}
    for value in DOMAIN[index.name]:
        count, total = by_values.get(canon((value,)), (0, 0))
        assert face.count(index, value) == count, f"{index.name}: index_count({value!r})"
        if index.kind == "sum":
            got_sum = face.sum(index, value)  # the same type and bits: 1 is not 1.0
            assert canon(got_sum) == canon(total), f"{index.name}: index_sum({value!r})"


def check_everything(face: SyncFace, model: Model, readable: list[Index]) -> None:
    """Every read form of every readable index equals the model, and check_indexes() == []."""
    for index in readable:
        if index.aggregate:
            check_aggregate(face, model, index)
        else:
            check_value_index(face, model, index)
    problems = face.check()
    assert problems == [], [str(p) for p in problems]


def expect_refused(outcome: Outcome, holder: MKey | None) -> None:
    """A write the model refuses raised UniqueIndexError naming the live holder."""
    assert isinstance(outcome, UniqueIndexError), outcome
    assert holder is not None and mkey(outcome.key) == holder, (outcome, holder)
