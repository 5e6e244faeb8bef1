"""The C floor for the store bench: build ../shared/floor/ and bind it to the loaded slatedb.

Not a bench section itself (tools/bench.py lists the sections) and never part of the product:
opendata_kv does not import it, and its files stay in ../shared/floor/ (relative to the
repository root). The extension is compiled into `.floor-build/` at the repository root
(ignored by git) and rebuilt when its source is newer than the built file. Without the
folder, a C compiler or the Python headers, `load` returns the reason and the bench prints
"no floor" in place of ratios.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
FLOOR_DIR = REPO.parent / "shared" / "floor"
BUILD_DIR = REPO / ".floor-build"
BUILD_TIMEOUT_S = 120.0

#: built extension path -> the initialised floorext module (init once per process)
_loaded: dict[Path, ModuleType] = {}


@dataclass(frozen=True)
class Floor:
    """floorext bound to the slatedb library this process loaded, and where it was built."""

    fx: ModuleType
    built: Path


def load(floor_dir: Path = FLOOR_DIR, build_dir: Path = BUILD_DIR) -> Floor | str:
    """The floor, or a one-line reason starting with "no floor" why there is none."""
    source = floor_dir / "floorext.c"
    if not source.is_file() or not (floor_dir / "glue.py").is_file():
        return f"no floor: {floor_dir} not found"
    compiler = os.environ.get("CC", "gcc")
    if shutil.which(compiler) is None:
        return f"no floor: no C compiler ({compiler}) to build {source}"
    built = build_dir / f"floorext{sysconfig.get_config_var('EXT_SUFFIX')}"
    if built not in _loaded:
        newest = max(p.stat().st_mtime for p in (source, floor_dir / "build.sh"))
        if not built.exists() or built.stat().st_mtime < newest:
            failure = _build(floor_dir, build_dir, built)
            if failure:
                return failure
        try:
            _loaded[built] = _bind(built, floor_dir / "glue.py")
        except (AttributeError, ImportError, OSError) as exc:
            return f"no floor: {built} does not bind to this slatedb: {exc}"
    return Floor(_loaded[built], built)


def _build(floor_dir: Path, build_dir: Path, built: Path) -> str | None:
    """Compile into a private folder, then move into place (concurrent runs never see half a
    file); the reason on failure."""
    build_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=build_dir, prefix="tmp-") as tmp:
        try:
            done = subprocess.run(
                ["sh", str(floor_dir / "build.sh"), sys.executable, tmp],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"no floor: building {floor_dir} took over {BUILD_TIMEOUT_S:.0f} s"
        output = Path(tmp) / built.name
        if done.returncode != 0 or not output.is_file():
            lines = (done.stderr or done.stdout).strip().splitlines()
            return f"no floor: build failed: {lines[-1] if lines else done.returncode}"
        os.replace(output, built)
    return None


def _bind(built: Path, glue_path: Path) -> ModuleType:
    """Import the built extension and the harness's glue, and hand it the binding's entry points."""
    loader = importlib.machinery.ExtensionFileLoader("floorext", str(built))
    spec = importlib.util.spec_from_file_location("floorext", built, loader=loader)
    glue_spec = importlib.util.spec_from_file_location("_floor_glue", glue_path)
    if spec is None or glue_spec is None or glue_spec.loader is None:
        raise ImportError(f"cannot load {built} or {glue_path}")
    floorext = importlib.util.module_from_spec(spec)
    loader.exec_module(floorext)
    glue = importlib.util.module_from_spec(glue_spec)
    glue_spec.loader.exec_module(glue)
    fx: ModuleType = glue.load_floorext(floorext)
    return fx
