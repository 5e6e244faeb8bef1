"""Values a batch's writer read ahead (Store.read_before_write, carried by Batch.replacing)
stand in for the index plan's read of the values the write replaces only while nothing was
written since: hypothesis drives random batches into two stores with the same indexes, one
written with values read ahead (of some of the batch's keys, of others too, and sometimes
made stale by a write between the read and the batch's write), the other plainly; every
record and index row is compared byte for byte after each batch, and the indexes equal a
recount (check_indexes)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio
from test_index_routing import OPS, ROUTED, _apply, _rows

from opendata_kv import RecordType, Store, fields
from opendata_kv.collections import RECORDS, default_schema
from opendata_kv.collections import backlinks as bl
from opendata_kv.errors import OpendataKvError
from opendata_kv.store import Batch
from opendata_kv.store import writer as writer_module
from opendata_kv.store.indexes.maintain import _key_decoder

Op = tuple[str, str, str, Any]


def _batch(store: Store, ops: list[Op]) -> Batch:
    batch = Batch(store)
    record = RECORDS.record
    for repo, collection, rkey, value in ops:
        if value is None:
            batch.delete(record, (repo, collection, rkey))
        else:
            batch.put(record, (repo, collection, rkey), value)
    return batch


async def _apply_known(
    store: Store, ops: list[Op], extra: list[Op], between: list[Op] | None
) -> tuple[str | None, str | None]:
    """`ops` in one batch carrying values read ahead of its keys and of `extra`'s, with
    `between` (if any) written after the read: (the error of `between`, of the batch)."""
    record = RECORDS.record
    keys = [record.encode(r, c, k) for r, c, k, _ in [*ops, *extra]]
    known = await store.read_before_write(keys)
    refused_between = None if between is None else await _apply(store, between)
    try:
        batch = _batch(store, ops)
        batch.replacing(known)
        await store.write(batch)
    except OpendataKvError as exc:
        return refused_between, type(exc).__name__
    return refused_between, None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(OPS, min_size=1, max_size=10),
            st.lists(OPS, max_size=3),
            st.none() | st.lists(OPS, min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=5,
    )
)
@aio
async def test_values_read_ahead_give_the_rows_of_a_plain_write(
    batches: list[tuple[list[Op], list[Op], list[Op] | None]],
) -> None:
    schema = default_schema()
    name = uuid.uuid4().hex
    async with (
        Store.open(f"memory://known-{name}", schema, indexes=ROUTED) as known,
        Store.open(f"memory://plain-{name}", schema, indexes=ROUTED) as plain,
    ):
        for ops, extra, between in batches:
            refused = await _apply_known(known, ops, extra, between)
            expected_between = None if between is None else await _apply(plain, between)
            assert refused == (expected_between, await _apply(plain, ops))
            assert await _rows(known) == await _rows(plain)
        assert await known.check_indexes() == []


LIKE = ("did:plc:aaa", bl.LIKE, "3kaaaaaaaaa22")


@aio
async def test_a_stale_read_is_not_taken() -> None:
    """A write between the read and the batch's write (another subject for the like): the
    batch reads the replaced value again, so the old subject's entry goes."""
    record = RECORDS.record
    key = record.encode(*LIKE)
    async with Store.open(
        f"memory://stale-{uuid.uuid4().hex}", default_schema(), indexes=ROUTED
    ) as s:
        await s.put(record, LIKE, {"subject": {"uri": "at://one"}})
        known = await s.read_before_write([key])
        await s.put(record, LIKE, {"subject": {"uri": "at://two"}})
        batch = _batch(s, [(*LIKE, {"subject": {"uri": "at://three"}})])
        batch.replacing(known)
        await s.write(batch)
        assert await s.check_indexes() == []


@pytest.mark.parametrize("stale", [False, True])
@aio
async def test_the_plan_reads_only_what_was_not_read_ahead(
    stale: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys read ahead are not read again by the write's index upkeep, unless stale."""
    record = RECORDS.record
    read: list[bytes] = []
    old_values = writer_module.old_values

    async def counted(source: Any, where: str, keys: list[bytes], *args: Any, **kw: Any) -> Any:
        read.extend(keys)
        return await old_values(source, where, keys, *args, **kw)

    async with Store.open(
        f"memory://ahead-{uuid.uuid4().hex}", default_schema(), indexes=ROUTED
    ) as s:
        await s.put(record, LIKE, {"subject": {"uri": "at://one"}})
        other = ("did:plc:bbb", bl.LIKE, "3kaaaaaaaaa22")
        known = await s.read_before_write([record.encode(*LIKE)])
        if stale:
            await s.put(record, other, {"subject": {"uri": "at://x"}})
        monkeypatch.setattr(writer_module, "old_values", counted)
        batch = _batch(s, [(*LIKE, None), (*other, {"subject": {"uri": "at://two"}})])
        batch.replacing(known)
        await s.write(batch)
        expected = (
            [record.encode(*LIKE), record.encode(*other)] if stale else [record.encode(*other)]
        )
        assert sorted(read) == sorted(expected)
        assert await s.check_indexes() == []


class _Named(NamedTuple):
    repo: Annotated[str, fields.string]
    rkey: Annotated[str, fields.rkey("any")]


_DECLARED = RecordType("declared", 3, _Named)
_RKEYS = st.from_regex(r"[A-Za-z0-9._:~-]{1,20}", fullmatch=True).filter(
    lambda s: s not in {".", ".."}
)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(["app.bsky.feed.like", "com.example.x"]), _RKEYS)
def test_a_key_from_its_fields_is_its_decode(repo: str, collection: str, rkey: str) -> None:
    """The Key built from a put's field tuple equals the decode of the key bytes, class and
    all (plain and declared key classes); fields that are not all str are decoded."""
    for record_type, values in (
        (RECORDS.record, (repo, collection, rkey)),
        (_DECLARED, (repo, rkey)),
    ):
        try:
            key = record_type.encode(*values)
        except OpendataKvError:
            continue  # a string UTF-8 cannot encode: no put, nothing to decode
        decoded = record_type.decode(key)
        built = _key_decoder(record_type, {key: values})(key)
        assert built == decoded and type(built) is type(decoded)
        assert tuple(built) == tuple(values)
    as_tid = RecordType("with_tid", 4, [("repo", fields.string), ("at", fields.tid)])
    assert _key_decoder(as_tid, {b"x": ("a", "b")}) == as_tid.decode  # not all strings


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(OPS, min_size=1, max_size=10), min_size=1, max_size=4))
@aio
async def test_keys_from_put_fields_give_the_rows_of_decoded_keys(
    batches: list[list[Op]],
) -> None:
    """Puts addressed by field tuple (their fields kept for upkeep) and by Key (decoded) give
    the same rows."""
    schema = default_schema()
    name = uuid.uuid4().hex
    record = RECORDS.record
    async with (
        Store.open(f"memory://fields-{name}", schema, indexes=ROUTED) as by_fields,
        Store.open(f"memory://keys-{name}", schema, indexes=ROUTED) as by_keys,
    ):
        warm = Batch(by_fields)  # a record type's first put binds its encoders: the rest
        warm.put(record, ("did:plc:aaa", bl.LIKE, "3kaaaaaaaaa22"), {})  # keep their fields
        warm.put(record, ("did:plc:bbb", bl.LIKE, "3kaaaaaaaaa22"), {})
        assert len(warm.key_fields()) == 1
        for ops in batches:
            results = []
            for store, keyed in ((by_fields, False), (by_keys, True)):
                batch = Batch(store)
                try:
                    for repo, collection, rkey, value in ops:
                        if value is None:
                            batch.delete(record, (repo, collection, rkey))
                        elif keyed:
                            batch.put(record.key(repo, collection, rkey), value)
                        else:
                            batch.put(record, (repo, collection, rkey), value)
                    assert bool(batch.key_fields()) == (
                        not keyed and any(v is not None for *_, v in ops)
                    )
                    await store.write(batch)
                    results.append(None)
                except OpendataKvError as exc:
                    results.append(type(exc).__name__)
            assert results[0] == results[1]
            assert await _rows(by_fields) == await _rows(by_keys)
        assert await by_fields.check_indexes() == []
