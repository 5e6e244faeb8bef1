"""Stray objects and refused access (issue 21, points 3, 5 and 8): a stray file under wal/ is
reported by name in bounded time and memory; an object the process may not read, or a
directory a writer may not write, is a StorePermissionError naming it at once, with default
options; the tools exit with a message naming the directory instead of a traceback.

Permission bits do not stop root, so the permission cases run in a child process without the
override capabilities (setpriv), and are skipped, saying so, where setpriv is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import damaged_store as ds
import pytest
from clikit import run_in_process
from hang_guard import hang_guard
from writer_process import child_env

from opendata_kv.errors import StoreDataError
from opendata_kv.store import SyncStore, verify_sync

pytestmark = pytest.mark.hang_guard(120)

SETPRIV = shutil.which("setpriv")
NO_OVERRIDE = [
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]
#: seconds a refused access may take to be reported (slatedb used to retry it forever)
BOUND = 30


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("access") / "base"
    ds.build(path)
    return path


def read_all(path: Path, writer: bool = False) -> dict[int, object]:
    opening = SyncStore.open if writer else SyncStore.open_reader
    with opening(str(path), ds.SCHEMA) as store:
        return {record.key.n: record.value for record in store.scan(ds.item)}


# --- point 3: stray names ------------------------------------------------------------------


@pytest.mark.parametrize(
    "stray",
    ["wal/99999999999999999999.sst", "wal/123.sst", "wal/notes.txt", "manifest/x.manifest"],
)
def test_a_stray_object_is_named_and_skipped(base: Path, tmp_path: Path, stray: str) -> None:
    path = ds.copy(base, tmp_path / "db")
    (path / stray).touch()
    with hang_guard(60):
        assert read_all(path) == ds.expected()
        assert read_all(path, writer=True) == ds.expected()
        report = verify_sync(path)
    assert [p.object_name for p in report.problems] == [stray], report.problems
    assert "not an object slatedb writes" in report.problems[0].message
    result = run_in_process("dump", str(path))
    assert result.returncode == 0 and "Traceback" not in result.stderr


def test_a_far_off_wal_id_is_a_gap_reported_in_bounded_memory(base: Path, tmp_path: Path) -> None:
    """The largest id slatedb can write: a real name, so a gap of ~2^64 ids, reported as one
    run naming its first file (the old check built the range of ids and ran out of memory)."""
    path = ds.copy(base, tmp_path / "db")
    (path / "wal" / f"{2**64 - 1:020d}.sst").touch()
    newest = max(int(p.stem) for p in (path / "wal").iterdir() if int(p.stem) < 2**64 - 1)
    with hang_guard(60), pytest.raises(StoreDataError) as caught:
        read_all(path)
    assert caught.value.object_name == f"wal/{newest + 1:020d}.sst"
    assert "ids after it" in str(caught.value)
    with hang_guard(60):
        report = verify_sync(path)
    assert f"wal/{newest + 1:020d}.sst" in {p.object_name for p in report.problems}


# --- point 5 and 8: refused access ---------------------------------------------------------

CHILD = """
import json, sys, time
sys.path.insert(0, {tests!r})
import damaged_store as ds
from opendata_kv.store import SyncStore
from opendata_kv.errors import OpendataKvError
started = time.monotonic()
try:
    opening = SyncStore.open if {writer!r} else SyncStore.open_reader
    with opening({path!r}, ds.SCHEMA) as store:
        found = len(list(store.scan(ds.item)))
    result = {{"found": found}}
except OpendataKvError as exc:
    result = {{"error": type(exc).__name__, "message": str(exc), "value": exc.value}}
result["seconds"] = time.monotonic() - started
print(json.dumps(result))
"""


def without_override(*argv: str) -> subprocess.CompletedProcess[str]:
    if SETPRIV is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop the override capabilities")
    return subprocess.run(
        [SETPRIV, *NO_OVERRIDE, *argv],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=BOUND * 3,
    )


def open_without_override(path: Path, writer: bool = False) -> dict[str, object]:
    code = CHILD.format(tests=str(Path(__file__).parent), writer=writer, path=str(path))
    done = without_override(sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("target", ["SST data", "middle WAL", "latest manifest"])
@pytest.mark.parametrize("writer", [False, True], ids=["reader", "writer"])
def test_an_unreadable_object_is_a_permission_error_naming_it(
    base: Path, tmp_path: Path, target: str, writer: bool
) -> None:
    path = ds.copy(base, tmp_path / "db")
    name = ds.local_targets(path)[target][0]
    os.chmod(path / name, 0)
    result = open_without_override(path, writer)
    assert result.get("error") == "StorePermissionError", result
    assert result["value"] == name and name in str(result["message"]), result
    assert float(result["seconds"]) < BOUND, result  # not after slatedb's endless retries


def test_a_writer_on_a_read_only_directory_is_refused_and_a_reader_reads(
    base: Path, tmp_path: Path
) -> None:
    path = ds.copy(base, tmp_path / "db")
    for directory in [path, *(p for p in path.iterdir() if p.is_dir())]:
        os.chmod(directory, 0o555)
    result = open_without_override(path, writer=True)
    assert result.get("error") == "StorePermissionError", result
    assert str(path) in str(result["value"]), result
    assert open_without_override(path, writer=False) == {
        "found": ds.TOTAL,
        "seconds": pytest.approx(0, abs=BOUND),
    }


@pytest.mark.parametrize("command", ["dump", "verify", "stats"])
def test_the_tools_name_an_unreadable_manifest_directory(
    base: Path, tmp_path: Path, command: str
) -> None:
    path = ds.copy(base, tmp_path / "db")
    os.chmod(path / "manifest", 0)
    done = without_override(sys.executable, "-m", "opendata_kv", command, str(path))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "permission denied" in done.stderr.lower() and "manifest" in done.stderr, done.stderr


# --- point 8: WAL files out of order name the file -----------------------------------------


@pytest.mark.parametrize("how", ["swapped", "older copy"])
@pytest.mark.parametrize("writer", [False, True], ids=["reader", "writer"])
def test_wal_files_out_of_order_are_a_data_error_naming_the_file(
    base: Path, tmp_path: Path, how: str, writer: bool
) -> None:
    path = ds.copy(base, tmp_path / "db")
    wal = sorted(p for p in (path / "wal").iterdir() if p.stat().st_size > 0)
    if how == "swapped":
        first, second = wal[-3], wal[-2]
        data = first.read_bytes()
        first.write_bytes(second.read_bytes())
        second.write_bytes(data)
        culprit = second
    else:
        wal[-1].write_bytes(wal[-4].read_bytes())
        culprit = wal[-1]
    with hang_guard(60), pytest.raises(StoreDataError) as caught:
        read_all(path, writer)
    name = culprit.relative_to(path).as_posix()
    assert caught.value.object_name == name and name in str(caught.value), caught.value
    assert "out of order" in str(caught.value)
