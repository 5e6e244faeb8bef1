"""verify: read every object of a database and report each damaged or inconsistent one.

    report = await verify("./data")      # or verify_sync(url) without an event loop
    for problem in report.problems:      # Problem(object_name, message)
        print(problem)

Read-only: slatedb's Admin decodes the manifests and compactions files, its WAL reader reads
the WAL files after the replay point, a reader that writes nothing reads the filter, index
and stats block of every SST, and a FOLLOW_LATEST DbReader scans every row so that each data
block of every live SST passes its checksum. On a local directory the objects are listed too
(missing ids, empty files, sizes against the manifest, stray names, unreadable files), and so
is an s3:// prefix where static credentials allow (objstore/remote_listing.py). Without them
the WAL is read to its tail (a file it does not serve is missing) and each SST's last block is
probed for its size. What cannot be
detected at all: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opendata_kv.checks.integrity import (
    WAL_READ_TIMEOUT,
    Problem,
    epoch_problems,
    l0_problems,
    newest_compactions_name,
    newest_manifest_id,
    replay_problems,
    sst_problems,
    wal_sequence_problems,
)
from opendata_kv.checks.remote_checks import (
    GAP_WAIT,
    probe_reader,
    shut_down,
    sst_extent_problems,
)
from opendata_kv.errors import StorePermissionError, StoreUnavailableError
from opendata_kv.native import driver
from opendata_kv.native.errors import FOREIGN, object_named, one_line, translate
from opendata_kv.native.opendata_compat import build_compatible
from opendata_kv.native.slatedb import (
    AdminBuilder,
    CacheTarget,
    DbCache,
    DbReaderBuilder,
    KeyRange,
    MokaCacheOptions,
    ReaderMode,
    ReaderOptions,
    SlateDbWalReader,
    SsTableId,
)
from opendata_kv.objstore.deadline import READER_TIMEOUT, budget, each_wait
from opendata_kv.objstore.location import Location, describe, parse_location
from opendata_kv.objstore.objects import (
    Listing,
    compactions_name,
    id_gaps,
    list_local,
    manifest_name,
    manifest_ssts,
    sst_name,
    wal_name,
)
from opendata_kv.objstore.remote_listing import list_remote, lister

#: what verify says of a name in the database's directories that slatedb does not write
STRAY = "not an object slatedb writes here (slatedb ignores it)"

#: Rows per next_batch of the checksum scan, and the seconds one batch may take.
SCAN_BATCH = 1024
SCAN_TIMEOUT = 120.0
#: bytes of block cache the scan keeps (it reads each block once)
SCAN_CACHE = 32 << 20

_COUNTERS = (
    "writer_epoch",
    "compactor_epoch",
    "next_wal_sst_id",
    "replay_after_wal_id",
    "last_l0_seq",
)


#: progress(stage, count): the stage verify has reached, and how many of its items so far
Progress = Callable[[str, int], None]


@dataclass
class VerifyReport:
    """What verify found: `problems` (empty when the database is sound), how many objects of
    each kind it checked, and `notes` on what it could not check."""

    url: str
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, problems: list[Problem]) -> None:
        """Add problems, once per (object, message)."""
        seen = {(p.object_name, p.message) for p in self.problems}
        for problem in problems:
            if (problem.object_name, problem.message) not in seen:
                self.problems.append(problem)
                seen.add((problem.object_name, problem.message))

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "ok": self.ok,
            "problems": [{"object": p.object_name, "problem": p.message} for p in self.problems],
            "checked": dict(self.checked),
            "notes": list(self.notes),
        }


def _text(exc: BaseException) -> str:
    return one_line(str(getattr(exc, "message", None) or exc))[:400]


async def _manifests(admin: Any, listing: Listing | None, report: VerifyReport) -> dict[int, Any]:
    """Every manifest present, decoded (id -> manifest); problems for those that do not."""
    decoded: dict[int, Any] = {}
    if listing is None:
        try:
            for manifest in await admin.list_manifests(None, None):
                decoded[manifest.id] = manifest
        except FOREIGN as exc:
            # one does not decode: find the newest id, name it, and read those before it
            newest = await newest_manifest_id(admin)
            name = manifest_name(newest) if newest is not None else "manifest/ (newest)"
            report.add([Problem(name, f"does not decode: {_text(exc)}")])
            if newest is not None:
                with contextlib.suppress(*FOREIGN):
                    for manifest in await admin.list_manifests(None, newest):
                        decoded[manifest.id] = manifest
        return decoded
    for manifest_id, size in sorted(listing.manifests.items()):
        name = manifest_name(manifest_id)
        if size == 0:
            report.add([Problem(name, "empty (0 bytes)")])
            continue
        try:
            manifest = await admin.read_manifest(manifest_id)
        except FOREIGN as exc:
            report.add([Problem(name, f"does not decode: {_text(exc)}")])
            continue
        if manifest is not None:
            decoded[manifest_id] = manifest
    return decoded


def _history_problems(decoded: dict[int, Any], listing: Listing | None) -> list[Problem]:
    """Manifest versions in order: counters never go back, and consecutive versions keep
    their L0 SSTs (ids missing in between are garbage collection's: _collected_note)."""
    problems: list[Problem] = []
    ids = sorted(decoded)
    for before, after in itertools.pairwise(ids):
        old, new = decoded[before], decoded[after]
        if after == before + 1:
            problems.extend(l0_problems(old, new))
        for counter in _COUNTERS:
            if getattr(new, counter) < getattr(old, counter):
                problems.append(
                    Problem(
                        manifest_name(after),
                        f"{counter} goes back from {getattr(old, counter)} in "
                        f"{manifest_name(before)} to {getattr(new, counter)}: one of them is "
                        "damaged",
                    )
                )
    return problems


def _collected_note(listing: Listing | None) -> str | None:
    """The manifest versions missing between the oldest and newest present: garbage
    collection deletes old versions in any order (it keeps the newest, those checkpoints
    pin, and any not yet old enough), so a kept older version before a collected range is
    no damage; a pinned one missing is (_checkpoint_problems), and so is a missing newest
    one (epoch_problems)."""
    if listing is None or not listing.manifests:
        return None
    present = sorted(listing.manifests)
    gaps = id_gaps(present, present[0], present[-1])
    if not gaps:
        return None
    count = sum(last - first + 1 for first, last in gaps)
    runs = ", ".join(
        manifest_name(first) if first == last else f"{manifest_name(first)} to {last}"
        for first, last in gaps[:3]
    )
    more = f" and {len(gaps) - 3} more runs" if len(gaps) > 3 else ""
    return (
        f"{count} manifest versions between the oldest kept and the newest were collected "
        f"by garbage collection ({runs}{more}); only the newest, "
        f"{manifest_name(present[-1])}, and those checkpoints pin are read"
    )


def _checkpoint_problems(
    latest: Any, decoded: dict[int, Any], listing: Listing | None
) -> list[Problem]:
    """Every checkpoint of the newest manifest pins a manifest that must still be there,
    and the SSTs it references."""
    problems: list[Problem] = []
    for checkpoint in latest.checkpoints:
        pinned = decoded.get(checkpoint.manifest_id)
        if pinned is None:
            if listing is not None and checkpoint.manifest_id not in listing.manifests:
                problems.append(
                    Problem(
                        manifest_name(checkpoint.manifest_id),
                        f"missing, but checkpoint {checkpoint.id} of "
                        f"{manifest_name(latest.id)} pins it",
                    )
                )
            continue
        if listing is not None and pinned is not latest:
            problems.extend(sst_problems(pinned, listing))
    return problems


async def _compactions(
    admin: Any, latest: Any, listing: Listing | None, report: VerifyReport
) -> None:
    if listing is None:
        try:
            await admin.read_compactions(None)
        except FOREIGN as exc:
            name = await newest_compactions_name(admin)
            report.add([Problem(name, f"does not decode: {_text(exc)}")])
            return
        if latest is not None:
            report.add(await epoch_problems(admin, latest, None, strict=False))
        return
    for compactions_id, size in sorted(listing.compactions.items()):
        name = compactions_name(compactions_id)
        if size == 0:
            report.add([Problem(name, "empty (0 bytes)")])
            continue
        try:
            await admin.read_compactions(compactions_id)
        except FOREIGN as exc:
            report.add([Problem(name, f"does not decode: {_text(exc)}")])
    report.checked["compactions files"] = len(listing.compactions)
    if latest is not None:
        report.add(await epoch_problems(admin, latest, listing, strict=False))


async def _wal(
    location: Location,
    object_store: Any,
    latest: Any,
    listing: Listing | None,
    report: VerifyReport,
) -> None:
    """The WAL files recovery needs: no gap, each readable, sequence numbers unbroken."""
    replay = latest.replay_after_wal_id
    if listing is not None:
        problems = replay_problems(latest, listing)
        report.add(problems)
        after: Sequence[int] = sorted(i for i in listing.wals if i > replay)
        if problems:
            return  # reading on would wait at the gap
        if after and listing.wals[after[-1]] == 0:
            report.notes.append(_empty_newest_note(latest, after[-1]))
    else:
        if replay >= latest.next_wal_sst_id:
            report.add(replay_problems(latest, Listing()))
            return
        reader = SlateDbWalReader(location.db_path, object_store)
        try:
            tail = await asyncio.wait_for(reader.last_wal_file_id(replay), budget(WAL_READ_TIMEOUT))
        except asyncio.TimeoutError:
            raise _no_answer(location, "reading the newest WAL file id") from None
        except FOREIGN as exc:
            report.notes.append(f"the newest WAL file id could not be read: {_text(exc)}")
            return
        after = range(replay + 1, tail + 1)
    report.checked["WAL files"] = len(after)
    try:
        problems = await wal_sequence_problems(location, object_store, latest, after, wait=GAP_WAIT)
    except asyncio.TimeoutError:  # the first file's reader did not open: an outage
        raise _no_answer(location, "reading the WAL") from None
    report.add(problems)


def _empty_newest_note(latest: Any, newest: int) -> str:
    """What an empty newest WAL file after the replay point is. A writer's open writes an
    empty file to fence older writers and records it in the manifest (next_wal_sst_id is
    the id after it); one that wrote nothing since, and closed cleanly, leaves it newest. A
    file of writes emptied by damage is not recorded so, unless replay already passed it."""
    name = wal_name(newest)
    if newest == latest.next_wal_sst_id - 1:
        return (
            f"the newest WAL file {name} is empty: the fence the last writer left when it "
            f"opened ({manifest_name(latest.id)} records it: next_wal_sst_id "
            f"{latest.next_wal_sst_id}), with no writes after it, as a clean close leaves it"
        )
    return (
        f"the newest WAL file {name} is empty: a writer's fence, or a file emptied by "
        "damage; the two cannot be told apart (docs/reliability.md)"
    )


#: the blocks of an SST besides its data blocks (the scan reads those), by name
_BLOCKS = (
    ("filter", CacheTarget.FILTERS()),
    ("index", CacheTarget.INDEX()),
    ("stats", CacheTarget.STATS()),
)


async def _blocks(location: Location, object_store: Any, latest: Any, report: VerifyReport) -> None:
    """The filter, index and stats blocks of every SST of the newest manifest, each read
    (and checksummed) on its own: a scan reads no filter, and a get reads only the filters of
    the SSTs on its path, so a damaged filter would otherwise show only as failing gets."""
    ssts = list(manifest_ssts(latest))
    if not ssts:
        return
    try:
        reader = await probe_reader(location, object_store)
    except asyncio.TimeoutError:
        raise _no_answer(location, "opening a reader of the SST blocks") from None
    except FOREIGN as exc:
        report.notes.append(f"the SST blocks could not be read: {_text(exc)}")
        return
    checked = 0
    try:
        for ulid, handle in ssts:
            for block, target in _BLOCKS:
                if block == "filter" and not handle.info.filter_len:
                    continue
                try:
                    await asyncio.wait_for(
                        reader.warm_sst(SsTableId(value=ulid), [target]), budget(SCAN_TIMEOUT)
                    )
                    checked += 1
                except asyncio.TimeoutError:
                    raise _no_answer(
                        location, f"reading the {block} block of {sst_name(ulid)}"
                    ) from None
                except FOREIGN as exc:
                    report.add(
                        [Problem(sst_name(ulid), f"its {block} block is unreadable: {_text(exc)}")]
                    )
    finally:
        report.checked["SST filter, index and stats blocks"] = checked
        await shut_down(reader)


async def _scan(
    location: Location,
    object_store: Any,
    report: VerifyReport,
    retries: int = 0,
    progress: Progress | None = None,
) -> None:
    """Every row of the newest state through a reader that writes nothing: each block of each
    live SST is read, so a block that fails its checksum is reported by name."""

    def make_builder() -> Any:
        builder = DbReaderBuilder(location.db_path, object_store)
        builder.with_reader_mode(ReaderMode.FOLLOW_LATEST())
        # every block is read once: slatedb's default cache (512 MiB) would keep them all
        builder.with_db_cache(
            DbCache.new_moka_cache(
                MokaCacheOptions(max_capacity=SCAN_CACHE, time_to_live=None, time_to_idle=None)
            ),
            0,
        )
        builder.with_options(
            ReaderOptions(
                manifest_poll_interval_ms=3_600_000,
                checkpoint_lifetime_ms=3_600_000,
                max_memtable_bytes=64 << 20,
                skip_wal_replay=True,
                object_store_max_retries=retries,
            )
        )
        return builder

    where = f"verify scan of {location}"
    rows = 0
    reader = None
    try:
        # a database OpenData wrote needs its segment extractor and a merge operator
        reader = await build_compatible(
            make_builder, lambda b: asyncio.wait_for(b, budget(SCAN_TIMEOUT))
        )
        everything = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        iterator = await asyncio.wait_for(reader.scan(everything), budget(SCAN_TIMEOUT))
        while True:
            batch = await asyncio.wait_for(iterator.next_batch(SCAN_BATCH), budget(SCAN_TIMEOUT))
            if not batch:
                break
            rows += len(batch)
            if progress is not None:
                progress("rows read from SSTs", rows)
    except asyncio.TimeoutError:
        raise _no_answer(location, f"reading the SSTs (after {rows} rows)") from None
    except FOREIGN as exc:
        error = translate(exc, where)
        name = getattr(error, "object_name", None) or object_named(str(error))
        if name is None and report.problems:  # most likely one already reported
            report.notes.append(f"the SST scan stopped after {rows} rows: {_text(exc)}")
        elif not any(p.object_name == name for p in report.problems):
            report.add(
                [Problem(name or "compacted/", f"unreadable after {rows} rows: {_text(exc)}")]
            )
    finally:
        report.checked["rows read from SSTs"] = rows
        if reader is not None:
            await shut_down(reader)


def _no_answer(location: Location, doing: str) -> StoreUnavailableError:
    """A read that timed out: an outage, not damage, so the check ends here (every later
    read would wait as long again)."""
    return StoreUnavailableError(
        f"verify {location}: {doing} had no answer in time; check that the endpoint is up, "
        "or allow more time (timeout=, --timeout)",
        value=str(location),
    )


class _BoundedAdmin:
    """slatedb's Admin with every call bounded: against a dead endpoint or a missing bucket
    each call would otherwise retry without end, and verify must not hang."""

    def __init__(self, admin: Any, timeout: float | None, where: str) -> None:
        self._admin, self._timeout, self._where = admin, timeout, where

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._admin, name)

        async def call(*args: Any) -> Any:
            limit = budget(self._timeout)
            if limit is None:
                return await method(*args)
            try:
                return await asyncio.wait_for(method(*args), limit)
            except asyncio.TimeoutError:
                raise StoreUnavailableError(
                    f"verify {self._where}: {name} had no answer within {self._timeout:g} s; "
                    "check the location, the bucket and that the endpoint is up, or allow "
                    "more time (timeout=, --timeout)"
                ) from None

        return call


async def verify(
    url: str | os.PathLike[str],
    *,
    object_store_options: Mapping[str, str] | None = None,
    timeout: float | None = READER_TIMEOUT,
    retries: int = 0,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every object of the database at `url` (see the module docstring); never writes.
    `timeout` bounds each read (None: no bound); the first that overruns ends the check
    with StoreUnavailableError naming the location (an outage is not damage).
    `progress(stage, count)` is told each stage as it starts and the rows read so far."""
    with each_wait(timeout):  # every read below, not only Admin's, within `timeout`
        return await _verify(url, object_store_options, timeout, retries, progress)


async def _verify(
    url: str | os.PathLike[str],
    object_store_options: Mapping[str, str] | None,
    timeout: float | None,
    retries: int,
    progress: Progress | None,
) -> VerifyReport:
    location = parse_location(url)
    report = VerifyReport(str(location))
    object_store = location.object_store(object_store_options)
    listing = None
    if location.scheme == "file":
        try:
            listing = list_local(location.path)
        except PermissionError as exc:
            raise StorePermissionError(
                f"verify {location}: permission denied listing the directory "
                f"{exc.filename or location.path}; verify needs read access to the database "
                "directory and its subdirectories",
                value=str(exc.filename or location.path),
            ) from exc
        report.add([Problem(name, STRAY) for name in listing.strays])
        denied = "permission denied: this process may not read it"
        report.add([Problem(name, denied) for name in listing.unreadable])
    elif location.scheme == "s3":
        # with static credentials the prefix is listed as check_open lists it (one round
        # trip for its four directories): the checks of a directory, without the binary
        # searches and probes that find the same facts object by object (a damaged newest
        # manifest cost ~300 listings that way)
        client = lister(location, object_store_options)
        if client is not None:
            listing = await list_remote(location, client)
            report.add([Problem(name, STRAY) for name in listing.strays])
    if listing is None:
        report.notes.append(
            f"{location.scheme}:// objects cannot be listed here (no static credentials, or "
            "not a listable store): the WAL is read to its tail and each SST's size probed "
            "instead; stray names are not seen"
        )
    admin = _BoundedAdmin(
        AdminBuilder(location.db_path, object_store).build(),
        timeout,
        describe(location, object_store_options),
    )
    if progress is not None:
        progress("manifests", 0)
    decoded = await _manifests(admin, listing, report)
    report.checked["manifests"] = len(decoded)
    if not decoded:
        if not report.problems:
            report.add([Problem("manifest/", "no manifest: there is no database here")])
        return report
    report.add(_history_problems(decoded, listing))
    collected = _collected_note(listing)
    if collected is not None:
        report.notes.append(collected)
    newest = max(decoded)
    latest = decoded[newest]
    newest_decodes = listing is None or max(listing.manifests) == newest
    if not newest_decodes:
        report.notes.append(
            f"the newest manifest does not decode: checked against {manifest_name(newest)}; "
            "the SSTs were not read"
        )
    ssts = dict(manifest_ssts(latest))
    report.checked["SSTs"] = len(ssts)
    if listing is not None:
        report.add(sst_problems(latest, listing))
    elif newest_decodes:
        report.add(
            [
                Problem(name, message)
                for name, message in await sst_extent_problems(
                    location, object_store, latest, outage_raises=True
                )
            ]
        )
    report.add(_checkpoint_problems(latest, decoded, listing))
    if progress is not None:
        progress("compactions and WAL files", 0)
    await _compactions(admin, latest if newest_decodes else None, listing, report)
    await _wal(location, object_store, latest, listing, report)
    if newest_decodes:
        if progress is not None:
            progress("SST blocks", len(ssts))
        await _blocks(location, object_store, latest, report)
        await _scan(location, object_store, report, retries, progress)
    return report


def verify_sync(
    url: str | os.PathLike[str],
    *,
    object_store_options: Mapping[str, str] | None = None,
    timeout: float | None = READER_TIMEOUT,
    retries: int = 0,
    progress: Progress | None = None,
) -> VerifyReport:
    """`verify`, blocking (on a private event loop, so it works inside a running one)."""
    checking = verify(
        url,
        object_store_options=object_store_options,
        timeout=timeout,
        retries=retries,
        progress=progress,
    )
    report: VerifyReport = driver.run(checking)
    return report


def verify_async(
    url: str | os.PathLike[str],
    *,
    object_store_options: Mapping[str, str] | None = None,
    timeout: float | None = READER_TIMEOUT,
    retries: int = 0,
    progress: Progress | None = None,
) -> Coroutine[Any, Any, VerifyReport]:
    """Deprecated: the async `verify` under its old name (the async face has the plain
    name, the blocking one ends in _sync: RFC 0012)."""
    warnings.warn(
        "verify_async is deprecated: await verify(...) (the blocking face is verify_sync)",
        DeprecationWarning,
        stacklevel=2,
    )
    return verify(
        url,
        object_store_options=object_store_options,
        timeout=timeout,
        retries=retries,
        progress=progress,
    )
