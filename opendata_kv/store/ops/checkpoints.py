"""Checkpoints: named, pinned database states that readers and clones can open.

A slatedb checkpoint pins a manifest, i.e. the SSTs flushed so far; it never holds writes that
are still only in the WAL (a checkpoint reader does not replay the WAL). So:

- from the writer, the memtable is flushed to an SST first (FlushType.MEM_TABLE): every write
  acknowledged before `checkpoint()` was called is in the checkpoint;
- from anywhere else (a reader, the CLI) nothing can be flushed, so the checkpoint is made and
  then checked against the WAL as it stood before the call: if a WAL file holds a write newer
  than the checkpoint's last flushed sequence number, the checkpoint is deleted again and
  CheckpointError says to make it from the writer. A checkpoint never silently lacks an
  acknowledged write.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from slatedb.uniffi import (
    AdminBuilder,
    CheckpointOptions,
    Error,
    FlushOptions,
    FlushType,
)

from opendata_kv.errors import CheckpointError, InvalidArgumentError
from opendata_kv.store.native.errors import translate
from opendata_kv.store.ops.feed import encode_cursor, wal_reader


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

    def _admin(self) -> Any:
        try:
            return AdminBuilder(self._path, self._store).build()
        except Error as exc:
            raise translate(exc, f"admin of {self.where}") from exc

    async def _call(self, awaitable: Any, what: str) -> Any:
        try:
            return await awaitable
        except Error as exc:
            raise translate(exc, f"{what} on {self.where}") from exc

    async def cursor_of(self, admin: Any, manifest_id: int) -> str | None:
        """The feed position right after the state of manifest `manifest_id`."""
        manifest = await self._call(admin.read_manifest(manifest_id), "read manifest")
        if manifest is None:
            return None
        return encode_cursor(manifest.replay_after_wal_id + 1, 0, manifest.last_l0_seq + 1)

    async def _info(self, admin: Any, cp: Any) -> Checkpoint:
        return Checkpoint(
            cp.id,
            cp.name,
            cp.manifest_id,
            _time(cp.create_time_secs) or datetime.datetime.now(datetime.timezone.utc),
            _time(cp.expire_time_secs),
            await self.cursor_of(admin, cp.manifest_id),
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
        reader = wal_reader(self._path, self._store)
        before = await self._call(admin.read_manifest(None), "read manifest")
        if before is None:
            raise CheckpointError(f"checkpoint of {self.where}: there is no database here")
        tail = await self._call(reader.last_wal_file_id(before.replay_after_wal_id), "read WAL")
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
        manifest = await self._call(admin.read_manifest(made.manifest_id), "read manifest")
        missing = await self._unflushed(reader, manifest, tail)
        if missing:
            await self._call(admin.delete_checkpoint(made.id), "delete checkpoint")
            raise CheckpointError(
                f"checkpoint of {self.where}: {missing} acknowledged write(s) are still only "
                f"in the WAL (files {manifest.replay_after_wal_id + 1}..{tail}), and a "
                "checkpoint holds only what is flushed to SSTs, so it would lack them. Make "
                "the checkpoint from the writer (Store.checkpoint(), which flushes first), or, "
                "with no writer running, open the store as its writer once (Store.open) so "
                "it replays and flushes the WAL. Nothing was kept."
            )
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        listed = {cp.id: cp for cp in await self._call(admin.list_checkpoints(None), "list")}
        cp = listed.get(made.id)
        if cp is not None:
            return await self._info(admin, cp)
        expires = None if ms is None else now + datetime.timedelta(milliseconds=ms)
        cursor = encode_cursor(manifest.replay_after_wal_id + 1, 0, manifest.last_l0_seq + 1)
        return Checkpoint(made.id, name, made.manifest_id, now, expires, cursor)

    async def _unflushed(self, reader: Any, manifest: Any, tail: int) -> int:
        """How many rows of WAL files up to `tail` the manifest's SSTs do not hold."""
        first = manifest.replay_after_wal_id + 1
        if tail < first:
            return 0
        iterator = await self._call(reader.iterator(first), "read WAL")
        missing = 0
        while True:
            rows = await self._call(iterator.next(), "read WAL")
            if rows is None:
                return missing
            missing += sum(1 for row in rows.rows if row.seq > manifest.last_l0_seq)
            if rows.last_consumed_wal_file_id >= tail:
                return missing

    async def list(self, name: str | None = None) -> list[Checkpoint]:
        """Every checkpoint (or those with exactly this name), oldest first."""
        admin = self._admin()
        found = await self._call(admin.list_checkpoints(name), "list checkpoints")
        infos = [await self._info(admin, cp) for cp in found]
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
        admin = self._admin()
        await self._call(
            admin.refresh_checkpoint(found.id, lifetime_ms(lifetime)), "refresh checkpoint"
        )
        return await self.get(found.id)

    async def delete(self, checkpoint_id: str) -> Checkpoint:
        """Delete the checkpoint (id or name) and return it, so a name's id is known;
        CheckpointError when there is no such one."""
        found = await self.get(checkpoint_id)
        try:
            await self._admin().delete_checkpoint(found.id)
        except Error as exc:
            raise translate(exc, f"delete checkpoint on {self.where}") from exc
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
    try:
        found = await AdminBuilder(db_path, object_store).build().list_checkpoints(ref)
    except Error as exc:
        raise translate(exc, f"{where}: look up checkpoint {ref!r}") from exc
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
