"""The tools on indexes declared with the library's own functions and on the index key space
(issue 27 points 10-11, issue 28 point 8): `verify --indexes` checks a RecordCollection's six
backlink indexes from their stored definitions alone and finds planted damage; `index list`
and `index rebuild` need no --indexes for them; `clone` counts records and index rows apart;
`stats` shows the catalog row as what it is; `index list` shows BUILT only for builds."""

from __future__ import annotations

from pathlib import Path

import indexkit as K
import pytest
from clikit import json_lines, run_in_process

from opendata_kv import SyncStore
from opendata_kv.collections import BACKLINKS, RECORDS, default_schema, default_values
from opendata_kv.collections.backlinks import FOLLOW, LIKE, REPOST
from opendata_kv.store.indexes.layout import entry_prefix

POSTS = ["at://did:plc:aaa/app.bsky.feed.post/3kx1", "at://did:plc:bbb/app.bsky.feed.post/3kx2"]
LIKES_COUNT = BACKLINKS.likes.counts.name
K_SCHEMA = ("--schema", "indexkit:SCHEMA")


@pytest.fixture
def appview(tmp_path: Path) -> tuple[str, tuple[str, str]]:
    """A RecordCollection backlinks store (likes, reposts, follows) and its --schema."""
    (tmp_path / "appview.py").write_text(
        "from opendata_kv.collections import default_schema, default_values\n"
        "VALUES = default_values(default_schema())\n"
    )
    url = str(tmp_path / "db")
    schema = default_schema()
    values = default_values(schema)
    with SyncStore.open(url, schema, values=values, indexes=BACKLINKS.indexes) as db:
        for n in range(6):
            repo = f"did:plc:u{n}"
            for collection, value in (
                (LIKE, {"subject": {"uri": POSTS[n % 2], "cid": "b"}}),
                (REPOST, {"subject": {"uri": POSTS[0], "cid": "b"}}),
                (FOLLOW, {"subject": "did:plc:aaa"}),
            ):
                key = {"repo": repo, "collection": collection, "rkey": f"3kaaaaaaa{n:02d}22"}
                db.put(RECORDS.record, key, {"$type": collection, **value})
    return url, ("--schema", f"{tmp_path / 'appview.py'}:VALUES")


def test_verify_checks_the_library_backlink_indexes(appview: tuple[str, tuple[str, str]]) -> None:
    url, schema = appview
    result = run_in_process("verify", url, "--indexes", *schema, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = json_lines(result.stdout)
    assert report["checked"]["indexes"] == 6 and report["notes"] == []
    assert report["ok"] and report["verdict"] == "ok"
    schema_ = default_schema()
    with SyncStore.open(url, schema_, values=default_values(schema_)) as db:  # undeclared
        db.put_raw(entry_prefix(LIKES_COUNT) + POSTS[0].encode() + b"\x00", b"\x92\x07\x00")
    damaged = run_in_process("verify", url, "--indexes", *schema)
    assert damaged.returncode == 1
    assert f"  index {LIKES_COUNT}: aggregate" in damaged.stdout
    assert "recount gives (3, 0)" in damaged.stdout
    # the repair needs no --indexes either: the functions are the library's
    repaired = run_in_process("index", "rebuild", url, LIKES_COUNT, *schema)
    assert repaired.returncode == 0, repaired.stderr
    assert run_in_process("verify", url, "--indexes", *schema).returncode == 0


def test_index_list_names_the_functions_and_built_only_for_builds(
    appview: tuple[str, tuple[str, str]],
) -> None:
    url, schema = appview
    listed = run_in_process("index", "list", url)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith(LIKES_COUNT + " "))
    assert "using=opendata_kv.collections.backlinks.like_groups" in line
    assert line.split()[-2:] == ["-", "2"]  # readable from its registration: no build ran
    listing = json_lines(run_in_process("index", "list", url, "--json").stdout)
    rows = {row["name"]: row for row in listing}  # JSON Lines: one object per index
    assert rows[LIKES_COUNT]["built"] is None and rows[LIKES_COUNT]["entries"] == 2
    assert run_in_process("index", "rebuild", url, LIKES_COUNT, *schema).returncode == 0
    listing = json_lines(run_in_process("index", "list", url, "--json").stdout)
    rows = {row["name"]: row for row in listing}  # JSON Lines: one object per index
    assert rows[LIKES_COUNT]["built"] == 18  # every record of the type, linking or not


def test_stats_shows_the_catalog_row_as_no_index(appview: tuple[str, tuple[str, str]]) -> None:
    url, _ = appview
    table = run_in_process("stats", url).stdout.splitlines()
    head = next(x for x in table if x.startswith("INDEX"))
    assert head.split() == [
        "INDEX",
        "KIND",
        "ENTRIES",
        "META",
        "ROWS",
        "KEY",
        "BYTES",
        "VALUE",
        "BYTES",
    ]
    catalog = next(x for x in table if x.startswith("(catalog)"))
    assert catalog.split()[:4] == ["(catalog)", "catalog", "-", "1"]
    likes = next(x for x in table if x.startswith(LIKES_COUNT + " "))
    assert likes.split()[1:4] == ["count", "2", "1"]


def test_clone_counts_records_and_index_rows_apart(
    appview: tuple[str, tuple[str, str]], tmp_path: Path
) -> None:
    url, _ = appview
    (stats,) = json_lines(run_in_process("stats", url, "--json").stdout)
    index_rows = sum(g["entries"] + g["metadata_rows"] for g in stats["indexes"])
    assert stats["count"] == 18 and index_rows > stats["count"]
    result = run_in_process("clone", url, str(tmp_path / "copy"), "--json")
    assert result.returncode == 0, result.stderr
    (cloned,) = json_lines(result.stdout)
    assert cloned["records"] == 18 and cloned["index_rows"] == index_rows
    text = run_in_process("clone", url, str(tmp_path / "copy2")).stdout.splitlines()
    assert any(x.split() == ["records:", "18"] for x in text)
    assert any(x.split() == ["index_rows:", str(index_rows)] for x in text)
    (copied,) = json_lines(run_in_process("stats", str(tmp_path / "copy"), "--json").stdout)
    assert copied["count"] == 18 and copied["indexes"] == stats["indexes"]


def test_verify_says_which_indexes_it_did_not_check(tmp_path: Path) -> None:
    """Some indexes checked, one needing a function nobody gave: "ok, but", exit 0; the
    index tools write no record, so they open beside it without its declaration."""
    url = str(tmp_path / "db")
    with SyncStore.open(url, K.SCHEMA, indexes=[K.per_tag, K.tags]) as db:
        db.put(K.post, ("a", 1), {"tag": "x", "tags": ["p"]})
    with SyncStore.open(url, K.SCHEMA, indexes=[K.tags]) as db:  # per_tag is taken up
        db.put(K.post, ("a", 2), {"tag": "x", "tags": ["q"]})
    with SyncStore.open(url, K.SCHEMA, indexes=[K.tags, K.by_tag]):
        pass  # by_tag registered write_only: records exist
    built = run_in_process("index", "build", url, "by_tag", *K_SCHEMA)  # no --indexes
    assert built.returncode == 0, built.stderr
    result = run_in_process("verify", url, "--indexes", *K_SCHEMA)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = f"verify {url}: ok, but 1 of 3 stored indexes not checked (see the notes)"
    assert result.stdout.splitlines()[0] == verdict
    assert "note: index tags not checked" in result.stdout
    (report,) = json_lines(run_in_process("verify", url, "--indexes", *K_SCHEMA, "--json").stdout)
    assert report["ok"] and report["checked"]["indexes"] == 2


def test_verify_error_lines_escape_the_database_path(tmp_path: Path) -> None:
    """The verdict lines on stderr name the database as given: escaped like every line."""
    url = str(tmp_path / "db\x1b[31m\u202e\x85FORGED")
    with SyncStore.open(url, K.SCHEMA, indexes=[K.tags]) as db:
        db.put(K.post, ("a", 1), {"tags": ["p"]})
    result = run_in_process("verify", url, "--indexes", *K_SCHEMA)
    assert result.returncode == 1 and "checked none of the indexes" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.rstrip("\n").isprintable()
    assert "db\\x1b[31m\\u202e\\x85FORGED" in result.stderr
