"""Value decoding: what the decode caps and DataclassCodec's type checks cost.

    python tools/bench.py values [--quick]

Side by side on the same stored bytes, interleaved rounds (see bench_codec.py):
- msgpack.unpackb as the binding-free baseline vs MsgpackCodec.decode (caps on) on a small
  record and on a 20 KiB record with 300 containers (past the cheap depth bound: it walks);
- DataclassCodec with check_types=True vs check_types=False;
- a scan's batch decoding (store scans decode 100 values at once), per value: MsgpackCodec
  (today's dict scan), DataclassCodec, and StructCodec (msgspec, when installed): a strict
  Struct (forbid_unknown_fields) against one keeping unknown fields (issue 39), on records
  without and with a field it does not declare;
- the time a hostile value (2 levels of 3000 empty arrays, 9 MB) takes to be refused.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
from bench_timing import interleaved, loop, ratio

try:
    from opendata_kv.errors import ValueLimitError
    from opendata_kv.values import DataclassCodec, MsgpackCodec, batch_decoder
except ImportError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from opendata_kv.errors import ValueLimitError
    from opendata_kv.values import DataclassCodec, MsgpackCodec, batch_decoder

try:
    import msgspec

    from opendata_kv.values import StructCodec

    class PostStruct(msgspec.Struct, forbid_unknown_fields=True):
        text: str
        lang: str
        likes: int
        tags: list[str]
        reply_to: str | None = None

    class KeptStruct(msgspec.Struct, weakref=True):  # unknown="keep": looks for unknown fields
        text: str
        lang: str
        likes: int
        tags: list[str]
        reply_to: str | None = None

except ImportError:  # the msgspec extra is not installed: no Struct case
    msgspec = None


@dataclasses.dataclass
class Post:
    text: str
    lang: str
    likes: int
    tags: list[str]
    reply_to: str | None = None


def run(quick: bool) -> None:
    count, rounds, repeat = (200, 5, 3) if quick else (1000, 11, 5)
    post = {"text": "hello world " * 8, "lang": "en", "likes": 42, "tags": ["a", "b", "c"]}
    small = [msgpack.packb({**post, "likes": i}) for i in range(count)]
    big_value = [{"id": i, "tags": ["x", "y"], "text": "é" * 20} for i in range(150)]
    big = [msgpack.packb(big_value)] * max(1, count // 20)
    codec = MsgpackCodec()
    checked = DataclassCodec(Post)
    unchecked = DataclassCodec(Post, check_types=False)
    assert checked.decode(small[0]) == unchecked.decode(small[0])
    unpackb = msgpack.unpackb

    def baseline(data: bytes) -> Any:
        return unpackb(data, raw=False, timestamp=3, strict_map_key=False)

    cases = {
        "small unpackb": lambda: loop(baseline, small),
        "small MsgpackCodec": lambda: loop(codec.decode, small),
        "big unpackb": lambda: loop(baseline, big),
        "big MsgpackCodec": lambda: loop(codec.decode, big),
        "dataclass checked": lambda: loop(checked.decode, small),
        "dataclass unchecked": lambda: loop(unchecked.decode, small),
    }
    # a scan decodes its values a batch at a time (batch_decoder): 100 per batch here
    batches = [small[i : i + 100] for i in range(0, count, 100)]
    scans = {"scan msgpack": codec, "scan dataclass": checked}
    if msgspec is not None:
        scans["scan struct"] = StructCodec(PostStruct)
        assert scans["scan struct"].decode(small[0]) == PostStruct(**codec.decode(small[0]))
    for name, scan_codec in scans.items():
        cases[name] = functools.partial(loop, batch_decoder(scan_codec), batches)
    if msgspec is not None:
        kept = batch_decoder(StructCodec(KeptStruct))
        newer = [msgpack.packb({**post, "likes": i, "facets": [i]}) for i in range(count)]
        newer_batches = [newer[i : i + 100] for i in range(0, count, 100)]
        cases["scan struct keep"] = functools.partial(loop, kept, batches)
        cases["scan struct keep+new"] = functools.partial(loop, kept, newer_batches)
    samples = interleaved(cases, count, rounds, repeat)
    big_ops = len(big) / count  # the big cases ran len(big) items but were divided by count
    print(
        f"{count} values of {len(small[0])} B, {len(big)} of {len(big[0])} B; "
        f"{rounds} interleaved rounds, best of {repeat}"
    )
    for name, values in samples.items():
        scale = 1 / big_ops if name.startswith("big") else 1.0
        print(f"  {name:<22} {statistics.median(values) * scale:8.3f} us/op")
    for label, mine, other in (
        ("caps, small record", "small MsgpackCodec", "small unpackb"),
        ("caps, 300-container record", "big MsgpackCodec", "big unpackb"),
        ("type checks", "dataclass checked", "dataclass unchecked"),
        ("dataclass scan", "scan dataclass", "scan msgpack"),
        *([("Struct scan", "scan struct", "scan msgpack")] if msgspec is not None else []),
        *(
            [
                ("Struct keep", "scan struct keep", "scan struct"),
                ("Struct keep, unknown field", "scan struct keep+new", "scan struct"),
            ]
            if msgspec is not None
            else []
        ),
    ):
        median, low, high = ratio(samples, mine, other)
        print(f"  {label}: {mine} / {other} = {median:.2f}x (range {low:.2f}-{high:.2f})")
    side = 3000
    hostile = (b"\xdc" + side.to_bytes(2, "big")) + (
        b"\xdc" + side.to_bytes(2, "big") + b"\x90" * side
    ) * side
    start = time.perf_counter()
    try:
        codec.decode(hostile)
    except ValueLimitError as exc:
        print(
            f"  hostile {len(hostile) / 1e6:.1f} MB of empty arrays refused ({exc.cap}) in "
            f"{time.perf_counter() - start:.2f} s"
        )


if __name__ == "__main__":
    run("--quick" in sys.argv)
