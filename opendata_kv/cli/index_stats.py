"""`stats` for index keys (RFC 0010): entries, metadata rows, key bytes and value bytes per
index (its metadata row counted in its bytes), the catalog row apart (it is no index: its kind
is "catalog" and it has no entries, shown "-"); counted beside the records, not in their
totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opendata_kv.cli.opendata_stats import _aligned
from opendata_kv.cli.text import printable

CATALOG_NAME = "(catalog)"


@dataclass
class IndexCounter:
    """The rows of one index."""

    kind: str = "?"
    entries: int = 0
    metadata: int = 0
    key_bytes: int = 0
    value_bytes: int = 0


@dataclass
class IndexStats:
    """Counters of the index keys a stats run met."""

    groups: dict[str, IndexCounter] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.groups)

    @staticmethod
    def owns(key: bytes) -> bool:
        from opendata_kv.store.indexes.layout import is_index_key

        return is_index_key(key)

    def add(self, key: bytes, value: bytes) -> None:
        from opendata_kv.store.indexes.layout import CATALOG, META, decode_meta, index_name_of

        if key == CATALOG:
            group = self.groups.setdefault(CATALOG_NAME, IndexCounter(kind="catalog"))
            group.metadata += 1
        elif key.startswith(META):
            group = self.groups.setdefault(
                key[len(META) :].decode(errors="replace"), IndexCounter()
            )
            group.metadata += 1
            try:
                group.kind = str(decode_meta(key, value)["definition"].get("kind"))
            except Exception:  # damaged metadata: dump and verify name it; stats counts it
                group.kind = "?"
        else:
            name = index_name_of(key)
            group = self.groups.setdefault("?" if name is None else name, IndexCounter())
            group.entries += 1
        group.key_bytes += len(key)
        group.value_bytes += len(value)

    def totals(self) -> dict[str, int]:
        groups = self.groups.values()
        return {
            "count": sum(g.entries + g.metadata for g in groups),
            "key_bytes": sum(g.key_bytes for g in groups),
            "value_bytes": sum(g.value_bytes for g in groups),
        }

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "index": name,
                "kind": c.kind,
                "entries": c.entries,
                "metadata_rows": c.metadata,
                "key_bytes": c.key_bytes,
                "value_bytes": c.value_bytes,
            }
            for name, c in sorted(self.groups.items())
        ]

    def table(self) -> str:
        rows = [["INDEX", "KIND", "ENTRIES", "META ROWS", "KEY BYTES", "VALUE BYTES"]]
        rows += [
            [
                printable(name),
                c.kind,
                "-" if name == CATALOG_NAME else f"{c.entries:,}",
                f"{c.metadata:,}",
                f"{c.key_bytes:,}",
                f"{c.value_bytes:,}",
            ]
            for name, c in sorted(self.groups.items())
        ]
        total = self.totals()
        entries = sum(c.entries for c in self.groups.values())
        metadata = sum(c.metadata for c in self.groups.values())
        rows.append(
            [
                "total",
                "",
                f"{entries:,}",
                f"{metadata:,}",
                f"{total['key_bytes']:,}",
                f"{total['value_bytes']:,}",
            ]
        )
        return _aligned(rows, numeric_from=2)
