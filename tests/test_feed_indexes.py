"""The change feed and secondary indexes (issue 23 point 6, issue 19 point 5): a records
consumer sees its records only; indexes=True yields index writes naming their index with
decoded fields; cursors stay exact when index rows are left out; Change.key is a Key for
mypy without an isinstance check."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import indexkit as ik
import pytest
from clikit import json_lines, run_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mypykit import mypy_strict
from storekit import aio

from opendata_kv import Index, fields
from opendata_kv.keys import Schema
from opendata_kv.store import Change, IndexChange, RawChange, Store, SyncStore
from opendata_kv.values import Values


async def feed(store: Any, since: str | None = None, **options: Any) -> list[Any]:
    return [change async for change in store.changes(since, **options)]


async def write_some(store: Store) -> None:
    await store.put(ik.post, ("ann", 1), {"tag": "x", "handle": "ann", "likes": 3})
    async with store.batch() as batch:
        batch.put(ik.post, ("bob", 2), {"tag": "x", "tags": ["a", "b"], "likes": 1})
        batch.put(ik.note, ("bob", 9), {"tags": ["b"]})
    await store.delete(ik.post, ("ann", 1))
    await store.flush()


@aio
async def test_records_only_by_default_and_index_writes_when_asked(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "db", ik.SCHEMA, indexes=ik.ALL) as store:
        await write_some(store)
        records = await feed(store)
        everything = await feed(store, indexes=True)
        assert await store.check_indexes() == []
    assert [type(c) for c in records] == [Change] * 4
    assert [(c.op, tuple(c.key)) for c in records] == [
        ("put", ("ann", 1)),
        ("put", ("bob", 2)),
        ("put", ("bob", 9)),
        ("delete", ("ann", 1)),
    ]
    index_rows = [c for c in everything if isinstance(c, IndexChange)]
    assert [c for c in everything if isinstance(c, Change)] == records
    assert len(everything) == len(records) + len(index_rows)
    # registration: the catalog and one metadata row per index, decoded
    assert {c.index for c in index_rows if c.part == "meta"} == {i.name for i in ik.ALL}
    assert any(c.part == "catalog" and c.index is None for c in index_rows)
    metas = [c for c in index_rows if c.part == "meta" and c.index == "by_tag"]
    assert metas[0].value["definition"] == ik.by_tag.describe()
    entries = [c for c in index_rows if c.part == "entry"]
    assert all(c.fields is not None for c in entries)
    # a value entry points at its record, with its fields by name
    by_tag = [(c.op, c.fields, c.record_key) for c in entries if c.index == "by_tag"]
    assert by_tag == [
        ("put", {"tag": "x", "author": "ann"}, ik.post.key("ann", 1)),
        ("put", {"tag": "x", "author": "bob"}, ik.post.key("bob", 2)),
        ("delete", {"tag": "x", "author": "ann"}, ik.post.key("ann", 1)),
    ]
    # a unique entry's record comes from its value; aggregates carry (count, sum)
    unique = [(c.op, c.fields, c.record_key) for c in entries if c.index == "by_handle"]
    assert unique == [
        ("put", {"handle": "ann"}, ik.post.key("ann", 1)),
        ("delete", {"handle": "ann"}, None),
    ]
    per_tag = [(c.op, c.fields, c.value) for c in entries if c.index == "per_tag"]
    assert per_tag == [
        ("put", {"tag": "x"}, (1, 0)),
        ("put", {"tag": "x"}, (2, 0)),
        ("put", {"tag": "x"}, (1, 0)),
    ]
    sums = [(c.op, c.fields, c.value) for c in entries if c.index == "likes"]
    assert sums[0] == ("put", {"author": "ann"}, (1, 3)) and sums[-1][0] == "delete"
    # a using() index over two record types: one entry per tag
    tags = {(c.fields["tag"], c.record_key) for c in entries if c.index == "tags" and c.fields}
    assert tags == {
        ("a", ik.post.key("bob", 2)),
        ("b", ik.post.key("bob", 2)),
        ("b", ik.note.key("bob", 9)),
    }


@aio
async def test_a_reader_decodes_entries_from_the_stored_definitions(tmp_path: Path) -> None:
    """A reader that declares no index still names every index and decodes its entries from
    the stored definition (codec names); an index created after the feed began is learned;
    a parametrised codec (fixed(2)) is found again from its stored name."""
    odd = Index("odd", "post", [("code", fields.fixed(2))])
    async with Store.open(tmp_path / "db", ik.SCHEMA, indexes=[ik.by_tag, odd]) as store:
        await store.put(ik.post, ("ann", 1), {"tag": "x", "code": b"ab"})
    async with Store.open_reader(tmp_path / "db", ik.SCHEMA) as reader:
        found = [c for c in await feed(reader, indexes=True) if isinstance(c, IndexChange)]
        assert [c for c in await feed(reader)] != []
    entries = {c.index: c for c in found if c.part == "entry"}
    assert entries["by_tag"].fields == {"tag": "x", "author": "ann"}
    assert entries["by_tag"].record_key == ik.post.key("ann", 1)
    assert entries["odd"].fields == {"code": b"ab"} and entries["odd"].value is None
    assert entries["odd"].raw_key.endswith(b"ab" + ik.post.encode("ann", 1))

    # learned while following: the reader opened before the index existed
    async with Store.open(tmp_path / "db2", ik.SCHEMA) as store:
        await store.put(ik.post, ("ann", 1), {"tag": "x"})
        await store.flush()
        async with Store.open_reader(tmp_path / "db2", ik.SCHEMA) as reader:
            start = (await feed(reader))[-1].cursor
            await store.close()
            async with Store.open(tmp_path / "db2", ik.SCHEMA, indexes=[ik.per_tag]) as again:
                await again.build_index("per_tag")
                await again.put(ik.post, ("bob", 2), {"tag": "x"})
                await again.flush()
            later = await feed(reader, start, indexes=True)
    counts = [
        c.value
        for c in later
        if isinstance(c, IndexChange) and c.index == "per_tag" and c.part == "entry"
    ]
    assert counts == [(1, 0), (2, 0)]


def _history() -> st.SearchStrategy[list[tuple[Any, ...]]]:
    put = st.tuples(
        st.just("put"),
        st.sampled_from(["ann", "bob"]),
        st.integers(0, 3),
        st.sampled_from(["x", "y", None]),
    )
    delete = st.tuples(st.just("delete"), st.sampled_from(["ann", "bob"]), st.integers(0, 3))
    batch = st.tuples(st.just("batch"), st.lists(put, max_size=3))
    return st.lists(st.one_of(put, delete, batch, st.tuples(st.just("flush"))), max_size=8)


async def _apply(store: Store, history: list[tuple[Any, ...]]) -> None:
    for step in history:
        if step[0] == "put":
            await store.put(ik.post, (step[1], step[2]), {"tag": step[3]})
        elif step[0] == "delete":
            await store.delete(ik.post, (step[1], step[2]))
        elif step[0] == "batch":
            async with store.batch() as batch:
                for _, author, rkey, tag in step[1]:
                    batch.put(ik.post, (author, rkey), {"tag": tag})
        else:
            await store.flush()
    await store.flush()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=_history())
def test_cursors_stay_exact_when_index_rows_are_left_out(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[Any, ...]]
) -> None:
    """Any cursor of either feed resumes either feed right after it: the records feed from
    an index change's cursor yields the records after that index row, the full feed from a
    record's cursor yields every row after it (index rows included), and every limit
    splits them without a gap or a repeat."""

    async def run() -> None:
        path = tmp_path_factory.mktemp("feed") / "db"
        async with Store.open(path, ik.SCHEMA, indexes=[ik.by_tag, ik.per_tag]) as store:
            await _apply(store, history)
            full = await feed(store, indexes=True)
            records = await feed(store)
            assert records == [c for c in full if isinstance(c, Change)]
            for at, change in enumerate(full):
                rest = full[at + 1 :]
                assert await feed(store, change.cursor) == [
                    c for c in rest if isinstance(c, Change)
                ]
                if isinstance(change, Change):
                    assert await feed(store, change.cursor, indexes=True) == rest
            # paging the records feed with a limit never loses or repeats a record
            paged: list[Any] = []
            cursor = None
            while page := await feed(store, cursor, limit=2):
                paged += page
                cursor = page[-1].cursor
            assert paged == records

    aio(run)()


def test_sync_face_and_typing(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", ik.SCHEMA, indexes=[ik.by_tag]) as db:
        db.put(ik.post, ("ann", 1), {"tag": "x"})
        db.flush()
        with db.changes() as changes:
            plain = list(changes)
        assert [c.key.author for c in plain] == ["ann"]  # a Key: no isinstance needed
        both = list(db.changes(indexes=True))
        assert {type(c) for c in both} == {Change, IndexChange}
        batches = list(db.change_batches(indexes=True))
        assert [c for batch in batches for c in batch] == both
        db.put_raw(b"\xf0\xf1", b"?")
        db.flush()
        raw = list(db.changes(on_unknown="raw"))
        assert isinstance(raw[-1], RawChange) and raw[-1].key == b"\xf0\xf1"


def test_change_key_is_typed_for_mypy(tmp_path: Path, mypy_cache: Path) -> None:
    """With the default policies a change's key is a Key (`change.key.rkey` checks without
    isinstance); modes that yield undecoded rows type it as a union mypy makes you narrow."""
    source = tmp_path / "client.py"
    source.write_text(
        textwrap.dedent(
            """
            from opendata_kv import Store, SyncStore
            from opendata_kv.store import Change, IndexChange, RawChange

            async def typed(store: Store) -> str:
                async for change in store.changes():
                    return str(change.key.rkey)
                return ""

            def sync(db: SyncStore) -> None:
                for change in db.changes(since=None, follow=False):
                    change.key.rkey
                for batch in db.change_batches():
                    batch[0].key.rkey

            async def raw(store: Store) -> None:
                async for change in store.changes(on_unknown="raw"):
                    change.key.rkey  # E1: may be a RawChange, whose key is bytes
                    if isinstance(change, Change):
                        change.key.rkey

            async def index(store: Store) -> None:
                async for change in store.changes(indexes=True):
                    change.key  # E2: an IndexChange has no key
                    if isinstance(change, IndexChange):
                        change.index.upper()  # E3: None for the catalog row

            def errors(db: SyncStore) -> None:
                for change in db.changes(on_error="raw"):
                    change.key.rkey  # E4
            """
        )
    )
    status, out = mypy_strict(tmp_path, [source.name], mypy_cache)
    lines = [line for line in out.splitlines() if ": error:" in line]
    text = source.read_text().splitlines()
    flagged = {int(line.split(":")[1]) for line in lines}
    expected = {n + 1 for n, line in enumerate(text) if "# E" in line}
    assert flagged == expected, out
    assert status != 0


def test_cli_changes_leaves_index_rows_out_unless_asked(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with SyncStore.open(db, ik.SCHEMA, indexes=[ik.by_tag, ik.per_tag]) as store:
        store.put(ik.post, ("ann", 1), {"tag": "x"})
    plain = run_in_process("changes", str(db), "--json")
    assert plain.returncode == 0, plain.stderr
    rows = json_lines(plain.stdout)
    assert len(rows) == 1 and "index" not in rows[0]
    full = run_in_process("changes", str(db), "--json", "--indexes")
    rows = json_lines(full.stdout)
    entries = [r for r in rows if r.get("part") == "entry"]
    assert {r["index"] for r in entries} == {"by_tag", "per_tag"}
    by_tag = next(r for r in entries if r["index"] == "by_tag")
    assert by_tag["key"] == {"tag": "x", "author": "ann"}
    assert by_tag["target"] == {"key_hex": ik.post.encode("ann", 1).hex()}  # no --schema
    count = next(r for r in entries if r["index"] == "per_tag")
    assert count["value"] == [1, 0]
    text = run_in_process("changes", str(db), "--indexes")
    assert "index by_tag(tag='x', author='ann') -> 0x" in text.stdout
    assert "index per_tag(tag='x')" in text.stdout
    # a cursor printed for an index row resumes the plain feed after it
    last_index = [r for r in rows if "index" in r][-1]
    resumed = run_in_process("changes", str(db), "--json", "--since", last_index["cursor"])
    assert [r["seq"] for r in json_lines(resumed.stdout)] == [
        r["seq"] for r in rows[rows.index(last_index) + 1 :] if "index" not in r
    ]


@aio
async def test_definitions_are_read_again_once_for_an_index_not_known_yet() -> None:
    """An entry of an index the feed has no definition for (registered after it started,
    its metadata row before the cursor) makes the feed read the definitions again, once per
    name; an index still unknown then stays raw."""
    from opendata_kv.store.ops.feed import _learn_shapes
    from opendata_kv.store.ops.feed_rows import Decoder, shape_of

    class Row:
        def __init__(self, key: bytes) -> None:
            self.key = key

    calls: list[int] = []

    async def shapes() -> dict[str, Any]:
        calls.append(1)
        return {"per_tag": shape_of(ik.per_tag)}

    schema = Schema(*ik.SCHEMA)
    decoder = Decoder(schema, Values(schema), indexes=True)
    rows = [Row(b"\x00\xf1eper_tag\x00x"), Row(b"\x00\xf1eghost\x00y"), Row(ik.post.encode("a", 1))]
    seen: set[bytes] = set()
    await _learn_shapes(rows, 0, decoder, shapes, seen)
    assert calls == [1] and set(decoder.shapes) == {"per_tag"}
    await _learn_shapes(rows, 0, decoder, shapes, seen)  # ghost was looked up already
    assert calls == [1]
