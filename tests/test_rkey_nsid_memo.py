"""An rkey('nsid') field remembers the NSIDs it found valid (a store's few collection names),
so a key of a known collection skips the NSID rules on encode and decode; what it has not
seen is still checked, and the memory is bounded (keys/idfields.py)."""

from __future__ import annotations

import pytest

from opendata_kv import RecordType, fields
from opendata_kv.errors import KeyDecodeError, KeyEncodeError
from opendata_kv.keys import idfields


def test_known_nsids_skip_the_rules_and_unknown_ones_are_still_checked() -> None:
    field = fields.rkey("nsid")
    record = RecordType("r", 1, [("collection", field)])
    key = record.encode("app.bsky.feed.like")
    assert record.encode("app.bsky.feed.like") == key
    assert record.decode(key).collection == "app.bsky.feed.like"
    with pytest.raises(KeyEncodeError):
        record.encode("app.bsky.feed.not-valid")
    with pytest.raises(KeyEncodeError):
        record.encode("not an nsid")
    bad = key.replace(b"app.bsky.feed.like", b"app.bsky.feed.li-e")
    with pytest.raises(KeyDecodeError):
        record.decode(bad)


def test_the_memory_of_valid_nsids_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idfields, "VALID_NSIDS", 4)
    record = RecordType("r", 1, [("collection", fields.rkey("nsid"))])
    for n in range(10):
        record.encode(f"app.example.n{n}")
    remembered: set[str] = record.fields[0][1]._valid  # type: ignore[attr-defined]
    assert 1 <= len(remembered) <= 4
    assert "app.example.n9" in remembered
