"""Side-by-side benchmarks, printed as ratios measured in one run.

    python tools/bench.py codec     our key codec vs fdb.tuple (pip install '.[bench]')
    python tools/bench.py ids       TID generation, muid pack/parse rates
    python tools/bench.py store [--json]
                                    Store, SyncStore, the generated binding and rocksdict as
                                    ratios to the C floor (../shared/floor), rows in the
                                    memtable and in an SST (see tools/bench_store.py)
    python tools/bench.py metrics   what store metrics cost: a store with an OpenTelemetry meter
                                    provider beside one without, alternating rounds
    python tools/bench.py sstget [--pin none|one|split] [--variant NAME] [--native c|pure|both]
                                    warm SST point gets: p50/p99 per path (floor, SyncStore,
                                    Store), DB setting and CPU pinning (tools/bench_sstget.py)
    python tools/bench.py values    decode caps and dataclass type checks vs plain msgpack
    python tools/bench.py feed      change feed row rate vs a typed scan; flush-to-follower delay
    python tools/bench.py scale [--records N] [--store file|s3] [--json]
                                    N records of two record types: typed Store, raw slatedb
                                    and rocksdict side by side (see tools/bench_scale.py)
    python tools/bench.py footprint [--records N] [--variants slatedb,default,...] [--root DIR]
                                    bytes a settled store of AT Protocol records leaves beside
                                    rocksdict's, per settings variant, with get and scan cost
                                    per row side by side (see tools/bench_footprint.py)
    python tools/bench.py indexes   secondary indexes: indexed put_many, index_scan and online
                                    build rates vs the same without indexes / a primary scan
    python tools/bench.py collections
                                    RecordCollection put_many/create_many/create vs
                                    store.put_many, backlink indexes on (bench_collections.py)
    python tools/bench.py bulk      put_many vs load_pairs and `import` (same schema and
                                    indexes); `export` vs a typed scan (see tools/bench_bulk.py)
    python tools/bench.py listing [--repos N] [--per-repo N] [--store s3|file]
                                    RecordCollection.repos()/collections() vs a keys-only
                                    scan (see tools/bench_listing.py)
    python tools/bench.py arrow     scan.to_arrow() read to the end vs a plain typed scan (rows/s)
    python tools/bench.py scaleout [--records N] [--sst-kib K] [--export-records N] [--parallel P]
                                   [--root DIR [--rows] [--lz4 python] [--s3]]
                                    Store.splits time on a manifest of many SSTs (and a
                                    synthesized 10M-record one); `export --parallel P` vs the
                                    single-file Parquet export; with --root, splits of DIR's
                                    store (built there once) by phase, rows per split, S3
                                    request counts (see tools/bench_scaleout.py)
    python tools/bench.py appview   "who liked X" pages through covering vs plain backlinks,
                                    top(), distinct likers; Jetstream ingest vs a hand-written
                                    rocksdict consumer (see tools/bench_appview.py)
    python tools/bench.py keyvalue  py-key-value: opendata_kv.keyvalue's SlateDBStore beside its
                                    own RocksDBStore, put/get/get_many/put_many/ttl per key
    python tools/bench.py engines [--records N] [--rounds R] [--split-bytes B]
                                    N records into Arrow by 2 Dask workers vs one process's
                                    to_arrow() at one pinned checkpoint (tools/bench_engines.py)
    python tools/bench.py cache [--records N] [--gets N] [--cache-mib M]
                                    the writer's record cache: zipfian (s=1.1) typed gets over
                                    records in SSTs and batched writes, cache on and off
                                    (see tools/bench_cache.py)
    python tools/bench.py all       every section but scale, listing and footprint (run alone)

Each section lives in tools/bench_<section>.py and exposes run(quick: bool) -> None; one that
takes options of its own (scale, store) also exposes main(argv) and gets the arguments after
its name.
Numbers are never asserted in tests; they are recorded in the README and issue notes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

SECTIONS = (
    "codec",
    "ids",
    "store",
    "metrics",
    "values",
    "feed",
    "indexes",
    "collections",
    "arrow",
    "bulk",
    "appview",
    "keyvalue",
)
#: sections with options of their own -> what --quick becomes for their main(argv)
OWN_OPTIONS = {
    "scale": ["--records", "20000"],
    "store": ["--quick"],
    "listing": ["--quick"],
    "sstget": ["--quick"],
    "footprint": ["--records", "20000"],
    "scaleout": ["--quick"],
    "engines": ["--records", "20000", "--rounds", "1"],
    "cache": ["--quick"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("section", choices=(*SECTIONS, *OWN_OPTIONS, "all"))
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args, rest = parser.parse_known_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.section in OWN_OPTIONS:
        module = importlib.import_module(f"bench_{args.section}")
        return int(module.main([*rest, *(OWN_OPTIONS[args.section] if args.quick else [])]))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    for section in SECTIONS if args.section == "all" else (args.section,):
        print(f"== {section}")
        importlib.import_module(f"bench_{section}").run(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
