"""The writer's cache of aggregate groups (store/indexes/groups.py, RFC 0010 "The group
cache"): a batch reads only the groups it does not know, and every way a group can change
outside the writer's upkeep (a failed or uncertain write, a transaction, a raw write of an
index row, a rebuild) leaves later counts equal to a recount."""

from __future__ import annotations

from typing import Any

import pytest
from indexkit import SCHEMA, InjectedWriteError, failing_write, likes, per_tag, post

from opendata_kv.store import SyncStore
from opendata_kv.store import writer as writer_module
from opendata_kv.store.indexes.groups import GroupCache
from opendata_kv.store.indexes.layout import encode_aggregate, encode_fields

INDEXES = [per_tag, likes]


def _group_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every index row the writer's upkeep reads from now on (unique holders and groups)."""
    asked: list[bytes] = []
    real = writer_module.current_values

    async def counting(source: Any, where: str, keys: list[bytes], **kw: Any) -> Any:
        asked.extend(keys)
        return await real(source, where, keys, **kw)

    monkeypatch.setattr(writer_module, "current_values", counting)
    return asked


def _posts(start: int, n: int, tag: str = "x", likes_each: int = 2) -> list[Any]:
    return [(post, ("a", i), {"tag": tag, "likes": likes_each}) for i in range(start, start + n)]


def _counts(db: SyncStore) -> tuple[int, int | float]:
    assert db.check_indexes() == []
    return db.index_count(per_tag, "x"), db.index_sum(likes, "a")


def test_a_known_group_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=INDEXES) as db:
        asked = _group_reads(monkeypatch)
        db.put_many(_posts(0, 5), batch_size=5)
        assert len(asked) == 2  # the first batch reads its two groups
        db.put_many(_posts(5, 5), batch_size=5)
        db.put(post, ("a", 10), {"tag": "x", "likes": 1})
        assert len(asked) == 2  # later ones know them
        assert _counts(db) == (11, 21)


@pytest.mark.parametrize("landed", [False, True])
def test_a_failed_write_drops_the_cache(monkeypatch: pytest.MonkeyPatch, landed: bool) -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=INDEXES) as db:
        db.put_many(_posts(0, 3), batch_size=3)
        asked = _group_reads(monkeypatch)
        with failing_write(landed) as failed, pytest.raises(InjectedWriteError):
            db.put_many(_posts(3, 3), batch_size=3)
        assert failed
        db.put_many(_posts(6, 3), batch_size=3)
        assert len(asked) == 2  # read again after the failure
        assert _counts(db) == ((9, 18) if landed else (6, 12))


def test_a_transaction_drops_the_cache() -> None:
    with SyncStore.open("memory://", SCHEMA, indexes=INDEXES) as db:
        db.put_many(_posts(0, 3), batch_size=3)
        with db.transaction() as tx:
            tx.put(post, ("a", 50), {"tag": "x", "likes": 5})
        db.put_many(_posts(3, 2), batch_size=2)
        assert _counts(db) == (6, 15)


def test_a_raw_write_of_a_group_row_drops_the_cache() -> None:
    group = encode_fields(per_tag.name, per_tag.fields, ("x",))
    with SyncStore.open("memory://", SCHEMA, indexes=INDEXES) as db:
        db.put_many(_posts(0, 3), batch_size=3)
        db.put_raw(group, encode_aggregate(100, 0))  # damage, as a tool could plant it
        db.put(post, ("a", 3), {"tag": "x", "likes": 2})
        assert db.index_count(per_tag, "x") == 101  # counted from what is stored
        with db.batch() as batch:
            batch.put_raw(group, encode_aggregate(7, 0))
        db.put(post, ("a", 4), {"tag": "x", "likes": 2})
        assert db.index_count(per_tag, "x") == 8
        db.rebuild_index(per_tag.name)
        db.put(post, ("a", 5), {"tag": "x", "likes": 2})
        assert _counts(db) == (6, 12)


def test_the_cache_learns_only_acknowledged_writes_and_stays_bounded() -> None:
    cache = GroupCache(limit=3)
    assert cache.known(1) == {}
    cache.stage({b"g1": (1, 0)})
    assert cache.known(1) == {}  # staged, not yet acknowledged
    cache.written()
    assert cache.known(1) == {b"g1": (1, 0)}
    cache.stage({b"g2": None})
    cache.drop()  # a drop between plan and acknowledgement: nothing learnt
    cache.written()
    assert cache.known(1) == {}
    cache.stage({b"g1": (1, 0), b"g2": (2, 0)})
    cache.written()
    cache.stage({b"g3": (3, 0), b"g4": (4, 0)})
    cache.written()  # over the limit: starts afresh
    assert cache.known(1) == {b"g3": (3, 0), b"g4": (4, 0)}
    cache.stage({bytes([i]): (i, 0) for i in range(4)})
    cache.written()  # one write larger than the limit is not remembered
    assert len(cache) == 0
    cache.stage({b"g1": (1, 0)})
    cache.written()
    assert cache.known(2) == {}  # the index set changed generation
