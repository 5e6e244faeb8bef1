"""`opendata-kv import` in child processes: interrupted by SIGINT or SIGKILL and resumed
without losing or repeating a row, and a 100,000-record export and import whose memory stays
bounded by the batch, not the file (OPENDATA_KV_EXPORT_RECORDS scales it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_schema import LIKE, SCHEMA
from clikit import CHILD_ENV, json_lines, run_in_process
from storekit import run

from opendata_kv import Schema
from opendata_kv.store import Store

BIG = int(os.environ.get("OPENDATA_KV_EXPORT_RECORDS", "100000"))


def fill(db: Path, count: int) -> None:
    async def body() -> None:
        async with Store.open(str(db), SCHEMA) as store:
            rows = ((LIKE, (n,), {"n": n, "by": f"did:plc:{n:024d}"}) for n in range(count))
            await store.put_many(rows, batch_size=2000)
            await store.flush()

    run(body())


def stored(db: Path) -> list[tuple[str, str]]:
    result = run_in_process("dump", str(db), "--json", "--layout", "none")
    assert result.returncode == 0, result.stderr
    return [(r["key_hex"], r["value_hex"]) for r in json_lines(result.stdout)]


def export(db: Path, out: Path) -> None:
    result = run_in_process(
        "export", str(db), "--schema", "cli_schema:SCHEMA", "--output", str(out)
    )
    assert result.returncode == 0, result.stderr


def child(*args: str) -> subprocess.Popen[bytes]:
    return python("-m", "opendata_kv", *args)


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in KiB) of a child once it ends."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stdout:
        proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return proc.returncode, err, usage.ru_maxrss


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("interrupt")
    db, out = base / "db", base / "rows.jsonl"
    fill(db, 20_000)
    export(db, out)
    return db, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_import_resumes_without_gaps_or_repeats(
    source: tuple[Path, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    db, out = source
    copy = tmp_path / "copy"
    marker = copy / "opendata-kv" / "import.json"
    args = (
        "import",
        str(copy),
        str(out),
        "--schema",
        "cli_schema:SCHEMA",
        "--batch-size",
        "200",
        "--mark-every",
        "0",
    )
    proc = child(*args)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads(marker.read_text())["rows"] >= 1000:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.01)
    assert proc.poll() is None, "the import ended before it could be interrupted"
    proc.send_signal(sig)
    status, err, _ = finish(proc)
    assert status == (130 if sig == signal.SIGINT else -signal.SIGKILL), err
    assert "Traceback" not in err
    if sig == signal.SIGINT:
        assert err.endswith(
            "import interrupted; the batches committed so far are kept: run it again to resume\n"
        ), err
    committed = json.loads(marker.read_text())["rows"]
    assert 1000 <= committed < 20_000 and committed % 200 == 0
    # every row the marker names is there (the marker is written once they are durable)
    assert len(stored(copy)) >= committed
    status, err, _ = finish(child(*args))
    assert status == 0, err
    resumed = f"(resumed: the first {committed:,} were committed before)"
    assert err == f"imported {20_000 - committed:,} records {resumed}\n"
    assert stored(copy) == stored(db)  # nothing missing, nothing extra
    assert not marker.exists()


#: The child's own peak RSS (VmHWM of its address space: ru_maxrss would also count the
#: parent's, inherited at fork) as the last stderr line.
HWM = """
import sys
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        sys.stderr.write(f"hwm={line.split()[1]}\\n")
"""
CLI = (
    """
import sys
from opendata_kv.cli.main import main
status = main(sys.argv[1:])
"""
    + HWM
    + "sys.exit(status)\n"
)
FILL = (
    """
import asyncio, sys
from cli_schema import LIKE, SCHEMA
from opendata_kv import Schema
from opendata_kv.store import Store

async def main(path, count):
    async with Store.open(path, SCHEMA) as store:
        rows = ((LIKE, (n,), {"n": n, "by": f"did:plc:{n:024d}"}) for n in range(count))
        await store.put_many(rows, batch_size=1000)
        await store.flush()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
    + HWM
)


def python(*args: str) -> subprocess.Popen[bytes]:
    """A child Python (its stdout dropped: a pipe nobody reads would stall it)."""
    return subprocess.Popen(
        [sys.executable, *args], env=CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def test_big_export_and_import_keep_memory_bounded(tmp_path: Path) -> None:
    """On BIG records, export peaks within 16 MiB (half the file) of `dump --json` over the
    same store (SlateDB's reader holds the WAL it replays), and import within 16 MiB of
    put_many writing the same records (SlateDB's memtable): file and rows are streamed."""
    db, out, copy = (tmp_path / part for part in ("db", "rows.jsonl", "copy"))
    schema = ("--schema", "cli_schema:SCHEMA")
    rss: dict[str, int] = {}
    runs = {
        "put_many": ("-c", FILL, str(db), str(BIG)),
        "dump": ("-c", CLI, "dump", str(db), *schema, "--json", "--values"),
        "export": ("-c", CLI, "export", str(db), *schema, "--output", str(out)),
        "import": ("-c", CLI, "import", str(copy), str(out), *schema),
    }
    for name, command in runs.items():
        status, err, _ = finish(python(*command))
        assert status == 0, (name, err)
        err, _, hwm = err.rpartition("hwm=")
        rss[name] = int(hwm)
    assert err == f"imported {BIG:,} records\n"
    assert raw_pairs(copy) == raw_pairs(db)
    mib = {name: round(kib / 1024, 1) for name, kib in rss.items()}
    print(f"peak RSS MiB at {BIG:,} records ({out.stat().st_size / 2**20:.1f} MiB file): {mib}")
    assert mib["export"] < mib["dump"] + 16, mib
    assert mib["import"] < mib["put_many"] + 16, mib


def raw_pairs(db: Path) -> list[tuple[bytes, bytes]]:
    async def body() -> list[tuple[bytes, bytes]]:
        async with await Store.open_reader(str(db), Schema()) as reader:
            return [(r.raw_key, r.value) async for r in reader.scan_all(on_unknown="raw")]

    return run(body())
