"""Shared fixtures. Conformance vectors come from $OPENDATA_KV_VECTORS (CI: ../shared/vectors);
a missing folder fails the tests that need it instead of skipping them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def vectors_dir() -> Path:
    """The conformance vector folder, or a test failure naming what is missing."""
    configured = os.environ.get("OPENDATA_KV_VECTORS")
    path = Path(configured) if configured else REPO.parent / "shared" / "vectors"
    if not path.is_dir():
        pytest.fail(
            f"conformance vectors not found at {path}: set OPENDATA_KV_VECTORS "
            "to the shared/vectors folder",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def vectors() -> Path:
    return vectors_dir()


@pytest.fixture(params=["memory", "local"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database location: an in-process memory store, or a temporary directory."""
    return "memory://test" if request.param == "memory" else str(tmp_path / "db")


# --- hypothesis profiles ----------------------------------------------------------------------
# "ci" (the default) keeps hypothesis's usual 100 examples, so property suites take seconds;
# OPENDATA_KV_FUZZ=long runs 20x more for a soak before a release. Tests may scale these
# (test_keys_properties does). No deadline: the machine is shared and timings jitter.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra; tests that need it fail on their own import
    pass
else:
    settings.register_profile(
        "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile(
        "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile(os.environ.get("OPENDATA_KV_FUZZ", "ci"))
