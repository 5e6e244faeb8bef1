"""The value codec protocol declares what the store calls on a codec (decode, the optional
batch fast path, decode caps), so a scan decodes exactly as a get does (issue 19, item 5)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import aio

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.errors import ValueDecodeError
from opendata_kv.values import (
    BatchDecoding,
    DataclassCodec,
    DecodeLimits,
    LimitsAware,
    MsgpackCodec,
    Values,
    batch_decoder,
)

note = RecordType("note", 7, [("n", F.u32)])


@dataclasses.dataclass
class Note:
    text: str
    stars: int = 0


def note_values(limits: DecodeLimits | None) -> Values:
    return Values(Schema(note), limits=limits).register(note, Note)


@pytest.mark.parametrize("limits", [None, DecodeLimits(max_value_bytes=1 << 16)])
@aio
async def test_scan_returns_the_dataclass_get_returns_and_checks_its_types(
    limits: DecodeLimits | None,
) -> None:
    async with Store.open("memory://codec", note_values(limits)) as store:
        await store.put(note, (1,), Note("hi", 2))
        assert await store.get(note, (1,)) == Note("hi", 2)
        records = await store.scan(note).to_list()
        assert [r.value for r in records] == [Note("hi", 2)]
        # the dataclass codec's type check holds in scans too: a str where an int is declared
        await store.put_raw(note.encode(2), b"\x82\xa4text\xa1x\xa5stars\xa3bad")
        with pytest.raises(ValueDecodeError, match="stars"):
            await store.get(note, (2,))
        with pytest.raises(ValueDecodeError, match="stars"):
            await store.scan(note).to_list()


def test_a_limited_dataclass_codec_keeps_decoding_to_the_dataclass() -> None:
    codec = DataclassCodec(Note).with_limits(DecodeLimits(max_value_bytes=1 << 16))
    assert not isinstance(codec, BatchDecoding)  # it declares no fast path it lacks
    assert isinstance(codec, LimitsAware)
    data = codec.encode(Note("a", 1))
    assert batch_decoder(codec)([data]) == [Note("a", 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**64 - 1))))
def test_the_msgpack_fast_path_decodes_as_decode_does(items: list[dict[str, Any]]) -> None:
    for codec in (MsgpackCodec(), MsgpackCodec().with_limits(DecodeLimits(max_depth=4))):
        assert isinstance(codec, BatchDecoding)
        batch = [codec.encode(item) for item in items]
        assert batch_decoder(codec)(batch) == [codec.decode(data) for data in batch]
