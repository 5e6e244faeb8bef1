"""`opendata-kv export` and `import` (cli/export_cmds.py, cli/import_cmds.py) and the bulk
load under them (store/ops/bulk_load.py): exact round trips, dump equality, refused rows.

Commands run in-process (tests/clikit.py); test_export_import_process.py has the
interrupted imports and the 100,000-record run in child processes."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from cli_schema import BLOB, LIKE, POST, POST_V2, SCHEMA, VALUES, Post
from clikit import CliResult, json_lines, run_in_process
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import run
from test_keys_properties import layouts, values_for

from opendata_kv import Schema
from opendata_kv.errors import KeyDecodeError, ValueDecodeError
from opendata_kv.store import Store
from opendata_kv.store.ops.bulk_load import load_pairs
from opendata_kv.values import pack

DEMO_SCHEMA = "opendata_kv.collections:default_schema"
FORMATS = ("jsonl", "csv", "parquet")


def ok(*args: str) -> CliResult:
    result = run_in_process(*args)
    assert result.returncode == 0, result.stderr
    return result


def fails(*args: str) -> str:
    """The one error line of a command that must fail with exit status 1."""
    result = run_in_process(*args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opendata-kv: error: "), result.stderr
    return lines[0]


def stored(db: Path) -> list[tuple[str, str]]:
    """Every (key hex, value hex) of `db`, index rows included, in key order."""
    rows = json_lines(ok("dump", str(db), "--json", "--indexes", "--layout", "none").stdout)
    return [(r["key_hex"], r["value_hex"]) for r in rows]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("demo") / "db"
    ok("demo", str(target))
    return target


def test_export_jsonl_is_dump_json_plus_the_value_bytes(demo_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    ok("export", str(demo_db), "--schema", DEMO_SCHEMA, "--output", str(out))
    exported = json_lines(out.read_text())
    dumped = json_lines(
        ok("dump", str(demo_db), "--schema", DEMO_SCHEMA, "--json", "--values").stdout
    )
    raw = json_lines(ok("dump", str(demo_db), "--json").stdout)
    assert len(exported) == len(dumped) == len(raw) > 10
    for row, dump_row, raw_row in zip(exported, dumped, raw, strict=True):
        assert row["value_hex"] == raw_row["value_hex"]  # the exact stored bytes
        if "value" in dump_row:  # dump shows value_hex only where the value is not decoded
            row = {k: v for k, v in row.items() if k != "value_hex"}
        assert row == dump_row
    # stdout gives the same lines as --output
    assert json_lines(ok("export", str(demo_db), "--schema", DEMO_SCHEMA).stdout) == exported


@pytest.mark.parametrize("fmt", FORMATS)
def test_demo_round_trip_is_byte_identical(demo_db: Path, tmp_path: Path, fmt: str) -> None:
    """Every collection of the demo (AT records, change log, pages) comes back byte for byte."""
    out = tmp_path / f"demo.{fmt}"
    ok("export", str(demo_db), "--schema", DEMO_SCHEMA, "--output", str(out))
    copy = tmp_path / "copy"
    result = ok("import", str(copy), str(out), "--schema", DEMO_SCHEMA, "--batch-size", "5")
    before = stored(demo_db)
    assert result.stderr == f"imported {len(before)} records\n"
    assert stored(copy) == before
    assert not (copy / "opendata-kv" / "import.json").exists()  # done: no resume marker


def test_backlink_indexes_are_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    """A RecordCollection with its backlink indexes (value and count indexes): import with
    --indexes gives the same records and the same index rows."""
    from opendata_kv.collections import BACKLINKS, RecordCollection, default_schema

    db, out, copy = tmp_path / "db", tmp_path / "rows.jsonl", tmp_path / "copy"
    post = "at://did:plc:bob/app.bsky.feed.post/3kabc2defgh22"

    async def fill() -> None:
        async with Store.open(str(db), default_schema(), indexes=BACKLINKS.indexes) as store:
            repo = RecordCollection(store, backlinks=BACKLINKS)
            for n, did in enumerate(("did:plc:aaa", "did:plc:ccc", "did:plc:ddd")):
                like = {"$type": "app.bsky.feed.like", "subject": {"uri": post, "cid": "x"}}
                await repo.put(did, "app.bsky.feed.like", f"3kabc2defgh2{n}", like)
                follow = {"$type": "app.bsky.graph.follow", "subject": "did:plc:bob"}
                await repo.put(did, "app.bsky.graph.follow", f"3kabc2defgh3{n}", follow)
            await store.flush()

    run(fill())
    ok("export", str(db), "--schema", DEMO_SCHEMA, "--output", str(out))
    indexes = ("--indexes", "opendata_kv.collections:BACKLINKS.indexes")
    ok("import", str(copy), str(out), "--schema", DEMO_SCHEMA, *indexes, "--batch-size", "4")
    before = stored(db)
    assert any(k.startswith("00f1") for k, _ in before)  # index rows are there to compare
    assert stored(copy) == before


def test_export_selects_a_record_and_a_prefix(tmp_path: Path) -> None:
    db = tmp_path / "db"
    run(_fill(db))
    out = ok("export", str(db), "--schema", "cli_schema:SCHEMA", "--record", "like").stdout
    assert {r["record"] for r in json_lines(out)} == {"like"}
    assert len(json_lines(out)) == 3
    out = ok("export", str(db), "--prefix", "0110").stdout
    assert [r["key_hex"][:4] for r in json_lines(out)] == ["0110"] * 2
    assert "--record NAME needs --schema" in fails("export", str(db), "--record", "like")
    rows = tmp_path / "likes.jsonl"
    ok(
        "export",
        str(db),
        "--schema",
        "cli_schema:SCHEMA",
        "--record",
        "like",
        "--output",
        str(rows),
    )
    report = json_lines(ok("import", str(tmp_path / "copy"), str(rows), "--json").stdout)
    copy = str(tmp_path / "copy")
    assert report == [
        {"db": copy, "file": str(rows), "imported": 3, "expired": 0, "resumed_after": 0}
    ]


async def _fill(db: Path) -> None:
    async with Store.open(str(db), SCHEMA, values=VALUES) as store:
        await store.put(POST, ("did:a", "1"), {"text": "one"})
        await store.put(POST, ("did:a", "2"), {"text": "two"})
        for n in range(3):
            await store.put(LIKE, (n,), {"n": n})
        await store.put(BLOB, ("b",), b"\x00\xff")
        await store.put(POST_V2, ("did:b", "1"), Post("hi"))
        await store.flush()


# --- every field codec: generated schemas --------------------------------------------------

MSGPACK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
EXAMPLES = int(os.environ.get("OPENDATA_KV_EXPORT_EXAMPLES", "8"))


@given(data=st.data())
@settings(max_examples=EXAMPLES)
def test_generated_schemas_round_trip(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Records of random layouts (every key field codec) with random msgpack values come back
    byte for byte through every format, checked by their schema on the way in."""
    rt, specs = data.draw(layouts(max_fields=4), "layout")
    values = MSGPACK.filter(lambda v: v is not None)  # None is never stored
    rows = data.draw(st.lists(st.tuples(values_for(specs), values), min_size=1, max_size=6))
    fmt = data.draw(st.sampled_from(FORMATS), "format")
    module = types.ModuleType("export_generated_schema")
    module.SCHEMA = Schema(rt)  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    spec = "export_generated_schema:SCHEMA"
    base = tmp_path_factory.mktemp("gen")
    db, copy, out = base / "db", base / "copy", base / f"rows.{fmt}"

    async def fill() -> None:
        async with Store.open(str(db), module.SCHEMA) as store:
            for fields, value in rows:
                await store.put(rt, fields, value)
            await store.flush()

    run(fill())
    try:
        ok("export", str(db), "--schema", spec, "--output", str(out))
        ok("import", str(copy), str(out), "--schema", spec, "--batch-size", "4")
    finally:
        del sys.modules[module.__name__]
    assert stored(copy) == stored(db)


# --- refused rows --------------------------------------------------------------------------


def _export_lines(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    db = tmp_path / "db"
    run(_fill(db))
    lines = json_lines(ok("export", str(db), "--schema", "cli_schema:VALUES").stdout)
    return db, lines


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_line_with_wrong_types_is_refused_naming_line_and_field(tmp_path: Path) -> None:
    _, lines = _export_lines(tmp_path)
    copy = tmp_path / "copy"
    bad = [dict(r) for r in lines]
    bad[2]["fields"] = {"n": "zero"}  # a like's u64 field given as text
    err = fails(
        "import",
        str(copy),
        str(_write_jsonl(tmp_path / "a.jsonl", bad)),
        "--schema",
        "cli_schema:VALUES",
    )
    assert 'a.jsonl line 3 (like v1): fields field n: "zero" does not match key_hex, which ' in err
    bad = [dict(r) for r in lines]
    bad[4]["key_hex"] = 12
    err = fails("import", str(copy), str(_write_jsonl(tmp_path / "b.jsonl", bad)))
    assert "b.jsonl line 5: key_hex must be a hex string, got 12" in err
    bad = [dict(r) for r in lines]
    post_v2 = next(i for i, r in enumerate(bad) if r["record"] == "post" and r["version"] == 2)
    bad[post_v2]["value_hex"] = pack({"title": 5}).hex()  # not a Post: its dataclass refuses it
    bad[post_v2].pop("value")
    err = fails(
        "import",
        str(copy),
        str(_write_jsonl(tmp_path / "c.jsonl", bad)),
        "--schema",
        "cli_schema:VALUES",
    )
    assert f"c.jsonl line {post_v2 + 1}: refused by the schema" in err
    assert "post v2" in err
    assert not copy.exists() or stored(copy) == []  # every row was in the one refused batch


def test_a_refused_row_writes_nothing_of_its_batch(tmp_path: Path) -> None:
    """Batches before the refused one are committed; nothing of its own batch is."""
    db = tmp_path / "db"

    async def fill() -> None:
        async with Store.open(str(db), SCHEMA) as store:
            await store.put_many((LIKE, (n,), {"n": n}) for n in range(25))
            await store.flush()

    run(fill())
    rows = json_lines(ok("export", str(db), "--schema", "cli_schema:SCHEMA").stdout)
    rows[14]["key_hex"] = "ff" + rows[14]["key_hex"]  # no record of the schema owns this key
    path = _write_jsonl(tmp_path / "rows.jsonl", rows)
    copy = tmp_path / "copy"
    err = fails(
        "import", str(copy), str(path), "--schema", "cli_schema:SCHEMA", "--batch-size", "10"
    )
    assert "rows.jsonl line 15: refused by the schema" in err
    assert [k for k, _ in stored(copy)] == [r["key_hex"] for r in rows[:10]]
    marker = json.loads((copy / "opendata-kv" / "import.json").read_text())
    assert marker["rows"] == 10
    rows[14]["key_hex"] = rows[14]["key_hex"][2:]  # fixed: the rerun resumes after row 10
    _write_jsonl(path, rows)
    result = ok(
        "import", str(copy), str(path), "--schema", "cli_schema:SCHEMA", "--batch-size", "10"
    )
    assert "imported 25 records" in result.stderr  # the file changed size: started afresh
    assert stored(copy) == stored(db)


def test_truncated_or_non_object_jsonl_lines_are_refused(tmp_path: Path) -> None:
    _, lines = _export_lines(tmp_path)
    text = "".join(json.dumps(r) + "\n" for r in lines)
    copy = tmp_path / "copy"
    (tmp_path / "cut.jsonl").write_text(text[: len(text) - 30])  # an export cut short
    err = fails("import", str(copy), str(tmp_path / "cut.jsonl"), "--batch-size", "4")
    assert f"cut.jsonl line {len(lines)}: not a JSON object" in err
    # the batches before the cut line are written, the one holding it is not
    written = (len(lines) - 1) // 4 * 4
    assert [k for k, _ in stored(copy)] == [r["key_hex"] for r in lines[:written]]
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    err = fails("import", str(tmp_path / "copy2"), str(tmp_path / "list.jsonl"))
    assert "list.jsonl line 1: not a JSON object" in err


def test_csv_with_a_missing_column_is_refused(tmp_path: Path) -> None:
    db, _ = _export_lines(tmp_path)
    out = tmp_path / "rows.csv"
    ok("export", str(db), "--schema", "cli_schema:VALUES", "--output", str(out))
    text = out.read_text().splitlines()
    header = text[0].split(",")
    at = header.index("value_hex")
    # drop the value_hex column: the header has no such name any more
    cut = [",".join(c for i, c in enumerate(line.split(",")) if i != at) for line in text[:1]]
    (tmp_path / "cut.csv").write_text("\n".join(cut) + "\n" + "\n".join(text[1:]) + "\n")
    copy = tmp_path / "copy"
    err = fails("import", str(copy), str(tmp_path / "cut.csv"))
    assert "cut.csv: the CSV header has no value_hex column" in err
    assert not (copy / "manifest").exists() or stored(copy) == []
    # a row with a cell fewer than the header
    (tmp_path / "short.csv").write_text(text[0] + "\n" + text[1].rsplit(",", 1)[0] + "\n")
    err = fails("import", str(copy), str(tmp_path / "short.csv"))
    assert "short.csv line 2: 12 columns in the header" in err
    assert stored(copy) == []


def test_truncated_parquet_is_refused(tmp_path: Path) -> None:
    db, _ = _export_lines(tmp_path)
    out = tmp_path / "rows.parquet"
    ok("export", str(db), "--schema", "cli_schema:VALUES", "--output", str(out))
    data = out.read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    copy = tmp_path / "copy"
    err = fails("import", str(copy), str(tmp_path / "cut.parquet"))
    assert "cut.parquet is not a readable Parquet file" in err
    assert stored(copy) == []


def test_export_of_undecodable_records_says_so(tmp_path: Path) -> None:
    db = tmp_path / "db"
    run(_fill(db))
    result = run_in_process("export", str(db), "--schema", "cli_schema:VALUES", "--record", "post")
    assert result.returncode == 0, result.stderr
    # v1 posts are plain msgpack; under a schema without that record their keys do not decode
    result = run_in_process("export", str(db), "--schema", "fuzz_schema:SCHEMA")
    assert result.returncode == 1
    assert "did not decode (written raw with the reason)" in result.stderr
    assert all(r["value_hex"] is not None for r in json_lines(result.stdout))


# --- the library call ----------------------------------------------------------------------


def test_load_pairs_checks_every_pair_of_a_batch_first(tmp_path: Path) -> None:
    async def body() -> None:
        async with Store.open(str(tmp_path / "db"), SCHEMA, values=VALUES) as store:
            good = [(LIKE.encode(n), pack({"n": n})) for n in range(5)]
            assert await load_pairs(store, good, batch_size=2) == 5
            bad = [(LIKE.encode(9), pack(1)), (POST_V2.encode("r", "k"), pack([1, 2, 3]))]
            with pytest.raises(ValueDecodeError, match="post v2"):
                await load_pairs(store, bad, batch_size=5)
            assert await store.get(LIKE, (9,)) is None  # its batch wrote nothing
            with pytest.raises(KeyDecodeError):
                await load_pairs(store, [(b"\x0f\xf0", b"")])
            assert await load_pairs(store, [(b"\x0f\xf0", b"\xc0")], strict=False) == 1
            assert [k for k, _ in good] == [r.raw_key async for r in store.scan(LIKE)]

    run(body())
