"""Index upkeep on paths the #27 work did not exercise (review hR): a store opened with
check_expiry=False (expired records stay visible, so their entries are what a write
replaces), field values an index cannot hold."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from opendata_kv import Index, RecordType, fields
from opendata_kv.errors import KeyEncodeError, UniqueIndexError
from opendata_kv.store import SyncStore
from opendata_kv.store.indexes.layout import encode_fields

user = RecordType("user", 1, [("id", fields.string)])
by_team = Index("by_team", "user", [("team", fields.string)])
handle = Index("handle", "user", [("handle", fields.string)], kind="unique")
copy = Index("copy", "user", [("team", fields.string)], covering=True)
INDEXES = [by_team, handle, copy]
WALKED = 20  # a batch of at least old_values.WALK_MIN_KEYS keys walks them with an iterator


def _ids(records: Any) -> list[str]:
    return [r.key.id for r in records]


def _expired_store(url: str, n: int) -> None:
    """`n` records whose TTL has passed, every one still stored: the TTL outlasts the close's
    flush (a flush drops rows already expired, so a short TTL on a loaded machine lost the
    first of them), then the test waits it out."""
    ttl = 1.0
    written = time.monotonic()
    with SyncStore.open(url, [user], indexes=INDEXES) as db:
        for i in range(n):
            db.put(user, (f"u{i:02}",), {"team": "a", "handle": f"h{i}"}, ttl=ttl)
    time.sleep(max(0.0, written + ttl + 0.1 - time.monotonic()))


@pytest.mark.parametrize("how", ["put", "batch", "walked_batch", "transaction", "rebuild"])
def test_check_expiry_false_replaces_the_expired_records_it_shows(tmp_path: Path, how: str) -> None:
    url = str(tmp_path / "db")
    n = WALKED if how == "walked_batch" else 1
    _expired_store(url, n)
    with SyncStore.open(url, [user], indexes=INDEXES, check_expiry=False) as db:
        # this store shows the expired records, and their entries with them
        assert len(_ids(db.index_scan(by_team, "a"))) == n and db.check_indexes() == []
        new = [((f"u{i:02}",), {"team": "b", "handle": f"k{i}"}) for i in range(n)]
        if how == "put":
            db.put(user, *new[0])
        elif how == "transaction":
            with db.transaction() as tx:
                tx.put(user, *new[0])
        elif how == "rebuild":
            db.rebuild_index("copy")
            assert _ids(db.index_scan(copy, "a")) == ["u00"]
            return
        else:
            with db.batch() as batch:
                for fields_, value in new:
                    batch.put(user, fields_, value)
        assert db.index_scan(by_team, "a").to_list() == []
        assert db.index_scan(copy, "a").to_list() == []
        assert db.lookup(handle, "h0") is None
        assert db.check_indexes() == []
        db.put(user, ("v",), {"handle": "h0"})  # the value the replaced record held is free
        assert db.lookup(handle, "h0").key.id == "v"


@pytest.mark.parametrize("bad", [["a"], {"a": 1}])
def test_a_container_where_an_index_field_goes_is_refused_by_name(bad: Any) -> None:
    using = Index("using", "user", [("tag", fields.string)], using=lambda k, v: [(v["tag"],)])
    with SyncStore.open("memory://", [user], indexes=[by_team, using]) as db:
        for value in ({"team": bad}, {"team": "a", "tag": bad}):
            with pytest.raises(KeyEncodeError) as caught:
                db.put(user, ("u1",), value)
            assert caught.value.field in ("by_team", "using") and repr(bad) in str(caught.value)
        assert db.count(user) == 0 and db.check_indexes() == []


def test_entries_of_an_expired_value_go_when_its_key_is_written(tmp_path: Path) -> None:
    """A write removes the expired entries of the value it replaces: they are not shown by a
    check_expiry=True store, but a store opened with check_expiry=False shows every entry
    whose record row is still stored, and must not find them pointing at a record that no
    longer holds them. They count and hold nothing (a unique value is free at once)."""
    url = str(tmp_path / "db")
    with SyncStore.open(url, [user], indexes=INDEXES) as db:  # closed (in an SST) before
        db.put(user, ("u1",), {"team": "a", "handle": "h"}, ttl=0.3)  # it expires
    time.sleep(0.4)
    with SyncStore.open(url, [user], indexes=INDEXES) as db:
        db.put(user, ("v",), {"handle": "h"})  # h is free: its holder expired
        db.put(user, ("u1",), {"team": "b"})
        assert db.check_indexes() == [] and db.lookup(handle, "h").key.id == "v"
    with SyncStore.open(url, [user], indexes=INDEXES, check_expiry=False) as db:
        assert db.index_scan(by_team, "a", records=False).to_list() == []
        assert db.index_scan(copy, "a").to_list() == []
        assert db.lookup(handle, "h").key.id == "v"  # v's entry survived u1's rewrite
        assert db.check_indexes() == []


@pytest.mark.parametrize("how", ["delete_range", "batch"])
def test_a_live_holder_giving_up_its_value_beside_an_expired_one(how: str) -> None:
    """One batch writes the live holder of a unique value and a key whose expired value
    held it too: the live holder's entry goes, whatever the order of the two."""
    with SyncStore.open("memory://", [user], indexes=INDEXES) as db:
        db.put(user, ("u9",), {"handle": "h"}, ttl=0.02)  # after u1 in key order
        time.sleep(0.06)
        db.put(user, ("u1",), {"handle": "h"})
        if how == "delete_range":
            assert db.delete_range(user) == 1
        else:
            with db.batch() as batch:
                batch.put(user, ("u1",), {"handle": "k"})
                batch.put(user, ("u9",), {"team": "a"})
        assert db.lookup(handle, "h") is None and db.check_indexes() == []
        db.put(user, ("u5",), {"handle": "h"})  # free
        assert db.lookup(handle, "h").key.id == "u5"


# --- a state machine over the paths above: expiry, reopen, check_expiry=False sessions ---------

ratio = Index("ratio", "user", [("ratio", fields.f64)], kind="unique")
MACHINE_INDEXES = [*INDEXES, ratio]
KEYS = st.sampled_from(["u1", "u2"])
VALUES = st.fixed_dictionaries(
    {},
    optional={
        "team": st.sampled_from(["a", "b"]),
        "handle": st.sampled_from(["h1", "h2"]),
        "ratio": st.sampled_from([0.0, -0.0, 1.5, math.nan]),
    },
)
TTLS = st.sampled_from([None, None, 0.02, 3600])


def _entries(db: SyncStore, index: Index) -> list[tuple[bytes, bytes]]:
    return sorted((e.raw_key, e.key.encode()) for e in db.index_scan(index, records=False))


def _recount(db: SyncStore, index: Index) -> list[tuple[bytes, bytes]]:
    out = []
    for r in db.scan(user):
        for values in index.entries(r.key, r.value):
            entry = encode_fields(index.name, index.fields, values)
            out.append((entry if index.kind == "unique" else entry + r.raw_key, r.raw_key))
    return sorted(out)


class ExpiringIndexes(RuleBasedStateMachine):
    """Writes with short and long TTLs, waits, reopens and sessions opened with
    check_expiry=False (which write no TTL); after every step, in the normal view, every
    entry equals a recount of the live records."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="hR-machine-")
        self.db = SyncStore.open(self.dir, [user], indexes=MACHINE_INDEXES)

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _settle(self) -> None:
        time.sleep(0.05)  # every short TTL has passed: reads and the recount agree

    @rule(key=KEYS, value=VALUES, ttl=TTLS)
    def put(self, key: str, value: dict[str, Any], ttl: float | None) -> None:
        with contextlib.suppress(UniqueIndexError):
            self.db.put(user, (key,), value, ttl=ttl)
        self._settle()

    @rule(writes=st.lists(st.tuples(KEYS, st.none() | VALUES, TTLS), min_size=1, max_size=4))
    def batch(self, writes: list[tuple[str, Any, Any]]) -> None:
        now = time.time_ns() // 1_000_000
        with contextlib.suppress(UniqueIndexError), self.db.batch() as batch:
            for key, value, ttl in writes:
                raw = user.encode(key)
                if value is None:
                    batch.delete_raw(raw)
                else:
                    data = self.db.values.encode(user, value, raw)
                    expire_at = None if ttl is None else now + int(ttl * 1000)
                    batch.put_raw(raw, data, expire_at=expire_at)
        self._settle()

    @rule()
    def delete_range(self) -> None:
        self.db.delete_range(user)

    @rule(key=KEYS, value=VALUES, ttl=TTLS)
    def transaction(self, key: str, value: dict[str, Any], ttl: float | None) -> None:
        with contextlib.suppress(UniqueIndexError), self.db.transaction() as tx:
            tx.put(user, (key,), value, ttl=ttl)
        self._settle()

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = SyncStore.open(self.dir, [user], indexes=MACHINE_INDEXES)

    @rule(
        expiring=st.none() | st.tuples(KEYS, VALUES),
        writes=st.lists(st.tuples(KEYS, st.none() | VALUES), min_size=1, max_size=3),
    )
    def session_without_expiry(
        self, expiring: tuple[str, Any] | None, writes: list[tuple[str, Any]]
    ) -> None:
        if expiring is not None:  # stored in an SST before it expires (an expired row still
            with contextlib.suppress(UniqueIndexError):  # in the memtable is not flushed)
                self.db.put(user, (expiring[0],), expiring[1], ttl=0.2)
            self.reopen()
            time.sleep(0.25)
        self.db.close()
        self.db = SyncStore.open(self.dir, [user], indexes=MACHINE_INDEXES, check_expiry=False)
        for key, value in writes:
            with contextlib.suppress(UniqueIndexError):
                if value is None:
                    self.db.delete(user, (key,))
                else:
                    self.db.put(user, (key,), value)
        # this view shows expired records: value and covering entries follow them too (a
        # unique value freed by an expiry can be shown twice here, by design)
        for index in (by_team, copy):
            assert _entries(self.db, index) == _recount(self.db, index), index.name
        self.reopen()

    @invariant()
    def entries_equal_a_recount(self) -> None:
        assert self.db.check_indexes() == []
        for index in MACHINE_INDEXES:
            assert _entries(self.db, index) == _recount(self.db, index), index.name


ExpiringIndexes.TestCase.settings = settings(
    max_examples=int(os.environ.get("HR_MACHINE_EXAMPLES", "5")),
    stateful_step_count=8,
    deadline=None,
)
test_expiring_indexes = ExpiringIndexes.TestCase
