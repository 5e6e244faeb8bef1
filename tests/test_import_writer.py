"""Import as a writer (issue 37 points 1, 2 and 9): `opendata-kv import` and its library call
`load_pairs` keep every stored index right or refuse up front, naming it; refuse a row under
the index key space the library owns, naming its line, with nothing of its batch written; and
name the line of bytes that are not UTF-8, with the batches before it kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import importkit as I
import pytest
from clikit import CliResult, run_in_process, run_in_process_bytes
from storekit import run

from opendata_kv import Store, SyncStore
from opendata_kv.errors import IndexStateError, InvalidArgumentError
from opendata_kv.keys import Schema
from opendata_kv.store.indexes.layout import CATALOG, entry_prefix, meta_key
from opendata_kv.store.ops.bulk_load import load_pairs
from opendata_kv.values import pack

SCHEMA = ("--schema", "importkit:SCHEMA")
#: the index entry of issue 37 point 2: group "a" of `cnt` made to hold [999, 0]
FORGED = {"key_hex": "00f165636e74006100", "value_hex": "92cd03e700"}


def row(n: int, group: str, amount: int, **extra: Any) -> dict[str, str]:
    """The key_hex / value_hex row export writes for item n."""
    value = {"group": group, "amount": amount, **extra}
    return {"key_hex": I.item.encode(n).hex(), "value_hex": pack(value).hex()}


def seeded(path: Path, indexes: list[Any]) -> str:
    """A database with `indexes` over 3 items of group "a", amount 1 each."""
    db = str(path / "db")
    with SyncStore.open(db, I.SCHEMA, indexes=indexes) as store:
        for n in range(3):
            store.put(I.item, (n,), {"group": "a", "amount": 1, "labels": ["x"]})
    return db


def jsonl(path: Path, rows: list[dict[str, str]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def every_row(db: str) -> list[tuple[bytes, bytes]]:
    """Every stored row, index rows included."""
    with SyncStore.open_reader(db, Schema()) as store:
        return [(r.raw_key, r.value) for r in store.scan_all(on_unknown="raw")] + [
            (r.raw_key, r.value) for r in store.scan_all(prefix=b"\x00\xf1", on_unknown="raw")
        ]


def groups(db: str, indexes: list[Any]) -> dict[str, tuple[int, Any]]:
    """(count, sum) of groups a and b, after check_indexes() found nothing wrong."""
    with SyncStore.open(db, I.SCHEMA, indexes=indexes) as store:
        assert store.check_indexes() == []
        return {g: (store.index_count("cnt", g), store.index_sum("total", g)) for g in "ab"}


def refused(result: CliResult) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opendata-kv: error: "), result.stderr
    return lines[0]


# the issue's two rows: a new record in "a", and key 0 moved to group "b"
MOVES = [row(3, "a", 8), row(0, "b", 1)]
AFTER = {"a": (3, 10), "b": (1, 1)}  # a recount after MOVES


# --- point 1: every stored index kept right, or the import refused up front ---------------------


def test_raw_import_is_refused_up_front_while_indexes_keep_entries(tmp_path: Path) -> None:
    db = seeded(tmp_path, I.PLAIN)
    before = every_row(db)
    line = refused(run_in_process("import", db, jsonl(tmp_path / "rows.jsonl", MOVES)))
    assert "(cnt, total)" in line and "without --schema" in line and "--schema MODULE" in line
    assert every_row(db) == before  # nothing written
    assert groups(db, I.PLAIN) == {"a": (3, 3), "b": (0, 0)}


def test_import_with_the_schema_maintains_the_stored_indexes(tmp_path: Path) -> None:
    """Not declared to the import: maintained from their stored definitions (no function)."""
    db = seeded(tmp_path, I.PLAIN)
    result = run_in_process("import", db, jsonl(tmp_path / "rows.jsonl", MOVES), *SCHEMA)
    assert result.returncode == 0 and result.stderr == "imported 2 records\n", result.stderr
    assert groups(db, I.PLAIN) == AFTER


def test_an_index_with_a_function_is_named_unless_declared(tmp_path: Path) -> None:
    db = seeded(tmp_path, I.INDEXES)
    before = every_row(db)
    rows = jsonl(tmp_path / "rows.jsonl", [row(3, "a", 8, labels=["y"]), row(0, "b", 1)])
    line = refused(run_in_process("import", db, rows, *SCHEMA))
    assert "labels (using=" in line and "--indexes MODULE:ATTR" in line
    assert every_row(db) == before
    ok = run_in_process("import", db, rows, *SCHEMA, "--indexes", "importkit:INDEXES")
    assert ok.returncode == 0, ok.stderr
    assert groups(db, I.INDEXES) == AFTER
    with SyncStore.open(db, I.SCHEMA, indexes=I.INDEXES) as store:
        assert [r.key.n for r in store.index_scan(I.labels, "y")] == [3]
        assert [r.key.n for r in store.index_scan(I.labels, "x")] == [1, 2]


def test_raw_import_into_a_store_without_indexes_is_let_through(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    result = run_in_process("import", db, jsonl(tmp_path / "rows.jsonl", MOVES))
    assert result.returncode == 0, result.stderr
    assert len(every_row(db)) == 2


def test_load_pairs_keeps_or_refuses_the_stored_indexes(tmp_path: Path) -> None:
    """The library face: a store opened with no record refuses before any pair is read; one
    opened with the schema maintains them; with strict=False a pair no record owns is refused
    with its batch (the batches before it kept)."""
    db = seeded(tmp_path, I.PLAIN)
    pairs = [(bytes.fromhex(r["key_hex"]), bytes.fromhex(r["value_hex"])) for r in MOVES]

    def read() -> tuple[bytes, bytes]:
        raise AssertionError("a pair was read")

    never = iter(read, None)  # an iterator whose first pair fails the test

    async def body() -> None:
        async with Store.open(db, Schema()) as raw:
            with pytest.raises(IndexStateError, match="cnt, total") as caught:
                await load_pairs(raw, never, strict=False)
            assert caught.value.index == "cnt, total"
        async with Store.open(db, I.SCHEMA) as store:
            stray = (b"\x05\x10zz", b"\xc0")
            with pytest.raises(IndexStateError, match="0x051" + "07a7a"):
                await load_pairs(store, [*pairs, stray], batch_size=2, strict=False)
            assert await store.index_count("cnt", "b") == 1  # the first batch: written
            assert await store.get(I.item, (3,)) is not None
            assert await store.get_raw(stray[0]) is None

    run(body())
    assert groups(db, I.PLAIN) == AFTER


# --- point 2: rows under the index key space ----------------------------------------------------


@pytest.mark.parametrize("schema", [(), SCHEMA])
def test_the_forged_count_row_of_the_issue_is_refused(
    tmp_path: Path, schema: tuple[str, ...]
) -> None:
    """The one-line file into a database of 3 records: refused (without --schema before it
    is read: the store's indexes keep entries; with it, naming line 1), the count still 3."""
    db = seeded(tmp_path, I.PLAIN)
    line = refused(run_in_process("import", db, jsonl(tmp_path / "one.jsonl", [FORGED]), *schema))
    assert ("line 1:" in line) == bool(schema), line
    assert groups(db, I.PLAIN)["a"] == (3, 3)


@pytest.mark.parametrize("schema", [(), SCHEMA])
def test_a_row_under_the_index_key_space_is_refused_with_its_batch(
    tmp_path: Path, schema: tuple[str, ...]
) -> None:
    """The issue's forged count row after two good lines, 2 per batch: line 3 is named, the
    batch of lines 1 and 2 is kept and line 4 (its own batch) is not written. Without
    --schema the store holds no index, so the import is let through up to the row."""
    db = seeded(tmp_path, I.PLAIN) if schema else str(tmp_path / "db")
    rows = [row(3, "a", 1), row(4, "a", 1), FORGED, row(5, "a", 1)]
    file = jsonl(tmp_path / "rows.jsonl", rows)
    line = refused(run_in_process("import", db, file, *schema, "--batch-size", "2"))
    assert "line 3:" in line and "an entry of index 'cnt'" in line, line
    assert "0x00f165636e74006100" in line
    with SyncStore.open_reader(db, I.SCHEMA if schema else Schema()) as store:
        assert store.get_raw(I.item.encode(4)) is not None
        assert store.get_raw(I.item.encode(5)) is None
        forged = store.get_raw(bytes.fromhex(FORGED["key_hex"]))
    if schema:  # the entry holds what upkeep wrote, never the row's [999, 0]
        assert groups(db, I.PLAIN)["a"] == (5, 5)
    else:
        assert forged is None


@pytest.mark.parametrize(
    ("key", "part"),
    [
        (CATALOG, "the index catalog"),
        (meta_key("cnt"), "the metadata of index 'cnt'"),
        (entry_prefix("total") + b"a\x00", "an entry of index 'total'"),
    ],
)
def test_load_pairs_refuses_the_library_rows(tmp_path: Path, key: bytes, part: str) -> None:
    async def body() -> None:
        async with Store.open(str(tmp_path / "db"), I.SCHEMA) as store:
            good = (I.item.encode(1), pack({"group": "a"}))
            for strict in (True, False):
                with pytest.raises(InvalidArgumentError, match=part) as caught:
                    await load_pairs(store, [good, (key, b"\x90")], strict=strict)
                assert caught.value.value == key
            assert await store.get_raw(good[0]) is None  # nothing of the batch
            assert await store.get_raw(key) is None

    run(body())


# --- point 9: bytes that are not UTF-8 ----------------------------------------------------------


def _bad_utf8_lines(fmt: str) -> bytes:
    good = [row(n, "a", 1) for n in (3, 4)]
    if fmt == "jsonl":
        lines = [json.dumps(r).encode() for r in good]
        lines.append(b'{"key_hex": "' + I.item.encode(5).hex().encode() + b'", "x": "\xff"}')
    else:
        lines = [b"key_hex,value_hex"]
        lines += [f"{r['key_hex']},{r['value_hex']}".encode() for r in good]
        lines.append(I.item.encode(5).hex().encode() + b",c0\xe9")
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_bytes_not_utf8_are_named_by_line_and_earlier_batches_kept(
    tmp_path: Path, fmt: str
) -> None:
    db = seeded(tmp_path, I.PLAIN)
    file = tmp_path / f"rows.{fmt}"
    file.write_bytes(_bad_utf8_lines(fmt))
    bad_line = 3 if fmt == "jsonl" else 4
    line = refused(run_in_process("import", db, str(file), *SCHEMA, "--batch-size", "1"))
    assert f"line {bad_line}: not UTF-8 text" in line, line
    assert groups(db, I.PLAIN)["a"] == (5, 5)  # the two lines before it: written


def test_stdin_not_utf8_is_named_by_line(tmp_path: Path) -> None:
    db = seeded(tmp_path, I.PLAIN)
    status, _, err = run_in_process_bytes(
        "import",
        db,
        "-",
        *SCHEMA,
        "--batch-size",
        "1",
        stdin=_bad_utf8_lines("jsonl"),
        strict_io=True,
    )
    assert status == 1 and b"stdin line 3: not UTF-8 text: byte" in err, err
    assert groups(db, I.PLAIN)["a"] == (5, 5)
