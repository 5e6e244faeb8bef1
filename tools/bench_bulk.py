"""Bulk load (issue 31): records/s of `put_many` beside `load_pairs` (the library call under
`opendata-kv import`, exact bytes checked by the schema) and the `import` command itself
(in-process, from a JSONL file `export` wrote), all into a fresh local store with the same
schema and indexes (one value index, one count index); `export` to JSONL beside a typed scan.

Rounds alternate the paths; the median of each is reported with its ratio to put_many.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

from bench_indexes import _value, by_subject, like, per_subject

from opendata_kv import Schema
from opendata_kv.cli.main import main as cli
from opendata_kv.store import Store
from opendata_kv.store.ops.bulk_load import load_pairs
from opendata_kv.values import pack

INDEXES = [by_subject, per_subject]


def _records(count: int) -> list[tuple[str, int]]:
    return [(f"did:{n % 50}", n) for n in range(count)]


async def _put_many(url: str, count: int) -> float:
    async with Store.open(url, [like], indexes=INDEXES) as store:
        start = time.perf_counter()
        rows = ((like, fields, _value(fields[1])) for fields in _records(count))
        await store.put_many(rows, batch_size=1000)
        return time.perf_counter() - start


async def _load_pairs(url: str, count: int) -> float:
    pairs = [(like.encode(*fields), pack(_value(fields[1]))) for fields in _records(count)]
    async with Store.open(url, [like], indexes=INDEXES) as store:
        start = time.perf_counter()
        await load_pairs(store, pairs, batch_size=1000)
        return time.perf_counter() - start


def _quiet_cli(*args: str) -> float:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli(list(args))
    took = time.perf_counter() - start
    assert status == 0, err.getvalue()
    return took


async def _scan(url: str) -> tuple[float, int]:
    async with Store.open(url, [like], indexes=INDEXES) as store:
        start = time.perf_counter()
        rows = len(await store.scan("like").to_list())
        return time.perf_counter() - start, rows


def run(quick: bool) -> None:
    count = 5_000 if quick else 50_000
    rounds = 2 if quick else 3
    module = types.ModuleType("bench_bulk_spec")
    module.SCHEMA = Schema(like)  # type: ignore[attr-defined]
    module.INDEXES = INDEXES  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    spec = ("--schema", "bench_bulk_spec:SCHEMA", "--indexes", "bench_bulk_spec:INDEXES")
    times: dict[str, list[float]] = {
        k: [] for k in ("put_many", "load_pairs", "import", "export", "scan")
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        source = str(base / "source")
        asyncio.run(_put_many(source, count))
        jsonl = str(base / "rows.jsonl")
        for r in range(rounds):
            times["export"].append(
                _quiet_cli("export", source, spec[0], spec[1], "--output", jsonl)
            )
            took, rows = asyncio.run(_scan(source))
            assert rows == count, rows
            times["scan"].append(took)
            times["put_many"].append(asyncio.run(_put_many(str(base / f"p{r}"), count)))
            times["load_pairs"].append(asyncio.run(_load_pairs(str(base / f"l{r}"), count)))
            times["import"].append(_quiet_cli("import", str(base / f"i{r}"), jsonl, *spec))
    rate = {k: count / statistics.median(v) for k, v in times.items()}
    print(f"{count:,} records, 1 value + 1 count index, median of {rounds} rounds, records/s:")
    for name in ("put_many", "load_pairs", "import"):
        print(f"  {name:<11}{rate[name]:>10,.0f}  {rate[name] / rate['put_many']:.2f}x put_many")
    print(f"  {'scan':<11}{rate['scan']:>10,.0f}  (typed scan of the same records)")
    ratio = rate["export"] / rate["scan"]
    print(f"  {'export':<11}{rate['export']:>10,.0f}  {ratio:.2f}x the scan (JSONL, --schema)")
