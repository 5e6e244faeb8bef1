"""The C accelerator's key encoder (native/_accel/keyenc.c) against the pure path's bytes, and
Batch.put / put_many through its one-call queue (issue 40): byte for byte on every key field
kind it takes (and desc() of each), at the fields' caps and past them, where it declines and
the pure path raises the same error (type, message, attributes) it raises without the
accelerator. OPENDATA_KV_ACCEL_EXAMPLES raises the example count (CI: the default)."""

from __future__ import annotations

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
from opendata_kv.keys.codecs import Field
from opendata_kv.native import accel, calls, records
from opendata_kv.store import views
from opendata_kv.store.batch import Batch
from opendata_kv.values import Values

EXAMPLES = int(os.environ.get("OPENDATA_KV_ACCEL_EXAMPLES", "150"))
calls.status()  # binds the extension
module = accel._import()[0] if accel.reason() == "C accelerator" else None
pytestmark = pytest.mark.skipif(module is None, reason="the C accelerator is off or not built")


class Small(enum.IntEnum):
    ONE = 1


#: every key codec the C encoder takes, with values of its own type, at its caps and past them
KINDS: list[tuple[Field, st.SearchStrategy[Any]]] = [
    (F.u8, st.integers(-2, 2**8 + 1) | st.sampled_from([0, 255, 256, -1])),
    (F.u16, st.integers(-2, 2**16 + 1) | st.sampled_from([65535, 65536])),
    (F.u32, st.integers(-2, 2**32 + 1) | st.sampled_from([2**32 - 1, 2**32])),
    (F.u64, st.integers(-(2**64), 2**65) | st.sampled_from([2**64 - 1, 2**64, 2**63])),
    (F.i32, st.integers(-(2**31) - 2, 2**31 + 1) | st.sampled_from([-(2**31), 2**31 - 1])),
    (F.i64, st.integers(-(2**64), 2**64) | st.sampled_from([-(2**63), 2**63 - 1, 2**63])),
    (F.f64, st.floats() | st.sampled_from([0.0, -0.0, float("inf"), float("-inf")])),
    (F.boolean, st.booleans()),
    (F.fixed(3), st.binary(min_size=2, max_size=4)),
    (F.string, st.text(max_size=12) | st.sampled_from(["\x00", "\x01", "\x00\x01\x02", "é"])),
    (F.bytes_, st.binary(max_size=12) | st.sampled_from([b"\x00", b"\x01", b"\x01\x00\xff"])),
    (F.var_u32, st.integers(-1, 2**32 + 1) | st.sampled_from([2**32 - 1, 127, 128, 2**21])),
    (F.var_u64, st.integers(-1, 2**64 + 1) | st.sampled_from([2**64 - 1, 2**60, 2**56])),
    (F.url_key, st.integers(-1, 2**64) | st.sampled_from([2**63 - 1, 2**63])),
    (
        F.tid,
        st.sampled_from(["3jzfcijpj2z2a", "2222222222222", "bzzzzzzzzzzzz", "czzzzzzzzzzzz"])
        | st.text(alphabet="234567abcdefghijklmnopqrstuvwxyz", min_size=12, max_size=14),
    ),
]
TRAILING: list[tuple[Field, st.SearchStrategy[Any]]] = [
    (F.trailing_string, st.text(max_size=12) | st.just("\x00\x01")),
    (F.trailing_bytes, st.binary(max_size=12)),
]
#: values of other types: the C encoder declines them all, the pure path decides
OTHERS = st.sampled_from(
    [
        None,
        True,
        1,
        1.5,
        "x",
        b"x",
        bytearray(b"abc"),
        memoryview(b"abc"),
        Small.ONE,
        "\ud800",  # a surrogate: UTF-8 cannot encode it
        2**70,
    ]
)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[RecordType, list[Any]]:
    """A record type of 1 to 3 fields (each maybe desc()), maybe ending with a trailing one,
    and values for them: mostly of each field's own strategy, sometimes of another type."""
    chosen = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    pairs: list[tuple[Field, st.SearchStrategy[Any]]] = []
    for field, values in chosen:
        pairs.append((F.desc(field) if draw(st.booleans()) else field, values))
    if draw(st.booleans()):
        pairs.append(draw(st.sampled_from(TRAILING)))
    record_type = RecordType(
        "keyed", draw(st.integers(1, 15)), [(f"f{i}", f) for i, (f, _) in enumerate(pairs)]
    )
    given = [draw(v | OTHERS if draw(st.integers(0, 5)) == 0 else v) for _, v in pairs]
    return record_type, given


def outcome(call: Any, *args: Any) -> tuple[Any, ...]:
    """("ok", result) or the error: its type, message and attributes."""
    try:
        return ("ok", call(*args))
    except OpendataKvError as exc:
        return (type(exc), str(exc), sorted(vars(exc).items(), key=repr))


def exact(value: Any, field: Field) -> bool:
    """Whether `value` is of the exact type the C encoder takes for `field`."""
    inner = field.inner if isinstance(field, F.Desc) else field
    if inner is F.f64:
        return type(value) is float
    if inner is F.boolean:
        return type(value) is bool
    if inner in (F.string, F.trailing_string, F.tid):
        return type(value) is str
    if inner in (F.bytes_, F.trailing_bytes) or isinstance(inner, F.Fixed):
        return type(value) is bytes
    return type(value) is int


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(layout=layouts())
def test_the_c_key_is_the_pure_key_or_declined(layout: tuple[RecordType, list[Any]]) -> None:
    record_type, values = layout
    encoder = records.key_encoder(record_type)
    assert encoder is not None and type(encoder).__name__ == "KeyEncoder"
    pure = outcome(record_type.encode_by_field, values)  # the reference: codec by codec
    try:
        got = encoder(*values)
    except ValueError:  # declined: what every per-record path then runs
        got = None
        assert outcome(record_type.encode, *values) == pure
    if got is not None:
        assert pure == ("ok", got)
    elif pure[0] == "ok":  # a key the pure path encodes: declined only for another type
        kinds = [field for _, field in record_type.fields]
        assert not all(exact(v, f) for v, f in zip(values, kinds, strict=True)), values
    assert encoder.try_encode(*values) == got  # type: ignore[attr-defined]


def test_the_c_encoder_checks_the_field_count_and_takes_no_keywords() -> None:
    record_type = RecordType("two", 2, [("a", F.u8), ("b", F.string)])
    encoder = records.key_encoder(record_type)
    assert encoder is not None
    assert encoder(1, "x") == record_type.encode(1, "x")
    for wrong in ((1,), (1, "x", 2)):
        with pytest.raises(ValueError):
            encoder(*wrong)
    with pytest.raises(TypeError):
        encoder(1, b="x")
    assert encoder(1, "x" * 1000) == record_type.encode(1, "x" * 1000)  # past its stack buffer


def test_layouts_the_c_encoder_does_not_take() -> None:
    assert records.key_encoder(RecordType("rk", 3, [("r", F.rkey("tid"))])) is None
    assert records.key_encoder(RecordType("big", 3, [("n", F.u128)])) is None


REC = RecordType("keyed", 1, [("repo", F.string), ("at", F.desc(F.tid)), ("n", F.i64)])
SCHEMA = Schema(REC)


@dataclass
class Codecs:
    schema: Schema
    values: Values
    check_expiry: bool = True
    where: str = "test store"


def batches() -> tuple[Batch, Batch]:
    """A batch on the accelerator's one-call path and one on the pure path (Python keys and
    encoders, no C queue), each with its plan bound."""
    fast, pure = Batch(Codecs(SCHEMA, Values(SCHEMA))), Batch(Codecs(SCHEMA, Values(SCHEMA)))
    pure._pack = pure._cput = None
    found = views.put_encoders(SCHEMA, pure.values, REC)
    assert found is not None
    pure._encoders[REC] = found._replace(fast_key=REC.fast_encode)
    for batch in (fast, pure):
        batch.put(REC, ("bind", "3jzfcijpj2z2a", 0), {"the": "encoders"})
    assert fast._cput is not None
    return fast, pure


def queued(batch: Batch, items: list[tuple[Any, ...]], all_at_once: bool) -> tuple[Any, ...]:
    """The batch's ops after queueing `items` (and the native flush), and the error if any."""
    error: tuple[Any, ...] = ()
    try:
        if all_at_once:
            batch.put_all(items)
        else:
            for item in items:
                batch.put_item(item)
    except OpendataKvError as exc:
        error = (type(exc), str(exc), sorted(vars(exc).items(), key=repr))
    batch._wb()
    return [tuple(op) for op in batch.ops], error


fields = st.tuples(
    st.text(max_size=6) | st.sampled_from(["\x00", "\ud800"]),
    st.sampled_from(["3jzfcijpj2z2a", "2222222222222", "czzzzzzzzzzzz", "short"]),
    st.integers(-(2**63) - 1, 2**63) | st.sampled_from([True, 1.0]),
)
value = st.one_of(
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=4), max_size=4),
    st.sampled_from([None, {1, 2}, 2**70]),
)
items = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([REC, "keyed"]), fields, value),
        st.tuples(st.just(REC), fields, value, st.none()),
        st.tuples(st.just(REC), fields, value, st.just(60)),
    ),
    max_size=10,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(items=items, all_at_once=st.booleans())
def test_the_one_call_put_queues_and_refuses_as_the_pure_path(
    items: list[tuple[Any, ...]], all_at_once: bool
) -> None:
    fast, pure = batches()
    # expiries differ by the clock: compare them present or not
    got, want = queued(fast, items, all_at_once), queued(pure, items, False)
    assert got[1] == want[1]
    assert [(*op[:2], op[2] is None) for op in got[0]] == [
        (*op[:2], op[2] is None) for op in want[0]
    ]


def test_put_many_queues_its_common_items_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, _ = batches()
    seen: list[int] = []
    queue_puts = calls.queue_puts

    def counted(*args: Any) -> int:
        seen.append(args[2])
        result: int = queue_puts(*args)
        return result

    monkeypatch.setattr(calls, "queue_puts", counted)
    rows = [(REC, ("r", "3jzfcijpj2z2a", i), {"i": i}) for i in range(500)]
    fast.put_all(rows)
    assert seen == [0]  # one call took them all
    rows = [(REC, ("r", "3jzfcijpj2z2a", i), {"i": i}, 60) for i in range(500)]
    seen.clear()
    fast.put_all(rows)
    assert seen == [0, 1]  # ttl puts: declined twice running, then the Python loop
    assert len(fast) == 1_001


def test_batch_put_and_put_many_store_what_the_pure_path_stores(tmp_path: Path) -> None:
    rows = [(REC, (f"did:{i % 7}", "3jzfcijpj2z2a", i - 50), {"i": i}) for i in range(300)]
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        with store.batch() as batch:
            for target, key, data in rows[:150]:
                batch.put(target, key, data)
        store.put_many(rows[150:], batch_size=64)
        expected = {REC.encode_by_field(key): msgpack.packb(data) for _, key, data in rows}
        assert {key: store.get_raw(key) for key in expected} == expected
        assert store.count(REC) == len(expected)


def test_a_sync_batch_puts_through_c_and_refuses_after_its_write(tmp_path: Path) -> None:
    with SyncStore.open(tmp_path / "db", SCHEMA) as store:
        with store.batch() as batch:
            assert type(vars(batch)["put"]).__name__ == "BatchPut"
            batch.put(REC, ("a", "3jzfcijpj2z2a", 1), {"n": 1})  # binds the plan (Python)
            batch.put(REC, ("a", "3jzfcijpj2z2a", 2), {"n": 2})  # in C
            batch.put(REC, ("a", "3jzfcijpj2z2a", 3), {"n": 3}, ttl=3600)  # a ttl: Python
            with pytest.raises(OpendataKvError) as caught:  # declined in C, refused in Python
                batch.put(REC, ("a", "3jzfcijpj2z2a", 2**63), {"n": 4})
            assert caught.value.field == "n"  # type: ignore[attr-defined]
            assert len(batch) == 3
        for n in (1, 2, 3):
            assert store.get(REC, ("a", "3jzfcijpj2z2a", n)) == {"n": n}
        with pytest.raises(OpendataKvError, match="already written"):
            batch.put(REC, ("a", "3jzfcijpj2z2a", 5), {"n": 5})
        assert store.get(REC, ("a", "3jzfcijpj2z2a", 5)) is None
