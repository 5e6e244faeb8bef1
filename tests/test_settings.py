"""settings= is checked (issue 20.7): unknown names refused with the closest known one,
partial groups merged over slatedb's defaults; and None is never stored as a value unless
the codec says it is one (issue 20.6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from storekit import SCHEMA, VALUES, aio, like, post1

from opendata_kv.errors import InvalidArgumentError, ValueEncodeError
from opendata_kv.store import Store
from opendata_kv.store.settings import (
    LIBRARY_DEFAULTS,
    defaults,
    effective_defaults,
    slatedb_settings,
)
from opendata_kv.values import Values


def test_unknown_setting_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="'no_such_setting'") as info:
        slatedb_settings({"flush_interval": "50ms", "no_such_setting": 1})
    assert info.value.field == "no_such_setting"
    with pytest.raises(InvalidArgumentError, match=r"did you mean 'flush_interval'\?"):
        slatedb_settings({"flush_intervall": "50ms"})
    with pytest.raises(
        InvalidArgumentError, match=r"garbage_collector_options\.wal_options\.min_ag"
    ):
        slatedb_settings({"garbage_collector_options": {"wal_options": {"min_ag": "1s"}}})

    async def run() -> None:
        with pytest.raises(InvalidArgumentError, match="no_such_setting"):
            await Store.open(tmp_path / "db", SCHEMA, settings={"no_such_setting": 1})

    aio(run)()


def test_partial_group_is_merged_over_the_defaults() -> None:
    made = slatedb_settings({"garbage_collector_options": {"wal_options": {"min_age": "86400s"}}})
    got = json.loads(made.to_json_string())["garbage_collector_options"]
    base = defaults()["garbage_collector_options"]
    assert got["wal_options"] == {**base["wal_options"], "min_age": "86400s"}
    assert got["manifest_options"] == base["manifest_options"]


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda n: n not in defaults()),
        st.integers(),
        min_size=1,
        max_size=3,
    )
)
def test_any_unknown_name_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown slatedb setting"):
        slatedb_settings(settings)


def test_none_is_not_stored(tmp_path: Path) -> None:
    """put(rt, fields, None) stored None: get() then looked like a missing record and an
    upgrade function failed with a TypeError on the next read."""

    class NoneCodec:
        name = "none-ok"
        none_is_value = True

        def encode(self, value: Any) -> bytes:
            return b"" if value is None else b"x"

        def decode(self, data: bytes) -> Any:
            return None if data == b"" else "x"

    async def run() -> None:
        async with Store.open(tmp_path / "db", SCHEMA, values=VALUES) as store:
            for rt, fields in ((like, (1,)), (post1, ("did:plc:a", "3k"))):
                with pytest.raises(ValueEncodeError, match="the value is None") as info:
                    await store.put(rt, fields, None)
                assert info.value.record == rt.name
                assert not await store.exists(rt, fields)
            with pytest.raises(ValueEncodeError):
                async with store.batch() as batch:
                    batch.put(like, (2,), None)
            assert not await store.exists(like, (2,))
        values = Values(SCHEMA).register(like, NoneCodec())
        async with Store.open(tmp_path / "db2", SCHEMA, values=values) as store:
            await store.put(like, (1,), None)  # this codec says None is a value
            assert await store.exists(like, (1,))

    aio(run)()


def test_dotted_names_are_checked_too() -> None:
    made = slatedb_settings({"compactor_options.poll_interval": "1s"})
    assert json.loads(made.to_json_string())["compactor_options"]["poll_interval"] == "1s"
    with pytest.raises(InvalidArgumentError, match=r"did you mean 'poll_interval'\?"):
        slatedb_settings({"compactor_options.pol_interval": "1s"})


def test_library_defaults_apply_and_give_way_to_the_caller() -> None:
    """The footprint defaults (docs/performance.md, "Footprint") are what a writer opens with;
    a caller's setting replaces them, None included (slatedb's own: no codec)."""
    chosen = json.loads(slatedb_settings(None).to_json_string())
    assert chosen["compression_codec"] == "Lz4" == LIBRARY_DEFAULTS["compression_codec"]
    assert effective_defaults()["compression_codec"] == "Lz4"
    assert defaults()["compression_codec"] is None  # slatedb's, unchanged
    for codec in (None, "Zstd"):
        made = json.loads(slatedb_settings({"compression_codec": codec}).to_json_string())
        assert made["compression_codec"] == codec
