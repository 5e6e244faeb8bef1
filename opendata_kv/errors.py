"""The one exception hierarchy of opendata_kv, rooted at OpendataKvError.

Errors about bad input are also ValueErrors (arguments of the wrong type or shape also
TypeErrors), so callers that already catch the builtin keep working. Messages name the record,
the field and the offending bytes (as hex) or characters (repr); the same facts are attributes
(`record`, `field`, `value`, `offset`) for code that handles the error.
"""

from __future__ import annotations

from typing import Any, TypeVar

_T = TypeVar("_T")


def _escaped(char: str, as_json: bool) -> str:
    code = ord(char)
    if as_json:  # JSON has only \uXXXX: characters past the BMP as a surrogate pair
        if code <= 0xFFFF:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str, *, as_json: bool = False) -> str:
    """`text` with every character a terminal would act on or hide escaped as \\xNN /
    \\uNNNN (only \\uNNNN with `as_json`, for text inside a JSON string): C0 and C1 controls
    (escape sequences, newlines, carriage returns), DEL, line and paragraph separators, bidi
    overrides and other format characters (Cc, Cf, Zl, Zp; also unassigned, private-use and
    lone surrogate code points and spaces other than U+0020). The one escaping every command
    uses, so stored names and values cannot move the cursor, recolour the terminal or forge
    output lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c, as_json) for c in text)


def show_bytes(data: bytes | bytearray | memoryview, limit: int = 48) -> str:
    """Hex of `data` for an error message, shortened past `limit` bytes (the length is kept)."""
    raw = bytes(data)
    if len(raw) <= limit:
        return f"0x{raw.hex()}" if raw else "b'' (empty)"
    return f"0x{raw[:limit].hex()}... ({len(raw)} bytes)"


def show_text(text: str, limit: int = 48, *, quote: bool = True) -> str:
    """`text` for an error message: its repr (or, with quote=False, the text itself), cut
    past `limit` characters with the full length added, so a long bad input is never echoed
    in full."""
    if len(text) <= limit:
        return repr(text) if quote else printable(text)
    head = repr(text[:limit]) if quote else printable(text[:limit])
    return f"{head}... ({len(text)} characters)"


class OpendataKvError(Exception):
    """Root of every error opendata_kv raises on purpose.

    Beside the message, what the message names: `record` (record type name), `field` (key
    field or argument name), `value` (the offending value or bytes) and `offset` (byte offset
    in a key); each is None when it does not apply.
    """

    record: str | None
    field: str | None
    value: Any
    offset: int | None

    def __init__(
        self,
        message: str = "",
        *,
        record: str | None = None,
        field: str | None = None,
        value: Any = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.record = record
        self.field = field
        self.value = value
        self.offset = offset


class InvalidInputError(OpendataKvError, ValueError):
    """Input that can never be valid: malformed bytes, bad syntax, values out of range."""


class InvalidArgumentError(InvalidInputError):
    """A call argument out of range (`limit=-1`, `ttl=0`, an unknown isolation level, ...);
    `field` names the argument."""


def check_count(
    value: Any, field: str, minimum: int, *, none_ok: bool = False, hint: str = ""
) -> None:
    """InvalidArgumentError naming `field` unless `value` is an int >= `minimum` (never a bool;
    None passes when `none_ok`): one wording for every count argument (limit, batch_size...)."""
    if none_ok and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(
            f"{field} must be an int >= {minimum}{hint}, got {value!r}", field=field, value=value
        )


def check_choice(value: object, choices: tuple[_T, ...], field: str) -> _T:
    """The member of `choices` equal to `value`, else an InvalidArgumentError naming `field`
    (for policy names such as on_error="skip")."""
    for known in choices:
        if value == known:
            return known
    raise InvalidArgumentError(
        f"{field} must be one of {choices}, got {value!r}", field=field, value=value
    )


class MissingExtraError(OpendataKvError, ImportError):
    """An optional feature whose package is not installed; `field` names the extra to
    install (`pip install 'opendata-kv[<extra>]'`), `value` the missing module."""


class ArgumentTypeError(OpendataKvError, TypeError):
    """A call argument of the wrong type, or a required one missing (`put` without a value);
    `field` names the argument."""


class CursorError(InvalidInputError):
    """A page cursor (`after=`, a collection's `cursor=`) that is malformed or lies outside
    the scan's key range (a cursor from another record type or another scan); `field` names
    the argument, `value` is the cursor."""


# --- identifiers -------------------------------------------------------------------------------


class JetstreamEventError(InvalidInputError):
    """A Jetstream event that is no valid event (not JSON, a missing or mistyped field, a
    record the collection refuses): `field` names the JSON path, `value` the offending text;
    `time_us` is the event's time when it could be read (None otherwise)."""

    def __init__(
        self, message: str, *, field: str | None = None, value: Any = None, time_us: int | None
    ) -> None:
        super().__init__(message, field=field, value=value)
        self.time_us = time_us


class JetstreamConnectionError(OpendataKvError, ConnectionError):
    """A Jetstream websocket that could not be opened, closed abnormally or sent nothing for
    longer than the caller's bound; `value` is the URL."""


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
    """An inconsistent RecordType or Schema definition (duplicate names, bad nibbles, ...), or
    a RecordType or record name the store's schema does not hold (`record` names it)."""


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


class ValueLimitError(ValueDecodeError):
    """Stored value bytes that exceed a decode cap (size, container length, object count,
    nesting depth); refused before they can take the memory or time they ask for."""

    def __init__(
        self, message: str, *, cap: str, limit: int, record: str | None = None, value: Any = None
    ) -> None:
        super().__init__(message, record=record, value=value)
        #: the cap's name, as in DecodeLimits (e.g. "max_objects")
        self.cap = cap
        #: the cap's value when the value was refused
        self.limit = limit


# --- store -------------------------------------------------------------------------------------


class StoreError(OpendataKvError):
    """A failure talking to SlateDB or the object store beneath it."""


class StoreLocationError(StoreError, ValueError):
    """A database location that cannot be used as asked (a file where a directory belongs)."""


class StoreExistsError(StoreError, FileExistsError):
    """A database already exists at the location and the open asked `error_if_exists=True`."""


class ReentrantCallError(StoreError, RuntimeError):
    """A SyncStore called from its own event loop thread (it would wait for itself forever)."""


class StoreClosedError(StoreError):
    """The store (or the transaction, snapshot, reader) was already closed."""


class FencedError(StoreClosedError):
    """Another writer opened the same database and fenced this one; its writes now fail.

    `unflushed`: how many writes this store acknowledged after its last flush() that returned
    (lost with the fence, see docs/store.md); None where the error does not count them."""

    def __init__(self, message: str = "", *, unflushed: int | None = None) -> None:
        super().__init__(message)
        self.unflushed = unflushed


class StoreUnavailableError(StoreError):
    """The object store did not answer (outage, timeout); the call may succeed later."""


class TransactionConflictError(StoreError):
    """A transaction could not commit because a concurrent write conflicted with it."""


class StoreDataError(StoreError):
    """Corrupt, missing or unreadable data in the database (SlateDB's report or our own check).

    `object_name` is the damaged object's path in the store ("wal/00000000000000000011.sst")
    when it is known, else None.
    """

    def __init__(self, message: str = "", *, object_name: str | None = None, **facts: Any) -> None:
        super().__init__(message, **facts)
        self.object_name = object_name


class StorePermissionError(StoreError, PermissionError):
    """The object store refused access (file permissions, credentials, bucket policy);
    retrying does not help until the permissions change."""


class StoreNotFoundError(StoreDataError, FileNotFoundError):
    """No database at the location (a reader, or a writer opened with create_if_missing=False);
    a StoreDataError as before, and a FileNotFoundError."""


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


class ChangeDecodeError(ValueDecodeError):
    """A change in the feed whose value does not decode (on_error="raise"). `cursor` resumes
    after the last change delivered (None: none was), `bad_cursor` is the position right after
    the bad change (resume there to skip it), `seq` and `raw_key` name it."""

    def __init__(
        self,
        message: str,
        *,
        cursor: str | None,
        bad_cursor: str,
        seq: int,
        raw_key: bytes,
        record: str | None = None,
    ) -> None:
        super().__init__(message, record=record, value=raw_key)
        self.cursor = cursor
        self.bad_cursor = bad_cursor
        self.seq = seq
        self.raw_key = raw_key


class IncompleteCloneError(StoreError):
    """The database is a clone that was interrupted before its last record was written: it
    does not hold the source's state. Run the same clone again to resume it."""


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


class UniqueIndexError(StoreError):
    """A write that would give a unique index two records for one value: nothing was written.
    `index` names the index, `value` the indexed value, `key` the primary key already holding
    it (a Key, or raw bytes when it does not decode) and `new_key` the record refused."""

    def __init__(self, message: str, *, index: str, value: Any, key: Any, new_key: Any) -> None:
        super().__init__(message, field=index, value=value)
        self.index = index
        self.key = key
        self.new_key = new_key


class IndexStateError(StoreError):
    """An index read, build or drop the index's state does not allow (unknown index, still
    being built, declared differently than stored); `index` names it, `state` its state."""

    def __init__(self, message: str, *, index: str, state: str | None = None) -> None:
        super().__init__(message, field=index, value=state)
        self.index = index
        self.state = state


class IndexArgumentError(InvalidArgumentError):
    """Index read arguments that do not fit the index: the wrong number of field values for
    lookup / index_count / index_sum, or more leading values than it has fields. `index` names
    it, `fields` its field names, `value` the values given."""

    def __init__(self, message: str, *, index: str, fields: tuple[str, ...], value: Any) -> None:
        super().__init__(message, field=index, value=value)
        self.index = index
        self.fields = fields


class IndexAmountError(IndexArgumentError):
    """A sum index's amount it cannot add up exactly (not finite, an integer outside the signed
    64-bit range), or a write that would take a group's total past the range (RFC 0010,
    "Exact sums"): nothing was written. `index`, `group` (its field values), `record`, `key`
    and `value` (the amount) name them."""

    def __init__(
        self,
        message: str,
        *,
        index: str,
        fields: tuple[str, ...],
        group: Any,
        record: str,
        key: Any,
        value: Any,
    ) -> None:
        super().__init__(message, index=index, fields=fields, value=value)
        self.group = group
        self.record = record
        self.key = key


class IndexTtlError(IndexStateError):
    """A write (or build) of a record with a TTL into a count or sum index, which keeps no
    expiry (RFC 0010): nothing was written. `index`, `record` and `key` name them."""

    def __init__(self, message: str, *, index: str, record: str, key: Any) -> None:
        super().__init__(message, index=index)
        self.record = record
        self.key = key


__all__ = [
    "ArgumentTypeError",
    "ChangeCursorError",
    "ChangeCursorExpiredError",
    "ChangeDecodeError",
    "CheckpointError",
    "CursorError",
    "FencedError",
    "IdError",
    "IncompleteCloneError",
    "IndexAmountError",
    "IndexArgumentError",
    "IndexStateError",
    "IndexTtlError",
    "InvalidArgumentError",
    "InvalidInputError",
    "JetstreamConnectionError",
    "JetstreamEventError",
    "KeyDecodeError",
    "KeyEncodeError",
    "KeyFormatError",
    "MissingExtraError",
    "MuidError",
    "OpendataKvError",
    "ReadOnlyError",
    "RecordExistsError",
    "ReentrantCallError",
    "RkeyError",
    "SchemaError",
    "SnapshotGoneError",
    "StoreClosedError",
    "StoreDataError",
    "StoreError",
    "StoreExistsError",
    "StoreLocationError",
    "StoreNotFoundError",
    "StorePermissionError",
    "StoreUnavailableError",
    "TidError",
    "TransactionConflictError",
    "UniqueIndexError",
    "UnknownRecordError",
    "UnknownVersionError",
    "UrlCollisionError",
    "UrlKeyError",
    "ValueCodecError",
    "ValueDecodeError",
    "ValueEncodeError",
    "ValueLimitError",
    "printable",
    "show_bytes",
    "show_text",
]
