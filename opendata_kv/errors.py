"""The one exception hierarchy of opendata_kv, rooted at OpendataKvError.

Errors about bad input are also ValueErrors, so callers that already catch ValueError keep
working. Messages name the field and show the offending bytes (as hex) or characters (repr).
"""

from __future__ import annotations


def show_bytes(data: bytes | bytearray | memoryview, limit: int = 48) -> str:
    """Hex of `data` for an error message, shortened past `limit` bytes (the length is kept)."""
    raw = bytes(data)
    if len(raw) <= limit:
        return f"0x{raw.hex()}" if raw else "b'' (empty)"
    return f"0x{raw[:limit].hex()}... ({len(raw)} bytes)"


class OpendataKvError(Exception):
    """Root of every error opendata_kv raises on purpose."""


class InvalidInputError(OpendataKvError, ValueError):
    """Input that can never be valid: malformed bytes, bad syntax, values out of range."""


# --- identifiers -------------------------------------------------------------------------------


class IdError(InvalidInputError):
    """An identifier (TID, record key, muid, URL key) that does not parse or validate."""


class TidError(IdError):
    """Not a valid AT Protocol TID."""


class RkeyError(IdError):
    """Not a valid AT Protocol record key (or not of the required Lexicon key type)."""


class MuidError(IdError):
    """Not a valid Gink muid, or a component out of range."""


class UrlKeyError(IdError):
    """A URL that cannot be keyed (for example one that does not parse)."""


# --- keys --------------------------------------------------------------------------------------


class KeyFormatError(InvalidInputError):
    """Base for key building and key decoding problems (not named KeyError: that is a builtin)."""


class SchemaError(KeyFormatError):
    """An inconsistent RecordType or Schema definition (duplicate names, bad nibbles, ...)."""


class KeyEncodeError(KeyFormatError):
    """A value that cannot be encoded into the named key field."""


class KeyDecodeError(KeyFormatError):
    """Bytes that are not a valid encoding of the key (or of one of its fields)."""


class UnknownRecordError(KeyDecodeError):
    """A key whose (keyspace, version, record tag) prefix no registered RecordType owns."""


# --- values ------------------------------------------------------------------------------------


class ValueCodecError(InvalidInputError):
    """A value that cannot be encoded, or stored bytes that do not decode for their key."""


class ValueEncodeError(ValueCodecError):
    """A Python value that the record type's value codec cannot serialise."""


class ValueDecodeError(ValueCodecError):
    """Stored value bytes that do not decode; the message names the key."""


class UnknownVersionError(ValueDecodeError):
    """A stored key version for which no value codec is registered (policy "raise")."""


# --- store -------------------------------------------------------------------------------------


class StoreError(OpendataKvError):
    """A failure talking to SlateDB or the object store beneath it."""


class StoreClosedError(StoreError):
    """The store (or the transaction, snapshot, reader) was already closed."""


class FencedError(StoreClosedError):
    """Another writer opened the same database and fenced this one; its writes now fail."""


class StoreUnavailableError(StoreError):
    """The object store did not answer (outage, timeout); the call may succeed later."""


class TransactionConflictError(StoreError):
    """A transaction could not commit because a concurrent write conflicted with it."""


class StoreDataError(StoreError):
    """SlateDB reported corrupt or unreadable data."""


class ReadOnlyError(StoreError):
    """A write was attempted through a read-only reader."""


class ChangeCursorError(InvalidInputError):
    """A change-feed cursor that is not one opendata_kv made (malformed, truncated, edited)."""

    def __init__(self, message: str, cursor: object = None) -> None:
        super().__init__(message)
        self.cursor = cursor


class ChangeCursorExpiredError(StoreError):
    """A change-feed cursor whose WAL files were already garbage-collected: the changes after
    it are gone. Resync: read a checkpoint, then follow the feed from the checkpoint's cursor."""

    def __init__(self, message: str, cursor: object = None, wal_file_id: int = 0) -> None:
        super().__init__(message)
        self.cursor = cursor
        self.wal_file_id = wal_file_id


class CheckpointError(StoreError):
    """A checkpoint that cannot be made, found or used (unknown id, or a checkpoint that would
    lack acknowledged writes still only in the WAL)."""


class SnapshotGoneError(StoreDataError):
    """A read-only reader that follows the latest state found an object the writer's garbage
    collector had already deleted (read a checkpoint for long scans)."""


class RecordExistsError(StoreError):
    """A create found a record already stored under the key (nothing was overwritten)."""


class UrlCollisionError(StoreError):
    """Two different URLs share one 63-bit URL key; the stored page is not the one asked for."""


__all__ = [
    "ChangeCursorError",
    "ChangeCursorExpiredError",
    "CheckpointError",
    "FencedError",
    "IdError",
    "InvalidInputError",
    "KeyDecodeError",
    "KeyEncodeError",
    "KeyFormatError",
    "MuidError",
    "OpendataKvError",
    "ReadOnlyError",
    "RecordExistsError",
    "RkeyError",
    "SchemaError",
    "SnapshotGoneError",
    "StoreClosedError",
    "StoreDataError",
    "StoreError",
    "StoreUnavailableError",
    "TidError",
    "TransactionConflictError",
    "UnknownRecordError",
    "UnknownVersionError",
    "UrlCollisionError",
    "UrlKeyError",
    "ValueCodecError",
    "ValueDecodeError",
    "ValueEncodeError",
    "show_bytes",
]
