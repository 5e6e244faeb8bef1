"""get's per-record path (a GetPlan bound per RecordType or record name: views.get_plan and
Values.decoder) reads exactly what the general path (key_bytes, then Values.decode) reads, and
refuses exactly what it refuses, with the same error class, message and attributes (issue 44:
the key's schema check and four decode layers were paid on every get)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import RecordType, Schema, Store, SyncStore
from opendata_kv import fields as F
from opendata_kv.errors import OpendataKvError
from opendata_kv.native import calls
from opendata_kv.store import views
from opendata_kv.store.views import get_plan, key_bytes
from opendata_kv.values import DEFAULT_LIMITS, Values

REC = RecordType("plan", 1, [("id", F.u16), ("name", F.string)])
REC_V2 = RecordType("plan", 1, [("id", F.u16), ("name", F.string)], version=2)
SCHEMA = Schema(REC)
LIMITS = DEFAULT_LIMITS.but(max_depth=4, max_array_len=8, max_str_len=40)
EXAMPLES = int(os.environ.get("OPENDATA_KV_PLAN_EXAMPLES", "60"))


def outcome(fn: Any) -> tuple[Any, ...]:
    """What fn returned, or the error's class, message and attributes."""
    try:
        return ("ok", fn())
    except OpendataKvError as exc:
        return (type(exc), str(exc), sorted(vars(exc).items(), key=repr))


fields = st.tuples(
    st.one_of(st.integers(min_value=-2, max_value=70_000), st.text(max_size=3), st.none()),
    st.one_of(st.text(max_size=10), st.integers(), st.binary(max_size=3)),
) | st.tuples(st.integers(min_value=0, max_value=9))
nested = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=50)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=10), st.dictionaries(st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
)
stored = st.one_of(
    nested.map(lambda v: msgpack.packb(v, use_bin_type=True)),
    st.binary(max_size=20),  # mostly not one msgpack value
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(fields=fields, data=stored, by_name=st.booleans(), capped=st.booleans())
def test_a_bound_plan_reads_and_refuses_as_the_general_path(
    fields: tuple[Any, ...], data: bytes, by_name: bool, capped: bool
) -> None:
    values = Values(SCHEMA, limits=LIMITS if capped else None)
    target: Any = "plan" if by_name else REC
    plan = get_plan(SCHEMA, values, target)
    assert plan is not None

    def bound_key() -> bytes:
        try:
            return plan.fast_key(*fields)
        except Exception:
            return plan.key(*fields)

    assert outcome(bound_key) == outcome(lambda: key_bytes(SCHEMA, target, fields)[1])
    key = REC.encode(1, "k")
    assert outcome(lambda: plan.value(data, key)) == outcome(lambda: values.decode(REC, key, data))


def test_only_the_schemas_own_record_types_and_names_get_a_plan() -> None:
    values = Values(SCHEMA)
    look_alike = RecordType("plan", 1, [("id", F.u16), ("name", F.string)])
    assert get_plan(SCHEMA, values, look_alike) is None
    assert get_plan(SCHEMA, values, "nope") is None
    assert get_plan(SCHEMA, values, REC.key(1, "a")) is None
    assert get_plan(SCHEMA, values, [REC]) is None  # unhashable: key_bytes names it
    assert get_plan(Schema(REC_V2), values, REC_V2) is None  # values of another schema
    assert get_plan(SCHEMA, values, REC) is get_plan(SCHEMA, values, REC)  # bound once


def test_a_registered_codec_or_upgrade_replaces_the_bound_plan(tmp_path: Path) -> None:
    schema = Schema(REC, REC_V2)
    with SyncStore.open(tmp_path / "db", schema) as store:
        store.put(REC, (1, "a"), {"n": 1})
        assert store.get(REC, (1, "a")) == {"n": 1}  # binds the plan
        store.store.values.register(REC, upgrade=lambda old: {**old, "up": True})
        assert store.get(REC, (1, "a")) == {"n": 1, "up": True}
        assert store.get(REC, (1, "a"), upgrade=False) == {"n": 1}


def test_get_by_record_type_and_fields_skips_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        store.put(REC, (1, "a"), {"n": 1})
        store.put(REC, (2, "b"), {"n": 2}, ttl=3600)

        def general(*args: Any) -> Any:
            raise AssertionError("the per-record get took the general path")

        monkeypatch.setattr(views, "key_bytes", general)
        assert store.get(REC, (1, "a")) == {"n": 1}
        assert store.get("plan", (2, "b")) == {"n": 2}
        assert store.get(REC, (3, "c"), default="none") == "none"

        async def read(view: Store) -> list[Any]:
            return [await view.get(REC, (1, "a")), await view.get("plan", (9, "z"))]

        assert calls.sync(read(store.store)) == [{"n": 1}, None]
        monkeypatch.undo()
        assert store.get(REC.key(1, "a")) == {"n": 1}  # a Key: the general path


def test_an_expired_record_reads_as_missing_on_the_bound_path(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        store.store.values.get_plans.clear()
        store.put(REC, (1, "a"), {"n": 1}, ttl=0.001)
        store.put(REC, (2, "b"), {"n": 2})
        time.sleep(0.01)  # past the TTL (not a timed assertion: expiry itself is the subject)
        assert store.get(REC, (1, "a"), default="gone") == "gone"
        assert store.get(REC, (2, "b")) == {"n": 2}
