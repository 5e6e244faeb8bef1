"""The index state machine's `import` rule (issue 37 point 1; tests/test_index_model.py): the
store exported and imported back with new rows after it, through the command line, while its
indexes exist. Three ways: without --schema (refused up front: it cannot tell which rows are
records of the indexes), with --schema alone (refused up front: `tags` needs its function) and
with --schema and --indexes (every index kept, undeclared `late_team` taken up from its
stored definition; batches atomic, a unique clash refusing its batch and the rest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clikit import json_lines, run_in_process
from indexmodel import TYPES, MKey, Model

from opendata_kv.values import pack

HOW = ("raw", "schema", "schema+indexes")
SCHEMA = ("--schema", "indexmodel:SCHEMA")
INDEXES = ("--indexes", "indexmodel:BASE")


def import_rows(
    url: str,
    folder: Path,
    model: Model,
    items: list[tuple[MKey, Any]],
    how: str,
    batch_size: int,
) -> Model:
    """Export the (closed) store at `url`, append `items` as key_hex/value_hex rows, import
    the file `how` says and return the model of what must be live after it."""
    exported = folder / "exported.jsonl"
    done = run_in_process("export", url, *SCHEMA, "--output", str(exported))
    assert done.returncode == 0, done.stderr
    rows = json_lines(exported.read_text())
    assert sorted(json.dumps(r["fields"], sort_keys=True) for r in rows) == sorted(
        json.dumps(dict(zip(TYPES[k[0]].field_names, k[1:], strict=True)), sort_keys=True)
        for k in model.live
    ), "export gives every live record"
    rows += [
        {"key_hex": TYPES[k[0]].encode(*k[1:]).hex(), "value_hex": pack(v).hex()} for k, v in items
    ]
    file = folder / f"import-{len(list(folder.glob('import-*')))}.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = {"raw": (), "schema": SCHEMA, "schema+indexes": (*SCHEMA, *INDEXES)}[how]
    result = run_in_process("import", url, str(file), *options, "--batch-size", str(batch_size))
    if how == "raw":  # the store always holds readable indexes
        assert result.returncode == 1 and "without --schema" in result.stderr, result.stderr
        return model
    if how == "schema":
        assert result.returncode == 1 and "tags (using=" in result.stderr, result.stderr
        return model
    live = [(k, v) for k, v in model.live.items()] + list(items)
    for start in range(0, len(live), batch_size):
        after = model.copy()
        for k, v in live[start : start + batch_size]:
            after.apply(("put", k, v))
        if after.duplicate_handle():
            assert result.returncode == 1 and "index 'handle'" in result.stderr, result.stderr
            return model
        model = after
    assert result.returncode == 0, result.stderr
    return model
