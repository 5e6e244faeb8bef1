"""The index commands (issue 23, points 4 to 6 on the command line): `index list|build|rebuild
|drop`, `verify --indexes` finding each kind of planted damage, and dump and stats showing
index keys by index name. Read-only commands leave the database byte-identical. Local
directories, and list/build/verify on the moto S3 endpoint."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import CHILD_ENV, json_lines, run_in_process
from indexkit import ALL, SCHEMA, by_handle, by_tag, likes, note, per_tag, post
from opskit import fingerprint

from opendata_kv.cli import index_cmds
from opendata_kv.keys import Schema
from opendata_kv.store import SyncStore
from opendata_kv.store.indexes.layout import entry_prefix

HERE = Path(__file__).parent
S = ("--schema", "indexkit:SCHEMA")
COUNT = 30


def fill(url: str, count: int = COUNT, *, declare: bool = True, built: bool = False) -> None:
    """`count` posts and one note; with `declare`, ALL registered (write_only: records exist);
    with `built`, every index built."""
    with SyncStore.open(url, SCHEMA) as db:
        db.put_many(
            (post, ("a", n), {"tag": "xy"[n % 2], "likes": n, "handle": f"h{n}", "tags": ["p"]})
            for n in range(count)
        )
        db.put(note, ("a", 1), {"tags": ["q"]})
    if declare:
        with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
            if built:
                for index in ALL:
                    db.build_index(index.name)


def cli(*args: str) -> Any:
    return run_in_process(*args)


def listed(url: str) -> dict[str, dict[str, Any]]:
    result = cli("index", "list", url, "--json")
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json_lines(result.stdout)}  # JSON Lines: one per index


def recount_ok(url: str) -> None:
    with SyncStore.open_reader(url, SCHEMA, indexes=ALL) as reader:
        assert reader.check_indexes() == []
        assert reader.index_count(per_tag, "x") == COUNT // 2
        assert reader.index_sum(likes, "a") == sum(range(COUNT))


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = str(tmp_path / "db")
    fill(url)
    return url


# --- index list ---------------------------------------------------------------------------------


def test_list_names_every_stored_index_and_writes_nothing(db: str) -> None:
    before = fingerprint(db)
    rows = listed(db)
    assert sorted(rows) == sorted(i.name for i in ALL)
    assert rows["by_tag"]["fields"] == [
        {"name": "tag", "codec": "string"},
        {"name": "author", "codec": "string"},
    ]
    assert rows["likes"]["kind"] == "sum" and rows["likes"]["amount"] == "likes"
    assert rows["tags"]["using"] == "indexkit.each_tag"
    assert rows["tags"]["records"] == ["post", "note"]
    assert all(r["state"] == "write_only" and r["entries"] == 0 for r in rows.values())
    table = cli("index", "list", db)
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "RECORDS", "FIELDS", "STATE", "BUILT", "ENTRIES"]
    assert any(line.startswith("by_tag ") and "tag:string author:string" in line for line in lines)
    assert fingerprint(db) == before


def test_list_of_a_database_without_indexes(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, declare=False)
    assert cli("index", "list", url).stdout == "(no indexes)\n"
    missing = cli("index", "list", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "no database" in missing.stderr


# --- index build / rebuild ----------------------------------------------------------------------


def test_build_from_the_stored_definitions(db: str) -> None:
    for index in (by_tag, per_tag, likes, by_handle):
        result = cli("index", "build", db, index.name, *S, "--batch-size", "7", "--json")
        assert result.returncode == 0, result.stderr
        (obj,) = json_lines(result.stdout)
        assert obj["indexed"] == COUNT and obj["built"] == COUNT and obj["state"] == "readable"
    rows = listed(db)
    assert rows["by_tag"]["entries"] == COUNT and rows["by_tag"]["built"] == COUNT
    assert rows["per_tag"]["entries"] == 2  # one aggregate per tag
    assert rows["tags"]["state"] == "write_only"  # not built yet
    again = cli("index", "build", db, "by_tag", *S)
    assert again.returncode == 0 and "readable already" in again.stdout
    # the function index needs its declaration
    tags = cli("index", "build", db, "tags", *S)
    assert tags.returncode == 1
    assert "'tags'" in tags.stderr and "using=indexkit.each_tag" in tags.stderr
    assert "--indexes" in tags.stderr
    done = cli("index", "build", db, "tags", *S, "--indexes", "indexkit:ALL")
    assert done.returncode == 0, done.stderr
    assert "31 records indexed" in done.stdout  # 30 posts and the note
    recount_ok(db)


def test_build_says_what_is_missing(db: str, tmp_path: Path) -> None:
    no_schema = cli("index", "build", db, "by_tag")
    assert no_schema.returncode == 1
    assert "--schema" in no_schema.stderr and "['post']" in no_schema.stderr
    unknown = cli("index", "build", db, "nope", *S)
    assert unknown.returncode == 1 and "no index named 'nope'" in unknown.stderr
    assert "--indexes" in unknown.stderr
    other = tmp_path / "other.py"
    other.write_text(
        "from opendata_kv import RecordType, fields\n"
        "SCHEMA = [RecordType('x', 3, [('k', fields.u8)])]\n"
    )
    wrong = cli("index", "build", db, "by_tag", "--schema", f"{other}:SCHEMA")
    assert wrong.returncode == 1 and "does not define" in wrong.stderr
    bad = cli("index", "build", db, "by_tag", *S, "--indexes", "indexkit:SCHEMA")
    assert bad.returncode == 1 and "not a list or tuple of opendata_kv.Index" in bad.stderr
    assert cli("index", "build", db, "by_tag", *S, "--batch-size", "0").returncode == 2


def test_build_registers_a_declared_index_not_stored_yet(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, declare=False)
    result = cli("index", "build", url, "per_tag", *S, "--indexes", "indexkit:ALL")
    assert result.returncode == 0, result.stderr
    assert sorted(listed(url)) == ["per_tag"]
    with SyncStore.open_reader(url, SCHEMA, indexes=[per_tag]) as reader:
        assert reader.index_count(per_tag, "y") == COUNT // 2
        assert reader.check_indexes() == []


def test_an_interrupted_build_resumes_where_it_stopped(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stop(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(index_cmds, "_after_step", stop)
    stopped = cli("index", "build", db, "per_tag", *S, "--batch-size", "4")
    assert stopped.returncode == 130
    assert "run `opendata-kv index build` again to resume" in stopped.stderr
    row = listed(db)["per_tag"]
    assert row["state"] == "write_only" and row["built"] == 12 and row["position_hex"]
    monkeypatch.setattr(index_cmds, "_after_step", None)
    resumed = cli("index", "build", db, "per_tag", *S, "--batch-size", "4", "--json")
    assert resumed.returncode == 0, resumed.stderr
    (obj,) = json_lines(resumed.stdout)
    assert obj["indexed"] == COUNT - 12 and obj["built"] == COUNT
    with SyncStore.open_reader(db, SCHEMA, indexes=ALL) as reader:
        assert reader.index_count(per_tag, "x") == COUNT // 2  # never counted twice


KILLER = """
import os, signal, sys
from opendata_kv.cli import index_cmds
from opendata_kv.cli.main import main

def die(step):
    if step == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

index_cmds._after_step = die
main(sys.argv[2:])
"""


@pytest.mark.parametrize("step", [1, 4])
def test_a_killed_build_ends_equal_to_a_full_one(db: str, step: int) -> None:
    args = ["index", "build", db, "per_tag", *S, "--batch-size", "3"]
    child = subprocess.run(
        [sys.executable, "-c", KILLER, str(step), *args],
        env=CHILD_ENV,
        cwd=HERE,
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert listed(db)["per_tag"]["state"] == "write_only"
    resumed = cli("index", "build", db, "per_tag", *S, "--batch-size", "3", "--json")
    assert resumed.returncode == 0, resumed.stderr
    (obj,) = json_lines(resumed.stdout)
    assert obj["built"] == COUNT and obj["state"] == "readable"
    with SyncStore.open_reader(db, SCHEMA, indexes=ALL) as reader:
        assert reader.index_count(per_tag, "x") == COUNT // 2
        assert reader.index_count(per_tag, "y") == COUNT // 2


# --- verify --indexes, rebuild ------------------------------------------------------------------


def plant_damage(url: str) -> None:
    """An entry without a record, a record without its entry, a wrong aggregate."""
    with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
        db.put_raw(entry_prefix("by_tag") + b"q\x00a\x00" + post.encode("a", 99), b"")
        with db.batch() as batch:
            batch.delete_raw(entry_prefix("by_tag") + b"x\x00a\x00" + post.encode("a", 2))
        db.put_raw(entry_prefix("per_tag") + b"x\x00", b"\x92\x07\x00")


def test_verify_indexes_names_each_planted_damage_and_rebuild_repairs_it(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, built=True)
    clean = cli("verify", url, "--indexes=indexkit:ALL", *S, "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (report,) = json_lines(clean.stdout)
    assert report["checked"]["indexes"] == len(ALL) and report["notes"] == []
    plant_damage(url)
    before = fingerprint(url)
    found = cli("verify", url, "--indexes", *S, "--json")
    assert found.returncode == 1
    (report,) = json_lines(found.stdout)
    problems = [(p["object"], p["problem"]) for p in report["problems"]]
    extra = (entry_prefix("by_tag") + b"q\x00a\x00" + post.encode("a", 99)).hex()
    missing = (entry_prefix("by_tag") + b"x\x00a\x00" + post.encode("a", 2)).hex()
    aggregate = (entry_prefix("per_tag") + b"x\x00").hex()
    assert any(
        o == "index by_tag" and extra in p and "no matching record" in p for o, p in problems
    )
    assert any(o == "index by_tag" and missing in p and "is missing" in p for o, p in problems)
    assert any(
        o == "index per_tag" and aggregate in p and "recount gives (15, 0)" in p
        for o, p in problems
    )
    assert len(problems) == 3
    # the function index is named as not checked, not skipped in silence
    assert any("index tags not checked" in n and "--indexes" in n for n in report["notes"])
    text = cli("verify", url, "--indexes", *S)
    assert text.returncode == 1 and "  index by_tag: entry " in text.stdout
    assert "note: index tags not checked" in text.stdout
    assert fingerprint(url) == before
    for name in ("by_tag", "per_tag"):
        repaired = cli("index", "rebuild", url, name, *S)
        assert repaired.returncode == 0, repaired.stderr
    assert cli("verify", url, "--indexes=indexkit:ALL", *S).returncode == 0
    recount_ok(url)


def test_verify_indexes_needs_the_schema_and_names_unbuilt_indexes(db: str) -> None:
    no_schema = cli("verify", db, "--indexes")
    assert no_schema.returncode == 1 and "--schema" in no_schema.stderr
    result = cli("verify", db, "--indexes", *S, "--json")
    (report,) = json_lines(result.stdout)
    assert report["checked"]["indexes"] == 0 and report["problems"] == []
    assert any("index by_tag not checked: it is write_only" in n for n in report["notes"])
    # it checked none of what was asked: not "ok", and not a success (issue 27 point 10)
    assert result.returncode == 1 and not report["ok"]
    assert report["verdict"] == (
        f"not checked: none of the {len(ALL)} stored indexes could be checked (see the notes)"
    )
    text = cli("verify", db, "--indexes", *S)
    assert text.returncode == 1 and text.stdout.startswith(f"verify {db}: not checked: ")
    assert "checked none of the indexes" in text.stderr


# --- index drop ---------------------------------------------------------------------------------


def test_drop_removes_an_index_from_its_stored_metadata_alone(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, built=True)
    result = cli("index", "drop", url, "by_tag", "--json")
    assert result.returncode == 0, result.stderr
    (obj,) = json_lines(result.stdout)
    assert obj["deleted"] == COUNT
    assert "by_tag" not in listed(url)
    with SyncStore.open_reader(url, SCHEMA) as reader:
        assert reader.scan_all(prefix=entry_prefix("by_tag"), on_unknown="raw").to_list() == []
    unknown = cli("index", "drop", url, "by_tag")
    assert unknown.returncode == 1 and "no index named 'by_tag'" in unknown.stderr


# --- dump and stats -----------------------------------------------------------------------------


def test_dump_shows_index_entries_by_name_and_writes_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, built=True)
    before = fingerprint(url)
    plain = cli("dump", url, *S, "--json")
    assert plain.returncode == 0, plain.stderr
    assert all(r.get("layout") != "index" for r in json_lines(plain.stdout))  # records only
    result = cli("dump", url, *S, "--indexes", "--values", "--json")
    assert result.returncode == 0, result.stderr
    every = json_lines(result.stdout)
    kinds = [r.get("layout") == "index" for r in every]
    assert kinds == sorted(kinds) and any(kinds)  # records first, then the index rows
    records = [r["key_hex"] for r in every if r.get("layout") != "index"]
    assert records == [r["key_hex"] for r in json_lines(plain.stdout)]
    rows = [r for r in every if r.get("layout") == "index"]
    assert all(r["error"] is None for r in rows)
    entry = next(r for r in rows if r["index"] == "by_tag" and r["entry"] == "value")
    assert entry["fields"] == {"tag": "x", "author": "a"}
    assert entry["primary"] == {
        "key_hex": post.encode("a", 0).hex(),
        "record": "post",
        "fields": {"author": "a", "rkey": 0},
    }
    unique = next(r for r in rows if r["index"] == "by_handle" and r["entry"] == "unique")
    assert unique["primary"]["record"] == "post"
    group = next(r for r in rows if r["index"] == "likes" and r["entry"] == "sum")
    assert group["fields"] == {"author": "a"}
    assert group["value"] == {"count": COUNT, "sum": sum(range(COUNT))}
    meta = next(r for r in rows if r["index"] == "per_tag" and r["entry"] == "metadata")
    assert meta["value"]["state"] == "readable" and meta["value"]["built"] == COUNT
    assert sum(1 for r in rows if r["entry"] == "catalog") == 1
    # without --values, index rows are shown as records are: keys decoded, values as hex
    bare = [
        r
        for r in json_lines(cli("dump", url, *S, "--indexes", "--json").stdout)
        if r.get("layout") == "index"
    ]
    assert [r["key_hex"] for r in bare] == [r["key_hex"] for r in rows]
    assert all("value" not in r and r["value_hex"] is not None for r in bare)
    assert all(r["fields"] == w["fields"] for r, w in zip(bare, rows, strict=True))
    reverse = cli("dump", url, *S, "--indexes", "--reverse", "--json").stdout
    flags = [r.get("layout") == "index" for r in json_lines(reverse)]
    assert flags == sorted(flags)  # records first in reverse too
    per_tag = entry_prefix("per_tag").hex()
    assert cli("dump", url, "--prefix", per_tag).stdout == "(no records)\n"
    table = cli("dump", url, "--prefix", per_tag, "--indexes", "--values").stdout
    assert "index per_tag" in table and "tag=x" in table and '"count": 15' in table
    assert fingerprint(url) == before


def test_dump_names_an_entry_whose_index_is_not_stored(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, built=True)
    with SyncStore.open(url, Schema()) as db:  # raw rows: no record, no index kept
        db.put_raw(entry_prefix("ghost") + b"x", b"")
    result = cli("dump", url, "--prefix", entry_prefix("ghost").hex(), "--indexes", "--json")
    assert result.returncode == 1
    (row,) = json_lines(result.stdout)
    assert row["index"] == "ghost" and "no index named 'ghost' is stored" in row["error"]


def test_stats_counts_entries_per_index_and_writes_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, built=True)
    before = fingerprint(url)
    result = cli("stats", url, "--json")
    assert result.returncode == 0, result.stderr
    (obj,) = json_lines(result.stdout)
    by_name = {g["index"]: g for g in obj["indexes"]}
    assert by_name["by_tag"]["entries"] == COUNT and by_name["by_tag"]["kind"] == "value"
    assert by_name["per_tag"]["entries"] == 2
    assert by_name["tags"]["entries"] == COUNT + 1
    assert all(g["metadata_rows"] == 1 for g in obj["indexes"])
    assert obj["count"] == sum(g["count"] for g in obj["groups"]) == COUNT + 1  # records only
    table = cli("stats", url).stdout
    assert any(line.split()[:3] == ["by_tag", "value", f"{COUNT}"] for line in table.splitlines())
    entries = sum(g["entries"] for g in obj["indexes"])
    assert any(line.split()[:2] == ["total", f"{entries}"] for line in table.splitlines())
    assert fingerprint(url) == before


# --- S3 -----------------------------------------------------------------------------------------


def test_list_build_verify_on_s3(s3_url: str) -> None:
    fill(s3_url)
    before = fingerprint(s3_url)
    assert listed(s3_url)["per_tag"]["state"] == "write_only"
    assert fingerprint(s3_url) == before
    built = cli("index", "build", s3_url, "per_tag", *S, "--batch-size", "8")
    assert built.returncode == 0, built.stderr
    assert listed(s3_url)["per_tag"]["entries"] == 2
    before = fingerprint(s3_url)
    result = cli("verify", s3_url, "--indexes", *S, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = json_lines(result.stdout)
    assert report["checked"]["indexes"] == 1
    assert fingerprint(s3_url) == before


# --- progress -----------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_build_progress_draws_on_a_terminal_only() -> None:
    ticks: Iterator[float] = iter([0.0, 2.0, 2.1, 3.0])
    terminal = _Terminal()
    bar = index_cmds.StepProgress(
        terminal, "index build by_tag", delay=1.0, every=0.5, clock=lambda: next(ticks)
    )
    bar.step(7, "records")
    bar.step(14, "records")  # too soon after the last draw
    bar.step(21, "records")
    bar.done()
    shown = terminal.getvalue()
    assert "index build by_tag: 7 records" in shown and "21 records" in shown
    assert "14" not in shown and shown.endswith("\r\x1b[K")
    quiet = io.StringIO()
    index_cmds.StepProgress(quiet, "x").step(1, "records")
    assert quiet.getvalue() == ""
