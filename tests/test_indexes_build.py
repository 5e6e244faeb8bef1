"""Online index builds (issue 23, item 4): an index added to a store with data is write_only
until built; reads are refused meanwhile; a build killed with SIGKILL at a random step resumes
from its persisted position and ends equal to a from-scratch build (aggregates never counted
twice); drop removes every entry."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from indexkit import ALL, SCHEMA, by_tag, covered, per_tag, post

from opendata_kv.errors import IndexStateError
from opendata_kv.store import SyncStore
from opendata_kv.store.indexes.layout import ENTRIES

HERE = Path(__file__).parent


def fill(url: str, count: int = 120) -> None:
    with SyncStore.open(url, SCHEMA) as db:
        db.put_many(
            (post, ("a", n), {"tag": "xyz"[n % 3], "likes": n, "handle": f"h{n}", "tags": ["p"]})
            for n in range(count)
        )
        db.flush()


def entries(db: SyncStore) -> dict[bytes, bytes]:
    return {r.raw_key: r.value for r in db.scan_all(prefix=ENTRIES, on_unknown="raw")}


def test_write_only_until_built_then_readable(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, 30)
    with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
        assert db.index_info()["by_tag"]["state"] == "write_only"
        with pytest.raises(IndexStateError, match="write_only"):
            db.index_count(per_tag, "x")
        db.put(post, ("a", 100), {"tag": "x"})  # past the position: left to the build
        steps: list[tuple[int, str]] = []
        assert db.build_index("per_tag", batch_size=8, progress=lambda d, s: steps.append((d, s)))
        assert steps[-1][1] == "readable" and steps[-1][0] == 31
        assert db.index_count(per_tag, "x") == 11
        for index in ALL:
            db.build_index(index.name)
        assert db.check_indexes() == []
        assert db.drop_index("by_tag") > 0
        assert not any(k.startswith(ENTRIES + b"by_tag\x00") for k in entries(db))
        with pytest.raises(IndexStateError):
            db.index_scan(by_tag).to_list()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_killed_build_resumes_and_ends_equal_to_a_fresh_build(tmp_path: Path, seed: int) -> None:
    url = str(tmp_path / "db")
    fill(url)
    rng = random.Random(seed)
    for _ in range(2):  # killed twice at random steps
        stop_after = rng.randrange(1, 40)
        env = dict(os.environ, PYTHONPATH=str(HERE))
        with subprocess.Popen(
            [sys.executable, str(HERE / "index_builder.py"), url],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        ) as child:
            assert child.stdout is not None
            for _ in range(stop_after):
                if not child.stdout.readline():
                    break
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    with SyncStore.open(url, SCHEMA, indexes=ALL) as db:
        for index in ALL:
            db.build_index(index.name, batch_size=11)
        assert db.check_indexes() == []
        resumed = entries(db)
        for index in ALL:
            db.rebuild_index(index.name)
        assert entries(db) == resumed


def test_a_covering_build_copies_values_and_expiries(tmp_path: Path) -> None:
    url = str(tmp_path / "db")
    fill(url, 25)
    ttl = 2.0  # outlasts the build and both reads on a loaded machine (0.3 s did not)
    written = time.monotonic()
    with SyncStore.open(url, SCHEMA) as db:
        db.put(post, ("b", 1), {"tag": "x", "brief": True}, ttl=ttl)
    with SyncStore.open(url, SCHEMA, indexes=[covered]) as db:
        assert db.index_info()["covered"]["state"] == "write_only"
        db.build_index("covered", batch_size=7)
        assert db.check_indexes() == []
        copies = {(r.key.author, r.key.rkey): r.value for r in db.index_scan(covered)}
        assert copies == {(r.key.author, r.key.rkey): r.value for r in db.scan(post)}
        assert ("b", 1) in copies, "the record expired before the build: the test proves nothing"
        # the built copy took its record's expiry
        time.sleep(max(0.0, written + ttl + 0.2 - time.monotonic()))
        assert ("b", 1) not in {(r.key.author, r.key.rkey) for r in db.index_scan(covered)}
