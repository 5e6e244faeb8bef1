"""The few small objects opendata_kv keeps beside a SlateDB database, under `opendata-kv/`:

    opendata-kv/identity                 the store's identity (a UUID, new for each store and
                                         each clone), which change cursors name
    opendata-kv/clone.json               present while a clone is being made (store/ops/clone.py)
    opendata-kv/checkpoints/<id>.json    the WAL end a checkpoint made from outside the writer
                                         must replay to (store/ops/checkpoints.py)

SlateDB never reads or deletes them. A local directory uses files, s3:// the small SigV4 client
(s3http.py; without static credentials these objects are not kept and what needs them is
skipped), memory:// a dict private to the process.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opendata_kv.errors import (
    IncompleteCloneError,
    StorePermissionError,
    StoreUnavailableError,
)
from opendata_kv.objstore.deadline import in_thread
from opendata_kv.objstore.location import Location, s3_config
from opendata_kv.objstore.s3http import S3Client, client_for

PREFIX = "opendata-kv"
IDENTITY = "identity"
CLONE_MARKER = "clone.json"

_MEMORY: dict[tuple[str, str], bytes] = {}


class Sidecar:
    """Read and write the objects beside one database."""

    def __init__(
        self,
        location: Location,
        options: Mapping[str, str] | None = None,
        timeout: float | None = None,
        memory_key: object = None,
    ) -> None:
        self.location = location
        self._s3: S3Client | None = None
        self._memory = f"{id(memory_key)}:{location.path}"
        if location.scheme == "s3":
            self._s3 = client_for(
                location.bucket or "", s3_config(location.bucket or "", options=options), timeout
            )

    @property
    def available(self) -> bool:
        """False where nothing can be kept (s3:// without static credentials)."""
        return self.location.scheme != "s3" or self._s3 is not None

    def _path(self, name: str) -> str:
        if self.location.scheme == "s3":
            return f"{self.location.path}/{PREFIX}/{name}"
        return os.path.join(self.location.path, PREFIX, name)

    def _get(self, name: str) -> bytes | None:
        scheme = self.location.scheme
        if scheme == "memory":
            return _MEMORY.get((self._memory, name))
        if scheme == "s3":
            return None if self._s3 is None else self._s3.get(self._path(name))
        try:
            with open(self._path(name), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except PermissionError as exc:
            raise StorePermissionError(f"{self._path(name)}: {exc}") from exc

    def _put(self, name: str, data: bytes) -> None:
        scheme = self.location.scheme
        if scheme == "memory":
            _MEMORY[(self._memory, name)] = data
            return
        if scheme == "s3":
            if self._s3 is not None:
                self._s3.put(self._path(name), data)
            return
        path = self._path(name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except PermissionError as exc:
            raise StorePermissionError(f"{path}: {exc}") from exc

    def _delete(self, name: str) -> None:
        scheme = self.location.scheme
        if scheme == "memory":
            _MEMORY.pop((self._memory, name), None)
        elif scheme == "s3":
            if self._s3 is not None:
                self._s3.delete(self._path(name))
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._path(name))

    def _copy_in(self, source: str, name: str) -> bool:
        """Copy the database's object `source` (e.g. "wal/...sst") to `name` beside it;
        False when `source` does not exist."""
        scheme = self.location.scheme
        if scheme == "s3":
            if self._s3 is None:
                return False
            data = self._s3.get(f"{self.location.path}/{source}")
            if data is None:
                return False
            self._s3.put(self._path(name), data)
            return True
        if scheme == "memory":
            return False
        path = self._path(name)
        if os.path.exists(path):
            return True  # slatedb's clone already copied (linked) it: WAL files never change
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            shutil.copyfile(os.path.join(self.location.path, source), path)
        except FileNotFoundError:
            return False
        except PermissionError as exc:
            raise StorePermissionError(f"{path}: {exc}") from exc
        return True

    def _delete_tree(self, name: str) -> None:
        scheme = self.location.scheme
        if scheme == "s3":
            if self._s3 is not None:
                for key in self._s3.list_keys(self._path(name) + "/"):
                    self._s3.delete(key)
        elif scheme == "file":
            shutil.rmtree(self._path(name), ignore_errors=True)

    def path_of(self, name: str) -> str:
        """The slatedb path (db_path-relative, as DbBuilder/SlateDbWalReader take it) of
        `name`, for a WAL reader over copied files."""
        if self.location.scheme == "s3":
            return f"{self.location.path}/{PREFIX}/{name}"
        return f"{PREFIX}/{name}"

    async def copy_in(self, source: str, name: str) -> bool:
        return await in_thread(self._copy_in, source, name)

    async def delete_tree(self, name: str) -> None:
        await in_thread(self._delete_tree, name)

    async def check_writable(self) -> None:
        """Write and delete a small object: a read-only credential or directory raises
        StorePermissionError now (slatedb would retry a refused write forever)."""
        if not self.available or self.location.scheme == "memory":
            return
        name = f"probe-{uuid.uuid4().hex}"
        await self.put(name, b"")
        await self.delete(name)

    async def get(self, name: str) -> bytes | None:
        return await in_thread(self._get, name)

    async def put(self, name: str, data: bytes) -> None:
        await in_thread(self._put, name, data)

    async def delete(self, name: str) -> None:
        await in_thread(self._delete, name)

    async def get_json(self, name: str) -> Any:
        data = await self.get(name)
        return None if data is None else json.loads(data)

    async def put_json(self, name: str, obj: Any) -> None:
        await self.put(name, json.dumps(obj, sort_keys=True).encode())

    async def identity(self, *, create: bool) -> str | None:
        """The store's identity; with `create` (a writer) a new one is made where none is."""
        data = await self.get(IDENTITY)
        if data is not None:
            return data.decode("ascii", "replace").strip() or None
        if not create or not self.available:
            return None
        made = uuid.uuid4().hex
        await self.put(IDENTITY, made.encode())
        return made

    async def set_identity(self, value: str) -> None:
        await self.put(IDENTITY, value.encode())


async def probe(
    location: Location,
    options: Mapping[str, str] | None,
    timeout: float | None,
    *,
    strict: bool = False,
) -> None:
    """For s3://, list one key of the database prefix: a missing bucket, a refused credential
    or any other S3 error answer raises its OpendataKvError now. No answer at all is left to
    slatedb's own retries (and the caller's timeout), or with `strict` raises
    StoreUnavailableError too. Nothing to do elsewhere."""
    if location.scheme != "s3":
        return
    client = client_for(
        location.bucket or "", s3_config(location.bucket or "", options=options), timeout
    )
    if client is None:
        return
    try:
        await in_thread(client.probe, location.path)
    except StoreUnavailableError:
        if strict:
            raise


#: set by clone while it opens its own, still incomplete destination
CLONING: contextvars.ContextVar[bool] = contextvars.ContextVar("opendata_kv_cloning", default=False)

_KNOWN: weakref.WeakKeyDictionary[Any, tuple[Sidecar, str | None]] = weakref.WeakKeyDictionary()


async def remember(
    location: Location, options: Mapping[str, str] | None, object_store: Any, *, writer: bool
) -> None:
    """Note the Sidecar and identity of an opened store (looked up by its ObjectStore); the
    writer gives a store that has no identity yet its first one."""
    side = Sidecar(location, options, memory_key=object_store)
    identity = await side.identity(create=writer)
    _KNOWN[object_store] = (side, identity)


def of(object_store: Any) -> tuple[Sidecar | None, str | None]:
    """(Sidecar, identity) of an ObjectStore an opener remembered; (None, None) otherwise."""
    return _KNOWN.get(object_store, (None, None))


async def check_not_cloning(
    location: Location,
    options: Mapping[str, str] | None,
    object_store: Any,
    where: str,
    *,
    strict: bool = False,
) -> None:
    """IncompleteCloneError when a clone into `location` started and has not finished; no
    answer raises StoreUnavailableError only when `strict`."""
    if CLONING.get():
        return
    try:
        marker = await Sidecar(location, options, memory_key=object_store).get_json(CLONE_MARKER)
    except StoreUnavailableError:
        if strict:  # a check of its own (verify): the outage ends it
            raise
        return  # no answer: the open itself reports the outage, within its own bound
    if marker is None:
        return
    raise IncompleteCloneError(
        f"{where}: this database is an incomplete clone of {marker.get('source')!r} "
        f"({marker.get('records', 0)} records copied so far, started {marker.get('started')}): "
        "it does not hold the source's whole state. Run the same `opendata-kv clone` again to "
        "resume it, or with --replace to start over",
        value=str(location),
    )


def wal_ids(location: Location, side: Sidecar | None) -> set[int] | None:
    """The ids of the WAL files present (one listing), or None where the store cannot be
    listed (memory://, s3:// without static credentials). Blocking: run it in a thread."""
    if location.scheme == "file":
        directory = os.path.join(location.path, "wal")
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return set()
        except PermissionError as exc:
            raise StorePermissionError(f"{directory}: {exc}") from exc
    elif location.scheme == "s3" and side is not None and side._s3 is not None:
        prefix = f"{location.path}/wal/"
        names = [key[len(prefix) :] for key in side._s3.list_keys(prefix)]
    else:
        return None
    found = set()
    for name in names:
        stem, dot, ext = name.partition(".")
        if dot and ext == "sst" and stem.isdigit() and len(stem) <= 20:
            found.add(int(stem))
    return found


@dataclass(frozen=True)
class CheckpointCopy:
    """The read-only copy a checkpoint made away from the writer keeps (ops/checkpoints.py: a
    slatedb clone sharing the checkpoint's SSTs, plus its WAL files): its slatedb path and
    the ids of the WAL files copied into it, every one of which its reader replays."""

    db_path: str
    wal_ids: range


async def checkpoint_copy(
    location: Location, options: Mapping[str, str] | None, object_store: Any, checkpoint_id: str
) -> CheckpointCopy | None:
    """The copy of checkpoint `checkpoint_id`, which a reader opens instead of the
    checkpoint itself; None for a plain checkpoint (its state is all in SSTs)."""
    side = Sidecar(location, options, memory_key=object_store)
    facts = await side.get_json(f"checkpoints/{checkpoint_id}.json")
    if not isinstance(facts, dict):
        return None
    first, last = int(facts["replay_after"]) + 1, int(facts["wal_end"])
    return CheckpointCopy(side.path_of(f"checkpoints/{checkpoint_id}/db"), range(first, last + 1))
