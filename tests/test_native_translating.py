"""native.errors.translating and call: the one way a binding failure becomes our error."""

from __future__ import annotations

import asyncio

import pytest
from slatedb.uniffi import Error

from opendata_kv.errors import InvalidArgumentError, StoreError, StoreUnavailableError
from opendata_kv.native.errors import call, translate, translating

OUTAGE = "Unavailable error: connection refused"


def test_a_binding_error_is_translated_like_translate_says() -> None:
    foreign = Error.Unavailable(OUTAGE)
    with pytest.raises(StoreUnavailableError) as caught, translating("get on file:///db"):
        raise foreign
    assert str(caught.value) == str(translate(foreign, "get on file:///db"))
    assert caught.value.__cause__ is foreign


def test_unless_lets_the_chosen_ones_through_and_ours_pass_untouched() -> None:
    passes = translating("w", unless=lambda exc: "refused" in str(exc))
    with pytest.raises(Error.Unavailable), passes:
        raise Error.Unavailable(OUTAGE)
    ours = InvalidArgumentError("bad limit")
    with pytest.raises(InvalidArgumentError) as caught, translating("w", others=True):
        raise ours
    assert caught.value is ours


def test_others_wraps_any_other_exception_only_when_asked() -> None:
    with pytest.raises(KeyError), translating("w"):
        raise KeyError("k")
    wraps = translating("feed of db", others=True)
    with pytest.raises(StoreError, match=r"^feed of db: KeyError: 'k'$"), wraps:
        raise KeyError("k")


def test_call_awaits_and_translates() -> None:
    async def ok() -> int:
        return 7

    async def failing() -> int:
        raise Error.Unavailable(OUTAGE)

    assert asyncio.run(call(ok(), "w")) == 7
    with pytest.raises(StoreUnavailableError, match=r"^flush of db: the object store"):
        asyncio.run(call(failing(), "flush of db"))
