"""The check of a batch's creates (Batch.create): every key it creates must hold no live
record when the batch is written, read under the store's write lock (RFC 0010, "Creates")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opendata_kv.errors import RecordExistsError
from opendata_kv.keys import Schema
from opendata_kv.store.indexes.maintain import Expired
from opendata_kv.store.writes import Fetch


def exists_error(schema: Schema, where: str, key: bytes, holder: str) -> RecordExistsError:
    """The error of a create refused because `holder` (a stored record, or an earlier write
    of its batch) holds its key: names the record type and the key (`value`: the Key)."""
    record_type = schema.try_record_type_of(key)
    try:
        shown: Any = schema.decode(key)
    except Exception:  # a key of no record type of the schema: its bytes
        shown = key
    name = None if record_type is None else record_type.name
    return RecordExistsError(
        f"create of {name or 'a record'} {shown!r} on {where}: {holder} holds that key; "
        "create never overwrites, so nothing of the batch was written",
        record=name,
        value=shown,
    )


class AbsentCheck:
    """Refuses a batch when a key it creates holds a live record (an expired one is absent,
    as for reads). The values index upkeep reads anyway are checked as they come (`reading`);
    the rest (`unread`: whatever the plan did not read) in one more read after it."""

    __slots__ = ("_creates", "_pending", "_schema", "_where")

    def __init__(self, schema: Schema, where: str, creates: Sequence[bytes]) -> None:
        self._schema = schema
        self._where = where
        self._creates = creates
        self._pending = set(creates)

    def unread(self) -> list[bytes]:
        """The created keys not checked yet (none read by the index plan), in order."""
        pending = self._pending
        return [key for key in dict.fromkeys(self._creates) if key in pending]

    def seen(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """RecordExistsError when one of `keys` still to check holds a live value."""
        pending = self._pending
        if not pending:
            return
        for key, value in zip(keys, values, strict=True):
            if key in pending:
                if value is not None and not isinstance(value, Expired):
                    raise exists_error(self._schema, self._where, key, "a stored record")
                pending.discard(key)

    def reading(self, fetch: Fetch) -> Fetch:
        """`fetch` checking what it returns (the plan's read of replaced values)."""

        async def checked(keys: list[bytes]) -> list[bytes | None]:
            found = await fetch(keys)
            self.seen(keys, found)
            return found

        return checked
