"""The C accelerator under AddressSanitizer and UBSan (opt-in: OPENDATA_KV_ASAN=1; needs gcc
with libasan): an ASan build of the extension in a copy of the package runs the parser fuzz,
the accelerator's driver tests and a few store tests in a subprocess, which must pass with no
sanitizer report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = (
    REPO / "tests" / "test_native_accel_wire.py",
    REPO / "tests" / "test_native_accel_records.py",
    REPO / "tests" / "test_native_accel_keyenc.py",
    REPO / "tests" / "test_native_accel_driver.py",
    REPO / "tests" / "test_native_driver.py",
    REPO / "tests" / "test_store_basic.py",
    REPO / "tests" / "test_batch_put_plan.py",
    REPO / "tests" / "test_native_batch_calls.py",
    REPO / "tests" / "test_store_ttl_batch.py",
    REPO / "tests" / "test_index_groups.py",
    REPO / "tests" / "test_indexes_old_values.py",
    REPO / "tests" / "test_metrics_timing.py",
    REPO / "tests" / "test_record_cache.py",
)


def _runtime(name: str) -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    found = subprocess.run(
        [gcc, f"-print-file-name={name}"], capture_output=True, text=True
    ).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


@pytest.mark.skipif(os.environ.get("OPENDATA_KV_ASAN") != "1", reason="opt-in: OPENDATA_KV_ASAN=1")
def test_the_extension_is_clean_under_asan(tmp_path: Path) -> None:
    asan, ubsan = _runtime("libasan.so"), _runtime("libubsan.so")
    if asan is None or ubsan is None:
        pytest.skip("gcc with libasan and libubsan is needed")
    package = tmp_path / "opendata_kv"
    shutil.copytree(REPO / "opendata_kv", package, ignore=shutil.ignore_patterns("*.so"))
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_accel.py"), "--asan", str(package / "native")],
        check=True,
        env={**os.environ, "CC": "gcc"},
    )
    logs = tmp_path / "asan"
    env = {
        **os.environ,
        # the copy first (its ASan build); the checkout after it for the tests' own helpers
        # (test_metrics imports tests.storekit)
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
        "LD_PRELOAD": f"{asan} {ubsan}",
        "ASAN_OPTIONS": f"detect_leaks=0:log_path={logs}",
        "UBSAN_OPTIONS": f"print_stacktrace=1:log_path={logs}",
        "PYTHONMALLOC": "malloc",
    }
    env.pop("OPENDATA_KV_NO_EXTENSIONS", None)
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import opendata_kv.native.calls as c, opendata_kv.native.accel as a;"
            "c.status(); print(a.reason(), a._import()[0].__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert check.returncode == 0 and check.stdout.startswith("C accelerator "), check
    assert str(tmp_path) in check.stdout
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, TESTS)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    reports = sorted(tmp_path.glob("asan*"))
    assert not reports, "\n".join(path.read_text() for path in reports)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    print(run.stdout.strip().splitlines()[-1])  # the subprocess's pass count, shown with -s
    assert " passed" in run.stdout
