"""The store's public API (issue 11): typed records, explicit keywords, one addressing, guards."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from storekit import SCHEMA, VALUES, Post, aio, like, post2

from opendata_kv import Store, SyncStore
from opendata_kv.keys import Key
from opendata_kv.store import RawRecord, Record

UNKNOWN_KEY = b"\x09\xf0stray"  # version 9, record type 0xF: no RecordType owns it


# --- typed records ------------------------------------------------------------------------------


@aio
async def test_scans_yield_typed_records_and_raw_rows_apart() -> None:
    async with Store.open("memory://typed", SCHEMA, values=VALUES) as store:
        await store.put(post2, ("did:a", "r1"), Post("hi"))
        await store.put_raw(UNKNOWN_KEY, b"\x00raw")
        [record] = await store.scan(post2).to_list()
        assert type(record) is Record and isinstance(record.key, Key)
        assert record.key.rkey == "r1" and record.value == Post("hi")
        rows = await store.scan_all(on_unknown="raw").to_list()
        assert [type(r) for r in rows] == [Record, RawRecord]
        assert rows[1] == RawRecord(UNKNOWN_KEY, b"\x00raw", UNKNOWN_KEY)
        assert [type(r) for r in await store.scan_all(on_unknown="skip").to_list()] == [Record]


def test_types_check_and_typos_fail_under_mypy(tmp_path: Path) -> None:
    """`record.key.rkey` type-checks; misspelt keywords and a raw row's key do not."""
    from mypy import api

    source = tmp_path / "client.py"
    source.write_text(
        textwrap.dedent(
            """
            from opendata_kv import RecordType, Schema, Store, SyncStore, fields

            post = RecordType("post", 2, [("repo", fields.string), ("rkey", fields.string)])
            schema = Schema(post)

            async def typed(store: Store) -> str:
                async for record in store.scan("post", "did:a"):
                    return str(record.key.rkey)
                return ""

            async def raw(store: Store) -> None:
                async for row in store.scan_all(on_unknown="raw"):
                    row.key.rkey  # E1: a raw row's key is bytes

            def sync(s: SyncStore) -> None:
                for record in s.scan(post):
                    record.key.rkey
                s.scan(post, revrse=True)  # E2
                s.scan_all(limt=3)  # E3
                SyncStore.open("memory://", schema, check_expiri=False)  # E4
                SyncStore.open_reader("memory://", schema, pol_interval=1)  # E5
                s.migrate("post", batch=3)  # E6

            async def aio(store: Store) -> None:
                store.scan(post, revrse=True)  # E7
                Store.open("memory://", schema, check_expiri=False)  # E8
                await store.put(post, ("a", "b"))  # E9: no value
            """
        )
    )
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(source)]
    )
    lines = [line for line in out.splitlines() if ": error:" in line]
    flagged = {
        line.split(":")[1] for line in lines
    }
    expected = {
        str(i + 1)
        for i, text in enumerate(source.read_text().splitlines())
        if "# E" in text
    }
    assert flagged == expected, out + err
    assert status == 1


# --- one addressing -----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 2**64 - 1), how=st.sampled_from(["type", "name", "key"]))
def test_every_call_takes_a_record_type_a_name_or_a_key(n: int, how: str) -> None:
    def target() -> tuple[object, ...]:
        if how == "type":
            return (like, (n,))
        if how == "name":
            return ("like", (n,))
        return (like.key(n),)

    with SyncStore.open("memory://addressing", SCHEMA, values=VALUES) as store:
        if how == "key":
            store.put(like.key(n), "v")
        else:
            store.put(*target(), "v")  # type: ignore[call-overload]
        assert store.get(*target()) == "v"  # type: ignore[arg-type]
        assert store.exists(*target())  # type: ignore[arg-type]
        [record] = store.scan("like").to_list()
        assert record.key == like.key(n) and record.raw_key == like.encode(n)
        assert store.scan(like).to_list() == [record]
        store.delete(*target())  # type: ignore[arg-type]
        assert not store.exists(like.key(n))
