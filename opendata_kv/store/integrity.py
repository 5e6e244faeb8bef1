"""Damage slatedb 0.17 does not notice, checked by opendata_kv before it opens a database.

slatedb replays the WAL files after the manifest's replay point until the first id that is
missing and silently stops there; it skips a WAL file emptied to zero bytes (an empty file is
also what a writer leaves to fence older writers); a replay point past the newest WAL file
skips them all; and an SST shorter than the manifest says makes every read retry forever.
`check_open` finds these on a local directory with one listing and one manifest read (and
reads WAL files only around an empty one), before the writer or a reader opens. `verify`
(store/verifier.py) runs the same checks and more over every object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slatedb.uniffi import AdminBuilder, SlateDbWalReader

from opendata_kv.errors import FencedError, StoreDataError, StoreError
from opendata_kv.store.location import Location
from opendata_kv.store.native.errors import (
    FOREIGN,
    VERIFY_ADVICE,
    object_named,
    one_line,
    translate,
)
from opendata_kv.store.objects import (
    Listing,
    compactions_name,
    list_local,
    manifest_name,
    manifest_ssts,
    sst_extent,
    sst_name,
    wal_name,
)

#: Seconds one WAL file read may take before it counts as missing (the binding's live WAL
#: iterator waits for a file that does not exist instead of failing).
WAL_READ_TIMEOUT = 10.0
#: Seconds to wait before looking again at a database that looked damaged at open.
RECHECK_DELAY = 0.2


@dataclass(frozen=True)
class Problem:
    """One damaged or inconsistent object: its name in the store and what is wrong."""

    object_name: str
    message: str

    def __str__(self) -> str:
        return f"{self.object_name}: {self.message}"


def replay_problems(manifest: Any, listing: Listing) -> list[Problem]:
    """The manifest's WAL counters against the WAL files present: the replay point must be
    below next_wal_sst_id, and every id from the replay point to the newest file present."""
    name = manifest_name(manifest.id)
    replay, next_wal = manifest.replay_after_wal_id, manifest.next_wal_sst_id
    if replay >= next_wal:
        return [
            Problem(
                name,
                f"replay_after_wal_id {replay} is not below next_wal_sst_id {next_wal}: the "
                "manifest is damaged (a reader would skip every WAL file after it)",
            )
        ]
    after = sorted(i for i in listing.wals if i > replay)
    if not after:
        return []
    missing = sorted(set(range(replay + 1, after[-1] + 1)) - set(after))
    return [
        Problem(
            wal_name(i),
            f"missing: the WAL files after the replay point {replay} of "
            f"{name} must run without a gap to the newest, {wal_name(after[-1])}; the writes "
            "in it and in every later WAL file would be lost on replay",
        )
        for i in missing
    ]


def l0_problems(older: Any, newer: Any) -> list[Problem]:
    """Two consecutive manifest versions: an SST keeps its facts (key range, offsets) in every
    version; last_l0_seq moves only with a new L0 SST; an L0 SST leaves only by compaction,
    which takes the oldest views (L0 lists the newest first) up to the one it records in
    last_compacted_l0_sst_view_id. Otherwise reads would skip records."""
    kept = {view.id for view in newer.l0}
    compacted = newer.last_compacted_l0_sst_view_id
    problems = []
    before = dict(manifest_ssts(older))
    for ulid, handle in manifest_ssts(newer):
        if ulid in before and before[ulid].info != handle.info:
            problems.append(
                Problem(
                    manifest_name(newer.id),
                    f"the facts of SST {ulid} (key range, offsets) differ from those in "
                    f"{manifest_name(older.id)}; an SST never changes: the manifest is damaged",
                )
            )
    added = kept - {view.id for view in older.l0}
    if newer.last_l0_seq != older.last_l0_seq and not added:
        problems.append(
            Problem(
                manifest_name(newer.id),
                f"last_l0_seq moved from {older.last_l0_seq} ({manifest_name(older.id)}) to "
                f"{newer.last_l0_seq} without a new L0 SST: the manifest is damaged",
            )
        )
    # L0 is listed newest first; a compaction takes the oldest views up to the one it names
    order = [view.id for view in older.l0]
    cut = order.index(compacted) if compacted in order else len(order)
    for position, view in enumerate(older.l0):
        if view.id not in kept and position < cut:
            problems.append(
                Problem(
                    manifest_name(newer.id),
                    f"L0 SST {view.sst.id.value} of {manifest_name(older.id)} is gone from it, "
                    "but no compaction took it: the manifest is damaged",
                )
            )
    return problems


def sst_problems(manifest: Any, listing: Listing) -> list[Problem]:
    """Every SST the manifest references must be present and at least as long as its info says."""
    problems = []
    for ulid, handle in manifest_ssts(manifest):
        name = sst_name(ulid)
        size = listing.ssts.get(ulid)
        if size is None:
            problems.append(
                Problem(name, f"missing, but {manifest_name(manifest.id)} references it")
            )
            continue
        needed = sst_extent(handle.info)
        if size < needed:
            problems.append(
                Problem(
                    name,
                    f"{size} bytes, but {manifest_name(manifest.id)} places its index, filter "
                    f"and stats up to byte {needed}: truncated, or the manifest is damaged",
                )
            )
    return problems


async def wal_sequence_problems(
    location: Location,
    object_store: Any,
    manifest: Any,
    wal_ids: Sequence[int],
    *,
    upto: int | None = None,
) -> list[Problem]:
    """Read the WAL files `wal_ids` (contiguous, after the replay point, in order) and check
    that sequence numbers continue from the manifest's last_l0_seq without a jump.

    A writer's fence file is empty and the numbers go on unbroken across it; a data file
    emptied by damage leaves a jump, reported against the empty file. `upto`: stop after
    this id (the open check reads only as far as the last empty file needs).
    """
    if not wal_ids:
        return []
    reader = SlateDbWalReader(location.db_path, object_store)
    where = f"read WAL of {location}"
    iterator = await asyncio.wait_for(reader.iterator(wal_ids[0]), WAL_READ_TIMEOUT)
    problems: list[Problem] = []
    previous = manifest.last_l0_seq
    empties: list[int] = []
    first_named = last_named = wal_name(wal_ids[0] - 1) if wal_ids[0] > 1 else "the SSTs"
    for expected in wal_ids:
        if upto is not None and expected > upto:
            break
        try:
            rows = await asyncio.wait_for(iterator.next(), WAL_READ_TIMEOUT)
        except asyncio.TimeoutError:
            problems.append(Problem(wal_name(expected), "could not be read (timed out)"))
            break
        except FOREIGN as exc:
            error = translate(exc, where)
            problems.append(Problem(object_named(str(error)) or wal_name(expected), str(error)))
            break
        if rows is None:
            break
        got = rows.last_consumed_wal_file_id
        if not rows.rows:
            empties.append(got)
            continue
        seqs = [row.seq for row in rows.rows]
        low, high = min(seqs), max(seqs)
        if low > previous + 1:
            gap = f"sequence numbers jump from {previous} to {low}"
            if empties:
                problems.extend(
                    Problem(
                        wal_name(i),
                        f"empty, but {gap} across it: a WAL file that held writes was emptied",
                    )
                    for i in empties
                )
            else:
                problems.append(
                    Problem(
                        wal_name(got),
                        f"{gap} between {last_named} and this file: writes are missing",
                    )
                )
        elif low <= previous and previous > manifest.last_l0_seq:
            problems.append(
                Problem(
                    wal_name(got),
                    f"sequence numbers go back from {previous} to {low}: files out of order",
                )
            )
        empties = []
        previous = max(previous, high)
        last_named = wal_name(got)
    if upto is None and last_named != first_named:
        problems.extend(seq_problems(manifest, previous, last_named))
    return problems


def seq_problems(manifest: Any, newest_seq: int, newest_file: str) -> list[Problem]:
    """The manifest's last_l0_seq against the newest sequence number in the WAL files after
    its replay point: replay skips every write numbered up to last_l0_seq (those are in L0
    already), so one above every write there is would skip them all."""
    if manifest.last_l0_seq <= newest_seq:
        return []
    return [
        Problem(
            manifest_name(manifest.id),
            f"last_l0_seq {manifest.last_l0_seq} is above the newest sequence number "
            f"{newest_seq} (in {newest_file}): the manifest is damaged, and replay would skip "
            "the writes in the WAL files after its replay point",
        )
    ]


async def newest_seq(object_store: Any, location: Location, wal_id: int) -> int | None:
    """The highest sequence number in one WAL file (None: it holds no writes)."""
    reader = SlateDbWalReader(location.db_path, object_store)
    iterator = await asyncio.wait_for(reader.iterator(wal_id), WAL_READ_TIMEOUT)
    rows = await asyncio.wait_for(iterator.next(), WAL_READ_TIMEOUT)
    if rows is None or not rows.rows:
        return None
    return int(max(row.seq for row in rows.rows))


def _raise(problems: list[Problem], where: str) -> None:
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise StoreDataError(
        f"{where}: the database is damaged: {first}{more}; refusing to open it, since reading "
        f"on would silently miss records; {VERIFY_ADVICE}",
        object_name=first.object_name,
    )


async def read_latest_manifest(
    location: Location, object_store: Any, listing: Listing, where: str
) -> Any:
    """The newest manifest decoded by slatedb's Admin; StoreDataError naming it if it does not
    decode (a Rust panic included)."""
    admin = AdminBuilder(location.db_path, object_store).build()
    try:
        return await admin.read_manifest(None)
    except FOREIGN as exc:
        error = translate(exc, where)
        if not isinstance(error, StoreDataError):
            raise error from exc
        latest = manifest_name(max(listing.manifests)) if listing.manifests else None
        raise StoreDataError(
            f"{where}: the newest manifest {latest} does not decode [{_text(exc)}]; "
            f"{VERIFY_ADVICE}",
            object_name=latest,
        ) from exc


async def open_problems(location: Location, object_store: Any, where: str) -> list[Problem]:
    """What check_open looks at, once: the newest manifest, then a listing (in this order, so
    that objects a live writer adds in between are present in the listing)."""
    before = list_local(location.path)
    if not before.manifests:
        return []  # nothing here yet: slatedb reports a missing database itself
    manifest = await read_latest_manifest(location, object_store, before, where)
    if manifest is None:
        return []
    listing = list_local(location.path)
    problems = replay_problems(manifest, listing) + sst_problems(manifest, listing)
    if not problems:
        admin = AdminBuilder(location.db_path, object_store).build()
        problems = await epoch_problems(admin, manifest, listing, strict=False)
        if not problems and manifest.id - 1 in listing.manifests:
            try:
                older = await admin.read_manifest(manifest.id - 1)
            except FOREIGN:
                older = None  # an old version that does not decode does not stop an open
            if older is not None:
                problems = l0_problems(older, manifest)
    if problems:
        return problems
    after = sorted(i for i in listing.wals if i > manifest.replay_after_wal_id)
    # The newest file with writes: the manifest's last_l0_seq may not be above its writes.
    newest = next((i for i in reversed(after) if listing.wals[i] > 0), None)
    if newest is not None:
        try:
            seq = await newest_seq(object_store, location, newest)
        except (asyncio.TimeoutError, *FOREIGN):  # type: ignore[misc]
            seq = None  # unreadable: slatedb's replay reports it, naming the file
        if seq is not None:
            problems = seq_problems(manifest, seq, wal_name(newest))
            if problems:
                return problems
    # An empty file before the newest is a writer's fence or a damaged file: the sequence
    # numbers around it tell (the newest file empty: see docs/reliability.md).
    middle_empty = [i for i in after[:-1] if listing.wals[i] == 0]
    if middle_empty:
        return await wal_sequence_problems(
            location, object_store, manifest, after, upto=middle_empty[-1] + 1
        )
    return []


async def check_open(location: Location, object_store: Any, where: str) -> None:
    """Refuse (StoreDataError naming the object) a local database whose WAL has a gap or an
    emptied file after the replay point, whose replay point is impossible, or whose manifest
    references SSTs missing or shorter than it says. A no-op for memory:// and s3:// (the
    binding cannot list objects there)."""
    if location.scheme != "file":
        return
    problems = await open_problems(location, object_store, where)
    if problems:
        # A live writer may have moved on between the manifest read and the listing (or be
        # half-way through opening): look again before calling the database damaged.
        await asyncio.sleep(RECHECK_DELAY)
        problems = await open_problems(location, object_store, where)
    if problems:
        _raise(problems, where)


async def diagnose(location: Location, object_store: Any, where: str) -> list[Problem]:
    """After slatedb failed to open a local database: which object is to blame (the newest
    manifest or compactions file does not decode, a manifest is missing, a WAL file after the
    replay point does not read)."""
    if location.scheme != "file":
        return []
    listing = list_local(location.path)
    if not listing.manifests:
        return []
    admin = AdminBuilder(location.db_path, object_store).build()
    try:
        manifest = await admin.read_manifest(None)
    except FOREIGN as exc:
        latest = manifest_name(max(listing.manifests))
        return [Problem(latest, f"the newest manifest does not decode [{_text(exc)}]")]
    if manifest is None:
        return []
    problems = await epoch_problems(admin, manifest, listing, strict=True)
    if problems:
        return problems
    after = sorted(i for i in listing.wals if i > manifest.replay_after_wal_id)
    return await wal_sequence_problems(location, object_store, manifest, after)


def _text(exc: BaseException) -> str:
    return one_line(str(getattr(exc, "message", None) or exc))[:300]


async def epoch_problems(
    admin: Any, manifest: Any, listing: Listing, *, strict: bool
) -> list[Problem]:
    """The newest compactions file against the newest manifest: a writer bumps the compactor
    epoch in both, so a compactions file of a later epoch means the newest manifest is gone.
    `strict`: report a compactions file that does not decode (readers never read it)."""
    if not listing.compactions:
        return []
    latest = compactions_name(max(listing.compactions))
    try:
        compactions = await admin.read_compactions(None)
    except FOREIGN as exc:
        if strict:
            return [Problem(latest, f"the newest compactions file does not decode [{_text(exc)}]")]
        return []
    if compactions is not None and compactions.compactor_epoch > manifest.compactor_epoch:
        return [
            Problem(
                manifest_name(manifest.id + 1),
                f"missing: {latest} is of compactor epoch {compactions.compactor_epoch}, but "
                f"the newest manifest present, {manifest_name(manifest.id)}, only of epoch "
                f"{manifest.compactor_epoch}: the newest manifest was deleted",
            )
        ]
    return []


async def opening_error(
    exc: BaseException, location: Location, object_store: Any, where: str
) -> StoreError:
    """The error for slatedb failing to open: translated, and, when that does not name the
    damaged object (or blames a writer that is not there), diagnosed (see `diagnose`)."""
    error = translate(exc, where)
    if isinstance(error, StoreDataError) and error.object_name:
        return error
    if not isinstance(error, (StoreDataError, FencedError)):
        return error
    try:
        problems = await diagnose(location, object_store, where)
    except Exception:  # the diagnosis is a best effort on top of slatedb's own error
        return error
    if not problems:
        return error
    first = problems[0]
    return StoreDataError(
        f"{where}: the database is damaged: {first} [{error}]", object_name=first.object_name
    )
