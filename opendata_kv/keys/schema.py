"""Schema: the RecordTypes that share one database, and decoding of any key by its prefix."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from opendata_kv.errors import KeyDecodeError, SchemaError, UnknownRecordError, show_bytes
from opendata_kv.keys.prefix import as_key_bytes, parse_prefix, record_type_text
from opendata_kv.keys.record import Key, RecordType
from opendata_kv.keys.shared import SharedHead


class Schema:
    """A set of RecordTypes; (keyspace, version, record tag) identifies exactly one of them.

    Several versions of one logical record (same name and record type, other version byte)
    may be registered together: old keys keep decoding after a layout change.
    """

    __slots__ = ("_by_head", "_by_name", "_head_sizes", "_types")

    def __init__(self, *record_types: RecordType | Iterable[RecordType]) -> None:
        self._types: list[RecordType] = []
        #: head -> its RecordType, or a SharedHead when several extended layouts share the
        #: head and differ after it (by the tag after header fields, or by a suffix)
        self._by_head: dict[bytes, RecordType | SharedHead] = {}
        self._by_name: dict[str, dict[int, RecordType]] = {}
        self._head_sizes: tuple[int, ...] = ()
        for item in record_types:
            for record_type in [item] if isinstance(item, RecordType) else item:
                self.add(record_type)

    def add(self, record_type: RecordType) -> RecordType:
        """Register one RecordType; a second owner of the same prefix is a SchemaError."""
        if not isinstance(record_type, RecordType):
            raise SchemaError(f"Schema holds RecordTypes, got {record_type!r}")
        other = self._by_head.get(record_type.head)
        shared: SharedHead | None = None
        if other is not None and record_type.extended and _extended(other):
            shared = other if isinstance(other, SharedHead) else SharedHead(other)
            shared.check(record_type)  # SchemaError when the two cannot be told apart
        elif isinstance(other, SharedHead):
            raise SchemaError(
                f"{record_type.name!r} has the prefix {show_bytes(record_type.head)}, which "
                f"{other.names()} share with header fields or suffixes after it: keys would "
                "be ambiguous"
            )
        elif other is not None:
            raise SchemaError(
                f"{record_type.name!r} and {other.name!r} share the prefix "
                f"{show_bytes(record_type.head)} (keyspace, version {record_type.version}, "
                f"record type {record_type_text(record_type.record_type)}, reserved "
                f"{record_type.reserved})"
            )
        for head, owner in self._by_head.items():
            if head == record_type.head:
                continue
            if head.startswith(record_type.head) or record_type.head.startswith(head):
                # One prefix inside the other: some keys would match both layouts, and a scan
                # of the shorter one would return keys of the longer.
                raise SchemaError(
                    f"{record_type.name!r} has the prefix {show_bytes(record_type.head)} and "
                    f"{_name(owner)!r} has {show_bytes(head)}: one starts with the other, so "
                    "keys would be ambiguous (check the keyspaces)"
                )
        for existing in self._by_name.get(record_type.name, {}).values():
            _check_same_record(existing, record_type)
        _check_look_alike(record_type.name, self._by_name)
        self._types.append(record_type)
        if shared is not None:
            shared.add(record_type)
            self._by_head[record_type.head] = shared
        else:
            self._by_head[record_type.head] = record_type
        self._by_name.setdefault(record_type.name, {})[record_type.version] = record_type
        self._head_sizes = tuple(sorted({len(h) for h in self._by_head}, reverse=True))
        return record_type

    # --- lookup ---------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[RecordType]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def __contains__(self, item: object) -> bool:
        """True for a RecordType registered here (the object itself, not a look-alike)."""
        if not isinstance(item, RecordType):
            return False
        owner = self._by_head.get(item.head)
        return owner is item or (isinstance(owner, SharedHead) and item in owner.types)

    def __repr__(self) -> str:
        return f"Schema({', '.join(f'{t.name}@v{t.version}' for t in self._types)})"

    def names(self) -> list[str]:
        """Logical record names, in registration order."""
        return list(self._by_name)

    def get(self, name: str, version: int | None = None) -> RecordType:
        """The RecordType called `name` (its newest version unless `version` is given)."""
        versions = self._by_name.get(name)
        if not versions:
            raise SchemaError(f"no record type named {name!r}; known: {self.names()}")
        if version is None:
            return versions[max(versions)]
        try:
            return versions[version]
        except KeyError:
            raise SchemaError(
                f"{name!r} has no version {version}; registered: {sorted(versions)}"
            ) from None

    def versions(self, name: str) -> list[RecordType]:
        """Every registered version of `name`, oldest first."""
        versions = self._by_name.get(name)
        if not versions:
            raise SchemaError(f"no record type named {name!r}; known: {self.names()}")
        return [versions[v] for v in sorted(versions)]

    def select(
        self, record_type: int | None = None, version: int | None = None
    ) -> list[RecordType]:
        """RecordTypes filtered by record type nibble and/or version byte."""
        return [
            t
            for t in self._types
            if (record_type is None or t.record_type == record_type)
            and (version is None or t.version == version)
        ]

    def declaring(self, key_class: type[Any]) -> RecordType:
        """The one RecordType of this schema declared with the NamedTuple `key_class`;
        SchemaError when none is, or several are (then give the RecordType with the fields)."""
        found = [t for t in self._types if t.declared is key_class]
        if len(found) != 1:
            which = "no RecordType" if not found else f"{len(found)} RecordTypes"
            raise SchemaError(
                f"{which} of this schema declared with the key class {key_class.__qualname__}"
                f"{': ' + str([f'{t.name}@v{t.version}' for t in found]) if found else ''}; "
                "address the record with its RecordType and fields",
                value=key_class,
            )
        return found[0]

    # --- decoding -------------------------------------------------------------------------------

    def record_type_of(self, key: bytes) -> RecordType:
        """The RecordType whose prefix `key` starts with; UnknownRecordError naming the bytes."""
        found = self.try_record_type_of(key)
        if found is None:
            raise self._unknown(as_key_bytes(key))
        return found

    def try_record_type_of(self, key: bytes) -> RecordType | None:
        """Like record_type_of, but None for a key no RecordType owns."""
        if key.__class__ is not bytes:
            key = as_key_bytes(key)
        by_head = self._by_head
        for size in self._head_sizes:
            found = by_head.get(key[:size])
            if found is not None:
                return found.pick(key) if isinstance(found, SharedHead) else found
        return None

    def record_types_of(self, keys: Sequence[bytes]) -> list[RecordType | None]:
        """try_record_type_of of each of `keys` (bytes: a batch's own), in one pass: with one
        head size and no shared head, one dict lookup each."""
        sizes = self._head_sizes
        by_head = self._by_head
        if len(sizes) == 1 and not any(isinstance(o, SharedHead) for o in by_head.values()):
            size, get = sizes[0], by_head.get
            found: list[Any] = [get(key[:size]) for key in keys]
            return found
        return list(map(self.try_record_type_of, keys))

    def decode(self, key: bytes) -> Key:
        """Decode any key of this schema into its RecordType's Key object.

        bytearray and memoryview are accepted; anything else that is not bytes is a
        KeyDecodeError, as is a key whose prefix no RecordType owns (UnknownRecordError).
        """
        if key.__class__ is not bytes:
            key = as_key_bytes(key)
        by_head = self._by_head
        for size in self._head_sizes:  # inlined record_type_of: this is the hot path of scans
            found = by_head.get(key[:size])
            if found is not None:
                decoded: Key = found.decode(key)
                return decoded
        raise self._unknown(key)

    def why_unknown(self, key: bytes) -> UnknownRecordError:
        """The error record_type_of raises for `key` (which no RecordType owns)."""
        return self._unknown(as_key_bytes(key))

    def _unknown(self, key: bytes) -> UnknownRecordError:
        for size in self._head_sizes:
            found = self._by_head.get(key[:size])
            if isinstance(found, SharedHead):
                return found.unknown(key)
        if self._types and all(t.extended for t in self._types):
            return _unknown_extended(self._types, key)
        keyspaces = sorted({t.keyspace for t in self._types}, key=len, reverse=True) or [b""]
        candidates = [k for k in keyspaces if key.startswith(k)]
        if not candidates:
            return UnknownRecordError(
                f"key {show_bytes(key)} starts with none of the keyspaces "
                f"{[show_bytes(k) for k in keyspaces]}"
            )
        # The longest keyspace the key starts with is the likeliest reading of its prefix.
        first_error: KeyDecodeError | None = None
        for keyspace in candidates:
            try:
                parts = parse_prefix(key, keyspace)
            except KeyDecodeError as exc:  # reserved or short prefix
                first_error = first_error or exc
                continue
            k = len(keyspace)
            return UnknownRecordError(
                f"key {show_bytes(key)}: no record type registered for prefix "
                f"{show_bytes(key[k : k + 2])} (version {parts.version}, record type "
                f"{record_type_text(parts.record_type)}, reserved {parts.reserved})"
                + (f" in keyspace {show_bytes(keyspace)}" if keyspace else "")
            )
        return UnknownRecordError(str(first_error))

    def describe(self) -> list[dict[str, Any]]:
        """A JSON-friendly description of every RecordType (for tools and docs)."""
        return [
            {
                "name": t.name,
                "version": t.version,
                "record_type": t.record_type,
                "reserved": t.reserved,
                "keyspace": t.keyspace.hex(),
                "prefix": t.head.hex(),
                "fields": [[n, f.kind] for n, f in t.fields],
            }
            for t in self._types
        ]


def _extended(owner: RecordType | SharedHead) -> bool:
    return isinstance(owner, SharedHead) or owner.extended


def _name(owner: RecordType | SharedHead) -> str:
    return owner.name if isinstance(owner, RecordType) else " / ".join(owner.names())


def _unknown_extended(types: list[RecordType], key: bytes) -> UnknownRecordError:
    """No head matched: name the first offset at which `key` leaves every head."""
    best = max(
        (
            next(
                (i for i, (a, b) in enumerate(zip(key, t.head, strict=False)) if a != b),
                min(len(key), len(t.head)),
            )
            for t in types
        ),
        default=0,
    )
    found = f"0x{key[best]:02x}" if best < len(key) else "the end of the key"
    return UnknownRecordError(
        f"key {show_bytes(key)}: no layout matches: decoding stopped at offset {best} "
        f"({found}); known prefixes: {sorted({t.head.hex() for t in types})}",
        value=key,
        offset=best,
    )


def _describe(record_type: RecordType) -> str:
    keyspace = show_bytes(record_type.keyspace) if record_type.keyspace else "none"
    return (
        f"record type {record_type_text(record_type.record_type)}, version {record_type.version}, "
        f"keyspace {keyspace}, prefix {show_bytes(record_type.head)}"
    )


def _check_same_record(existing: RecordType, new: RecordType) -> None:
    """Two RecordTypes of one name must be versions of one record: same record type and
    keyspace, other version byte. A Schema finds record types by name (get, select, a scan
    by name), and a name that stood for two records would pick one of them silently."""
    why = (
        "a Schema finds record types by name (schema.get, scan by name), so one name may only "
        "stand for versions of one record: the same record type and keyspace under another "
        "version byte"
    )
    if (existing.record_type, existing.keyspace) != (new.record_type, new.keyspace):
        raise SchemaError(
            f"two different record types are both named {new.name!r} ({_describe(existing)}; "
            f"{_describe(new)}): {why}; rename one of them",
            record=new.name,
        )
    if existing.version == new.version:
        raise SchemaError(
            f"{new.name!r} version {new.version} is registered twice ({_describe(existing)}; "
            f"{_describe(new)}): {why}; give the new layout another version byte",
            record=new.name,
        )


def _look(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


def _check_look_alike(name: str, names: Iterable[str]) -> None:
    """Two record names that differ only in Unicode compatibility forms (the ligature U+FB01
    and "fi", full-width and plain letters) read as one in the tools' output: the second is
    refused."""
    for other in names:
        if other != name and _look(other) == _look(name):
            raise SchemaError(
                f"record type name {name!r} looks like {other!r} (they differ only in "
                "Unicode compatibility forms); rename one of them",
                record=name,
                value=name,
            )
