"""Batch.put's per-record path (a plan bound per RecordType or record name, views.put_plan and
Values.encoder) queues exactly what the general path (views.encode_put) would, and refuses
exactly what it refuses, with the same error class, message and attributes (issue 32)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.errors import OpendataKvError, ValueEncodeError
from opendata_kv.store.batch import Batch
from opendata_kv.store.views import encode_put
from opendata_kv.values import DEFAULT_LIMITS, Values

REC = RecordType("plan", 1, [("id", F.u16), ("name", F.string)])
SCHEMA = Schema(REC)
LIMITS = DEFAULT_LIMITS.but(max_depth=4, max_array_len=8, max_str_len=40)
EXAMPLES = int(os.environ.get("OPENDATA_KV_PLAN_EXAMPLES", "60"))


@dataclass
class Codecs:
    schema: Schema
    values: Values
    check_expiry: bool = True
    where: str = "test store"


def outcome(fn: Any) -> tuple[Any, ...]:
    """(key, data) queued, or the error's class, message and attributes."""
    try:
        return ("ok", *fn())
    except OpendataKvError as exc:
        return (type(exc), str(exc), sorted(vars(exc).items(), key=repr))


def batch_of(values: Values) -> Batch:
    batch = Batch(Codecs(SCHEMA, values))
    batch.put(REC, (0, "warm"), {"bind": "the plan"})  # the first put binds it
    return batch


def queued(batch: Batch, target: Any, fields: Any, value: Any) -> tuple[bytes, bytes]:
    batch.put(target, fields, value)
    op = batch.ops[-1]
    assert op.data is not None
    return op.key, op.data


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=50),
    st.binary(max_size=50),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=10), st.dictionaries(st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
) | st.sampled_from([object(), {1j: 2}, {"set": {1, 2}}])
fields = st.tuples(
    st.one_of(st.integers(min_value=-2, max_value=70_000), st.text(max_size=3), st.none()),
    st.one_of(st.text(max_size=10), st.integers(), st.binary(max_size=3)),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(fields=fields, value=values, by_name=st.booleans(), capped=st.booleans())
def test_a_bound_plan_queues_and_refuses_as_the_general_path(
    fields: tuple[Any, Any], value: Any, by_name: bool, capped: bool
) -> None:
    codecs = Values(SCHEMA, limits=LIMITS if capped else None)
    target = "plan" if by_name else REC
    reference = outcome(lambda: encode_put(SCHEMA, codecs, True, target, fields, value, None)[:2])
    batch = batch_of(codecs)
    assert batch._encoders, "the warm-up put bound no encoders"
    assert outcome(lambda: queued(batch, target, fields, value)) == reference


def test_register_after_a_put_rebinds_the_codec() -> None:
    codecs = Values(SCHEMA)
    batch = batch_of(codecs)
    codecs.register(REC, bytes)
    assert queued(batch, REC, (1, "a"), b"raw") == (REC.encode(1, "a"), b"raw")
    with pytest.raises(ValueEncodeError, match="plan v1 key"):
        batch.put(REC, (1, "a"), {"not": "bytes"})


def test_a_value_over_a_cap_is_refused_naming_the_record_and_key() -> None:
    batch = batch_of(Values(SCHEMA, limits=LIMITS))
    deep = [[[[[1]]]]] * 8  # over the fast path's size gate, nested past max_depth
    reference = outcome(lambda: encode_put(SCHEMA, batch.values, True, REC, (2, "d"), deep, None))
    assert reference[0] != "ok" and "max_depth" in reference[1]
    assert outcome(lambda: queued(batch, REC, (2, "d"), deep)) == reference
    assert len(batch) == 1  # only the warm-up put was queued


def test_other_addressings_and_ttl_take_the_general_path() -> None:
    batch = batch_of(Values(SCHEMA))
    batch.put(REC.key(3, "k"), {"v": 1})
    batch.put(REC, {"id": 4, "name": "m"}, {"v": 2})
    batch.put(REC, (5, "t"), {"v": 3}, ttl=60)
    ops = batch.ops
    assert [op.key for op in ops[1:]] == [
        REC.encode(3, "k"),
        REC.encode(4, "m"),
        REC.encode(5, "t"),
    ]
    assert ops[-1].expire_at is not None and ops[1].expire_at is None
    with pytest.raises(OpendataKvError):
        batch.put([REC], (1, "a"), {"v": 1})  # type: ignore[call-overload]
