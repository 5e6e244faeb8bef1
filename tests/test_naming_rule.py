"""One naming rule for an operation with two faces (RFC 0012): the async function has the
plain name, the blocking one ends in `_sync`; `verify_async` is only a deprecated alias."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import opendata_kv
import opendata_kv.store
from opendata_kv import RecordType, Schema, SyncStore, fields
from opendata_kv.store import VerifyReport, verify, verify_async, verify_sync

PUBLIC = (opendata_kv, opendata_kv.store)
DEPRECATED = {"verify_async"}


def _public(module: ModuleType) -> dict[str, object]:
    return {name: getattr(module, name) for name in module.__all__}


def _parameters(function: object) -> list[tuple[str, object, object, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_every_sync_function_has_an_async_twin_with_the_same_parameters(
    module: ModuleType,
) -> None:
    public = _public(module)
    blocking = [n for n, obj in public.items() if n.endswith("_sync") and callable(obj)]
    for name in blocking:
        twin = public.get(name[: -len("_sync")])
        assert twin is not None, f"{module.__name__}.{name} has no async twin"
        assert inspect.iscoroutinefunction(twin), f"{module.__name__}.{name[:-5]} is not async"
        assert not inspect.iscoroutinefunction(public[name])
        assert _parameters(public[name]) == _parameters(twin), name
    if module is opendata_kv.store:
        assert {"clone_sync", "verify_sync"} <= set(blocking)


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_no_public_name_ends_in_async_but_the_deprecated_alias(module: ModuleType) -> None:
    assert {n for n in module.__all__ if n.endswith("_async")} <= DEPRECATED


def test_verify_is_async_and_the_old_name_warns(tmp_path: Path) -> None:
    item = RecordType("item", 1, [("n", fields.u32)])
    with SyncStore.open(tmp_path, Schema(item)) as store:
        store.put(item, (1,), {"n": 1})
    assert inspect.iscoroutinefunction(verify)
    assert _parameters(verify_async) == _parameters(verify)
    assert verify_sync(tmp_path).ok
    with pytest.warns(DeprecationWarning, match="verify_async is deprecated"):
        checking = verify_async(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only the call warns
        report = asyncio.run(checking)
    assert isinstance(report, VerifyReport) and report.ok
