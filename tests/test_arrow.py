"""Scan.to_arrow (store/arrow.py): typed key columns, values flattened with nothing dropped,
record/version/expiry columns, index scans, both faces, DuckDB and Polars, the missing extra,
and memory bounded by the batch size."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import duckdb
import polars
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import Index, RecordType, Schema, Store, fields
from opendata_kv.errors import InvalidArgumentError, MissingExtraError
from opendata_kv.ids import tid as tid_ids
from opendata_kv.ids.muid import Muid
from opendata_kv.native import calls
from opendata_kv.store import SyncStore
from opendata_kv.store.arrow import (
    key_arrow_type,
    key_from_arrow,
    key_to_arrow,
    value_columns,
    value_from_row,
)
from opendata_kv.values import Values

EXAMPLES = int(os.environ.get("ARROW_EXAMPLES", "25"))
REPO = Path(__file__).resolve().parent.parent

# one field of every codec family, with a value and the Arrow type its column has
KEY_FIELDS: list[tuple[str, Any, Any, Any]] = [
    ("a_u8", fields.u8, 200, pa.uint8()),
    ("a_u16", fields.u16, 60000, pa.uint16()),
    ("a_u32", fields.u32, 4_000_000_000, pa.uint32()),
    ("a_u64", fields.u64, 2**64 - 1, pa.uint64()),
    ("a_i32", fields.i32, -5, pa.int32()),
    ("a_i64", fields.i64, -(2**63), pa.int64()),
    ("a_f64", fields.f64, -1.5, pa.float64()),
    ("a_bool", fields.boolean, True, pa.bool_()),
    ("a_str", fields.string, "héllo", pa.string()),
    ("a_bytes", fields.bytes_, b"\x00\xff", pa.binary()),
    ("a_lps", fields.lp_string, "lp", pa.string()),
    ("a_lpb", fields.lp_bytes, b"lp", pa.binary()),
    ("a_tid", fields.tid, "3kabc2defgh22", pa.string()),
    ("a_muid", fields.muid, Muid.from_bytes(bytes(range(16))), pa.binary(16)),
    ("a_url", fields.url_key, 2**63 - 1, pa.uint64()),
    ("a_u128", fields.u128, 2**100 + 7, pa.binary(16)),
    ("a_vu32", fields.var_u32, 300, pa.uint32()),
    ("a_vu64", fields.var_u64, 2**40, pa.uint64()),
    ("a_fixed", fields.fixed(3), b"abc", pa.binary(3)),
    ("a_desc", fields.desc(fields.u32), 7, pa.uint32()),
    ("a_rkey", fields.rkey("any"), "self", pa.string()),
    ("a_tail", fields.trailing_string, "end", pa.string()),
]


def test_every_key_field_becomes_a_typed_column_and_turns_back() -> None:
    every = RecordType("every", 1, [(name, field) for name, field, _, _ in KEY_FIELDS])
    key = tuple(value for _, _, value, _ in KEY_FIELDS)
    with SyncStore.open("memory://arrow-keys", [every]) as db:
        db.put(every, key, {"v": 1})
        table = db.scan(every).to_arrow().read_all()
    for name, field, value, arrow_type in KEY_FIELDS:
        assert table.schema.field(name).type == arrow_type, name
        assert key_arrow_type(field) == arrow_type, name
        cell = table.column(name)[0].as_py()
        assert key_from_arrow(field, cell) == value, name
        assert table.schema.field(name).metadata[b"opendata_kv.kind"] == field.kind.encode()
    assert table.column("v").to_pylist() == [1]


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=2, max_size=20, unique=True))
def test_tid_and_muid_columns_sort_as_the_identifiers(numbers: list[int]) -> None:
    tids = [tid_ids.encode(n) for n in numbers]
    as_tid = [key_to_arrow(fields.tid, t) for t in tids]
    assert sorted(as_tid) == [tid_ids.encode(n) for n in sorted(numbers)]
    muids = [Muid.from_int(n << 40) for n in numbers]
    as_muid = [key_to_arrow(fields.muid, m) for m in muids]
    assert [Muid.from_bytes(b) for b in sorted(as_muid)] == sorted(muids)
    assert [key_from_arrow(fields.muid, b) for b in as_muid] == muids


# msgpack values: any map (or not a map) comes back whole from its columns and `_extra`
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=5),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
_maps = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _values, max_size=4)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.one_of(_maps, _maps, _values), min_size=1, max_size=30), st.integers(1, 8))
def test_msgpack_values_are_never_dropped(stored: list[Any], batch: int) -> None:
    thing = RecordType("thing", 1, [("n", fields.u32)])
    with SyncStore.open("memory://arrow-maps", [thing]) as db:
        for n, value in enumerate(stored):
            if value is not None:
                db.put(thing, (n,), value)
        reader = db.scan(thing, batch_size=batch).to_arrow()
        layout = value_columns(reader.schema)
        rows = reader.read_all().to_pylist()
    expected = [(n, v) for n, v in enumerate(stored) if v is not None]
    assert [(row["n"], value_from_row(row, layout)) for row in rows] == expected


@dataclasses.dataclass
class Post:
    text: str
    likes: int
    tags: list[str]
    score: float | None = None
    meta: dict[str, Any] | None = None


class Follow(TypedDict):
    subject: str
    since: int


def test_typed_values_become_their_declared_columns() -> None:
    post = RecordType("post", 1, [("repo", fields.string), ("rkey", fields.tid)])
    follow = RecordType("follow", 2, [("repo", fields.string)])
    values = Values(Schema(post, follow)).register(post, Post)
    with SyncStore.open("memory://arrow-typed", values) as db:
        db.put(post, ("did:a", "3kabc2defgh22"), Post("hi", 3, ["x"], None, {"k": [1]}))
        db.put(post, ("did:a", "3kabc2defgh23"), Post("yo", 0, [], 2.5))
        table = db.scan(post).to_arrow().read_all()
        assert table.schema.names == [
            "repo",
            "rkey",
            "text",
            "likes",
            "tags",
            "score",
            "meta",
            "_extra",
        ]
        assert table.schema.field("likes").type == pa.int64()
        assert table.schema.field("tags").type == pa.list_(pa.string())
        # a dict field: JSON text (DuckDB's ->> reads it)
        assert table.schema.field("meta").metadata[b"opendata_kv.encoding"] == b"json"
        assert table.column("meta").to_pylist() == ['{"k":[1]}', None]
        assert table.column("score").to_pylist() == [None, 2.5]
        assert table.column("_extra").to_pylist() == [None, None]
        db.put(follow, ("did:a",), {"subject": "did:b", "since": 5})
        table = db.scan(follow).to_arrow().read_all()
        assert table.to_pylist() == [
            {"repo": "did:a", "subject": "did:b", "since": 5, "_extra": None}
        ]


def test_a_scan_of_several_record_types_names_each_row() -> None:
    v1 = RecordType("item", 1, [("id", fields.u32)])
    v2 = RecordType("item", 1, [("id", fields.u32), ("part", fields.string)], version=2)
    other = RecordType("other", 2, [("id", fields.string)], version=3)
    with SyncStore.open("memory://arrow-multi", [v1, v2, other]) as db:
        db.put_raw(v1.encode(1), b"\x81\xa1x\x01")  # an old-version record, stored as v1 wrote it
        db.put(v2, (2, "b"), {"x": 2})
        db.put(other, ("o",), {"x": "three"})
        table = db.scan("item").to_arrow().read_all()
        assert table.select(["_record", "_version", "id", "part", "x"]).to_pylist() == [
            {"_record": "item", "_version": 1, "id": 1, "part": None, "x": 1},
            {"_record": "item", "_version": 2, "id": 2, "part": "b", "x": 2},
        ]
        every = db.scan_all(batch_size=2).to_arrow().read_all()
        # "id" is a u32 in item and a string in other: other's gets its own column
        assert every.schema.field("other.id").type == pa.string()
        assert every.column("_record").to_pylist() == ["item", "item", "other"]
        assert every.column("_version").to_pylist() == [1, 2, 3]
        assert every.column("other.id").to_pylist() == [None, None, "o"]
        # "x" was an int in the first batch: "three" is kept in _extra, not dropped
        assert every.column("x").to_pylist() == [1, 2, None]
        assert every.column("_extra").to_pylist()[2] == b"\x81\xa1x\xa5three"


def test_expiry_and_raw_key_columns() -> None:
    page = RecordType("page", 1, [("n", fields.u32)])
    with SyncStore.open("memory://arrow-expiry", [page]) as db:
        db.put(page, (1,), {"v": 1}, ttl=3600)
        db.put(page, (2,), {"v": 2})
        table = db.scan(page, batch_size=1).to_arrow(expiry=True, raw_key=True).read_all()
    assert table.schema.field("_expires").type == pa.timestamp("ms", tz="UTC")
    expires = table.column("_expires").to_pylist()
    assert expires[0] is not None and expires[1] is None
    assert table.column("_key").to_pylist() == [page.encode(1), page.encode(2)]


def _tagged(key: Any, value: Any) -> list[tuple[str]]:
    return [(tag,) for tag in value["tags"]]


@pytest.mark.parametrize("covering", [False, True])
def test_index_scan_expiry_column(covering: bool) -> None:
    """Each record's own expiry, read with it (or from its covering entry), also for a record
    under several entries; one get_rows per batch of records, no second read per record."""
    note = RecordType("note", 1, [("n", fields.u32)])
    by_tag = Index(
        "notes_by_tag", "note", [("tag", fields.string)], using=_tagged, covering=covering
    )
    url = f"memory://arrow-index-expiry-{covering}"
    with SyncStore.open(url, [note], indexes=[by_tag]) as db:
        db.put(note, (1,), {"tags": ["a", "b"]}, ttl=3600)
        db.put(note, (2,), {"tags": ["a"]})
        db.put(note, (3,), {"tags": ["b"]}, ttl=7200)
        reads: list[int] = []
        real = calls.get_rows

        def counted(source: Any, keys: list[bytes]) -> Any:
            reads.append(len(keys))
            return real(source, keys)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(calls, "get_rows", counted)
            table = db.index_scan(by_tag, batch_size=2).to_arrow(expiry=True).read_all()
        plain = db.scan(note).to_arrow(expiry=True).read_all()
    assert table.schema.field("_expires").type == pa.timestamp("ms", tz="UTC")
    got = [(r["n"], r["_expires"]) for r in table.select(["n", "_expires"]).to_pylist()]
    want = {r["n"]: r["_expires"] for r in plain.select(["n", "_expires"]).to_pylist()}
    assert [n for n, _ in got] == [1, 2, 1, 3]  # tag a: 1, 2; tag b: 1, 3
    assert got == [(n, want[n]) for n, _ in got]
    assert want[1] is not None and want[2] is None and want[3] is not None
    assert want[1] != want[3]
    # the records are read a batch at a time (none when the entries cover them)
    assert reads == ([] if covering else [2, 2])


def test_undecoded_rows_are_refused_not_dropped() -> None:
    thing = RecordType("thing", 1, [("n", fields.u32)])
    with SyncStore.open("memory://arrow-raw", [thing]) as db:
        db.put(thing, (1,), {"v": 1})
        db.put_raw(thing.encode(2), b"\xc1")  # not msgpack
        with pytest.raises(InvalidArgumentError, match="was not decoded") as caught:
            db.scan(thing, on_error="raw").to_arrow().read_all()
        assert caught.value.value == thing.encode(2)
        assert db.scan(thing, on_error="skip").to_arrow().read_all().num_rows == 1


def test_index_scan_to_arrow_and_the_async_face() -> None:
    like = RecordType("like", 1, [("did", fields.string), ("rkey", fields.string)])
    by_subject = Index("likes_by_subject", "like", [("subject", fields.string)])
    with SyncStore.open("memory://arrow-index", [like], indexes=[by_subject]) as db:
        db.put(like, ("did:b", "1"), {"subject": "s1"})
        db.put(like, ("did:a", "2"), {"subject": "s1"})
        db.put(like, ("did:c", "3"), {"subject": "s2"})
        table = db.index_scan(by_subject, "s1").to_arrow().read_all()
        assert table.select(["did", "subject"]).to_pylist() == [
            {"did": "did:a", "subject": "s1"},
            {"did": "did:b", "subject": "s1"},
        ]
        with pytest.raises(InvalidArgumentError, match="entries"):
            db.index_scan(by_subject, records=False).to_arrow()

    async def main() -> list[Any]:
        async with Store.open("memory://arrow-async", [like]) as store:
            await store.put(like, ("did:a", "1"), {"subject": "s1"})
            reader = store.scan(like).to_arrow()  # read inside the running loop
            return list(reader.read_all().column("did").to_pylist())

    assert asyncio.run(main()) == ["did:a"]


def test_duckdb_and_polars_read_a_scan() -> None:
    post = RecordType("post", 1, [("repo", fields.string), ("n", fields.u32)])
    with SyncStore.open("memory://arrow-duck", [post]) as db:
        db.put_many(
            (post, (f"did:{n % 3}", n), {"lang": "en" if n % 2 else "de"}) for n in range(90)
        )
        con = duckdb.connect()
        con.register("posts", db.scan(post, batch_size=16).to_arrow())
        counts = con.sql(
            "SELECT repo, lang, count(*) AS n FROM posts GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert counts[:2] == [("did:0", "de", 15), ("did:0", "en", 15)]
        frame = polars.from_arrow(db.scan(post).to_arrow().read_all())
        assert isinstance(frame, polars.DataFrame)
        assert frame.filter(polars.col("lang") == "en").height == 45


def test_without_pyarrow_the_error_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyarrow"] = None  # as if not installed
        from opendata_kv import RecordType, fields
        from opendata_kv.errors import MissingExtraError
        from opendata_kv.store import SyncStore
        t = RecordType("t", 1, [("n", fields.u32)])
        with SyncStore.open("memory://x", [t]) as db:
            try:
                db.scan(t).to_arrow()
            except MissingExtraError as exc:
                print(exc, exc.field)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'opendata-kv[arrow]'" in out.stdout and out.stdout.strip().endswith("arrow")
    assert issubclass(MissingExtraError, ImportError)
    # importing the package never imports pyarrow
    code = "import sys, opendata_kv.store, opendata_kv.cli.main; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr


_STREAM = """
import sys, time
import pyarrow as pa
from opendata_kv import RecordType, fields
from opendata_kv.store import SyncStore

def anonymous():  # the process's anonymous resident memory (heap, not library pages), KiB
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))

# pyarrow's first conversion initialises the library (~40 MiB here): done before the baseline,
# or the first batch of the stream is charged with it
pa.array(["x"], pa.string()), pa.array([b"x"], pa.binary())
big = RecordType("big", 1, [("n", fields.u32)])
mode, pause = sys.argv[2], float(sys.argv[3])
with SyncStore.open_reader(sys.argv[1], [big]) as db:
    scan = db.scan(big, batch_size=1000, fill_cache=False)
    reader = scan.to_arrow() if mode != "plain" else None
    base = peak = anonymous()
    rows = 0
    if reader is None:  # a plain typed scan: what slatedb itself holds while reading
        for chunk in iter(scan.next_chunk, []):
            rows += len(chunk)
            peak = max(peak, anonymous())
    elif mode == "stream":  # a consumer that takes `pause` seconds over each batch
        for batch in reader:
            rows += batch.num_rows
            peak = max(peak, anonymous())
            time.sleep(pause)
    else:  # the whole table at once, for contrast
        rows = reader.read_all().num_rows
        peak = max(peak, anonymous())
print(rows, (peak - base) // 1024)
"""


def test_memory_is_bounded_by_the_batch_not_the_scan(tmp_path: Path) -> None:
    """40,000 rows of ~1 KiB (~40 MiB of values) streamed 1,000 at a time: the reader process's
    anonymous memory (sampled after each batch) grows about as a plain scan's does, not by the
    scan's size, whether the consumer is quick or slow (a pause of 20 ms a batch: slatedb's
    read-ahead is pulled by the scan, never pushed, so its window waits for the consumer)."""
    big = RecordType("big", 1, [("n", fields.u32)])
    rows = 40_000
    with SyncStore.open(tmp_path / "db", [big]) as db:
        db.put_many(((big, (n,), {"text": f"{n:08d}" * 128}) for n in range(rows)), durable=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    grown = {}
    for mode, pause in (("plain", 0), ("stream", 0), ("stream", 0.02), ("all", 0)):
        out = subprocess.run(
            [sys.executable, "-c", _STREAM, str(tmp_path / "db"), mode, str(pause)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        count, grown[mode, pause] = map(int, out.stdout.split())
        assert count == rows
    # beside a plain typed scan (slatedb's read-ahead window and buffers), streaming adds one
    # batch and what the allocators keep (measured: 17-21 MiB against 26 for the plain scan,
    # whose window is 16 MiB); the whole table, for contrast (the measure can fail), holds
    # its ~40 MiB. Before issue 43 the baseline was taken before pyarrow's first conversion,
    # whose ~40 MiB of heap (50-60 MiB resident) were charged to the stream.
    plain = grown["plain", 0]
    assert grown["all", 0] > 30, grown  # the table's ~40 MiB of values, all held at once
    for pause in (0, 0.02):
        assert grown["stream", pause] - plain < 16, grown
    print(f"growth (MiB) over 40,000 rows of ~1 KiB: {grown}")


def test_struct_and_typeddict_codecs_give_their_declared_columns() -> None:
    import msgspec

    class Repost(msgspec.Struct, forbid_unknown_fields=True):
        subject: str
        count: int
        note: str | None = None

    repost = RecordType("repost", 1, [("n", fields.u32)])
    follow = RecordType("follow", 2, [("n", fields.u32)])
    values = Values(Schema(repost, follow)).register(repost, Repost).register(follow, Follow)
    assert type(values.plan(repost).codec).__name__ == "StructCodec"
    assert type(values.plan(follow).codec).__name__ == "TypedDictCodec"
    with SyncStore.open("memory://arrow-struct", values) as db:
        db.put(repost, (1,), Repost("at://x", 2))
        db.put(follow, (1,), Follow(subject="did:b", since=7))
        reposts = db.scan(repost).to_arrow().read_all()
        follows = db.scan(follow).to_arrow().read_all()
    assert reposts.schema.field("count").type == pa.int64()
    assert reposts.to_pylist() == [
        {"n": 1, "subject": "at://x", "count": 2, "note": None, "_extra": None}
    ]
    assert follows.schema.field("since").type == pa.int64()
    assert follows.to_pylist() == [{"n": 1, "subject": "did:b", "since": 7, "_extra": None}]


def test_limits_reverse_and_shapes() -> None:
    thing = RecordType("thing", 1, [("n", fields.u32)])
    with SyncStore.open("memory://arrow-shapes", [thing]) as db:
        db.put_many((thing, (n,), {"v": n}) for n in range(50))
        table = db.scan(thing, reverse=True, limit=7, batch_size=3).to_arrow().read_all()
        assert table.column("n").to_pylist() == list(range(49, 42, -1))
        assert [b.num_rows for b in db.scan(thing, batch_size=16).to_arrow()] == [16, 16, 16, 2]
        empty = db.scan(thing, 99).to_arrow().read_all()
        assert empty.num_rows == 0 and empty.schema.names == ["n", "_extra"]
        scan = db.scan(thing)
        scan.keys()
        with pytest.raises(InvalidArgumentError, match="yields keys"):
            scan.to_arrow()
