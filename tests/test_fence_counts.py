"""The fenced writer's account, as a state machine (store/fencing.py, docs/store.md "One
writer"): a model counts the write calls acknowledged after the last flush() that returned;
at any point a flush() may be told of a fence (as SlateDB tells a fenced one, while the
database still takes writes). Checked after every step: once told, every write and flush()
raises FencedError with `unflushed` equal to the model's count; close() raises it when that
count is not 0 and is quiet otherwise; before the fence every call works and the store's count
is the model's.
"""

from __future__ import annotations

import itertools
from typing import Any

import indexkit as ik
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from opendata_kv.errors import FencedError
from opendata_kv.native import calls
from opendata_kv.native.slatedb import CloseReason, Error
from opendata_kv.store import SyncStore

_names = itertools.count()
rkeys = st.integers(0, 7)


class FencedWriter(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = SyncStore.open(
            f"memory://fence-counts-{next(_names)}", ik.SCHEMA, indexes=ik.ALL
        )
        self.store.flush()  # the open registered the indexes: its own writes made durable
        self.unflushed = 0  # the model: writes acknowledged after the last good flush
        self.fenced = False
        self.armed = False
        self.real = calls.method
        calls.method = self._method

    def _method(self, target: Any, name: str, *args: Any) -> Any:
        """calls.method, whose flush fails as a fenced one while armed."""
        if name == "flush" and self.armed:
            self.armed = False

            async def fenced() -> None:
                raise Error.Closed(CloseReason.FENCED, "Closed error: detected newer DB client")

            return fenced()
        return self.real(target, name, *args)

    def _write(self, write: Any) -> None:
        if self.fenced:
            with pytest.raises(FencedError) as refusal:
                write()
            assert refusal.value.unflushed == self.unflushed
        else:
            write()
            self.unflushed += 1

    @rule(rkey=rkeys, likes=st.integers(0, 3))
    def put(self, rkey: int, likes: int) -> None:
        value = {"tag": "t", "likes": likes, "handle": f"h{rkey}", "tags": ["x"]}
        self._write(lambda: self.store.put(ik.post, ("a", rkey), value))

    @rule(rkey=rkeys)
    def delete(self, rkey: int) -> None:
        self._write(lambda: self.store.delete(ik.post, ("a", rkey)))

    @rule(rkey=rkeys)
    def put_unindexed(self, rkey: int) -> None:
        self._write(lambda: self.store.put(ik.note, ("a", rkey), {"text": "n"}))

    @rule(rkeys=st.lists(rkeys, min_size=1, max_size=3, unique=True))
    def batch(self, rkeys: list[int]) -> None:
        def write() -> None:
            with self.store.batch() as batch:
                for rkey in rkeys:
                    batch.put(ik.post, ("b", rkey), {"tag": "u", "likes": 1, "tags": []})

        self._write(write)

    @rule()
    def flush(self) -> None:
        if self.fenced or self.armed:
            with pytest.raises(FencedError, match="another writer opened") as flushing:
                self.store.flush()
            assert flushing.value.unflushed == self.unflushed
            self.fenced = True
        else:
            self.store.flush()
            self.unflushed = 0

    @rule()
    def fence(self) -> None:
        """Another writer opens: the next flush() is told."""
        if not self.fenced:
            self.armed = True

    @invariant()
    def counted(self) -> None:
        fence = self.store.store._fence
        assert fence.unflushed == self.unflushed
        assert (fence.error is not None) == self.fenced

    def teardown(self) -> None:
        calls.method = self.real
        if self.fenced and self.unflushed:
            with pytest.raises(FencedError) as closing:
                self.store.close()
            assert closing.value.unflushed == self.unflushed
            assert f"{self.unflushed} write" in str(closing.value)
        else:
            self.store.close()


TestFencedWriter = FencedWriter.TestCase
TestFencedWriter.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
