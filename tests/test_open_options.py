"""OpenOptions: Store.open / open_reader settings as one frozen value, validated once with the
keywords' errors; keywords and options= open alike, a conflicting pair is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import SCHEMA, VALUES, aio, like

from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError, OpendataKvError
from opendata_kv.objstore.deadline import READER_TIMEOUT
from opendata_kv.store import OpenOptions, Store, SyncStore
from opendata_kv.store import open_options as open_options_module
from opendata_kv.store import reader as reader_module
from opendata_kv.store import writer as writer_module

#: (setting, a value it refuses) for every setting validated at construction
BAD = [
    ("timeout", 0),
    ("timeout", -1.5),
    ("timeout", float("inf")),
    ("timeout", "5"),
    ("object_store_max_retries", -1),
    ("object_store_max_retries", 1.5),
    ("cache_bytes", -1),
    ("cache_bytes", "big"),
    ("poll_interval", 0),
    ("poll_interval", float("nan")),
    ("checkpoint", ""),
    ("checkpoint", 7),
]

WRITER_KEYWORDS: dict[str, Any] = {
    "create_if_missing": st.booleans(),
    "error_if_exists": st.booleans(),
    "timeout": st.none() | st.floats(0.5, 100),
    "object_store_max_retries": st.none() | st.integers(0, 9),
    "settings": st.none() | st.just({"flush_interval": "50ms"}),
    "object_store_options": st.none() | st.just({"region": "us-east-1"}),
    "check_expiry": st.booleans(),
    "cache_bytes": st.none() | st.integers(0, 1 << 30),
    "rebuild_later": st.lists(st.sampled_from(["a", "b"]), max_size=2).map(tuple),
}
READER_KEYWORDS: dict[str, Any] = {
    "timeout": st.none() | st.floats(0.5, 100),
    "object_store_max_retries": st.none() | st.integers(0, 9),
    "poll_interval": st.floats(0.05, 10),
    "object_store_options": st.none() | st.just({"region": "us-east-1"}),
    "check_expiry": st.booleans(),
    "checkpoint": st.none() | st.uuids().map(str),
    "cache_bytes": st.none() | st.integers(0, 1 << 30),
}


def _error(call: Any) -> OpendataKvError:
    with pytest.raises(OpendataKvError) as info:
        call()
    return info.value


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_setting_is_refused_when_made_with_the_keywords_error(name: str, value: Any) -> None:
    made = _error(lambda: OpenOptions(**{name: value}))
    assert isinstance(made, InvalidArgumentError | ArgumentTypeError)
    assert getattr(made, "field", None) in (name, "checkpoint_id")
    opener = Store.open_reader if name in ("poll_interval", "checkpoint") else Store.open
    keyword = _error(lambda: opener("memory://bad", SCHEMA, **{name: value}))
    assert (type(keyword), str(keyword)) == (type(made), str(made))


def test_settings_are_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    check = open_options_module.check_cache_bytes

    def counted(value: object) -> int | None:
        seen.append(value)
        return check(value)

    monkeypatch.setattr(open_options_module, "check_cache_bytes", counted)
    monkeypatch.setattr(writer_module, "_open_writer", lambda *args: None)
    Store.open("memory://once", SCHEMA, cache_bytes=1 << 20)
    assert seen == [1 << 20]
    options = OpenOptions(cache_bytes=1 << 20)
    seen.clear()
    Store.open("memory://once", SCHEMA, options=options)
    assert seen == []  # the value was checked when it was made


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    got: list[Any] = []
    monkeypatch.setattr(writer_module, "_open_writer", lambda *args: got.append(args[3]))
    monkeypatch.setattr(writer_module, "_open_reader", lambda *args: got.append(args[3]))
    return got


@settings(max_examples=40, deadline=None)
@given(
    writer=st.fixed_dictionaries({}, optional=WRITER_KEYWORDS),
    reader=st.fixed_dictionaries({}, optional=READER_KEYWORDS),
)
def test_keywords_and_options_open_alike(writer: dict[str, Any], reader: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        got = _captured(monkeypatch)
        Store.open("memory://alike", SCHEMA, **writer)
        Store.open("memory://alike", SCHEMA, options=OpenOptions(**writer))
        Store.open("memory://alike", SCHEMA, options=OpenOptions(**writer), **writer)  # agree
        Store.open_reader("memory://alike", SCHEMA, **reader)
        Store.open_reader("memory://alike", SCHEMA, options=OpenOptions(**reader))
    writers = [_effective(options, reader=False) for options in got[:3]]
    readers = [_effective(options, reader=True) for options in got[3:]]
    assert writers[0] == writers[1] == writers[2] and readers[0] == readers[1]
    assert writers[0].timeout == writer.get("timeout")
    assert readers[0].timeout == reader.get("timeout", READER_TIMEOUT)


def _effective(options: OpenOptions, reader: bool) -> OpenOptions:
    """`options` with the opener's default timeout filled in (what the open is bounded by)."""
    return dataclasses.replace(options, timeout=options.timeout_for(reader))


def test_a_keyword_that_disagrees_with_options_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _captured(monkeypatch)
    options = OpenOptions(timeout=10, check_expiry=False)
    with pytest.raises(InvalidArgumentError, match="timeout=5 conflicts") as info:
        Store.open("memory://x", SCHEMA, options=options, timeout=5)
    assert info.value.field == "timeout"
    with pytest.raises(InvalidArgumentError) as info:
        SyncStore.open_reader("memory://x", SCHEMA, options=options, cache_bytes=0)
    assert info.value.field == "cache_bytes"
    with pytest.raises(InvalidArgumentError, match=r"Store\.open_reader only") as info:
        Store.open("memory://x", SCHEMA, options=OpenOptions(poll_interval=0.5))
    assert info.value.field == "poll_interval"
    with pytest.raises(InvalidArgumentError, match=r"Store\.open only") as info:
        Store.open_reader("memory://x", SCHEMA, options=OpenOptions(error_if_exists=True))
    assert info.value.field == "error_if_exists"
    with pytest.raises(ArgumentTypeError, match="must be an OpenOptions"):
        Store.open("memory://x", SCHEMA, options={"timeout": 5})  # type: ignore[arg-type]


def test_replace_makes_a_checked_variant() -> None:
    base = OpenOptions(timeout=3, indexes=iter(()), rebuild_later=["a"])
    assert base.rebuild_later == ("a",) and base.indexes == ()
    assert dataclasses.replace(base, timeout=4).timeout == 4.0
    assert base.but(cache_bytes=0).cache_bytes == 0
    with pytest.raises(InvalidArgumentError):
        dataclasses.replace(base, timeout=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.timeout = 1  # type: ignore[misc]


@aio
async def test_a_reader_opened_with_options_checkpoint_reads_the_pinned_state(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "db")
    async with Store.open(url, SCHEMA, values=VALUES, options=OpenOptions(timeout=30)) as store:
        await store.put(like, (1,), {"v": 1})
        made = await store.checkpoint()
        await store.put(like, (2,), {"v": 2})
        await store.flush()
        pinned = OpenOptions(checkpoint=made.id, poll_interval=0.2)
        async with Store.open_reader(url, SCHEMA, values=VALUES, options=pinned) as reader:
            assert reader.checkpoint_id == made.id and reader.poll_interval == 0.2
            assert [r.value async for r in reader.scan(like)] == [{"v": 1}]
    with SyncStore.open_reader(url, SCHEMA, values=VALUES, options=pinned) as sync_reader:
        assert [r.value for r in sync_reader.scan(like)] == [{"v": 1}]
    assert reader_module.StoreReader is type(reader)
