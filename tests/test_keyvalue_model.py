"""opendata_kv.keyvalue against a dict model: a hypothesis state machine of puts, put_many,
deletes, delete_many, gets and the listings over keys and values of every shape (unicode,
empty, long) in a few collections, every step checked against {(collection, key): value}."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip("key_value.aio")

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from opendata_kv.keyvalue import SlateDBStore

# any text UTF-8 can hold (no lone surrogates), empty and long ones included
text = st.text(st.characters(codec="utf-8"), max_size=8) | st.text(min_size=200, max_size=400)
keys = st.one_of(text, st.sampled_from(["", "k", "ключ", "🔑" * 50, "a" * 1000]))
collections = st.sampled_from(["default_collection", "c", "日本", "x" * 300])
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
values = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


class KeyValueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.kv = SlateDBStore(f"memory://model-{uuid.uuid4().hex[:8]}")
        self.model: dict[tuple[str, str], dict[str, Any]] = {}

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    @rule(collection=collections, key=keys, value=values)
    def put(self, collection: str, key: str, value: dict[str, Any]) -> None:
        self.run(self.kv.put(key, value, collection=collection))
        self.model[(collection, key)] = value

    @rule(collection=collections, pairs=st.lists(st.tuples(keys, values), max_size=6))
    def put_many(self, collection: str, pairs: list[tuple[str, dict[str, Any]]]) -> None:
        self.run(
            self.kv.put_many([k for k, _ in pairs], [v for _, v in pairs], collection=collection)
        )
        for key, value in pairs:  # in order: the last of a repeated key wins
            self.model[(collection, key)] = value

    @rule(collection=collections, key=keys)
    def delete(self, collection: str, key: str) -> None:
        existed = self.run(self.kv.delete(key, collection=collection))
        assert existed == ((collection, key) in self.model)
        self.model.pop((collection, key), None)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete_stored(self, data: st.DataObject) -> None:
        collection, key = data.draw(st.sampled_from(sorted(self.model)))
        assert self.run(self.kv.delete(key, collection=collection)) is True
        del self.model[(collection, key)]

    @rule(collection=collections, chosen=st.lists(keys, max_size=6))
    def delete_many(self, collection: str, chosen: list[str]) -> None:
        count = self.run(self.kv.delete_many(chosen, collection=collection))
        assert count == len({k for k in chosen if (collection, k) in self.model})
        for key in chosen:
            self.model.pop((collection, key), None)

    @rule(collection=collections, chosen=st.lists(keys, max_size=6))
    def get_many(self, collection: str, chosen: list[str]) -> None:
        got = self.run(self.kv.get_many(chosen, collection=collection))
        assert got == [self.model.get((collection, k)) for k in chosen]

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def get_stored(self, data: st.DataObject) -> None:
        collection, key = data.draw(st.sampled_from(sorted(self.model)))
        assert self.run(self.kv.get(key, collection=collection)) == self.model[(collection, key)]
        assert self.run(self.kv.ttl(key, collection=collection)) == (
            self.model[(collection, key)],
            None,
        )

    @invariant()
    def listings_match(self) -> None:
        stored = sorted({c for c, _ in self.model})
        assert sorted(self.run(self.kv.collections())) == stored
        for collection in stored:
            listed = self.run(self.kv.keys(collection))
            assert sorted(listed) == sorted(k for c, k in self.model if c == collection)

    def teardown(self) -> None:
        self.run(self.kv.close())
        self.loop.close()


KeyValueModel.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
test_key_value_against_a_dict = KeyValueModel.TestCase
