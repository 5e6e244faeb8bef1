"""Issue 37, points 3-5: a sum index's total always equals a recount of the live records
(RFC 0010, "Exact sums"), on the sync face (SyncStore) and the async face (Store): float
amounts added exactly (1e17 beside 1.0, subnormals), non-finite amounts and totals past the
range refused with IndexAmountError before anything is written, rows of the earlier encoding
read or refused with a rebuild hint, and the row encoding's round trip and strictness."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from indexmodel import FACES, SyncFace, team_count

from opendata_kv import Index, fields
from opendata_kv.errors import IndexAmountError, IndexArgumentError, StoreDataError
from opendata_kv.store.indexes.layout import decode_aggregate, decode_sum, encode_sum
from opendata_kv.store.indexes.sums import FINE, ZERO, Sum, add, recount

score = Index("score", "post", [("author", fields.string)], kind="sum", amount="score")
INDEXES = [score, team_count]
A1, A2, A3 = ("post", "a", 1), ("post", "a", 2), ("post", "a", 3)


@pytest.fixture(params=["sync", "async"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SyncFace]:
    face = FACES[request.param](str(tmp_path / "db"), INDEXES)
    yield face
    face.close()


def same(got: Any, want: Any) -> None:
    """Equal with the same type (1 is not 1.0) and, for floats, the same bits."""
    assert (type(got), repr(got)) == (type(want), repr(want)), (got, want)


# --- the reproductions ------------------------------------------------------------------------


def test_4_a_deleted_large_amount_leaves_the_small_one_exactly(db: SyncFace) -> None:
    db.put(A1, {"score": 1.0}, None)
    db.put(A2, {"score": 1e17}, None)
    same(db.sum(score, "a"), 1e17 + 1.0)  # the exact 1e17 + 1, rounded once: 1e17
    db.delete(A2)
    same(db.sum(score, "a"), 1.0)
    assert db.check() == []


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_3_a_non_finite_amount_is_refused_naming_it(db: SyncFace, bad: float) -> None:
    db.put(A1, {"score": 1.0}, None)
    with pytest.raises(IndexAmountError) as caught:
        db.put(A2, {"score": bad, "team": "a"}, None)
    err = caught.value
    assert isinstance(err, IndexArgumentError)
    assert (err.index, err.group, err.record, tuple(err.key)) == ("score", "a", "post", ("a", 2))
    assert repr(err.value) == repr(bad)
    assert "not finite" in str(err) and "'score'" in str(err) and "nothing was written" in str(err)
    assert db.get(A2) is None  # nor the record, nor its count
    assert db.count(team_count, "a") == 0
    same(db.sum(score, "a"), 1.0)
    assert db.check() == []


@pytest.mark.parametrize("bad", [1 << 63, (1 << 64) - 1])
def test_5_an_integer_amount_past_the_range_is_refused(db: SyncFace, bad: int) -> None:
    """msgpack stores up to 2**64 - 1 (a value past that is refused as it is encoded); a sum
    takes the signed 64-bit range."""
    with pytest.raises(IndexAmountError) as caught:
        db.put(A1, {"score": bad}, None)
    assert caught.value.value == bad and "signed 64-bit" in str(caught.value)
    assert db.get(A1) is None and db.count(score, "a") == 0


def test_5_a_total_past_the_range_is_refused_and_the_batch_untouched(db: SyncFace) -> None:
    db.put(A1, {"score": (1 << 62) + 5}, None)
    with pytest.raises(IndexAmountError) as caught:
        db.put(A2, {"score": 1 << 62}, None)  # the total would be 2**63 + 5
    err = caught.value
    assert (err.group, err.record, tuple(err.key), err.value) == (
        "a",
        "post",
        ("a", 2),
        (1 << 63) + 5,
    )
    # in a batch (and put_many's one batch) with other records: none of them is written
    ops = [
        ("put", ("post", "b", 1), {"score": 2, "team": "b"}, None),
        ("put", A2, {"score": 1 << 62}, None),
    ]
    with pytest.raises(IndexAmountError):
        db.batch(ops, abort=False)
    with pytest.raises(IndexAmountError):
        db.put_many([(op[1], op[2]) for op in ops], batch_size=10)
    assert db.get(("post", "b", 1)) is None and db.get(A2) is None
    assert db.count(team_count, "b") == 0 and db.count(score, "b") == 0
    same(db.sum(score, "a"), (1 << 62) + 5)
    # negative totals too; a total back in range is taken
    db.put(A2, {"score": -(1 << 62)}, None)
    same(db.sum(score, "a"), 5)
    assert db.check() == []


def test_in_a_transaction_the_refused_put_is_skipped_and_the_rest_commits(db: SyncFace) -> None:
    """As for a unique clash: the put raises inside the transaction, which goes on."""
    db.put(A1, {"score": 1 << 62}, None)
    ops = [
        ("put", ("post", "b", 1), {"score": 1.5}, None),
        ("put", A2, {"score": math.inf}, None),
        ("put", A3, {"score": 1 << 62}, None),
    ]
    outcomes = db.transaction(ops, rollback=False, isolation="serializable")
    assert outcomes[0] is None
    assert all(isinstance(o, IndexAmountError) and o.group == "a" for o in outcomes[1:])
    assert db.get(A2) is None and db.get(A3) is None
    same(db.sum(score, "b"), 1.5)
    same(db.sum(score, "a"), 1 << 62)
    assert db.check() == []


def test_a_float_total_past_the_float_range_is_refused(db: SyncFace) -> None:
    db.put(A1, {"score": 1.7e308}, None)
    with pytest.raises(IndexAmountError) as caught:
        db.put(A2, {"score": 1.7e308}, None)
    assert "float range" in str(caught.value)
    assert caught.value.value == Fraction(1.7e308) * 2
    db.put(A2, {"score": -1.7e308}, None)
    db.put(A3, {"score": 1.7e308}, None)  # fine: the exact total is 1.7e308
    same(db.sum(score, "a"), 1.7e308)
    assert db.check() == []


def test_mixed_integer_and_float_amounts(db: SyncFace) -> None:
    """An int while no live amount is a float (Python's sum), else the rounded exact total."""
    db.put(A1, {"score": (1 << 53) + 1}, None)
    db.put(A2, {"score": 0.5}, None)
    same(db.sum(score, "a"), float(Fraction((1 << 53) + 1) + Fraction(1, 2)))
    db.delete(A2)
    same(db.sum(score, "a"), (1 << 53) + 1)  # no float left: an exact int again
    db.put(A2, {"score": 0.0}, None)
    same(db.sum(score, "a"), float((1 << 53) + 1))
    db.put(A2, {"team": "x"}, None)  # no amount: counted, adds nothing
    same(db.sum(score, "a"), (1 << 53) + 1)
    assert db.count(score, "a") == 2
    assert db.check() == []


def test_subnormals_and_tiny_amounts_are_exact(db: SyncFace) -> None:
    tiny = 5e-324
    db.put(A1, {"score": tiny}, None)
    db.put(A2, {"score": tiny}, None)
    db.put(A3, {"score": 1e-300}, None)
    same(db.sum(score, "a"), 1e-300)  # 1e-300 + 1e-323, rounded once
    db.delete(A3)
    same(db.sum(score, "a"), 1e-323)
    db.put(A2, {"score": -tiny}, None)
    same(db.sum(score, "a"), 0.0)
    assert db.check() == []


# --- rows of the earlier encoding --------------------------------------------------------------


def _group_key() -> bytes:
    from opendata_kv.store.indexes.layout import encode_fields

    return encode_fields(score.name, score.fields, ("a",))


def test_an_earlier_integer_row_reads_and_keeps_counting(tmp_path: Path) -> None:
    face = FACES["sync"](str(tmp_path / "db"), INDEXES)
    try:
        face.put(A1, {"score": 3}, None)
        face.put(A2, {"score": 7}, None)
        face.db.put_raw(_group_key(), msgpack.packb([2, 10]))  # what the earlier version wrote
        same(face.sum(score, "a"), 10)
        face.delete(A2)
        same(face.sum(score, "a"), 3)
        assert face.check() == []
    finally:
        face.close()


def test_an_earlier_float_row_is_refused_until_a_rebuild(tmp_path: Path) -> None:
    face = FACES["sync"](str(tmp_path / "db"), INDEXES)
    try:
        face.put(A1, {"score": 1.0}, None)
        face.db.put_raw(_group_key(), msgpack.packb([1, math.nan]))  # the earlier NaN for good
        with pytest.raises(StoreDataError, match="rebuild"):
            face.sum(score, "a")
        with pytest.raises(StoreDataError, match="rebuild"):
            face.put(A2, {"score": 2.0}, None)
        assert face.get(A2) is None
        (problem,) = face.check()
        assert "rebuild" in str(problem)
        face.db.rebuild_index(score.name)
        same(face.sum(score, "a"), 1.0)
        assert face.check() == []
    finally:
        face.close()


#: what odd_amount gives (a test turns it to NaN after the record is written)
ODD = [1.0]


def odd_amount(key: Any, value: Any) -> float:
    return ODD[0]


def test_check_names_a_live_record_no_sum_can_take(tmp_path: Path) -> None:
    """A live record whose amount no sum can take (as one stored before sums refused NaN):
    check_indexes names it and the record, and a rebuild refuses it."""
    odd = Index("odd", "post", [("author", fields.string)], kind="sum", amount=odd_amount)
    face = FACES["sync"](str(tmp_path / "db"), [odd])
    try:
        face.put(A1, {}, None)
        ODD[0] = math.nan
        problems = [str(p) for p in face.check()]
        assert len(problems) == 2, problems  # the record, and the group that disagrees
        assert any("nan" in p and "no sum can take" in p for p in problems), problems
        with pytest.raises(IndexAmountError) as caught:
            face.db.rebuild_index(odd.name)
        assert caught.value.group == "a" and tuple(caught.value.key) == ("a", 1)
    finally:
        ODD[0] = 1.0
        face.close()


# --- the row encoding ------------------------------------------------------------------------

AMOUNTS = (
    st.integers(-(1 << 63), (1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
    | st.sampled_from([1e17, 1.0, 1e-300, 5e-324, -5e-324, 2.2250738585072014e-308, -0.0])
)


def _state(amounts: list[int | float]) -> Sum:
    state = ZERO
    for amount in amounts:
        state = add(state, 1, amount)
    return state


@given(st.lists(AMOUNTS, min_size=1, max_size=8))
def test_rows_round_trip_exactly(amounts: list[int | float]) -> None:
    state = _state(amounts)
    if not -(1 << 63) <= state.ints < 1 << 63:
        return
    data = encode_sum(state)
    assert decode_sum("s", b"k", data) == state
    assert decode_aggregate("s", b"k", data) == (len(amounts), state.total())


@given(st.lists(AMOUNTS, max_size=8), st.lists(AMOUNTS, max_size=8))
def test_taking_amounts_out_leaves_the_recount_of_the_rest(
    kept: list[int | float], gone: list[int | float]
) -> None:
    state = _state(kept + gone)
    for amount in gone:
        state = add(state, -1, amount)
    assert state == _state(kept)
    same(state.total(), recount(kept))


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, max_value=1e300, min_value=-1e300))
)
def test_a_float_total_is_the_correctly_rounded_exact_sum(amounts: list[float]) -> None:
    got = recount(amounts)
    exact = sum(map(Fraction, amounts), Fraction(0))
    assert got == float(exact) and (not amounts or got == math.fsum(amounts))
    if amounts:
        assert isinstance(got, float)


@pytest.mark.parametrize(
    "row",
    [
        [1, 1.5],  # the earlier float sum
        [0, 0],  # no group has no record
        [1, 2, 1, b"\x02", -1],  # an even mantissa (2 * 2**-1 is 1 * 2**0)
        [1, 2, 1, b"\x00\x03", -1],  # a mantissa longer than it needs
        [1, 2, 1, b"\x03", -1075],  # below 2**-1074
        [1, 2, 2, b"\x03", -1],  # more float amounts than records
        [1, 2, 0, b"\x03", -1],  # a float row without floats
        [1, 0, 1, b"\x01", 1024],  # a total past the float range
        [1, True],
        [1, 2, 1, 3, -1],
    ],
)
def test_malformed_rows_are_refused(row: list[Any]) -> None:
    with pytest.raises(StoreDataError, match="'s'"):
        decode_sum("s", b"k", msgpack.packb(row))


def test_the_float_row_layout() -> None:
    """[count, ints, floats, m, e]: 1.5 + 1.25 + 3 is 3 + 11 * 2**-2."""
    data = encode_sum(_state([1.5, 1.25, 3]))
    assert msgpack.unpackb(data) == [3, 3, 2, b"\x0b", -2]
    assert encode_sum(_state([0.5, -0.5])) == msgpack.packb([2, 0, 2, b"\x00", 0])
    assert FINE == 1074


# --- the pure path too -----------------------------------------------------------------------


def test_the_reproductions_on_the_pure_path(tmp_path: Path) -> None:
    """Records' values decode in C on the accelerated path: the same refusals and totals on the
    pure one (OPENDATA_KV_NO_EXTENSIONS=1, another process)."""
    script = f"""
import math
from indexmodel import FACES
from test_index_sums import INDEXES, score, A1, A2
from opendata_kv.errors import IndexAmountError
from opendata_kv.native import accel, calls
print(accel.describe(calls.status()))
db = FACES["sync"]({str(tmp_path / "db")!r}, INDEXES)
db.put(A1, {{"score": 1.0}}, None)
db.put(A2, {{"score": 1e17}}, None)
db.delete(A2)
out = [repr(db.sum(score, "a"))]
for bad in (math.inf, math.nan, 1 << 63):
    try:
        db.put(A2, {{"score": bad}}, None)
    except IndexAmountError as exc:
        out.append(exc.group)
out.append(repr(db.check()))
db.close()
print(" ".join(out))
"""
    env = {**os.environ, "OPENDATA_KV_NO_EXTENSIONS": "1"}
    tests = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join([tests, env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    path, results = done.stdout.splitlines()
    assert "C accelerator" not in path
    assert results.split() == ["1.0", "a", "a", "a", "[]"]


# --- the other readers of the row ------------------------------------------------------------


def test_the_feed_and_the_cli_read_the_float_row(tmp_path: Path) -> None:
    """The change feed and the CLI's index rows decode the new row as index_sum reports it."""
    import asyncio

    from opendata_kv.cli.index_rows import IndexKeys
    from opendata_kv.store import IndexChange, Store

    async def go() -> tuple[list[Any], dict[str, Any]]:
        async with Store.open(tmp_path / "db", [face_post()], indexes=INDEXES) as store:
            await store.put(face_post(), ("a", 1), {"score": 1.0})
            await store.put(face_post(), ("a", 2), {"score": 1e17})
            await store.delete(face_post(), ("a", 2))
            await store.flush()
            changes = [c async for c in store.changes(None, indexes=True)]
            keys = await IndexKeys.load(store, None)
            group = _group_key()
            row = keys.row(group, await store.get_raw(group))
        return [
            c.value
            for c in changes
            if isinstance(c, IndexChange) and c.index == "score" and c.part == "entry"
        ], row

    values, row = asyncio.run(go())
    assert [(v[0], repr(v[1])) for v in values] == [(1, "1.0"), (2, "1e+17"), (1, "1.0")]
    assert row.obj["value"] == {"count": 1, "sum": 1.0}, row


def face_post() -> Any:
    from indexmodel import post

    return post
