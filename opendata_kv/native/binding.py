"""The one import of slatedb's generated UniFFI module, and the guard deciding whether the
native driver may call its library directly.

The driver (driver.py, calls.py) repeats what the generated code does around each call:
handle clones, byte-buffer layouts, the future poll/complete/free protocol. That is only
right for the exact generated text it was written against, so it is used only when the
installed distribution is slatedb 0.17.x *and* the generated module hashes to the known
text (KNOWN_SHA256); otherwise every call goes through the generated binding, with one
warning naming the version and what that costs. `OPENDATA_KV_NO_NATIVE=1` asks for the
generated binding (no warning).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Final

# importing the generated module loads the native library
import slatedb.uniffi._slatedb_uniffi.slatedb as _generated

BINDING_MODULE: Final = "slatedb.uniffi._slatedb_uniffi.slatedb"
DISTRIBUTION: Final = "slatedb"
SUPPORTED_SERIES: Final = (0, 17)

#: sha256 of the generated slatedb.py shipped in the slatedb 0.17.0 wheel (uniffi 0.31.1)
KNOWN_SHA256: Final = "aa166f2f20323a783fff2f4a1b27ef436be4b5a1c9e748a3477b9ee69f741d6b"

ENV_DISABLE: Final = "OPENDATA_KV_NO_NATIVE"
"""Set to 1 (or true/yes/on) to run every call through the generated binding."""

#: what the generated binding costs instead, measured on slatedb 0.17.0 (tools/bench.py store)
COST: Final = (
    "each get takes ~10x the native driver's time, each sync call ~35x (a hand-off to an "
    "event-loop thread), and puts of large values 20-65x (a Python loop copies every byte)"
)

logger = logging.getLogger("opendata_kv.native")


def generated() -> ModuleType:
    """slatedb's generated UniFFI module (loaded once, with the native library)."""
    module: ModuleType = _generated
    return module


@dataclass(frozen=True)
class NativeStatus:
    """Whether the native driver is in use, for which slatedb version, and why not."""

    active: bool
    version: str | None
    reason: str

    def __str__(self) -> str:
        state = "native driver" if self.active else "generated binding"
        return f"{state} (slatedb {self.version or 'unknown'}): {self.reason}"


def _disabled_by_env() -> bool:
    return os.environ.get(ENV_DISABLE, "").strip().lower() in {"1", "true", "yes", "on"}


def _version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _in_series(version: str) -> bool:
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) == SUPPORTED_SERIES


def source_sha256(module: ModuleType) -> str | None:
    """sha256 of a module's source file, None when it has none."""
    path = getattr(module, "__file__", None)
    if not path:
        return None
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def mismatch(module: ModuleType, version: str | None) -> str | None:
    """Why the driver cannot use `module` (None: it can)."""
    if version is None or not _in_series(version):
        return f"slatedb {version or '(not installed as a distribution)'} is not a 0.17 release"
    digest = source_sha256(module)
    if digest != KNOWN_SHA256:
        return (
            f"the generated binding of slatedb {version} is not the text the driver was written "
            f"for (sha256 {digest or 'unknown'})"
        )
    return None


def decide(module: ModuleType | None = None) -> NativeStatus:
    """The status for `module` (default: the installed binding), warning once when the driver
    has to stand aside for a binding it does not know."""
    module = module if module is not None else _generated
    version = _version()
    if _disabled_by_env():
        return NativeStatus(False, version, f"turned off by {ENV_DISABLE}")
    why = mismatch(module, version)
    if why is not None:
        logger.warning(
            "opendata_kv runs slatedb %s through its generated binding: %s; %s",
            version,
            why,
            COST,
        )
        return NativeStatus(False, version, why)
    return NativeStatus(True, version, "slatedb 0.17.0 binding, hash checked")
