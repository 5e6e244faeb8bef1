"""Checking every index a database stores (verify --indexes): each readable index with a
usable declaration (given, or rebuilt from its stored definition) is recounted from its
records (check.py); every other one is named with the reason it was not checked. Reads
only."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opendata_kv.checks.integrity import Problem
from opendata_kv.errors import KeyDecodeError, SchemaError, StoreDataError, ValueDecodeError
from opendata_kv.store.indexes.admin import stored_metas
from opendata_kv.store.indexes.check import check_index
from opendata_kv.store.indexes.declare import Index
from opendata_kv.store.indexes.registry import READABLE
from opendata_kv.store.indexes.stored import resolve

if TYPE_CHECKING:
    from opendata_kv.store.views import ReadView


@dataclass
class IndexCheck:
    """What checking a database's indexes found: `problems` (each names the index and the
    entry key), the indexes `checked`, and `not_checked` (name -> why)."""

    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    not_checked: dict[str, str] = field(default_factory=dict)


async def check_stored_indexes(view: ReadView, declared: Iterable[Index] = ()) -> IndexCheck:
    """Check every index stored in the database behind `view` against its records."""
    declared = list(declared)
    stored = await stored_metas(view)
    resolved = resolve(stored, declared)
    out = IndexCheck()
    for name, reason in resolved.unusable.items():
        out.not_checked[name] = reason
    for index in declared:
        if index.name not in stored:
            out.not_checked[index.name] = "declared but not stored in the database"
    for name, index in resolved.usable.items():
        meta = stored[name]
        if meta["state"] != READABLE:
            out.not_checked[name] = (
                f"it is {meta['state']} (being built, {meta.get('built', 0)} records so far): "
                "finish the build first"
            )
            continue
        missing = [r for r in index.records if r not in view.schema.names()]
        if missing:
            out.not_checked[name] = f"the schema does not define its records {missing}"
            continue
        try:
            out.problems += await check_index(view, index)
        except SchemaError as exc:  # e.g. a `using` that yields the wrong number of fields
            out.not_checked[name] = f"its entries could not be computed: {exc}"
            continue
        except (StoreDataError, KeyDecodeError, ValueDecodeError) as exc:  # damaged rows
            out.problems.append(Problem(f"index {name}", f"the check stopped: {exc}"))
            continue
        out.checked.append(name)
    out.not_checked = dict(sorted(out.not_checked.items()))
    return out
