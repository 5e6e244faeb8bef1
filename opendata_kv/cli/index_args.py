"""--indexes MODULE:ATTR: the Index declarations a command uses (imported like --schema), and
finding the declaration of one index from them or from its stored definition."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opendata_kv.cli.common import CliError, load_attr
from opendata_kv.errors import IndexStateError, StoreDataError
from opendata_kv.keys import Schema

if TYPE_CHECKING:  # the store layer (and slatedb) loads only when a command runs
    from opendata_kv.store.indexes.declare import Index

EXAMPLE = "myapp.schema:INDEXES or ./schema.py:INDEXES"


def indexes_arg(parser: argparse.ArgumentParser, *, optional_value: bool = False) -> None:
    """--indexes MODULE:ATTR (with `optional_value`, also a bare --indexes: the value is then
    "", meaning "indexes, from their stored definitions")."""
    help_text = (
        "the Index declarations (a list or tuple of opendata_kv.Index, or a callable returning "
        "one), imported like --schema; needed for an index declared with a function"
    )
    if optional_value:
        parser.add_argument(
            "--indexes",
            nargs="?",
            const="",
            metavar="MODULE:ATTR",
            help="also check every stored index against its records; "
            + help_text
            + " (put it after DB, or write --indexes=MODULE:ATTR)",
        )
    else:
        parser.add_argument("--indexes", metavar="MODULE:ATTR", help=help_text)


def load_indexes(spec: str) -> list[Index]:
    """The Index objects `spec` names: a list or tuple of Index, one Index, or a callable
    with no arguments returning one of those. CliError naming the spec otherwise."""
    from opendata_kv.store.indexes.declare import Index

    obj = load_attr(spec, "--indexes", EXAMPLE)
    if callable(obj) and not isinstance(obj, Index):
        try:
            obj = obj()
        except Exception as exc:
            raise CliError(
                f"--indexes {spec}: calling it failed: {type(exc).__name__}: {exc}"
            ) from None
    items = [obj] if isinstance(obj, Index) else obj
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, Index) for i in items):
        shown = type(obj).__name__
        raise CliError(
            f"--indexes {spec} is a {shown}, not a list or tuple of opendata_kv.Index (or a "
            "callable returning one)"
        )
    names = [i.name for i in items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CliError(f"--indexes {spec} declares {twice} more than once")
    return list(items)


def declaration_of(
    name: str,
    stored: Mapping[str, Mapping[str, Any]],
    declared: list[Index],
    where: str,
) -> Index:
    """The Index named `name`: from --indexes, else rebuilt from its stored definition.
    CliError naming the index and what to pass when neither works."""
    from opendata_kv.store.indexes.stored import index_from_definition

    for index in declared:
        if index.name == name:
            return index
    meta = stored.get(name)
    if meta is None:
        given = f"; --indexes declares {sorted(i.name for i in declared)}" if declared else ""
        raise CliError(
            f"{where}: no index named {name!r} is stored (stored: {sorted(stored)}){given}; to "
            "build a new index, pass its declaration with --indexes MODULE:ATTR"
        )
    try:
        return index_from_definition(meta["definition"])
    except IndexStateError as exc:
        raise CliError(f"{where}: {exc}; pass it with --indexes MODULE:ATTR") from None
    except StoreDataError as exc:
        raise CliError(f"{where}: {exc}") from None


def check_records(index: Index, schema: Schema | None, where: str) -> None:
    """CliError unless `schema` defines every record `index` covers."""
    if schema is None:
        raise CliError(
            f"{where}: index {index.name!r} covers records {list(index.records)}: pass the "
            "Schema that defines them with --schema MODULE:ATTR"
        )
    names = set(schema.names())
    missing = [r for r in index.records if r not in names]
    if missing:
        raise CliError(
            f"{where}: index {index.name!r} covers records {missing}, which --schema does not "
            f"define (it defines {sorted(names)})"
        )
