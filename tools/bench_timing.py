"""Timing shared by the micro benchmarks (codec, values): best-of runs, interleaved rounds.

Not a bench section itself (tools/bench.py lists the sections).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def loop(fn: Callable[[Any], Any], items: Sequence[Any]) -> None:
    """Call fn on every item (the timed body of a case)."""
    for item in items:
        fn(item)


def best_us(fn: Callable[[], None], ops: int, repeat: int) -> float:
    """Best of `repeat` runs of fn, in microseconds per operation."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - start)
    return best / ops / 1000.0


def interleaved(
    cases: dict[str, Callable[[], None]], ops: int, rounds: int, repeat: int
) -> dict[str, list[float]]:
    """Per case, `rounds` samples of best_us: every case warmed up once, then the cases run
    in a rotated order each round with the garbage collector off, so drift hits all alike."""
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for fn in cases.values():
        fn()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(best_us(cases[name], ops, repeat))
    finally:
        if was_enabled:
            gc.enable()
    return samples


def ratio(samples: dict[str, list[float]], num: str, den: str) -> tuple[float, float, float]:
    """num/den round by round (the rounds interleave, so each ratio compares like with like):
    the median, min and max of those ratios."""
    ratios = [a / b for a, b in zip(samples[num], samples[den], strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)
