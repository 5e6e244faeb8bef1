"""`verify --indexes`: every index the database stores checked against a recount from its
records (store/indexes/scrub.py), added to verify's report: each problem names the index and
the entry key; an index that could not be checked is named in a note with the reason.
Read-only (a reader that writes nothing)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from opendata_kv.cli.common import CliError, load_schema
from opendata_kv.cli.db_args import schema_args
from opendata_kv.cli.db_read import ReadLimits, open_reader
from opendata_kv.cli.index_args import indexes_arg, load_indexes


def index_check_args(parser: argparse.ArgumentParser) -> None:
    """--indexes [MODULE:ATTR] and --schema/--keyspace (the records are decoded with it)."""
    indexes_arg(parser, optional_value=True)
    schema_args(parser)


def add_index_check(
    args: argparse.Namespace,
    report: Any,
    limits: ReadLimits,
    progress: Callable[[str, int], None],
) -> str | None:
    """Check the indexes of args.db and add what was found to `report` (a VerifyReport).
    Returns what the verdict must say was not checked (None: every stored index was)."""
    if not args.schema:
        raise CliError(
            "verify --indexes: the records an index is checked against are decoded with the "
            "Schema: pass it with --schema MODULE:ATTR"
        )
    spec = load_schema(args.schema)
    declared = load_indexes(args.indexes) if args.indexes else []
    progress("indexes", 0)
    found = asyncio.run(_check(args.db, limits, spec, declared))
    report.add(found.problems)
    report.checked["indexes"] = len(found.checked)
    for name, reason in found.not_checked.items():
        if "declared with a function" in reason:
            reason += "; pass its declaration with --indexes=MODULE:ATTR"
        report.notes.append(f"index {name} not checked: {reason}")
    if not found.not_checked:
        return None
    total = len(found.checked) + len(found.not_checked)
    if not found.checked:
        return f"none of the {total} stored indexes could be checked (see the notes)"
    return f"{len(found.not_checked)} of {total} stored indexes not checked (see the notes)"


async def _check(db: str, limits: ReadLimits, spec: Any, declared: list[Any]) -> Any:
    from opendata_kv.store.indexes.scrub import check_stored_indexes

    store = await open_reader(db, limits, None, spec.schema, spec.values)
    try:
        return await check_stored_indexes(store, declared)
    finally:
        await store.close()
