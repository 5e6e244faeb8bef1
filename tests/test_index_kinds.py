"""Every registered index kind through every surface (issue 44 point 1): its declaration rules,
its maintainer on puts, replaces, deletes and batches, its TTL policy, index_scan (entries and
records), lookup when unique, check_indexes, a rebuild, the change feed and the CLI's index
rows. A new kind registered in store/indexes/kinds.py runs here without editing this file."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import run

from opendata_kv import Index, RecordType, fields
from opendata_kv.cli.index_rows import IndexKeys
from opendata_kv.errors import IndexTtlError, SchemaError, UniqueIndexError
from opendata_kv.store import IndexChange, Store
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.kinds import KINDS, kind_named
from opendata_kv.store.indexes.layout import decode_entry, entry_prefix
from opendata_kv.store.indexes.read import holds

item = RecordType("item", 1, [("rkey", fields.u32)])
GROUPS = ("a", "b", "c")


def declared(kind: IndexKind, **extra: Any) -> Index:
    """The smallest declaration of `kind` its rules allow: one string field, an amount when
    it takes one."""
    options: dict[str, Any] = {"amount": "n"} if kind.takes_amount else {}
    options.update(extra)
    return Index(f"by_{kind.name}", "item", [("group", fields.string)], kind=kind.name, **options)


@pytest.mark.parametrize("name", list(KINDS))
def test_the_declaration_follows_the_kind(name: str) -> None:
    """The registry names the kind; its rules refuse what it does not take."""
    kind = kind_named(name)
    index = declared(kind)
    assert index.index_kind is kind and index.kind == name
    assert index.aggregate == kind.aggregate
    if not kind.takes_amount:
        with pytest.raises(SchemaError):
            declared(kind, amount="n")
    if not kind.takes_covering:
        with pytest.raises(SchemaError):
            declared(kind, covering=True)
    if kind.needs_fields:
        with pytest.raises(SchemaError):
            Index("no_fields", "item", [], kind=name, amount="n" if kind.takes_amount else None)


def test_an_unknown_kind_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(SchemaError) as caught:
        Index("odd", "item", [("group", fields.string)], kind="median")
    assert caught.value.field == "kind" and caught.value.value == "median"
    assert all(name in str(caught.value) for name in KINDS)


#: one write: (record number, its group or None for no entry, its amount, delete it)
writes = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from([*GROUPS, None]),
        st.integers(-3, 9),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


async def entry_rows(store: Store, index: Index) -> dict[bytes, bytes]:
    """The index's stored entry rows, read as raw rows."""
    rows = store.scan_all(prefix=entry_prefix(index.name), on_unknown="raw")
    return {row.raw_key: row.value async for row in rows}


async def every_surface(path: Path, kind: IndexKind, ops: list[Any]) -> None:
    index = declared(kind)
    async with Store.open(path, [item], indexes=[index]) as store:
        for rkey, group, n, delete in ops:
            if delete:
                await store.delete(item, (rkey,))
                continue
            value = {"n": n} if group is None else {"group": group, "n": n}
            try:
                await store.put(item, (rkey,), value)
            except UniqueIndexError:
                assert kind.unique  # another record holds the group: nothing was written
        async with store.batch() as batch:  # a batch: the columnar path of change_all
            for rkey in range(6, 9):  # groups of their own: no unique clash
                batch.put(item, (rkey,), {"group": f"g{rkey}", "n": rkey})
        # the TTL policy
        if kind.takes_ttl:
            await store.put(item, (20,), {"group": "ttl", "n": 1}, ttl=3600)
        else:
            with pytest.raises(IndexTtlError):
                await store.put(item, (20,), {"group": "ttl", "n": 1}, ttl=3600)
        await store.flush()

        # check: the stored entries equal the kind's recount from the records
        assert await store.check_indexes() == []
        stored = await entry_rows(store, index)
        assert stored  # the batch wrote entries

        # index_scan, entries: one per stored row, decoded by the kind
        entries = await store.index_scan(index, records=False).to_list()
        assert [e.raw_key for e in entries] == list(stored)
        for entry in entries:
            values, rest = decode_entry(index.name, index.fields, entry.raw_key)
            assert entry.values == values
            data = stored[entry.raw_key]
            if kind.aggregate:
                assert entry.key is None
                assert (entry.records, entry.sum) == kind.counts(index.name, entry.raw_key, data)
            else:
                assert entry.key is not None
                assert entry.key.encode() == kind.primary(rest, data)
        # index_scan, records: each one still holds the entry it came through
        if not kind.aggregate:
            found = await store.index_scan(index).to_list()
            assert len(found) == len(entries)
            for record, entry in zip(found, entries, strict=True):
                assert holds(index, record, entry.raw_key)
        if kind.unique:
            for entry in entries:
                record = await store.lookup(index, *entry.values)
                assert record is not None and record.key == entry.key
        if kind.aggregate:
            for entry in entries:
                assert await store.index_count(index, *entry.values) == entry.records
                assert await store.index_sum(index, *entry.values) == entry.sum

        # the change feed decodes every entry write of the index
        feed = [
            c
            async for c in store.changes(None, indexes=True)
            if isinstance(c, IndexChange) and c.index == index.name and c.part == "entry"
        ]
        assert feed
        for change in feed:
            assert change.fields is not None and set(change.fields) == {"group"}
            if change.op != "put":
                continue
            if kind.aggregate:
                assert change.value == kind.counts(index.name, change.raw_key, change.raw_value)
            else:
                assert change.record_key is not None and change.record_key.record_type is item

        # the CLI's index rows (dump): every entry decodes, its value as the kind shows it
        keys = await IndexKeys.load(store, store.schema)
        for key, data in stored.items():
            row = keys.row(key, data)
            assert row.key_error is None and row.obj["error"] is None, row.obj
            assert row.obj["entry"] == kind.name and row.obj["index"] == index.name
            if kind.aggregate:
                assert row.obj["value"] == kind.shown_value(index.name, key, data)
            else:
                assert row.obj["primary"]["record"] == "item"

        # a rebuild (the build path of the maintainer) writes the same rows
        await store.rebuild_index(index.name)
        await store.flush()
        assert await entry_rows(store, index) == stored
        assert await store.check_indexes() == []


@pytest.mark.parametrize("name", list(KINDS))
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=writes)
def test_every_kind_works_through_every_surface(name: str, ops: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(every_surface(Path(tmp) / "db", KINDS[name], ops))


def test_index_entry_total_and_amount_are_deprecated_names() -> None:
    """IndexEntry.total was a count and .amount a sum: both still read, with a warning."""
    from opendata_kv.store.indexes.read import IndexEntry

    entry = IndexEntry(("a",), None, b"k", 3, 7)
    assert (entry.records, entry.sum) == (3, 7)
    with pytest.warns(DeprecationWarning, match="IndexEntry.records"):
        assert entry.total == 3
    with pytest.warns(DeprecationWarning, match="IndexEntry.sum"):
        assert entry.amount == 7
