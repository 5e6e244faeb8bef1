"""Indexes known from their stored definitions (RFC 0010), for writers and tools that did not
declare them: Store.open, the CLI's index commands, dump, stats and verify. A definition that
names no function (no `using`, `amount` absent or a value field name), or only functions the
library defines (library.py), is enough to rebuild its Index; one that names another function
needs the declaration itself (the function cannot be stored).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opendata_kv.errors import IndexStateError, OpendataKvError, StoreDataError
from opendata_kv.keys.codec_names import field_named
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.library import library_function


def functions_of(definition: Mapping[str, Any]) -> dict[str, str]:
    """The functions a stored definition names, by argument (`using`, or an `amount` that is
    not a field name: the stored name of a function is `module.qualname`, so it holds a dot)."""
    found = {}
    if definition.get("using") is not None:
        found["using"] = str(definition["using"])
    amount = definition.get("amount")
    if isinstance(amount, str) and "." in amount:
        found["amount"] = amount
    return found


def unknown_functions(definition: Mapping[str, Any]) -> list[str]:
    """The functions a stored definition names that the library does not define (`arg=name`):
    empty when the definition alone rebuilds its Index."""
    return [
        f"{arg}={name}"
        for arg, name in functions_of(definition).items()
        if library_function(name) is None
    ]


def index_from_definition(definition: Mapping[str, Any]) -> Index:
    """The Index a stored definition describes (its describe() equals `definition`); the
    library's own functions are found by their stored names.

    IndexStateError naming the index and its functions when it names any other (the
    declaration is needed); StoreDataError naming the index when the definition is damaged."""
    name = str(definition.get("name"))
    unknown = unknown_functions(definition)
    if unknown:
        raise IndexStateError(
            f"index {name!r} is declared with a function ({', '.join(unknown)}), which the "
            "database does not store: its declaration is needed to compute its entries",
            index=name,
        )
    functions = {arg: library_function(n) for arg, n in functions_of(definition).items()}
    try:
        pairs = [(str(n), field_named(codec)) for n, codec in definition["fields"]]
        index = Index(
            name,
            list(definition["records"]),
            pairs,
            kind=definition["kind"],
            amount=functions.get("amount") or definition.get("amount"),
            using=functions.get("using"),
            covering=definition.get("covering", False),
            version=definition.get("version", 1),
        )
    except (OpendataKvError, KeyError, TypeError, ValueError) as exc:
        raise StoreDataError(
            f"index {name!r}: its stored definition {dict(definition)!r} does not describe an "
            f"index: {exc}",
            field=name,
        ) from None
    if index.describe() != dict(definition):
        raise StoreDataError(
            f"index {name!r}: its stored definition {dict(definition)!r} does not round-trip "
            f"(rebuilt as {index.describe()!r})",
            field=name,
        )
    return index


@dataclass(frozen=True)
class Resolved:
    """For every stored index: the Index to use (`usable`), or why there is none
    (`unusable`: it names a function and was not declared, or was declared differently)."""

    usable: dict[str, Index] = field(default_factory=dict)
    unusable: dict[str, str] = field(default_factory=dict)


def resolve(stored: Mapping[str, Mapping[str, Any]], declared: Iterable[Index]) -> Resolved:
    """Match stored indexes with declarations (by name), else rebuild them from their stored
    definitions."""
    by_name = {index.name: index for index in declared}
    out = Resolved()
    for name, meta in sorted(stored.items()):
        definition = meta["definition"]
        index = by_name.get(name)
        if index is not None:
            if index.describe() != definition:
                out.unusable[name] = (
                    f"declared as {index.describe()!r} but stored as {definition!r}"
                )
            else:
                out.usable[name] = index
            continue
        try:
            out.usable[name] = index_from_definition(definition)
        except (IndexStateError, StoreDataError) as exc:
            out.unusable[name] = str(exc)
    return out


def readable_undeclared(
    stored: Mapping[str, Mapping[str, Any]], declared: Iterable[str], records: Iterable[str]
) -> list[Index]:
    """The stored indexes a reader was not given that it reads from their stored definitions
    (RFC 0013, "Readers and the indexes they were not given"): each one over a record type of
    the reader's schema (`records`) whose definition rebuilds its Index (no function, or only
    the library's). A reader writes
    no entry, so what a writer needs the function for never happens; the definition gives the
    entry layout, the stored state still refuses reads of an index being built, and one that
    names another function is left to its declaration (the error of a read names
    `Store.open_reader(..., indexes=[...])`)."""
    given = set(declared)
    names = set(records)
    found: list[Index] = []
    for name, meta in sorted(stored.items()):
        definition = meta["definition"]
        over = definition.get("records")
        if name in given or (isinstance(over, list) and not names.intersection(map(str, over))):
            continue
        if unknown_functions(definition):
            continue
        try:
            found.append(index_from_definition(definition))
        except (IndexStateError, StoreDataError):
            continue  # damaged: a read of it says it was not declared; verify reports it
    return found
