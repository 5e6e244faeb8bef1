"""Arrow scans: `scan.to_arrow()` read to the end beside a plain typed scan of the same rows.

    python tools/bench.py arrow [--quick]

N records (msgpack maps of 4 fields, and the same as a dataclass codec) in an SST of a local
store; interleaved rounds (bench_timing.py) of: a SyncScan iterated record by record, its
batches taken with next_chunk, and to_arrow() read batch by batch; rows/s and the ratios.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_timing import interleaved, ratio

try:
    from opendata_kv import RecordType, Schema, fields
    from opendata_kv.store import SyncStore
    from opendata_kv.values import Values
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv import RecordType, Schema, fields
    from opendata_kv.store import SyncStore
    from opendata_kv.values import Values


@dataclasses.dataclass
class Post:
    text: str
    lang: str
    likes: int
    tags: list[str]


POST = RecordType("post", 1, [("repo", fields.string), ("rkey", fields.tid)])
TYPED = RecordType("typed_post", 2, [("repo", fields.string), ("rkey", fields.tid)])


def _fill(db: Any, count: int) -> None:
    from opendata_kv.ids import tid

    def rows(record_type: RecordType, typed: bool) -> Any:
        for i in range(count):
            key = (f"did:plc:{i % 97:05d}", tid.encode(1_700_000_000_000_000 + i))
            value = {"text": f"post {i} " * 4, "lang": "en", "likes": i, "tags": ["a", "b"]}
            yield record_type, key, Post(**value) if typed else value  # type: ignore[arg-type]

    db.put_many(rows(POST, False))
    db.put_many(rows(TYPED, True))
    db.flush()


def run(quick: bool) -> None:
    count, rounds = (20_000, 3) if quick else (200_000, 5)
    values = Values(Schema(POST, TYPED)).register(TYPED, Post)
    with tempfile.TemporaryDirectory() as tmp, SyncStore.open(Path(tmp) / "db", values) as db:
        _fill(db, count)

        def records(record_type: RecordType) -> None:
            for _ in db.scan(record_type, fill_cache=False):
                pass

        def chunks(record_type: RecordType) -> None:
            scan = db.scan(record_type, fill_cache=False)
            while scan.next_chunk():
                pass

        def arrow(record_type: RecordType) -> None:
            rows = 0
            for batch in db.scan(record_type, fill_cache=False).to_arrow():
                rows += batch.num_rows
            assert rows == count

        cases = {}
        for label, record_type in (("msgpack", POST), ("dataclass", TYPED)):
            cases[f"{label} scan, for record in"] = lambda t=record_type: records(t)
            cases[f"{label} scan, next_chunk"] = lambda t=record_type: chunks(t)
            cases[f"{label} to_arrow, batches"] = lambda t=record_type: arrow(t)
        samples = interleaved(cases, count, rounds, 1)
    print(f"{count} records in an SST; {rounds} interleaved rounds")
    for name, us in samples.items():
        print(f"  {name:<32} {1e6 / statistics.median(us):>10,.0f} rows/s")
    for label in ("msgpack", "dataclass"):
        for plain in ("for record in", "next_chunk"):
            median, low, high = ratio(
                samples, f"{label} to_arrow, batches", f"{label} scan, {plain}"
            )
            print(
                f"  {label}: to_arrow time / scan ({plain}) time = {median:.2f}x "
                f"(range {low:.2f}-{high:.2f})"
            )


if __name__ == "__main__":
    run("--quick" in sys.argv)
