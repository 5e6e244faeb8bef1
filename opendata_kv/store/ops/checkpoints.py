"""Checkpoints: named, pinned database states that readers and clones can open.

A slatedb checkpoint pins a manifest, i.e. the SSTs flushed so far; it never holds writes that
are still only in the WAL (a checkpoint reader does not replay the WAL), and slatedb's garbage
collector does not keep the WAL files after a checkpoint's manifest (measured: they go with the
next collection). So:

- from the writer, the memtable is flushed to an SST first (FlushType.MEM_TABLE): every write
  acknowledged before `checkpoint()` was called is in the checkpoint's SSTs;
- from anywhere else (a reader, the CLI, while a writer runs) nothing can be flushed: the WAL
  end T is read first (every acknowledged write is in a WAL file up to T), the checkpoint is
  made, and beside the database (opendata-kv/checkpoints/<id>/db, objstore/sidecar.py) a
  read-only copy of it is made: a slatedb clone of the checkpoint (it shares the SSTs, pinned
  by a second, unnamed checkpoint slatedb makes for it, which `list` does not show) plus the
  WAL files after the checkpoint's replay point up to T, where the collector never deletes
  them. Readers of the checkpoint open that copy (it replays those files), so they and
  clones see every write acknowledged before the call; the checkpoint's feed cursor starts
  after T. Nothing is kept when a step fails.
"""

from __future__ import annotations

import contextlib
import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from opendata_kv.errors import CheckpointError, InvalidArgumentError
from opendata_kv.native.errors import call, translating
from opendata_kv.native.slatedb import (
    AdminBuilder,
    CheckpointOptions,
    CloneSourceSpec,
    Error,
    FlushOptions,
    FlushType,
)
from opendata_kv.objstore import sidecar
from opendata_kv.store.ops.feed import encode_cursor, wal_reader

#: how often an outside checkpoint is made again when the GC deleted a WAL file it copies
_ATTEMPTS = 3


def wal_dir(checkpoint_id: str) -> str:
    """The sidecar name under which an outside checkpoint keeps its manifest and WAL files."""
    return f"checkpoints/{checkpoint_id}"


def facts_name(checkpoint_id: str) -> str:
    return f"checkpoints/{checkpoint_id}.json"


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a database. `cursor` is where the change feed continues after the
    state the checkpoint holds (None when its manifest is no longer readable)."""

    id: str
    name: str | None
    manifest_id: int
    created: datetime.datetime
    expires: datetime.datetime | None
    cursor: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON object `opendata-kv checkpoint` prints."""
        return {
            "id": self.id,
            "name": self.name,
            "manifest_id": self.manifest_id,
            "created": self.created.isoformat(),
            "expires": None if self.expires is None else self.expires.isoformat(),
        }


def _time(seconds: int | None) -> datetime.datetime | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def lifetime_ms(lifetime: float | datetime.timedelta | None) -> int | None:
    """A checkpoint lifetime in ms (None: it lives until deleted)."""
    if lifetime is None:
        return None
    seconds = lifetime.total_seconds() if isinstance(lifetime, datetime.timedelta) else lifetime
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise InvalidArgumentError(
            f"lifetime must be a positive number of seconds, got {lifetime!r}",
            field="lifetime",
            value=lifetime,
        )
    return max(1, round(seconds * 1000))


class Checkpoints:
    """Checkpoint operations on one database (its object store and path)."""

    def __init__(self, db_path: str, object_store: Any, where: str) -> None:
        self._path = db_path
        self._store = object_store
        self.where = where
        self._side, self.identity = sidecar.of(object_store)

    def _admin(self) -> Any:
        with translating(f"admin of {self.where}"):
            return AdminBuilder(self._path, self._store).build()

    async def _call(self, awaitable: Any, what: str) -> Any:
        return await call(awaitable, f"{what} on {self.where}")

    async def facts(self, checkpoint_id: str) -> dict[str, Any] | None:
        """What an outside checkpoint recorded beside the database ({"wal_end": T, ...}),
        None for a checkpoint whose state is all in SSTs."""
        if self._side is None:
            return None
        found = await self._side.get_json(facts_name(checkpoint_id))
        return found if isinstance(found, dict) else None

    async def _pin(self, checkpoint_id: str) -> str | None:
        facts = await self.facts(checkpoint_id)
        return None if facts is None else facts.get("pin")

    async def cursor_of(
        self, admin: Any, manifest_id: int, facts: dict[str, Any] | None = None
    ) -> str | None:
        """The feed position right after the state of manifest `manifest_id` (and, for an
        outside checkpoint, after the WAL files it copied)."""
        manifest = await self._call(admin.read_manifest(manifest_id), "read manifest")
        if manifest is None:
            return None
        wal = manifest.replay_after_wal_id + 1
        if facts is not None:
            wal = max(wal, int(facts["wal_end"]) + 1)
        return encode_cursor(wal, 0, manifest.last_l0_seq + 1, self.identity)

    async def _info(self, admin: Any, cp: Any) -> Checkpoint:
        return Checkpoint(
            cp.id,
            cp.name,
            cp.manifest_id,
            _time(cp.create_time_secs) or datetime.datetime.now(datetime.timezone.utc),
            _time(cp.expire_time_secs),
            await self.cursor_of(admin, cp.manifest_id, await self.facts(cp.id)),
        )

    async def create(
        self,
        *,
        writer: Any = None,
        name: str | None = None,
        lifetime: float | datetime.timedelta | None = None,
    ) -> Checkpoint:
        """Make a checkpoint holding every write acknowledged before this call (see the module
        docstring); `writer` is the slatedb Db when called from the writer process."""
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidArgumentError(
                f"checkpoint name must be a non-empty string, got {name!r}",
                field="name",
                value=name,
            )
        ms = lifetime_ms(lifetime)
        admin = self._admin()
        if name is not None:
            taken = await self._call(admin.list_checkpoints(name), "list checkpoints")
            if taken:
                raise CheckpointError(
                    f"checkpoint of {self.where}: a checkpoint named {name!r} already exists "
                    f"({', '.join(cp.id for cp in taken)}); names must be unique so that "
                    "--checkpoint NAME means one state: delete it first or pick another name",
                    value=name,
                )
        if self._side is not None:
            await self._side.check_writable()  # a refused write fails now, not in a retry loop
        if writer is not None:
            await self._call(
                writer.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)),
                "flush before checkpoint",
            )
            made = await self._call(
                admin.create_detached_checkpoint(
                    CheckpointOptions(lifetime_ms=ms, source=None, name=name)
                ),
                "create checkpoint",
            )
            facts = None
        else:
            made, facts = await self._outside(admin, ms, name)
        listed = {cp.id: cp for cp in await self._call(admin.list_checkpoints(None), "list")}
        cp = listed.get(made.id)
        if cp is not None:
            return await self._info(admin, cp)
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        expires = None if ms is None else now + datetime.timedelta(milliseconds=ms)
        cursor = await self.cursor_of(admin, made.manifest_id, facts)
        return Checkpoint(made.id, name, made.manifest_id, now, expires, cursor)

    async def _outside(
        self, admin: Any, ms: int | None, name: str | None
    ) -> tuple[Any, dict[str, Any] | None]:
        """A checkpoint made away from the writer, with its read-only copy where it needs
        WAL files (see the module docstring)."""
        reader = wal_reader(self._path, self._store)
        for _ in range(_ATTEMPTS):
            before = await self._call(admin.read_manifest(None), "read manifest")
            if before is None:
                raise CheckpointError(f"checkpoint of {self.where}: there is no database here")
            tail = await self._call(reader.last_wal_file_id(before.replay_after_wal_id), "read WAL")
            made = await self._call(
                admin.create_detached_checkpoint(
                    CheckpointOptions(lifetime_ms=ms, source=None, name=name)
                ),
                "create checkpoint",
            )
            manifest = await self._call(admin.read_manifest(made.manifest_id), "read manifest")
            first = manifest.replay_after_wal_id + 1
            if tail < first:
                return made, None  # every acknowledged write is in its SSTs
            if self._side is None or not self._side.available:
                await self._call(admin.delete_checkpoint(made.id), "delete checkpoint")
                raise CheckpointError(
                    f"checkpoint of {self.where}: WAL files {first}..{tail} hold acknowledged "
                    "writes no SST has yet, and without credentials this process can sign "
                    "(AWS_ACCESS_KEY_ID/SECRET) it cannot copy them beside the checkpoint. "
                    "Make the checkpoint from the writer (Store.checkpoint()). Nothing was kept."
                )
            facts: dict[str, Any] = {
                "wal_end": tail,
                "replay_after": manifest.replay_after_wal_id,
                "manifest_id": manifest.id,
                "pin": None,
            }
            try:
                copied = await self._copy(admin, made.id, facts, first, tail, ms)
            except BaseException:
                await self._forget(admin, made.id, facts.get("pin"))
                raise
            if copied:
                await self._side.put_json(facts_name(made.id), facts)
                return made, facts
            # the collector deleted a file between our reads: its rows are in newer SSTs
            await self._forget(admin, made.id, facts.get("pin"))
        raise CheckpointError(
            f"checkpoint of {self.where}: the garbage collector kept deleting the WAL files "
            f"being copied ({_ATTEMPTS} attempts); try again, or make it from the writer"
        )

    async def _copy(
        self,
        admin: Any,
        checkpoint_id: str,
        facts: dict[str, Any],
        first: int,
        tail: int,
        ms: int | None,
    ) -> bool:
        """Make the checkpoint's read-only copy: a slatedb clone of it (sharing its SSTs)
        and its WAL files first..tail; False when one of those files is gone."""
        assert self._side is not None
        base = f"{wal_dir(checkpoint_id)}/db"
        path = self._side.path_of(base)
        builder = admin.create_clone_builder_from_source(
            CloneSourceSpec(path=self._path, checkpoint=checkpoint_id, projection_range=None)
        )
        builder.with_clone_path(path)
        await self._call(builder.build(), "copy checkpoint")
        copy = await self._call(
            AdminBuilder(path, self._store).build().read_manifest(None), "read copy"
        )
        pins = [db.final_checkpoint_id for db in copy.external_dbs if db.final_checkpoint_id]
        facts["pin"] = pins[0] if pins else None
        if facts["pin"] is not None and ms is not None:  # it expires with the checkpoint
            await self._call(admin.refresh_checkpoint(facts["pin"], ms), "refresh pin")
        for wal_id in range(first, tail + 1):
            name = f"wal/{wal_id:020d}.sst"
            if not await self._side.copy_in(name, f"{base}/{name}"):
                return False
        return True

    async def _forget(self, admin: Any, checkpoint_id: str, pin: str | None = None) -> None:
        """Delete a checkpoint, the pin of its copy and whatever was copied for it."""
        if pin is None:
            facts = await self.facts(checkpoint_id)
            pin = None if facts is None else facts.get("pin")
        await self._call(admin.delete_checkpoint(checkpoint_id), "delete checkpoint")
        if pin:
            with contextlib.suppress(Error):  # already gone (expired with the checkpoint)
                await admin.delete_checkpoint(pin)
        if self._side is not None:
            await self._side.delete_tree(wal_dir(checkpoint_id))
            await self._side.delete(facts_name(checkpoint_id))

    async def list(self, name: str | None = None) -> list[Checkpoint]:
        """Every checkpoint (or those with exactly this name), oldest first."""
        admin = self._admin()
        found = await self._call(admin.list_checkpoints(name), "list checkpoints")
        infos = [await self._info(admin, cp) for cp in found]
        if name is None:  # the pins of outside checkpoints' copies are not checkpoints of ours
            pins = {p for p in [await self._pin(cp.id) for cp in infos] if p}
            infos = [cp for cp in infos if cp.id not in pins]
        return sorted(infos, key=lambda c: (c.created, c.manifest_id, c.id))

    async def get(self, ref: str) -> Checkpoint:
        """The checkpoint with this id, or else the one with this name."""
        found = await self.list()
        for cp in found:
            if cp.id == ref:
                return cp
        named = [cp for cp in found if cp.name == ref]
        if len(named) == 1:
            return named[0]
        if named:
            raise CheckpointError(
                f"{self.where}: {len(named)} checkpoints are named {ref!r} "
                f"({', '.join(cp.id for cp in named)}): give one of their ids"
            )
        raise CheckpointError(f"{self.where} has no checkpoint {ref!r}")

    async def refresh(
        self, checkpoint_id: str, lifetime: float | datetime.timedelta | None
    ) -> Checkpoint:
        """Give the checkpoint (id or name) a new lifetime from now (None: until deleted)."""
        found = await self.get(checkpoint_id)
        if self._side is not None:
            await self._side.check_writable()
        admin = self._admin()
        await self._call(
            admin.refresh_checkpoint(found.id, lifetime_ms(lifetime)), "refresh checkpoint"
        )
        return await self.get(found.id)

    async def delete(self, checkpoint_id: str) -> Checkpoint:
        """Delete the checkpoint (id or name) and return it, so a name's id is known;
        CheckpointError when there is no such one."""
        found = await self.get(checkpoint_id)
        if self._side is not None:
            await self._side.check_writable()  # a refused write fails now, not in a retry loop
        await self._forget(self._admin(), found.id)
        return found


async def resolve(db_path: str, object_store: Any, ref: str, where: str) -> str:
    """The checkpoint id `ref` names: `ref` itself when it is a UUID (an id), else the id of
    the one checkpoint with that name (CheckpointError for none or several)."""
    try:
        uuid.UUID(ref)
    except ValueError:
        pass
    else:
        return ref
    with translating(f"{where}: look up checkpoint {ref!r}"):
        found = await AdminBuilder(db_path, object_store).build().list_checkpoints(ref)
    if len(found) == 1:
        checkpoint_id: str = found[0].id
        return checkpoint_id
    if not found:
        raise CheckpointError(
            f"{where}: no checkpoint is named {ref!r} and it is not a checkpoint id (ids are "
            "UUIDs; `opendata-kv checkpoint list` shows ids and names)"
        )
    raise CheckpointError(
        f"{where}: {len(found)} checkpoints are named {ref!r} "
        f"({', '.join(cp.id for cp in found)}): give one of their ids"
    )


def require_id(checkpoint_id: object) -> str:
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise InvalidArgumentError(
            f"a checkpoint id is a non-empty string, got {checkpoint_id!r}",
            field="checkpoint_id",
            value=checkpoint_id,
        )
    return checkpoint_id


__all__ = ["Checkpoint", "Checkpoints", "lifetime_ms", "require_id"]
