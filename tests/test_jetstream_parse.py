"""parse_event's fast paths (msgspec's JSON decoder when installed, a commit built without the
field-by-field reader) take and refuse exactly what json.loads and the checked reader do:
hypothesis over JSON texts and over Jetstream events with every field varied."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from opendata_kv.atproto import events
from opendata_kv.atproto.events import Commit, _Reader, parse_event
from opendata_kv.errors import JetstreamEventError


def _outcome(function: Any, message: Any) -> tuple[str, str]:
    try:
        return "ok", repr(function(message))
    except (ValueError, UnicodeDecodeError) as exc:
        return "error", type(exc).__name__


JSONISH = st.one_of(
    st.text(alphabet='{}[]",:0123456789.eE+-tfnaulrsNI \\u\ud800\n\ufeffx', max_size=24),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=8,
    ).map(json.dumps),
)


@settings(max_examples=400, deadline=None)
@given(JSONISH, st.booleans())
def test_loads_takes_and_refuses_what_json_loads_does(text: str, as_bytes: bool) -> None:
    message: Any = text
    if as_bytes:
        try:
            message = text.encode()
        except UnicodeEncodeError:
            message = text.encode("utf-8", "surrogatepass")
    assert _outcome(events.loads, message) == _outcome(json.loads, message)


def _checked(message: str) -> Any:
    """The event by the checked reader alone (the path before the fast one)."""
    data = json.loads(message)
    if not isinstance(data, dict) or type(data.get("time_us")) is not int or data["time_us"] < 0:
        return parse_event(message)  # refused before either path
    return _Reader(data, data["time_us"]).event()


ODD = st.none() | st.just("") | st.integers(-1, 1) | st.just({}) | st.just([])
GOOD = st.sampled_from(["did:plc:aaa", "app.bsky.feed.like", "3kaaaaaaaaa22"])
TEXT = st.one_of(GOOD, GOOD, GOOD, GOOD, ODD)  # mostly valid, so whole commits are common
COMMITS = st.fixed_dictionaries(
    {
        "did": TEXT,
        "time_us": st.one_of(*[st.integers(0, 9)] * 4, ODD),
        "kind": st.one_of(*[st.just("commit")] * 4, st.sampled_from(["identity", "other"]), ODD),
        "commit": st.fixed_dictionaries(
            {
                "operation": st.one_of(*[st.sampled_from(["create", "update", "delete"])] * 4, ODD),
                "collection": TEXT,
                "rkey": TEXT,
            },
            optional={
                "record": st.one_of(*[st.just({"text": "x"})] * 3, ODD),
                "cid": st.one_of(GOOD, st.just(""), ODD),
                "rev": st.one_of(GOOD, st.just(""), ODD),
            },
        )
        | st.just([]),  # (or no commit object)
    }
)


def _event(message: str) -> tuple[str, Any]:
    try:
        return "ok", parse_event(message)
    except JetstreamEventError as exc:
        return "error", (str(exc), exc.field, exc.time_us)


def _reference(message: str) -> tuple[str, Any]:
    try:
        return "ok", _checked(message)
    except JetstreamEventError as exc:
        return "error", (str(exc), exc.field, exc.time_us)


@settings(max_examples=500, deadline=None)
@given(COMMITS)
@example(
    {"did": "d", "time_us": 1, "kind": "commit", "commit": {"operation": {}, "rkey": "r"}}
)  # an unhashable operation was a TypeError that stopped the consumer
@example(
    {
        "did": "d",
        "time_us": 1,
        "kind": "commit",
        "commit": {"operation": "delete", "collection": "c", "rkey": "r", "rev": ""},
    }
)
def test_a_commit_is_read_as_the_checked_reader_reads_it(event: dict[str, Any]) -> None:
    message = json.dumps(event)
    got, want = _event(message), _reference(message)
    assert got == want
    if got[0] == "ok":
        assert type(got[1]) is type(want[1])


def test_a_plain_commit_is_a_whole_frozen_commit() -> None:
    message = json.dumps(
        {
            "did": "did:plc:aaa",
            "time_us": 5,
            "kind": "commit",
            "commit": {"operation": "create", "collection": "c.d.e", "rkey": "r", "record": {}},
        }
    )
    commit = parse_event(message)
    assert commit == Commit("did:plc:aaa", 5, "create", "c.d.e", "r", {}, None, None)
    try:
        commit.did = "x"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a Commit stays frozen")
