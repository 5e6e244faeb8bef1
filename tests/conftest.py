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


# --- hypothesis profiles ----------------------------------------------------------------------
# "ci" (the default) keeps the property suites to seconds; OPENDATA_KV_FUZZ=long runs many more
# examples for a soak before a release. No deadline: the machine is shared and timings jitter.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra; tests that need it fail on their own import
    pass
else:
    settings.register_profile(
        "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile(
        "long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile(os.environ.get("OPENDATA_KV_FUZZ", "ci"))
