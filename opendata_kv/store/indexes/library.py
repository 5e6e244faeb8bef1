"""Index functions the library itself defines (collections.backlinks' `using` functions),
found by the `module.qualname` a stored definition names, so that a writer or a tool that did
not declare such an index can still compute its entries (RFC 0010). Data never names code to
run: only the library modules listed in MODULES are imported (not any `opendata_kv.` name:
importing `opendata_kv.__main__` runs the command line), and only functions marked with
`@index_function` are returned."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

PACKAGE = "opendata_kv."
#: the modules that define @index_function functions: the only ones a stored name imports
MODULES = frozenset({"opendata_kv.collections.backlinks"})
_KNOWN: dict[str, Callable[..., Any]] = {}


def callable_name(function: Callable[..., Any]) -> str:
    """The name a definition stores for a function: `module.qualname`."""
    module = getattr(function, "__module__", "?")
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def index_function(function: F) -> F:
    """Mark a module-level function of the library as one stored definitions may name."""
    _KNOWN[callable_name(function)] = function
    return function


#: the attribute index_route sets on a function: (key field, value)
ROUTE = "__index_route__"


def index_route(field: str, value: Any) -> Callable[[F], F]:
    """Declare that an index function yields nothing unless its key's `field` equals `value`
    (a likes index reads like records only): the writer then hands it only the records of
    that value, routed once per distinct value in a batch instead of a call per record."""

    def mark(function: F) -> F:
        setattr(function, ROUTE, (field, value))
        return function

    return mark


def route_of(function: Callable[..., Any] | None) -> tuple[str, Any] | None:
    """The (key field, value) `function` declared with index_route, else None."""
    found = getattr(function, ROUTE, None)
    if isinstance(found, tuple) and len(found) == 2 and isinstance(found[0], str):
        return found
    return None


def library_function(name: str) -> Callable[..., Any] | None:
    """The library's index function stored as `name`, None when `name` is not one (outside
    MODULES, or not marked with @index_function)."""
    if not name.startswith(PACKAGE) or "<" in name:
        return None
    found = _KNOWN.get(name)
    if found is not None:
        return found
    module = name.rpartition(".")[0]
    while module and module not in MODULES:  # a method's qualname holds dots too
        module = module.rpartition(".")[0]
    if module:
        importlib.import_module(module)
    return _KNOWN.get(name)
