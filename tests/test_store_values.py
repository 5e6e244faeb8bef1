"""Value codecs through the store: raw / msgpack / dataclass, decode errors naming the key,
unknown-version policies, upgrades, and migration of v1 records to v2."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from slatedb.uniffi import Db
from storekit import SCHEMA, VALUES, Post, aio, blob, like, make_values, post1, post2

from opendata_kv import RecordType, Schema, Store
from opendata_kv import fields as F
from opendata_kv.errors import UnknownVersionError, ValueDecodeError
from opendata_kv.values import DataclassCodec, RawCodec, Values

# A record version this schema does not know (written by a newer program), and a record type
# nobody registered.
post3 = RecordType("post", 2, [("repo", F.string), ("rkey", F.string)], version=3)
stranger = RecordType("stranger", 9, [("n", F.u8)])


@pytest.mark.parametrize("store_url", ["memory", "local", "s3"], indirect=True)
@aio
async def test_codecs_round_trip(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)
        await store.put(like, (1,), {"nested": {"list": [1, "two", 3.0]}, "at": when})
        assert await store.get(like, (1,)) == {"nested": {"list": [1, "two", 3.0]}, "at": when}
        await store.put(blob, (1,), bytearray(b"\x00\x01"))
        assert await store.get(blob, (1,)) == b"\x00\x01"
        await store.put(post2, ("r", "k"), Post("hi", "de"))
        assert await store.get(post2, ("r", "k")) == Post("hi", "de")
        # dataclass values are stored as msgpack maps by field name
        assert await store.get_raw(post2.encode("r", "k")) == b"\x82\xa4text\xa2hi\xa4lang\xa2de"


@aio
async def test_values_that_do_not_decode_name_the_key() -> None:
    async with Store.open("memory://bad-values", SCHEMA, values=VALUES) as store:
        key = post2.encode("did:x", "3kbad")
        cases = [
            b"\xc1",  # never valid msgpack
            b"\x92\x01",  # truncated array
            b"\x01\x02",  # extra bytes after a value
            b"\x81\xa1x\x01",  # a map with a field Post does not have
            b"\x81\xa4lang\xa2en",  # a map missing the required "text"
            b"\x01",  # not a map at all
        ]
        for data in cases:
            await store.put_raw(key, data)
            with pytest.raises(ValueDecodeError) as info:
                await store.get(post2, ("did:x", "3kbad"))
            assert key.hex() in str(info.value), str(info.value)
            assert "post v2" in str(info.value)
            with pytest.raises(ValueDecodeError, match=key.hex()):
                await store.scan("post").to_list()
        # raw bytes always decode: a raw codec never fails
        await store.put_raw(blob.encode(7), b"\xc1")
        assert await store.get(blob, (7,)) == b"\xc1"


@aio
async def test_an_upgrade_that_fails_names_the_key() -> None:
    async with Store.open("memory://bad-upgrade", SCHEMA, values=VALUES) as store:
        await store.put(post1, ("r", "k"), {"no t": 1})
        with pytest.raises(ValueDecodeError, match=post1.encode("r", "k").hex()) as info:
            await store.get(post1, ("r", "k"))
        assert "upgrade" in str(info.value)
        with pytest.raises(ValueDecodeError, match="upgrade"):
            await store.scan("post").to_list()
        assert await store.get(post1, ("r", "k"), upgrade=False) == {"no t": 1}


@aio
async def test_unknown_version_policies() -> None:
    writer_schema = Schema(post1, post2, post3, like, blob, stranger)
    async with Store.open("memory://unknown", writer_schema) as store:
        # the newer program writes v1, v2, v3 posts and a record type we do not know
        await store.put(post1, ("r", "a"), {"t": "one"})
        await store.put(post2, ("r", "b"), {"text": "two"})
        await store.put(post3, ("r", "c"), {"body": "three"})
        await store.put(stranger, (1,), "who")
        await store.put(like, (1,), 1)

        # ...and we read it with the older schema (no post v3, no stranger)
        old = Store(store._source, store.location, SCHEMA, VALUES, readonly=False)
        with pytest.raises(UnknownVersionError) as info:
            await old.scan_all().to_list()
        assert stranger.encode(1).hex() in str(info.value)  # the first unknown key met
        with pytest.raises(UnknownVersionError, match=post3.encode("r", "c").hex()):
            await old.scan_all(prefix=post3.head).to_list()

        skipped = await old.scan_all(on_unknown="skip").to_list()
        assert [r.raw_key for r in skipped] == [
            post1.encode("r", "a"),
            like.encode(1),
            post2.encode("r", "b"),
        ]
        assert skipped[0].value == Post("one")  # upgraded
        assert skipped[2].value == Post("two")

        raw = await old.scan_all(on_unknown="raw").to_list()
        unknown = [r for r in raw if isinstance(r.key, bytes)]
        assert [(r.key, r.raw_key) for r in unknown] == [
            (stranger.encode(1), stranger.encode(1)),
            (post3.encode("r", "c"), post3.encode("r", "c")),
        ]
        assert unknown[1].value == b"\x81\xa4body\xa5three"  # the stored bytes, undecoded
        assert len(raw) == 5
        with pytest.raises(ValueError, match="on_unknown"):
            old.scan_all(on_unknown="ignore")
        # the known versions of a name still scan fine
        assert [r.value for r in await old.scan("post").to_list()] == [Post("one"), Post("two")]


@pytest.mark.parametrize("store_url", ["memory", "local", "s3"], indirect=True)
@aio
async def test_migrate_moves_v1_records_to_v2(store_url: str) -> None:
    async with Store.open(store_url, SCHEMA, values=VALUES) as store:
        async with store.batch() as batch:
            for n in range(25):
                batch.put(post1, ("did:m", f"{n:03}"), {"t": f"old {n}", "l": "fr"})
            batch.put(post2, ("did:m", "new"), Post("already v2"))
            batch.put(like, (1,), "untouched")
        progress: list[int] = []
        moved = await store.migrate("post", batch_size=10, progress=progress.append)
        assert moved == 25
        assert progress == [10, 20, 25]
        assert await store.scan(post1).to_list() == []
        migrated = await store.scan(post2).to_list()
        assert len(migrated) == 26
        assert await store.get(post2, ("did:m", "007")) == Post("old 7", "fr")
        # stored as v2 now: the raw bytes are the dataclass map
        raw = await store.get_raw(post2.encode("did:m", "007"))
        assert raw == DataclassCodec(Post).encode(Post("old 7", "fr"))
        assert await store.get(like, (1,)) == "untouched"
        # nothing left to do
        assert await store.migrate("post", progress=progress.append) == 0
        assert progress == [10, 20, 25]


@aio
async def test_migrate_keeps_ttls_and_walks_each_version_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans = 0
    original = Db.scan_with_options

    async def counting(db: Any, key_range: Any, options: Any) -> Any:
        nonlocal scans
        scans += 1
        return await original(db, key_range, options)

    monkeypatch.setattr(Db, "scan_with_options", counting)
    async with Store.open("memory://migrate-ttl", SCHEMA, values=VALUES) as store:
        for n in range(40):
            ttl = 3600 if n % 2 else None
            await store.put(post1, ("did:t", f"{n:03}"), {"t": str(n)}, ttl=ttl)
        await store.put(post1, ("did:t", "dying"), {"t": "short"}, ttl=0.05)
        kv = await store._source.get_key_value(post1.encode("did:t", "001"))
        await asyncio.sleep(0.1)  # "dying" expires before the migration
        progress: list[int] = []
        assert await store.migrate("post", batch_size=7, progress=progress.append) == 40
        assert progress == [7, 14, 21, 28, 35, 40]
        # one iterator for the moving pass, one for the pass that finds nothing left
        assert scans == 2
        moved = await store._source.get_key_value(post2.encode("did:t", "001"))
        assert moved.expire_ts == kv.expire_ts  # the same absolute expiry
        unexpiring = await store._source.get_key_value(post2.encode("did:t", "002"))
        assert unexpiring.expire_ts is None
        assert await store.get(post2, ("did:t", "dying")) is None
        assert await store._source.get(post1.encode("did:t", "dying")) is None  # deleted
        assert await store.scan(post1).to_list() == []
        assert len(await store.scan(post2).to_list()) == 40


@aio
async def test_migrate_with_key_upgrade() -> None:
    old = RecordType("doc", 6, [("id", F.u32)], version=1)
    new = RecordType("doc", 6, [("id", F.u64), ("part", F.u8)], version=2)
    schema = Schema(old, new)
    values = (
        Values(schema)
        .register(old, bytes, upgrade=lambda b: b.decode(), upgrade_key=lambda k: (k.id, 0))
        .register(new, dict)
    )
    async with Store.open("memory://doc", schema, values=values) as store:
        for n in range(3):
            await store.put(old, (n,), f"doc {n}".encode())
        assert await store.get(old, (1,)) == "doc 1"
        assert await store.migrate("doc") == 3
        assert [(r.key.id, r.key.part, r.value) async for r in store.scan("doc")] == [
            (0, 0, "doc 0"),
            (1, 0, "doc 1"),
            (2, 0, "doc 2"),
        ]


def test_values_registry_defaults() -> None:
    values = make_values()
    assert isinstance(values.plan(blob).codec, RawCodec)
    assert values.plan(like).codec.name == "msgpack"
    assert values.plan(post2).codec.name == "dataclass:Post"
    assert values.current(post1) is post2
