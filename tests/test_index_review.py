"""Index upkeep on paths the #27 work did not exercise (review hR): a store opened with
check_expiry=False (expired records stay visible, so their entries are what a write
replaces), field values an index cannot hold."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from opendata_kv import Index, RecordType, fields
from opendata_kv.errors import KeyEncodeError
from opendata_kv.store import SyncStore

user = RecordType("user", 1, [("id", fields.string)])
by_team = Index("by_team", "user", [("team", fields.string)])
handle = Index("handle", "user", [("handle", fields.string)], kind="unique")
copy = Index("copy", "user", [("team", fields.string)], covering=True)
INDEXES = [by_team, handle, copy]
WALKED = 20  # a batch of at least old_values.WALK_MIN_KEYS keys walks them with an iterator


def _ids(records: Any) -> list[str]:
    return [r.key.id for r in records]


def _expired_store(url: str, n: int) -> None:
    with SyncStore.open(url, [user], indexes=INDEXES) as db:
        for i in range(n):
            db.put(user, (f"u{i:02}",), {"team": "a", "handle": f"h{i}"}, ttl=0.02)
    time.sleep(0.06)


@pytest.mark.parametrize("how", ["put", "batch", "walked_batch", "transaction", "rebuild"])
def test_check_expiry_false_replaces_the_expired_records_it_shows(
    tmp_path: Path, how: str
) -> None:
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
