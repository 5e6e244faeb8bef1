"""Damage slatedb 0.17 does not notice, checked by opendata_kv before it opens a database.

slatedb replays the WAL files after the manifest's replay point until the first id that is
missing and silently stops there; it skips a WAL file emptied to zero bytes (an empty file is
also what a writer leaves to fence older writers); a replay point past the newest WAL file
skips them all; and an SST shorter than the manifest says, or a file it may not read, makes
every read retry forever. `check_open` finds these before the writer or a reader opens: on a
local directory with one listing and one manifest read (reading WAL files only around an
empty one), on s3:// by reading the WAL to its tail and probing each SST's last block
(remote_checks.py). `verify` (verify.py) runs the same checks and more over every object.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from opendata_kv.checks.remote_checks import GAP_WAIT, sst_extent_problems, wal_tail
from opendata_kv.errors import (
    FencedError,
    StoreDataError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
)
from opendata_kv.native.errors import (
    FOREIGN,
    VERIFY_ADVICE,
    object_named,
    one_line,
    translate,
)
from opendata_kv.native.slatedb import AdminBuilder, SlateDbWalReader
from opendata_kv.objstore.deadline import budget, left
from opendata_kv.objstore.location import Location
from opendata_kv.objstore.objects import (
    COMPACTIONS_DIR,
    MANIFEST_DIR,
    MAX_ID,
    SST_DIR,
    WAL_DIR,
    Listing,
    compactions_name,
    id_gaps,
    list_local,
    manifest_name,
    manifest_ssts,
    sst_extent,
    sst_name,
    wal_name,
)
from opendata_kv.objstore.remote_listing import list_remote, lister
from opendata_kv.objstore.s3http import S3Client
from opendata_kv.objstore.sidecar import CheckpointCopy

_log = logging.getLogger(__name__)

#: Seconds one WAL file read may take before it counts as missing (the binding's live WAL
#: iterator waits for a file that does not exist instead of failing).
WAL_READ_TIMEOUT = 10.0
#: At most this many runs of missing WAL ids are reported (each names its first file).
MAX_GAPS = 10
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
    below next_wal_sst_id, and every id from the replay point to the newest file present
    (one problem per run of missing ids, so a stray far-off id costs no memory)."""
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
    problems = []
    for first, last in id_gaps(after, replay + 1, after[-1])[:MAX_GAPS]:
        count = last - first + 1
        span = "" if count == 1 else f" (and the {count - 1} ids after it, to {wal_name(last)})"
        problems.append(
            Problem(
                wal_name(first),
                f"missing{span}: the WAL files after the replay point {replay} of "
                f"{name} must run without a gap to the newest, {wal_name(after[-1])}; the "
                "writes in it and in every later WAL file would be lost on replay",
            )
        )
    return problems


def l0_problems(older: Any, newer: Any) -> list[Problem]:
    """Two consecutive manifest versions: an SST keeps its facts (key range, offsets) in every
    version; last_l0_seq moves only with a new L0 SST; an L0 SST leaves only by compaction,
    which takes the oldest views (L0 lists the newest first) up to the one it records in
    last_compacted_l0_sst_view_id. Otherwise reads would skip records."""
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
    old_trees, new_trees = _l0_trees(older), _l0_trees(newer)
    old_ids = {view.id for l0, _ in old_trees.values() for view in l0}
    added = {view.id for l0, _ in new_trees.values() for view in l0} - old_ids
    if newer.last_l0_seq != older.last_l0_seq and not added:
        problems.append(
            Problem(
                manifest_name(newer.id),
                f"last_l0_seq moved from {older.last_l0_seq} ({manifest_name(older.id)}) to "
                f"{newer.last_l0_seq} without a new L0 SST: the manifest is damaged",
            )
        )
    for tree, (l0, _) in old_trees.items():
        kept_l0, compacted = new_trees.get(tree, ((), None))
        kept = {view.id for view in kept_l0}
        # L0 is listed newest first; a compaction takes the oldest views up to the one it names
        order = [view.id for view in l0]
        cut = order.index(compacted) if compacted in order else len(order)
        for position, view in enumerate(l0):
            if view.id not in kept and position < cut:
                problems.append(
                    Problem(
                        manifest_name(newer.id),
                        f"L0 SST {view.sst.id.value} of {manifest_name(older.id)} is gone from "
                        "it, but no compaction took it: the manifest is damaged",
                    )
                )
    return problems


def _l0_trees(manifest: Any) -> dict[bytes | None, tuple[Any, Any]]:
    """(L0 views, last compacted L0 view id) of the root tree (None) and of each segment (by
    prefix): a database written with a segment extractor keeps its L0 per segment."""
    trees: dict[bytes | None, tuple[Any, Any]] = {
        None: (manifest.l0, manifest.last_compacted_l0_sst_view_id)
    }
    for segment in getattr(manifest, "segments", None) or ():
        trees[bytes(segment.prefix)] = (segment.l0, segment.last_compacted_l0_sst_view_id)
    return trees


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
    wait: float = WAL_READ_TIMEOUT,
) -> list[Problem]:
    """Read the WAL files `wal_ids` (contiguous, after the replay point, in order: a `range`
    is read lazily) and check that each is there and that sequence numbers continue from the
    manifest's last_l0_seq without a jump.

    A writer's fence file is empty and the numbers go on unbroken across it; a data file
    emptied by damage leaves a jump, reported against the empty file. `upto`: stop after
    this id (the open check reads only as far as the last empty file needs). The binding's
    iterator waits, polling, for a file that is not there: one not served within `wait`
    seconds is reported missing.
    """
    if not wal_ids:
        return []
    reader = SlateDbWalReader(location.db_path, object_store)
    where = f"read WAL of {location}"
    iterator = await asyncio.wait_for(reader.iterator(wal_ids[0]), budget(WAL_READ_TIMEOUT))
    problems: list[Problem] = []
    previous = manifest.last_l0_seq
    empties: list[int] = []
    first_named = last_named = wal_name(wal_ids[0] - 1) if wal_ids[0] > 1 else "the SSTs"
    for expected in wal_ids:
        if upto is not None and expected > upto:
            break
        try:
            limit = budget(wait) or wait
            rows = await asyncio.wait_for(iterator.next(), limit)
        except asyncio.TimeoutError:
            if not await _answers(reader, expected):
                raise  # an outage, not a missing file: the caller reports no answer
            newest = wal_name(wal_ids[-1])
            problems.append(
                Problem(
                    wal_name(expected),
                    f"missing: not served within {limit:g} s, though the WAL runs to {newest}; "
                    "the writes in it and in every later WAL file would be lost on replay",
                )
            )
            break
        except FOREIGN as exc:
            error = translate(exc, where)
            problems.append(Problem(object_named(str(error)) or wal_name(expected), str(error)))
            break
        if rows is None:
            break
        got = rows.last_consumed_wal_file_id
        if got != expected:
            problems.append(
                Problem(wal_name(expected), f"missing: the WAL reader went on at {wal_name(got)}")
            )
            break
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
    iterator = await asyncio.wait_for(reader.iterator(wal_id), budget(WAL_READ_TIMEOUT))
    rows = await asyncio.wait_for(iterator.next(), budget(WAL_READ_TIMEOUT))
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


async def _newest_id(lister: Any) -> int | None:
    """The newest id present among manifests or compactions files without a listing (s3://):
    a binary search on whether any is there from id k on (`lister(k, None)` returns some, or
    fails decoding one); 64 steps over the id space."""
    low, high = 0, MAX_ID  # one >= low exists (low 0: none known); none above high
    while low < high:
        middle = (low + high + 1) // 2
        try:
            found = bool(await asyncio.wait_for(lister(middle, None), budget(WAL_READ_TIMEOUT)))
        except FOREIGN:
            found = True  # one from `middle` on is there, and does not decode
        except asyncio.TimeoutError:
            return None
        if found:
            low = middle
        else:
            high = middle - 1
    return low or None


async def newest_manifest_id(admin: Any) -> int | None:
    """The id of the newest manifest present (see _newest_id)."""
    return await _newest_id(admin.list_manifests)


async def newest_compactions_name(admin: Any) -> str:
    """The name of the newest compactions file present (see _newest_id)."""
    newest = await _newest_id(admin.list_compactions)
    return compactions_name(newest) if newest is not None else f"{COMPACTIONS_DIR}/ (newest)"


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
        if listing.manifests:
            latest: str | None = manifest_name(max(listing.manifests))
        else:
            newest = await newest_manifest_id(admin)
            latest = manifest_name(newest) if newest is not None else None
        raise StoreDataError(
            f"{where}: the newest manifest {latest} does not decode [{_text(exc)}]; "
            f"{VERIFY_ADVICE}",
            object_name=latest,
        ) from exc


def _refuse_access(listing: Listing, manifest: Any | None, where: str) -> None:
    """StorePermissionError naming the first object an open must read but may not: the
    newest manifest, a WAL file after the replay point, an SST the manifest references
    (slatedb retries a refused read forever)."""
    if not listing.unreadable:
        return
    needed: set[str] = set()
    if listing.manifests:
        needed.add(manifest_name(max(listing.manifests)))
    if manifest is not None:
        needed.update(wal_name(i) for i in listing.wals if i > manifest.replay_after_wal_id)
        needed.update(sst_name(ulid) for ulid, _ in manifest_ssts(manifest))
    for name in listing.unreadable:
        if name in needed:
            raise StorePermissionError(
                f"{where}: permission denied reading {name}; retrying will not help: give "
                "this process read access to it (chmod, owner, or the bucket policy)",
                value=name,
            )


def _refuse_read_only_dirs(location: Location, where: str) -> None:
    """StorePermissionError naming the directory of a local database a writer may not write
    to (slatedb retries the refused writes forever)."""
    for sub in ("", MANIFEST_DIR, WAL_DIR, SST_DIR, COMPACTIONS_DIR):
        path = os.path.join(location.path, sub) if sub else location.path
        if os.path.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
            raise StorePermissionError(
                f"{where}: permission denied writing to the directory {path}; a writer "
                "needs write access to the database directory and its subdirectories "
                "(open a reader to read only)",
                value=path,
            )


def _listing(location: Location, where: str) -> Listing:
    """list_local, with a directory the process may not read as StorePermissionError."""
    try:
        return list_local(location.path)
    except PermissionError as exc:
        path = exc.filename or location.path
        raise StorePermissionError(
            f"{where}: permission denied listing the directory {path}; give this process "
            "read access to the database directory and its subdirectories",
            value=str(path),
        ) from exc


def _warn_strays(listing: Listing, where: str) -> None:
    if listing.strays:
        shown = ", ".join(repr(name) for name in listing.strays[:5])
        more = f" and {len(listing.strays) - 5} more" if len(listing.strays) > 5 else ""
        _log.warning(
            "%s: ignoring objects slatedb does not write: %s%s (verify lists them)",
            where,
            shown,
            more,
        )


async def open_problems(
    location: Location,
    object_store: Any,
    where: str,
    *,
    writer: bool = False,
    client: S3Client | None = None,
    wal: bool = True,
) -> tuple[list[Problem], int | None]:
    """What check_open looks at, once, and the id of the manifest it judged: one listing (a
    directory, or with `client` the s3:// prefix in one round trip), then the newest manifest
    listed, the version before it and the newest compactions file read together, and (with
    `wal`) the WAL files after the replay point. Objects the process may not read raise
    StorePermissionError."""
    listing = await _list(location, where, client)
    if not listing.manifests:
        return [], None  # nothing here yet: slatedb reports a missing database itself
    if writer and client is None:
        _refuse_read_only_dirs(location, where)
    _refuse_access(listing, None, where)
    admin = AdminBuilder(location.db_path, object_store).build()
    newest_id = max(listing.manifests)
    try:
        manifest, older, compactions = await asyncio.gather(
            admin.read_manifest(newest_id),
            _older_manifest(admin, newest_id, listing),
            _newest_compactions(admin, listing),
        )
    except FOREIGN as exc:
        error = translate(exc, where)
        if not isinstance(error, StoreDataError):
            raise error from exc
        raise StoreDataError(
            f"{where}: the newest manifest {manifest_name(newest_id)} does not decode "
            f"[{_text(exc)}]; {VERIFY_ADVICE}",
            object_name=manifest_name(newest_id),
        ) from exc
    if manifest is None:
        return [], None  # collected since it was listed: a newer one judges (check_open)
    _refuse_access(listing, manifest, where)
    problems = replay_problems(manifest, listing) + sst_problems(manifest, listing)
    if not problems:
        problems = _epoch_problems(compactions, manifest)
    if not problems and older is not None:
        problems = l0_problems(older, manifest)
    if problems or not wal:
        return problems, manifest.id
    return await _wal_problems(location, object_store, manifest, listing), manifest.id


async def _list(location: Location, where: str, client: S3Client | None) -> Listing:
    if client is None:
        return _listing(location, where)
    return await list_remote(location, client)


async def _older_manifest(admin: Any, newest_id: int, listing: Listing) -> Any:
    """The manifest version before the newest, when listed (None: collected, or it does not
    decode: an old version does not stop an open)."""
    if newest_id - 1 not in listing.manifests:
        return None
    try:
        return await admin.read_manifest(newest_id - 1)
    except FOREIGN:
        return None


async def _newest_compactions(admin: Any, listing: Listing) -> Any:
    """The newest compactions file listed (None: none, or it does not decode: readers never
    read it, and verify reports it)."""
    if not listing.compactions:
        return None
    try:
        return await admin.read_compactions(max(listing.compactions))
    except FOREIGN:
        return None


async def _wal_problems(
    location: Location, object_store: Any, manifest: Any, listing: Listing
) -> list[Problem]:
    """The WAL files after the replay point: the newest with writes must not be below the
    manifest's last_l0_seq, and an empty file before the newest must be a writer's fence."""
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


def _epoch_problems(compactions: Any, manifest: Any) -> list[Problem]:
    """A compactions file of a later compactor epoch than the newest manifest: a writer
    bumps the epoch in both, so the newest manifest is gone."""
    if compactions is None or compactions.compactor_epoch <= manifest.compactor_epoch:
        return []
    return [
        Problem(
            manifest_name(manifest.id + 1),
            f"missing: {compactions_name(compactions.id)} is of compactor epoch "
            f"{compactions.compactor_epoch}, but the newest manifest present, "
            f"{manifest_name(manifest.id)}, only of epoch {manifest.compactor_epoch}: the "
            "newest manifest was deleted",
        )
    ]


async def _manifest_history_problems(
    location: Location, object_store: Any, manifest: Any, listing: Listing | None
) -> list[Problem]:
    """The compactions epoch against the newest manifest, and the newest manifest against
    the version before it (l0_problems); `listing` None: a store that cannot be listed."""
    admin = AdminBuilder(location.db_path, object_store).build()
    problems = await epoch_problems(admin, manifest, listing, strict=False)
    if problems or (listing is not None and manifest.id - 1 not in listing.manifests):
        return problems
    try:
        older = await admin.read_manifest(manifest.id - 1)
    except FOREIGN:
        older = None  # an old version that does not decode does not stop an open
    return l0_problems(older, manifest) if older is not None else []


async def remote_open_problems(
    location: Location, object_store: Any, where: str, wal: bool = True
) -> tuple[list[Problem], int | None]:
    """What check_open looks at, once, on s3:// (remote_checks.py says how without a
    listing), and the id of the newest manifest it checked."""
    # The WAL reader fails within object_store's own retries where Admin would retry without
    # end: an endpoint that does not answer is left to slatedb's open to report (with the
    # caller's retry limit), not turned into a wait here.
    try:
        await asyncio.wait_for(
            SlateDbWalReader(location.db_path, object_store).last_wal_file_id(0),
            budget(WAL_READ_TIMEOUT),
        )
    except (asyncio.TimeoutError, *FOREIGN):  # type: ignore[misc]
        return [], None
    manifest = await read_latest_manifest(location, object_store, Listing(), where)
    if manifest is None:
        return [], None
    problems = replay_problems(manifest, Listing())
    if not problems:
        problems = await _manifest_history_problems(location, object_store, manifest, None)
    if not problems:
        problems = [
            Problem(name, message)
            for name, message in await sst_extent_problems(location, object_store, manifest)
        ]
    if problems or not wal:
        return problems, manifest.id
    replay = manifest.replay_after_wal_id
    tail = await wal_tail(location, object_store, replay)
    if tail is None or tail <= replay:
        return [], manifest.id
    wal_ids = range(replay + 1, tail + 1)
    return (
        await wal_sequence_problems(location, object_store, manifest, wal_ids, wait=GAP_WAIT),
        manifest.id,
    )


#: How many times check_open looks again at a database that looked damaged while its newest
#: manifest moved on (a live writer flushing and collecting garbage between the listing and
#: the reads); a view judged twice against the same manifest is consistent.
MAX_LOOKS = 20


async def _judge(
    location: Location,
    object_store: Any,
    where: str,
    writer: bool,
    client: S3Client | None,
    wal: bool = True,
) -> tuple[list[Problem], int | None]:
    """Problems that hold in one consistent view, and the id of the manifest judged (None:
    no manifest): a look that finds damage is repeated while the newest manifest changes
    between looks (a gap the writer's garbage collection left behind a newer replay point is
    gone from the next look), and once more after RECHECK_DELAY (a writer half-way through
    opening) before it counts."""

    async def look() -> tuple[list[Problem], int | None]:
        if client is None and location.scheme == "s3":
            return await remote_open_problems(location, object_store, where, wal)
        return await open_problems(
            location, object_store, where, writer=writer, client=client, wal=wal
        )

    problems, checked = await look()
    waited = False
    for _ in range(MAX_LOOKS):
        if not problems:
            break
        again, newer = await look()
        if newer == checked and again:
            if waited:
                return again, newer
            waited = True
            await asyncio.sleep(RECHECK_DELAY)
        problems, checked = again, newer
    return problems, checked


#: seconds before the open checks ask a store that gave no answer again (doubled each time,
#: up to RETRY_CAP)
RETRY_FIRST, RETRY_CAP = 0.1, 2.0


async def _once_answered(
    judge: Callable[[], Awaitable[tuple[list[Problem], int | None]]], retries: int | None
) -> tuple[list[Problem], int | None]:
    """`judge()` once the store answers it: after StoreUnavailableError it is run again, at
    most `retries` times (None: without end) and while the caller's deadline allows, then the
    error is raised. Skipping the checks instead let a writer open a damaged database (an
    S3 500 on the listing, found under load in CI) and read it as complete."""
    attempt = 0
    while True:
        try:
            return await judge()
        except StoreUnavailableError:
            remaining = left()
            if (retries is not None and attempt >= retries) or remaining == 0:
                raise
            pause = min(RETRY_FIRST * 2**attempt, RETRY_CAP)
            await asyncio.sleep(pause if remaining is None else min(pause, remaining))
            attempt += 1


async def check_open(
    location: Location,
    object_store: Any,
    where: str,
    *,
    writer: bool = False,
    options: Mapping[str, str] | None = None,
    wal: bool = True,
    retries: int | None = None,
) -> bool | None:
    """Refuse (StoreDataError naming the object) a database whose WAL has a gap or an
    emptied file after the replay point, whose replay point is impossible, or whose manifest
    references SSTs missing or shorter than it says; on a local directory also objects the
    process may not read, and for a `writer` directories it may not write
    (StorePermissionError). A no-op for memory:// (every open starts empty). On s3:// the
    prefix is listed with `options`' credentials (remote_listing.py); without static
    credentials it cannot be, and the objects are probed instead (remote_checks.py).
    `wal=False` leaves the WAL files out (the manifest, SST and listing checks stay): for a
    reader at a checkpoint, which never reads the database's WAL (see open_reader_db).
    On s3:// a store that gives no answer is asked again (_once_answered), at most `retries`
    times (the caller's object_store_max_retries; None: until it answers) and within the
    caller's deadline: opening unchecked could read a damaged database as complete.
    Returns whether a database (a manifest) is there, None when that is not known."""
    if location.scheme not in ("file", "s3"):
        return None
    client = lister(location, options)
    if location.scheme == "s3":
        problems, checked = await _once_answered(
            lambda: _judge(location, object_store, where, writer, client, wal), retries
        )
        if problems:
            _raise(problems, where)
        return None if client is None else checked is not None
    problems, checked = await _judge(location, object_store, where, writer, None, wal)
    if problems:
        _raise(problems, where)
    _warn_strays(_listing(location, where), where)
    return checked is not None


async def check_checkpoint_copy(
    location: Location, copy: CheckpointCopy, options: Mapping[str, str] | None, where: str
) -> None:
    """Refuse (StoreDataError naming the file) a checkpoint copy missing a WAL file it was
    made with: its reader replays them all and slatedb would skip a missing one silently,
    returning the checkpoint without those writes. One listing of the copy; on s3:// only
    where it can be listed (static credentials), as check_open."""
    client = lister(location, options)
    if location.scheme == "s3" and client is None:
        return
    path = copy.db_path if location.scheme == "s3" else os.path.join(location.path, copy.db_path)
    there = replace(location, url=f"{location.url} (checkpoint copy {copy.db_path})", path=path)
    present = (await _list(there, where, client)).wals
    wanted = copy.wal_ids
    named = copy.db_path.removeprefix(f"{location.path}/") if client else copy.db_path
    gaps = id_gaps(sorted(present), wanted.start, wanted.stop - 1) if wanted else []
    problems = []
    for first, last in gaps[:MAX_GAPS]:
        span = "" if first == last else f" (and the ids after it, to {wal_name(last)})"
        problems.append(
            Problem(
                f"{named}/{wal_name(first)}",  # relative to the database, as elsewhere
                f"missing{span}: the checkpoint's copy was made with WAL files {wanted.start} "
                f"to {wanted.stop - 1}, which its reader replays; the writes in it would be "
                "lost",
            )
        )
    if problems:
        _raise(problems, where)


#: Seconds a store that let a WAL read time out has to answer a listing, before the
#: timeout counts as an outage rather than a missing file (a live store answers in ms).
CONFIRM_WAIT = 1.0


async def _answers(reader: Any, wal_id: int) -> bool:
    """True when the store answers a WAL listing (with anything) within CONFIRM_WAIT."""
    try:
        await asyncio.wait_for(reader.last_wal_file_id(wal_id), budget(CONFIRM_WAIT))
    except asyncio.TimeoutError:
        return False
    except FOREIGN:
        return True
    return True


async def diagnose(location: Location, object_store: Any, where: str) -> list[Problem]:
    """After slatedb failed to open a database (local or s3://): which object is to blame
    (the newest manifest or compactions file does not decode, a manifest is missing, a WAL
    file after the replay point does not read)."""
    if location.scheme not in ("file", "s3"):
        return []
    listing = _listing(location, where) if location.scheme == "file" else None
    if listing is not None and not listing.manifests:
        return []
    admin = AdminBuilder(location.db_path, object_store).build()
    try:
        manifest = await admin.read_manifest(None)
    except FOREIGN as exc:
        if listing is not None:
            newest: int | None = max(listing.manifests)
        else:
            newest = await newest_manifest_id(admin)
        latest = manifest_name(newest) if newest is not None else f"{MANIFEST_DIR}/ (newest)"
        return [Problem(latest, f"the newest manifest does not decode [{_text(exc)}]")]
    if manifest is None:
        return []
    problems = await epoch_problems(admin, manifest, listing, strict=True)
    if problems:
        return problems
    replay = manifest.replay_after_wal_id
    if listing is not None:
        after: Sequence[int] = sorted(i for i in listing.wals if i > replay)
        return await wal_sequence_problems(location, object_store, manifest, after)
    tail = await wal_tail(location, object_store, replay)
    if tail is None or tail <= replay:
        return []
    after = range(replay + 1, tail + 1)
    return await wal_sequence_problems(location, object_store, manifest, after, wait=GAP_WAIT)


def _text(exc: BaseException) -> str:
    return one_line(str(getattr(exc, "message", None) or exc))[:300]


async def epoch_problems(
    admin: Any, manifest: Any, listing: Listing | None, *, strict: bool
) -> list[Problem]:
    """The newest compactions file against the newest manifest: a writer bumps the compactor
    epoch in both, so a compactions file of a later epoch means the newest manifest is gone.
    `strict`: report a compactions file that does not decode (readers never read it).
    `listing` None: a store that cannot be listed (the file is read to find out)."""
    if listing is not None and not listing.compactions:
        return []
    newest = f"{COMPACTIONS_DIR}/ (newest)"
    if listing is not None:
        newest = compactions_name(max(listing.compactions))
    try:
        compactions = await admin.read_compactions(None)
    except FOREIGN as exc:
        if not strict:
            return []
        if listing is None:
            newest = await newest_compactions_name(admin)
        return [Problem(newest, f"the newest compactions file does not decode [{_text(exc)}]")]
    latest = compactions_name(compactions.id) if compactions is not None else newest
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
