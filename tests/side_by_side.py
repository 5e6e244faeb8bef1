"""Run independent test scenarios at the same time, in threads.

For scenarios that mostly wait -- on the object store, on timeouts, on child processes -- so
that two of them take about the time of one on a 2-core machine. Each scenario keeps every
check it has; the first failure is raised again naming its scenario.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def side_by_side(scenarios: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Call every scenario in its own thread; their results by label."""
    with concurrent.futures.ThreadPoolExecutor(len(scenarios)) as pool:
        futures = {label: pool.submit(call) for label, call in scenarios.items()}
        results: dict[str, T] = {}
        for label, future in futures.items():
            error = future.exception()  # waits (a hang guard's alarm interrupts it here)
            if error is not None:
                raise AssertionError(f"{label}: {type(error).__name__}: {error}") from error
            results[label] = future.result()
    return results
