"""Identifier throughput: TID generation and codec, muid pack/unpack and parse/str, URL keys.

Run as `PYTHONPATH=. python tools/bench.py ids [--quick]`. Each figure is the best of three
timed runs, in operations per second on one thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from opendata_kv.ids import tid, urlkey
from opendata_kv.ids.muid import Muid, MuidGenerator

TARGET_PER_SECOND = 1_000_000


def _rate(loop: Callable[[int], None], count: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        loop(count)
        best = min(best, time.perf_counter() - start)
    return count / best


def _report(name: str, per_second: float, target: int | None = None) -> None:
    verdict = ""
    if target is not None:
        verdict = "  (target >= {:,}: {})".format(
            target, "met" if per_second >= target else "MISSED"
        )
    print(f"  {name:<38} {per_second:>14,.0f} /s{verdict}")


def run(quick: bool) -> None:
    """Print the rates; `quick` uses 1/10 of the iterations."""
    count = 100_000 if quick else 1_000_000

    generator = tid.TidGenerator()
    next_tid = generator.next
    next_int = generator.next_int

    def tid_next(n: int) -> None:
        for _ in range(n):
            next_tid()

    def tid_next_int(n: int) -> None:
        for _ in range(n):
            next_int()

    sample_tid = next_tid()
    sample_int = tid.decode(sample_tid)
    encode, decode = tid.encode, tid.decode

    def tid_codec(n: int) -> None:
        for _ in range(n):
            decode(encode(sample_int))

    m = MuidGenerator().transaction().next()
    from_bytes, parse = Muid.from_bytes, Muid.parse

    def muid_pack_unpack(n: int) -> None:
        for _ in range(n):
            from_bytes(bytes(m))

    def muid_str_parse(n: int) -> None:
        for _ in range(n):
            parse(str(m))

    def muid_construct(n: int) -> None:
        for _ in range(n):
            Muid(1_700_000_000_000_000, 0x1ABCDEF0123, 7)

    url = "https://www.nytimes.com/2023/12/09/technology/openai-altman-inside-crisis.html"
    url_key = urlkey.url_key

    def url_keys(n: int) -> None:
        for _ in range(n):
            url_key(url)

    print(f"  ({count:,} operations per run, best of 3)")
    _report("tid TidGenerator.next()", _rate(tid_next, count), TARGET_PER_SECOND)
    _report("tid TidGenerator.next_int()", _rate(tid_next_int, count))
    _report("tid encode + decode", _rate(tid_codec, count))
    _report("muid bytes(m) + Muid.from_bytes", _rate(muid_pack_unpack, count), TARGET_PER_SECOND)
    _report("muid str(m) + Muid.parse", _rate(muid_str_parse, count))
    _report("muid Muid(ts, med, off)", _rate(muid_construct, count))
    _report("url_key (78-char URL)", _rate(url_keys, max(count // 20, 1000)))


if __name__ == "__main__":
    run(quick=False)
