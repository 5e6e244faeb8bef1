"""The C accelerator's msgpack encoder (native/_accel/pack.c) against msgpack's own Packer, the
reference (issue 40): byte for byte on nested values of the common types, no answer (None) for
anything else, at and past the decode caps; and Batch.put's accelerated path (deferred native
puts) stores and refuses exactly what the pure path does, in the same order as the other ops.
OPENDATA_KV_ACCEL_EXAMPLES raises the example count (CI: the default)."""

from __future__ import annotations

import datetime
import enum
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import OpendataKvError
from opendata_kv.native import accel, calls
from opendata_kv.store.batch import Batch
from opendata_kv.values import DEFAULT_LIMITS, Values

EXAMPLES = int(os.environ.get("OPENDATA_KV_ACCEL_EXAMPLES", "150"))
calls.status()  # binds the extension
module = accel._import()[0] if accel.reason() == "C accelerator" else None
pytestmark = pytest.mark.skipif(module is None, reason="the C accelerator is off or not built")
PACK = msgpack.Packer(use_bin_type=True, datetime=True).pack
BIG = 2**40


class Level(enum.IntEnum):
    LOW = 1


COMMON = (dict, list, tuple, str, bytes, int, float, bool, type(None))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**65),
    st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63]),
    st.sampled_from([-32, -33, -128, -129, -(2**15), -(2**15) - 1, -(2**31), -(2**31) - 1]),
    st.sampled_from([-(2**63), -(2**63) - 1, 2**64 - 1, 2**64]),
    st.floats(),  # nan and infinities too
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),
    st.binary(max_size=40),
    st.sampled_from(["x" * 31, "x" * 32, "x" * 255, "x" * 256, "é" * 128, b"y" * 255, b"y" * 256]),
    st.sampled_from([Level.LOW, datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)]),
)
nested = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=18),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=4) | st.integers(-3, 3), inner, max_size=18),
    ),
    max_leaves=60,
)


def depth(value: Any) -> int:
    """Nested containers, the top level counted."""
    if type(value) in (list, tuple):
        return 1 + max((depth(v) for v in value), default=0)
    if type(value) is dict:
        return 1 + max((max(depth(k), depth(v)) for k, v in value.items()), default=0)
    return 0


def uncommon(value: Any) -> bool:
    """Whether some part is not one of the C encoder's exact types (or is a str with
    surrogates, an int past 64 bits)."""
    if type(value) not in COMMON:
        return True
    if type(value) is str:
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
    if type(value) is int and not -(2**63) <= value < 2**64:
        return True
    if type(value) in (list, tuple):
        return any(uncommon(v) for v in value)
    if type(value) is dict:
        return any(uncommon(k) or uncommon(v) for k, v in value.items())
    return False


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=nested, max_depth=st.integers(1, 8), max_len=st.sampled_from([1, 16, 100, BIG]))
def test_the_c_encoder_writes_msgpacks_bytes_or_declines(
    value: Any, max_depth: int, max_len: int
) -> None:
    assert module is not None
    got = module.pack_value(value, max_len, max_depth)
    try:
        want: bytes | None = PACK(value)
    except Exception:
        want = None
    if got is not None:
        assert want is not None
        assert got == want
        assert len(got) <= max_len and depth(value) < max_depth
        return
    # declined: only for what it leaves to the codec
    assert (
        value is None
        or want is None
        or uncommon(value)
        or depth(value) >= max_depth
        or len(want) > max_len
    ), value


def test_the_c_encoder_at_its_bounds() -> None:
    assert module is not None
    pack = module.pack_value
    three = [[[1]]]  # 3 containers deep
    assert pack(three, BIG, 4) == PACK(three)
    assert pack(three, BIG, 3) is None  # as deep as the cap: left to the caps' own check
    data = PACK({"body": b"x" * 200})
    assert pack({"body": b"x" * 200}, len(data), 100) == data
    assert pack({"body": b"x" * 200}, len(data) - 1, 100) is None
    deep: Any = 0
    for _ in range(600):  # past msgpack's nesting limit: its error, from the codec
        deep = [deep]
    assert pack(deep, BIG, 10_000) is None
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert pack(cyclic, BIG, 10_000) is None
    assert pack(None, BIG, 100) is None
    with pytest.raises(TypeError):
        pack({}, "100", 100)


REC = RecordType("packed", 1, [("id", F.u16)])
SCHEMA = Schema(REC)
LIMITS = DEFAULT_LIMITS.but(max_depth=4, max_array_len=8, max_str_len=40)


@dataclass
class Codecs:
    schema: Schema
    values: Values
    check_expiry: bool = True
    where: str = "test store"


def queued(batch: Batch, value: Any) -> tuple[Any, ...]:
    """What the batch holds after put(REC, (1,), value) and the native flush, or the error."""
    try:
        batch.put(REC, (1,), value)
        batch._wb()
    except OpendataKvError as exc:
        return (type(exc), str(exc), sorted(vars(exc).items(), key=repr))
    op = batch.ops[-1]
    return ("ok", op.key, op.data)


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=nested, capped=st.booleans())
def test_the_accelerated_batch_put_stores_and_refuses_as_the_pure_one(
    value: Any, capped: bool
) -> None:
    values = Values(SCHEMA, limits=LIMITS if capped else None)
    fast, pure = Batch(Codecs(SCHEMA, values)), Batch(Codecs(SCHEMA, values))
    pure._pack = pure._cput = None
    for batch in (fast, pure):
        batch.put(REC, (0,), {"bind": "the encoders"})
    assert fast._pack is not None
    assert queued(fast, value) == queued(pure, value)


def test_deferred_puts_keep_their_order_with_the_other_ops(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        store.put(REC, (4,), {"old": True})
        with store.batch() as batch:
            batch.put(REC, (1,), {"n": 1})
            batch.delete(REC, (1,))  # after the deferred put: the key ends deleted
            batch.put(REC, (2,), {"n": 2})
            batch.put(REC, (2,), {"n": 3}, ttl=3600)  # a direct call: after the deferred one
            batch.put(REC, (3,), {"n": 4})
            batch.put_raw(REC.encode(3), msgpack.packb({"n": 5}))
            batch.delete(REC, (4,))
            batch.put(REC, (4,), {"n": 6})
            assert batch.batch._queued < len(batch.batch)  # the last put waits for the write
        assert store.get(REC, (1,)) is None
        assert store.get(REC, (2,)) == {"n": 3}
        assert store.get(REC, (3,)) == {"n": 5}
        assert store.get(REC, (4,)) == {"n": 6}


items = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([REC, "packed"]), st.tuples(st.integers(-1, 70_000)), nested),
        st.tuples(st.just(REC), st.fixed_dictionaries({"id": st.integers(0, 9)}), nested),
        st.tuples(st.integers(0, 9).map(lambda i: REC.key(i)), nested),
    ),
    max_size=12,
)


def columns(batch: Batch, items: list[tuple[Any, ...]], all_at_once: bool) -> tuple[Any, ...]:
    """The batch's ops after queueing `items` (and the native flush), and the error if any."""
    error: tuple[Any, ...] = ()
    try:
        if all_at_once:
            batch.put_all(items)
        else:
            for item in items:
                batch.put(*item)
    except OpendataKvError as exc:
        error = (type(exc), str(exc), sorted(vars(exc).items(), key=repr))
    batch._wb()
    return [tuple(op) for op in batch.ops], error


@settings(max_examples=EXAMPLES, deadline=None)
@given(items=items, capped=st.booleans())
def test_put_all_queues_and_refuses_as_put_one_by_one(
    items: list[tuple[Any, ...]], capped: bool
) -> None:
    values = Values(SCHEMA, limits=LIMITS if capped else None)
    fast, pure = Batch(Codecs(SCHEMA, values)), Batch(Codecs(SCHEMA, values))
    pure._pack = pure._cput = None
    for batch in (fast, pure):
        batch.put(REC, (0,), {"bind": "the encoders"})
    assert columns(fast, items, True) == columns(pure, items, False)


def test_put_many_writes_every_batch(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        seen: list[int] = []
        rows = ((REC, (i,), {"i": i}) for i in range(2_345))
        assert store.put_many(rows, batch_size=1_000, progress=seen.append) == 2_345
        assert seen == [1_000, 2_000, 2_345]
        assert store.count(REC) == 2_345
        assert store.get(REC, (2_344,)) == {"i": 2_344}
