"""Pinned reads (RFC 0014): one version of a store, held by a detached checkpoint for the
length of a job, that any number of readers in any processes open by its id.

    with opendata_kv.pinned("s3://bucket/db", lifetime=3600, schema=schema) as pin:
        for split in pin.splits(post, n=8):
            submit(task, pin, split)   # pin pickles; each task: pin.open_reader() ... scan

Entering makes the checkpoint away from the writer (store/ops/checkpoints.py: it works while
another process writes, and with no writer open), leaving deletes it, also when the block
raises. A job that dies without leaving cannot hold it past `lifetime` seconds: slatedb drops
an expired checkpoint, and its garbage collector then frees what only it held.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opendata_kv.errors import CheckpointError, InvalidArgumentError
from opendata_kv.keys import Schema
from opendata_kv.native import driver
from opendata_kv.store import pinned_readers
from opendata_kv.store.ops.checkpoints import lifetime_ms
from opendata_kv.store.ranges import KeyRange
from opendata_kv.store.reader import Opening, StoreReader
from opendata_kv.store.splitting import SPLITS_TIMEOUT, SplitTarget
from opendata_kv.store.writer import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from opendata_kv.store.ranges import RangeKeywords
    from opendata_kv.store.sync import SyncStoreReader

#: the open_reader keywords a Pinned does not pass on (it sets the checkpoint itself)
_OWN = ("checkpoint",)


class Pinned:
    """A store pinned at one checkpoint for a job: `with`/`async with` creates it (a detached
    checkpoint living `lifetime` seconds) and deletes it. Picklable: ship it to tasks, which
    open readers at exactly that version (`open_reader`, `open_reader_async`)."""

    def __init__(self, url: str | os.PathLike[str], lifetime: float, options: dict[str, Any]):
        lifetime_ms(lifetime)  # InvalidArgumentError for a lifetime that is not > 0
        for name in _OWN:
            if name in options:
                raise InvalidArgumentError(
                    f"pinned({url!r}): {name}= is the pinned checkpoint's; not an option here",
                    field=name,
                    value=options[name],
                )
        self.url = os.fspath(url)
        self.lifetime = float(lifetime)
        self.options = dict(options)
        self._checkpoint_id: str | None = None

    @classmethod
    def at(
        cls, url: str | os.PathLike[str], checkpoint_id: str, lifetime: float, **options: Any
    ) -> Pinned:
        """A Pinned of a checkpoint someone else holds (its id, e.g. passed as a string to an
        engine that cannot ship a Pinned): it reads that version; releasing it is the
        holder's (leave it, or its lifetime ends it)."""
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise InvalidArgumentError(
                f"pinned({url!r}): a checkpoint id is a non-empty string, got {checkpoint_id!r}",
                field="checkpoint",
                value=checkpoint_id,
            )
        made = cls(url, lifetime, options)
        made._checkpoint_id = checkpoint_id
        return made

    @property
    def checkpoint_id(self) -> str:
        """The id of the checkpoint (CheckpointError before `with` made it)."""
        if self._checkpoint_id is None:
            raise CheckpointError(
                f"pinned({self.url!r}) has no checkpoint yet: enter it (`with` or `async "
                "with`) first",
                value=self.url,
            )
        return self._checkpoint_id

    def __repr__(self) -> str:
        return f"<Pinned {self.url} checkpoint={self._checkpoint_id} lifetime={self.lifetime}>"

    def _reader_options(self, kwargs: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(schema, keywords) of a reader at the checkpoint: the pin's options, `kwargs`
        over them; no schema given: an empty one (keys come back raw)."""
        merged = {**self.options, **kwargs}
        for name in _OWN:
            if name in kwargs:
                raise InvalidArgumentError(
                    f"Pinned.open_reader: {name}= is the pinned checkpoint's "
                    f"({self._checkpoint_id}); not an option here",
                    field=name,
                    value=kwargs[name],
                )
        schema = merged.pop("schema", None)
        return (Schema() if schema is None else schema), merged

    def open_reader_async(self, **kwargs: Any) -> Opening[StoreReader]:
        """An async reader at exactly the pinned version (await it, or `async with`);
        keywords as for Store.open_reader, over those given to pinned()."""
        schema, options = self._reader_options(kwargs)
        return Store.open_reader(self.url, schema, checkpoint=self.checkpoint_id, **options)

    def open_reader(self, **kwargs: Any) -> SyncStoreReader:
        """A blocking reader at exactly the pinned version (close it, or `with`)."""
        from opendata_kv.store.sync import SyncStore

        schema, options = self._reader_options(kwargs)
        return SyncStore.open_reader(self.url, schema, checkpoint=self.checkpoint_id, **options)

    async def splits_async(
        self,
        target: SplitTarget,
        *leading: Any,
        n: int | None = None,
        target_bytes: int | None = None,
        timeout: float | None = SPLITS_TIMEOUT,
        **bounds: Unpack[RangeKeywords],
    ) -> list[KeyRange]:
        """StoreReader.splits of the pinned version."""
        async with self.open_reader_async() as reader:
            return await reader.splits(
                target, *leading, n=n, target_bytes=target_bytes, timeout=timeout, **bounds
            )

    def splits(
        self,
        target: SplitTarget,
        *leading: Any,
        n: int | None = None,
        target_bytes: int | None = None,
        timeout: float | None = SPLITS_TIMEOUT,
        **bounds: Unpack[RangeKeywords],
    ) -> list[KeyRange]:
        """StoreReader.splits of the pinned version, blocking."""
        return driver.run(
            self.splits_async(
                target, *leading, n=n, target_bytes=target_bytes, timeout=timeout, **bounds
            )
        )

    async def _open_admin(self) -> StoreReader:
        """A reader of the latest state (no schema), through which the checkpoint is made."""
        options = {k: v for k, v in self.options.items() if k not in ("schema", "indexes")}
        return await Store.open_reader(self.url, Schema(), **options)

    async def pin(self) -> str:
        """Make the checkpoint (what entering does); its id."""
        if self._checkpoint_id is not None:
            raise CheckpointError(
                f"pinned({self.url!r}) already holds checkpoint {self._checkpoint_id}",
                value=self._checkpoint_id,
            )
        async with await self._open_admin() as reader:
            made = await reader.checkpoint(lifetime=self.lifetime)
        self._checkpoint_id = made.id
        return made.id

    async def refresh_async(self) -> None:
        """Give the checkpoint its full lifetime again from now: what a job longer than
        `lifetime` calls now and then (a job that dies stops refreshing, so it still expires)."""
        async with await self._open_admin() as reader:
            await reader.refresh_checkpoint(self.checkpoint_id, self.lifetime)

    def refresh(self) -> None:
        """refresh_async, blocking."""
        driver.run(self.refresh_async())

    async def release(self) -> None:
        """Delete the checkpoint (what leaving does); nothing when none is held."""
        checkpoint_id, self._checkpoint_id = self._checkpoint_id, None
        if checkpoint_id is None:
            return
        pinned_readers.release(checkpoint_id)  # the readers tasks kept open at it
        async with await self._open_admin() as reader:
            await reader.delete_checkpoint(checkpoint_id)

    async def __aenter__(self) -> Pinned:
        await self.pin()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._released(exc_info[1])

    def __enter__(self) -> Pinned:
        driver.run(self.pin())
        return self

    def __exit__(self, *exc_info: object) -> None:
        driver.run(self._released(exc_info[1]))

    async def _released(self, raised: object) -> None:
        """release() at the end of a block; when the block raised, a failure to delete does
        not hide its error (the lifetime bounds the checkpoint)."""
        try:
            await self.release()
        except Exception:
            if raised is None:
                raise


def pinned(
    url: str | os.PathLike[str], *, lifetime: float = 3600.0, **store_options: Any
) -> Pinned:
    """A Pinned for the store at `url`: enter it (`with` or `async with`) to make a detached
    checkpoint living at most `lifetime` seconds, deleted on leaving. `store_options`:
    Store.open_reader's keywords (schema, object_store_options, timeout, ...) for the readers
    it opens."""
    return Pinned(url, lifetime, store_options)


__all__ = ["Pinned", "pinned"]
