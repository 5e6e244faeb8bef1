"""The open-time damage checks for a store the binding cannot list (s3://).

Without a listing, the objects are found by reading them, through the ObjectStore the
binding already configured (so any credentials that work for slatedb work here):

- the WAL files after the replay point, in order, with slatedb's WAL reader: its tail
  (`last_wal_file_id`) says how far the WAL runs, and each file up to it must come back in
  turn. A missing one is not an error for the binding's live iterator, which polls for it, so
  a file not served within GAP_WAIT seconds while later ones exist is reported missing; an
  emptied one shows as a jump in sequence numbers (integrity.wal_sequence_problems).
- every SST the manifest references, by warming its last block (stats, index or filter)
  through a reader that writes nothing and never retries: an object shorter than the
  manifest says answers 416 at once, a deleted one 404. slatedb's own readers retry both
  forever.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from opendata_kv.native.errors import FOREIGN, is_bad_range, one_line
from opendata_kv.native.opendata_compat import build_compatible
from opendata_kv.native.slatedb import (
    CacheTarget,
    DbCache,
    DbReaderBuilder,
    MokaCacheOptions,
    ReaderMode,
    ReaderOptions,
    SlateDbWalReader,
    SsTableId,
)
from opendata_kv.objstore.deadline import READER_SHUTDOWN, budget
from opendata_kv.objstore.location import Location
from opendata_kv.objstore.objects import manifest_name, manifest_ssts, sst_name

#: Seconds the WAL reader may take to serve one file before it counts as missing (it polls
#: once a second for a file that is not there; a present one comes back in milliseconds).
GAP_WAIT = 5.0
#: Seconds the probe reader may take to open, and to read one SST's last block.
PROBE_TIMEOUT = 10.0
#: SSTs probed at a time.
PROBE_PARALLEL = 16

_NOT_FOUND = ("not found", "notfound", "404", "no such key", "nosuchkey")


async def wal_tail(location: Location, object_store: Any, replay_after: int) -> int | None:
    """The newest WAL file id after `replay_after` (itself when there is none); None when
    the WAL cannot be looked at within PROBE_TIMEOUT (slatedb's open reports why)."""
    reader = SlateDbWalReader(location.db_path, object_store)
    try:
        return int(
            await asyncio.wait_for(reader.last_wal_file_id(replay_after), budget(PROBE_TIMEOUT))
        )
    except (asyncio.TimeoutError, *FOREIGN):  # type: ignore[misc]
        return None


def _last_block(info: Any) -> Any:
    """The CacheTarget of the SST block that ends last (reading it needs the whole extent)."""
    ends = [
        (info.stats_offset + info.stats_len, CacheTarget.STATS()),
        (info.index_offset + info.index_len, CacheTarget.INDEX()),
    ]
    if info.filter_len:
        ends.append((info.filter_offset + info.filter_len, CacheTarget.FILTERS()))
    return max(ends, key=lambda pair: pair[0])[1]


async def probe_reader(location: Location, object_store: Any) -> Any:
    """A reader that writes nothing, never retries, replays no WAL and keeps a small block
    cache (warm_sst reads nothing without one); a database OpenData wrote gets its segment
    extractor, as every other reader does, so its SSTs are read too."""

    def make_builder() -> Any:
        builder = DbReaderBuilder(location.db_path, object_store)
        builder.with_reader_mode(ReaderMode.FOLLOW_LATEST())
        builder.with_db_cache(
            DbCache.new_moka_cache(
                MokaCacheOptions(max_capacity=4 << 20, time_to_live=None, time_to_idle=None)
            ),
            0,
        )
        builder.with_options(
            ReaderOptions(
                manifest_poll_interval_ms=3_600_000,
                checkpoint_lifetime_ms=3_600_000,
                max_memtable_bytes=1 << 20,
                skip_wal_replay=True,
                object_store_max_retries=0,
            )
        )
        return builder

    return await build_compatible(
        make_builder, lambda b: asyncio.wait_for(b, budget(PROBE_TIMEOUT))
    )


async def shut_down(reader: Any) -> None:
    """Shut a probe or check reader down, quietly, within READER_SHUTDOWN: against a silent
    endpoint slatedb's shutdown waits ~30 s for its requests, and a reader that only read
    has nothing to save (on a live endpoint it takes milliseconds)."""
    with contextlib.suppress(asyncio.TimeoutError, *FOREIGN):
        await asyncio.wait_for(reader.shutdown(), budget(READER_SHUTDOWN))


async def sst_extent_problems(
    location: Location, object_store: Any, manifest: Any, *, outage_raises: bool = False
) -> list[tuple[str, str]]:
    """(object name, problem) for each SST of `manifest` that is shorter than its info says
    or gone. Other failures (timeouts, an outage) prove nothing and are left to the open;
    with `outage_raises`, a timeout raises asyncio.TimeoutError (verify ends there)."""
    ssts = list(manifest_ssts(manifest))
    if not ssts:
        return []
    try:
        reader = await probe_reader(location, object_store)
    except asyncio.TimeoutError:
        if outage_raises:
            raise
        return []
    except FOREIGN:
        return []
    found: list[tuple[str, str]] = []
    source = manifest_name(manifest.id)

    async def probe(ulid: str, handle: Any) -> None:
        try:
            await asyncio.wait_for(
                reader.warm_sst(SsTableId(value=ulid), [_last_block(handle.info)]),
                budget(PROBE_TIMEOUT),
            )
        except asyncio.TimeoutError:
            if outage_raises:
                raise
            return
        except FOREIGN as exc:
            text = one_line(str(getattr(exc, "message", None) or exc))
            if is_bad_range(text):
                found.append(
                    (
                        sst_name(ulid),
                        f"shorter than {source} places its blocks (the store refused the "
                        "range: truncated, or the manifest is damaged)",
                    )
                )
            elif any(word in text.lower() for word in _NOT_FOUND):
                found.append((sst_name(ulid), f"missing, but {source} references it"))

    try:
        for start in range(0, len(ssts), PROBE_PARALLEL):
            await asyncio.gather(
                *(probe(ulid, handle) for ulid, handle in ssts[start : start + PROBE_PARALLEL])
            )
    finally:
        await shut_down(reader)
    return sorted(found)
