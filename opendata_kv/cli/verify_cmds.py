"""`opendata-kv verify DB`: read every object of a database and list each damaged or
inconsistent one (store/verifier.py); exit 1 when there is any. Read-only."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from opendata_kv.cli.common import EXIT_BAD_INPUT, EXIT_OK, add_json_flag, emit_json
from opendata_kv.cli.db_args import database_arg, read_limit_args
from opendata_kv.cli.db_read import ReadLimits
from opendata_kv.cli.index_check import add_index_check, index_check_args
from opendata_kv.cli.progress import Progress
from opendata_kv.cli.text import printable


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `verify`."""
    verify = subparsers.add_parser(
        "verify",
        help="check every manifest, WAL file and SST of a database (read-only)",
        description=(
            "Decode every manifest and compactions file present, check that the WAL files "
            "after the replay point run without a gap and read, that sequence numbers do not "
            "jump, that every SST the manifest references exists, is long enough and passes "
            "its block checksums, and that the manifest's counters agree with the objects. "
            "Prints each problem with the object's name; exit 1 if there is any. Writes "
            "nothing. What cannot be detected: docs/reliability.md. With --indexes (and "
            "--schema) every stored index is also checked against a recount from its records."
        ),
    )
    verify.add_argument("db", metavar="DB", type=database_arg, help="database directory or URL")
    read_limit_args(verify)  # --retries 0 (the default): damage shows at once
    index_check_args(verify)
    add_json_flag(verify)
    verify.set_defaults(handler=run_verify)


async def _refuse_unusable(location: Any, options: dict[str, str] | None) -> None:
    """An S3 error answer (missing bucket, refused credential) or an unfinished clone fails
    before any object is read; so does no answer (each later read would wait as long)."""
    from opendata_kv.objstore import sidecar

    await sidecar.probe(location, options, None, strict=True)
    if location.scheme == "file" and not os.path.isdir(location.path):
        return
    await sidecar.check_not_cloning(location, options, None, f"verify {location}", strict=True)


class StageProgress(Progress):
    """`verify: <stage> <count>` on a terminal's stderr, as stats shows its progress."""

    def update(self, stage: str, count: int) -> None:  # type: ignore[override]
        if self._due() is not None:
            self._draw(f"verify: {stage}" + (f" {count:,}" if count else ""))


def run_verify(args: argparse.Namespace) -> int:
    from opendata_kv.checks.verify import verify_sync
    from opendata_kv.objstore.location import parse_location

    limits = ReadLimits.from_args(args)
    location = parse_location(args.db)
    options = limits.object_store_options(location)
    asyncio.run(limits.bound(_refuse_unusable(location, options), f"verify {args.db}"))
    bar = StageProgress(sys.stderr)
    unchecked = None
    try:
        report = verify_sync(
            args.db,
            object_store_options=options,
            timeout=limits.timeout,
            retries=limits.retries,
            progress=bar.update,
        )
        if args.indexes is not None:
            unchecked = add_index_check(args, report, limits, bar.update)
    finally:
        bar.done()
    # asked to check the indexes and none could be: not "ok", and not a success
    nothing = unchecked is not None and not report.checked.get("indexes")
    if not report.ok:
        state = f"{len(report.problems)} problem(s)"
    elif nothing:
        state = f"not checked: {unchecked}"
    else:
        state = "ok" if unchecked is None else f"ok, but {unchecked}"
    if args.json:
        emit_json({**report.as_json(), "ok": report.ok and not nothing, "verdict": state})
    else:
        out = sys.stdout
        out.write(f"verify {report.url}: {state}\n")
        for problem in report.problems:
            out.write(f"  {printable(problem.object_name)}: {printable(problem.message)}\n")
        checked = ", ".join(f"{count} {what}" for what, count in report.checked.items())
        out.write(f"checked: {checked}\n")
        for note in report.notes:
            out.write(f"note: {printable(note)}\n")
    if not report.ok:
        sys.stderr.write(
            f"opendata-kv: error: {printable(args.db)} is damaged: "
            f"{len(report.problems)} problem(s)\n"
        )
        return EXIT_BAD_INPUT
    if nothing:
        sys.stderr.write(
            "opendata-kv: error: verify --indexes checked none of the indexes of "
            f"{printable(args.db)}: {unchecked}\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK
