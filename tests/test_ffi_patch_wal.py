"""The struct reader for the change feed's WAL rows (ffi_patch): it reads exactly what the
generated RowEntry reader reads, refuses truncated or malformed buffers the same way, and a
broken one fails the self-check."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ffikit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.store import ffi_patch

binding = ffikit.binding
WalRows: Any = binding._UniffiFfiConverterSequenceTypeRowEntry
ORIGINAL_READ = WalRows.__dict__["read"]


@pytest.fixture(autouse=True)
def pristine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from ffikit.fresh_patch_state(monkeypatch)
    assert WalRows.__dict__["read"] is ORIGINAL_READ


optional_i64 = st.none() | st.integers(-(2**63), 2**63 - 1)
row_entries = st.lists(
    st.builds(
        lambda kind, key, value, seq, create_ts, expire_ts: binding.RowEntry(
            kind=kind, key=key, value=value, seq=seq, create_ts=create_ts, expire_ts=expire_ts
        ),
        st.sampled_from(list(binding.RowEntryKind)),
        st.binary(max_size=64),
        st.none() | st.binary(max_size=2000),
        st.integers(0, 2**64 - 1),
        optional_i64,
        optional_i64,
    ),
    max_size=40,
)


def read(raw: bytes) -> Any:
    return ffikit.read(WalRows, raw)


def lowered(rows: list[Any]) -> bytes:
    return ffikit.lower(WalRows, rows)


@settings(max_examples=60)
@given(rows=row_entries)
def test_fast_wal_reader_reads_what_the_generated_reader_reads(rows: list[Any]) -> None:
    raw = lowered(rows)
    expected = read(raw)
    assert ffi_patch.install(db_check=False)
    assert WalRows.__dict__["read"] is not ORIGINAL_READ
    assert read(raw) == expected == rows


@settings(max_examples=60)
@given(rows=row_entries.filter(bool), cut=st.integers(1, 40), bad=st.integers(4, 255))
def test_fast_wal_reader_rejects_truncated_and_malformed_buffers(
    rows: list[Any], cut: int, bad: int
) -> None:
    raw = lowered(rows)
    assert ffi_patch.install(db_check=False)
    with pytest.raises(binding.InternalError):
        read(raw[: max(0, len(raw) - cut)])
    with pytest.raises(binding.InternalError):  # the first row's kind: 1..3 only
        read(raw[:4] + bad.to_bytes(4, "big") + raw[8:])
    value_flag_at = 4 + 4 + 4 + len(rows[0].key)
    with pytest.raises(binding.InternalError):
        read(raw[:value_flag_at] + bytes([bad]) + raw[value_flag_at + 1 :])


def test_broken_wal_reader_fails_the_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    make_reader = ffi_patch._make_wal_rows_reader

    def broken(binding_module: Any) -> Any:
        reader = make_reader(binding_module)
        return lambda cls, buf: reader(cls, buf)[::-1]

    monkeypatch.setattr(ffi_patch, "_make_wal_rows_reader", broken)
    assert ffi_patch.install() is False
    assert ffi_patch.status().reason.startswith("self-check failed, originals restored")
    assert WalRows.__dict__["read"] is ORIGINAL_READ
