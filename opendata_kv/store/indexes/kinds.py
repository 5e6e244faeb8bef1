"""The registry of index kinds: every kind an Index may declare, by name (RFC 0010, "Adding
an index kind"). A new kind is one module defining its IndexKind (and its Maintainer), listed
here; tests/test_index_kinds.py runs every registered kind through every surface."""

from __future__ import annotations

from opendata_kv.errors import SchemaError
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.kind_count import COUNT, SUM
from opendata_kv.store.indexes.kind_unique import UNIQUE
from opendata_kv.store.indexes.kind_value import VALUE

#: every index kind by name, in declaration order of the docs
KINDS: dict[str, IndexKind] = {kind.name: kind for kind in (VALUE, UNIQUE, COUNT, SUM)}


def kind_named(name: object, index: str = "?") -> IndexKind:
    """The registered kind `name`; SchemaError naming the index and the kinds there are."""
    found = KINDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise SchemaError(
            f"index {index!r}: kind must be one of {list(KINDS)}, got {name!r}",
            field="kind",
            value=name,
        )
    return found
