"""The C accelerator's column passes of index upkeep (native/_accel/columns.c) give what the
Python loops they stand in for give: Maintainer.column's entry keys, a count index's deltas
(CountMaintainer.change_columns) and its settled rows (CountMaintainer.settle), over
generated columns with the awkward cases in them (not a dict, not exactly a str, a string
not seen before, a group with no change, a sum, a group the writer does not know, a count
past the table of made rows)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv import Index, RecordType, Schema, fields
from opendata_kv.native import accel
from opendata_kv.store.indexes.layout import encode_sum
from opendata_kv.store.indexes.maintainers import (
    Changes,
    CountMaintainer,
    ValueMaintainer,
    column_passes,
)
from opendata_kv.store.indexes.sums import Sum
from opendata_kv.store.writes import Put

like = RecordType("like", 1, [("n", fields.u32)])
by_subject = Index("by_subject", "like", [("subject", fields.string)])
per_subject = Index("per_subject", "like", [("subject", fields.string)], kind="count")
SCHEMA = Schema([like])


class Tagged(str):
    """A str subclass: never taken for the str it equals."""


def _passes() -> Any:
    passes = column_passes()
    if passes is None:
        pytest.skip(f"the C accelerator is not in use ({accel.reason()})")
    return passes


field_values = st.one_of(
    st.sampled_from(["a", "b", "c", "d"]),
    st.sampled_from(["a", "b"]).map(Tagged),
    st.integers(0, 3),
    st.none(),
)
values = st.one_of(
    st.fixed_dictionaries({"subject": field_values}),
    st.just({"other": "a"}),
    st.just({1: "x", "subject": "a"}),
)


@settings(max_examples=300, deadline=None)
@given(
    column=st.lists(values, max_size=40),
    not_a_dict=st.booleans(),
    known=st.sets(st.sampled_from(["a", "b", "c"])),
)
def test_entry_column_is_the_python_column(
    column: list[Any], not_a_dict: bool, known: set[str]
) -> None:
    passes = _passes()
    if not_a_dict:
        column = [*column, ["subject", "a"]]
    strings = {s: f"entry:{s}".encode() for s in known}
    found = passes.entry_column(column, "subject", strings)
    if not_a_dict:
        assert found is None
        return
    expected = []
    for value in column:
        got = value.get("subject")
        expected.append(strings.get(got) if type(got) is str else None)
    assert found == expected


def _maintainers(kind: type[Any], with_passes: bool) -> Any:
    made = kind(SCHEMA, lambda name, fs, vs: f"{name}:{vs!r}".encode(), None)
    made.passes = _passes() if with_passes else None
    return made


@settings(max_examples=200, deadline=None)
@given(column=st.lists(values, min_size=1, max_size=40), seen=st.sets(st.sampled_from("abcd")))
def test_the_value_columns_agree(column: list[Any], seen: set[str]) -> None:
    """Maintainer.column with the C pass and without: the same entry keys, the same strings
    learnt."""
    results = []
    for with_passes in (True, False):
        maintainer = _maintainers(ValueMaintainer, with_passes)
        maintainer.strings = {"by_subject": {s: f"by_subject:{(s,)!r}".encode() for s in seen}}
        nothing = [None] * len(column)
        out = maintainer.column(by_subject, nothing, list(column))
        results.append((out, maintainer.strings))
    assert results[0] == results[1]


groups_of = st.lists(st.one_of(st.none(), st.sampled_from([b"g1", b"g2", b"g3", b"g4"])))


@settings(max_examples=300, deadline=None)
@given(
    groups=groups_of,
    sign=st.sampled_from([1, -1]),
    before=st.dictionaries(st.sampled_from([b"g1", b"g2"]), st.integers(-3, 3)),
)
def test_count_into_is_the_python_count(
    groups: list[bytes | None], sign: int, before: dict[bytes, int]
) -> None:
    keys = [b"k%d" % at for at in range(len(groups))]
    changes = Changes(
        keys,
        [None] * len(keys),
        [None] * len(keys),
        [None] * len(keys),
        [{"subject": "x"}] * len(keys),
        [None] * len(keys),
        [False] * len(keys),
    )
    results = []
    for with_passes in (True, False):
        maintainer = _maintainers(CountMaintainer, with_passes)
        maintainer.deltas = {g: [per_subject, c, 0, 0, 0, b"old"] for g, c in before.items()}
        maintainer.entry_columns = lambda index, ch, live=False: (  # type: ignore[method-assign]
            [None] * len(groups) if sign == 1 else list(groups),
            list(groups) if sign == 1 else [None] * len(groups),
        )
        maintainer.change_columns(per_subject, changes)
        results.append((maintainer.deltas, list(maintainer.deltas)))
    assert results[0] == results[1]


count_states = st.one_of(
    st.none(),
    st.builds(Sum, st.integers(0, 5000), st.just(0), st.just(0), st.just(0)),
    st.builds(Sum, st.integers(1, 5), st.integers(-3, 3), st.just(0), st.just(0)),
)
deltas_of = st.dictionaries(
    st.sampled_from([b"g%d" % n for n in range(8)]),
    st.tuples(st.integers(-3, 3), st.sampled_from([0, 0, 0, 2])),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(
    deltas=deltas_of,
    known=st.dictionaries(st.sampled_from([b"g%d" % n for n in range(8)]), count_states),
    stored=st.dictionaries(st.sampled_from([b"g%d" % n for n in range(8)]), count_states),
)
def test_settle_counts_is_the_python_settle(
    deltas: dict[bytes, tuple[int, int]], known: dict[bytes, Any], stored: dict[bytes, Any]
) -> None:
    current = {
        g: None if stored.get(g) is None else encode_sum(stored[g])
        for g in deltas
        if g not in known
    }
    results = []
    for with_passes in (True, False):
        maintainer = _maintainers(CountMaintainer, with_passes)
        maintainer.deltas = {
            g: [per_subject, count, ints, 0, 0, b"key"] for g, (count, ints) in deltas.items()
        }
        maintainer.known = copy.copy(known)
        try:
            maintainer.settle(current)
        except Exception as exc:  # a total out of range: the same refusal either way
            results.append(("raised", type(exc), str(exc)))
            continue
        results.append(
            (
                sorted(zip(maintainer.put_keys, maintainer.put_data, strict=True)),
                sorted(maintainer.ops),
                maintainer.learnt,
            )
        )
    assert results[0] == results[1]


def test_wrong_columns_are_refused_not_misread() -> None:
    passes = _passes()
    with pytest.raises(TypeError):
        passes.entry_column(("not", "a list"), "subject", {})
    with pytest.raises(TypeError):
        passes.count_into({}, (b"g",), [b"k"], per_subject, 1)
    with pytest.raises(ValueError, match="differ in length"):
        passes.count_into({}, [b"g"], [], per_subject, 1)
    with pytest.raises(TypeError):
        passes.settle_counts({}, {}, {}, [], [], None)


@settings(max_examples=50, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", None])), min_size=1, max_size=30
    )
)
def test_indexed_puts_are_the_python_triples(
    items: list[tuple[int, str | None]], monkeypatch_store: Any
) -> None:
    """Batch.indexed_ops of a put_many batch: the same (key, record type, Put) triples, each
    Put of the same class and fields, built in C as in Python."""
    store, batch_module = monkeypatch_store
    _passes()
    built = []
    for with_passes in (True, False):
        batch = batch_module.Batch(store)
        batch.put_all([(like, (n,), {"subject": s}) for n, s in items])
        real = batch_module.column_passes
        if not with_passes:
            batch_module.column_passes = lambda: None
        try:
            ops = batch.indexed_ops(store._indexes)
        finally:
            batch_module.column_passes = real
        built.append([(key, rt, type(op), tuple(op)) for key, rt, op in ops])
    assert built[0] == built[1]
    assert all(kind is Put for _, _, kind, _ in built[0])


@pytest.fixture(scope="module")
def monkeypatch_store() -> Any:
    """A store with a value and a count index on `like` (its batches keep typed values)."""
    from opendata_kv.native import driver
    from opendata_kv.store import batch as batch_module
    from opendata_kv.store.writer import Store

    opening = Store.open("memory://column-passes", [like], indexes=[by_subject, per_subject])
    store = driver.run(opening.__aenter__())
    yield store, batch_module
    driver.run(opening.__aexit__(None, None, None))
