"""`stats` for OpenData keys: counts per (subsystem, record kind) and per log segment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counter:
    """Keys, records and bytes (key + value) of one group."""

    keys: int = 0
    records: int = 0
    key_bytes: int = 0
    value_bytes: int = 0


@dataclass
class OpendataStats:
    """Counters of the OpenData keys a stats run met."""

    #: (subsystem, record kind or "?" when the key matches no layout) -> counts
    records: dict[tuple[str, str], Counter] = field(default_factory=dict)
    #: log segment id -> counts; records are the LogEntry keys of the segment
    segments: dict[int, Counter] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.records)

    def add(self, obj: dict[str, Any], key: bytes, value: bytes) -> None:
        record = obj["record"] or "?"
        group = self.records.setdefault((obj["subsystem"] or "?", record), Counter())
        _count(group, key, value, True)
        if obj["subsystem"] == "log" and obj["fields"] is not None:
            segment = self.segments.setdefault(obj["fields"]["segment_id"], Counter())
            _count(segment, key, value, record == "LogEntry")

    def totals(self) -> dict[str, int]:
        groups = self.records.values()
        return {
            "count": sum(g.keys for g in groups),
            "key_bytes": sum(g.key_bytes for g in groups),
            "value_bytes": sum(g.value_bytes for g in groups),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "records": [
                {
                    "subsystem": s,
                    "record": r,
                    "count": c.keys,
                    "key_bytes": c.key_bytes,
                    "value_bytes": c.value_bytes,
                }
                for (s, r), c in sorted(self.records.items())
            ],
            "log_segments": [
                {
                    "segment_id": n,
                    "keys": c.keys,
                    "records": c.records,
                    "bytes": c.key_bytes + c.value_bytes,
                }
                for n, c in sorted(self.segments.items())
            ],
        }

    def table(self) -> str:
        rows = [["SUBSYSTEM", "RECORD", "COUNT", "KEY BYTES", "VALUE BYTES"]]
        rows += [
            [s, r, f"{c.keys:,}", f"{c.key_bytes:,}", f"{c.value_bytes:,}"]
            for (s, r), c in sorted(self.records.items())
        ]
        out = _aligned(rows, numeric_from=2)
        if self.segments:
            seg = [["LOG SEGMENT", "KEYS", "RECORDS", "BYTES"]]
            seg += [
                [str(n), f"{c.keys:,}", f"{c.records:,}", f"{c.key_bytes + c.value_bytes:,}"]
                for n, c in sorted(self.segments.items())
            ]
            out += "\n" + _aligned(seg, numeric_from=0)
        return out


def _count(counter: Counter, key: bytes, value: bytes, is_record: bool) -> None:
    counter.keys += 1
    counter.records += is_record
    counter.key_bytes += len(key)
    counter.value_bytes += len(value)


def _aligned(rows: list[list[str]], numeric_from: int) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            f"{c:>{w}}" if i >= numeric_from else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + "\n"
