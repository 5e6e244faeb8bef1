"""Build the optional C accelerator (opendata_kv/native/_accel) in place, for a checkout run from
its source tree (PYTHONPATH=.): `pip install .` builds it through pyproject.toml's ext-modules,
but an editable tree on PYTHONPATH would otherwise run the ctypes driver silently.

    python tools/build_accel.py            # -O2, next to opendata_kv/native/
    python tools/build_accel.py --asan DIR # AddressSanitizer + UBSan build into DIR (tests)
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    "module.c",
    "wire.c",
    "records.c",
    "pack.c",
    "timing.c",
    "keyenc.c",
    "cachekeys.c",
    "columns.c",
)
SOURCE_DIR = ROOT / "opendata_kv" / "native" / "_accel"
WARNINGS = ("-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers")
ASAN = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined")


def target(directory: Path) -> Path:
    """Where the built module goes: directory/_accel<EXT_SUFFIX>."""
    return directory / f"_accel{sysconfig.get_config_var('EXT_SUFFIX')}"


def command(out: Path, asan: bool) -> list[str]:
    """The compiler command line building `out`."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    flags = ASAN if asan else ("-O2",)
    sources = [str(SOURCE_DIR / name) for name in SOURCES]
    return [*cc, *flags, *WARNINGS, "-shared", "-fPIC", f"-I{include}", *sources, "-o", str(out)]


def build(directory: Path, asan: bool = False) -> Path:
    """Compile the extension into `directory`; the path of the module."""
    out = target(directory)
    subprocess.run(command(out, asan), check=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asan", action="store_true", help="AddressSanitizer + UBSan build")
    parser.add_argument("directory", nargs="?", type=Path, default=SOURCE_DIR.parent)
    args = parser.parse_args(argv)
    print(build(args.directory, args.asan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
