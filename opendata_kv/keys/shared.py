"""SharedHead: several extended RecordTypes behind one head (RFC 0009).

OpenData's log puts its segment id between the version byte and the record tag, so every log
record type starts with the same constant bytes; vector's Deletions and DeletionsSentinel
share even the tag and differ only by a trailing byte. A Schema keeps such record types under
one SharedHead, which reads past the header fields to the tag, then looks at the suffix.
"""

from __future__ import annotations

from opendata_kv.errors import KeyDecodeError, SchemaError, UnknownRecordError, show_bytes
from opendata_kv.keys.record import Key, RecordType


class SharedHead:
    """The record types sharing one head; picks the one a key belongs to."""

    __slots__ = ("header", "types")

    def __init__(self, first: RecordType) -> None:
        self.types: list[RecordType] = [first]
        self.header = first.header

    def names(self) -> list[str]:
        return [t.name for t in self.types]

    def check(self, new: RecordType) -> None:
        """SchemaError unless `new` can be told apart from every type already here."""
        if new.header != self.header:
            raise SchemaError(
                f"{new.name!r} shares the prefix {show_bytes(new.head)} with {self.names()} "
                "but not their header fields: the record tag after them could not be found",
                record=new.name,
            )
        for other in self.types:
            if other.tag_byte != new.tag_byte:
                continue
            a, b = other.suffix, new.suffix
            if not a or not b or a.endswith(b) or b.endswith(a):
                raise SchemaError(
                    f"{new.name!r} and {other.name!r} share the prefix {show_bytes(new.head)} "
                    f"and the record tag 0x{new.tag_byte:02x}; records that share them must "
                    "differ by a suffix, none ending with another (got "
                    f"{show_bytes(b) if b else 'none'} and {show_bytes(a) if a else 'none'})",
                    record=new.name,
                )

    def add(self, new: RecordType) -> None:
        self.types.append(new)

    def _tag_at(self, key: bytes) -> int:
        """Offset of the record tag: after the head and the header fields, or without header
        fields the head's last byte."""
        if not self.header:
            return len(self.types[0].head) - 1
        pos = len(self.types[0].head)
        for name, field in self.header:
            try:
                pos = field.decode(key, pos)[1]
            except KeyDecodeError as exc:
                raise KeyDecodeError(
                    f"header field {name!r} at offset {pos}: {exc}", field=name, offset=pos
                ) from None
        return pos

    def pick(self, key: bytes) -> RecordType | None:
        """The record type `key` belongs to, or None."""
        try:
            pos = self._tag_at(key)
        except KeyDecodeError:
            return None
        if pos >= len(key):
            return None
        tag = key[pos]
        candidates = [t for t in self.types if t.tag_byte == tag]
        for record_type in candidates:
            suffix = record_type.suffix
            if not suffix or (len(key) > pos + len(suffix) and key.endswith(suffix)):
                return record_type
        return None

    def decode(self, key: bytes) -> Key:
        found = self.pick(key)
        if found is None:
            raise self.unknown(key)
        decoded: Key = found.decode(key)
        return decoded

    def unknown(self, key: bytes) -> UnknownRecordError:
        """Why no record type here takes `key`, naming the offset where decoding stopped."""
        try:
            pos = self._tag_at(key)
        except KeyDecodeError as exc:
            return UnknownRecordError(
                f"key {show_bytes(key)}: the header after prefix {show_bytes(self.types[0].head)}"
                f" does not decode: {exc}",
                value=key,
                offset=exc.offset,
            )
        tags = sorted({t.tag_byte for t in self.types})
        if pos >= len(key):
            return UnknownRecordError(
                f"key {show_bytes(key)}: ends at offset {pos}, where a record tag "
                f"({', '.join(f'0x{t:02x}' for t in tags)}) belongs",
                value=key,
                offset=pos,
            )
        tag = key[pos]
        if tag not in tags:
            return UnknownRecordError(
                f"key {show_bytes(key)}: record tag 0x{tag:02x} at offset {pos} is not one of "
                f"{', '.join(f'0x{t:02x}' for t in tags)} ({', '.join(self.names())})",
                value=key,
                offset=pos,
            )
        suffixes = [t.suffix.hex() for t in self.types if t.tag_byte == tag]
        if len(key) == pos + 1:
            return UnknownRecordError(
                f"key {show_bytes(key)}: ends at offset {pos + 1} after record tag "
                f"0x{tag:02x}, where one of the suffixes {suffixes} belongs",
                value=key,
                offset=pos + 1,
            )
        at = len(key) - 1
        return UnknownRecordError(
            f"key {show_bytes(key)}: record tag 0x{tag:02x} at offset {pos}, but the key ends "
            f"with 0x{key[-1]:02x} at offset {at}, none of the suffixes {suffixes}",
            value=key,
            offset=at,
        )
