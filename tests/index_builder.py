"""Subprocess for test_indexes_build: open the database at argv[1] with the test indexes and
build them in small steps, printing a line per step (the parent kills it at random points)."""

from __future__ import annotations

import sys

from indexkit import ALL, SCHEMA, post

from opendata_kv.store import SyncStore

with SyncStore.open(sys.argv[1], SCHEMA, indexes=ALL) as db:
    for n, index in enumerate(ALL):
        db.put(post, ("w", n), {"tag": "x", "likes": 1})  # writes while write_only
        db.build_index(
            index.name, batch_size=7, progress=lambda done, state: print(done, state, flush=True)
        )
        db.flush()
print("done", flush=True)
