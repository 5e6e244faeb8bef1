"""Index functions the library itself defines (collections.backlinks' `using` functions),
found by the `module.qualname` a stored definition names, so that a writer or a tool that did
not declare such an index can still compute its entries (RFC 0010). Data never names code to
run: only modules inside `opendata_kv.` are imported, and only functions marked with
`@index_function` are returned."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

PACKAGE = "opendata_kv."
_KNOWN: dict[str, Callable[..., Any]] = {}


def callable_name(function: Callable[..., Any]) -> str:
    """The name a definition stores for a function: `module.qualname`."""
    module = getattr(function, "__module__", "?")
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def index_function(function: F) -> F:
    """Mark a module-level function of the library as one stored definitions may name."""
    _KNOWN[callable_name(function)] = function
    return function


def library_function(name: str) -> Callable[..., Any] | None:
    """The library's index function stored as `name`, None when `name` is not one (outside
    `opendata_kv.`, no such module, or not marked with @index_function)."""
    if not name.startswith(PACKAGE) or "<" in name:
        return None
    found = _KNOWN.get(name)
    if found is not None:
        return found
    parts = name.split(".")
    for end in range(len(parts) - 1, 1, -1):  # the longest importable module prefix
        try:
            importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        break
    return _KNOWN.get(name)
