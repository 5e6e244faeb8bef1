"""Decoding one stored (key, value) pair into a dump row, as far as it decodes.

Keys are decoded record by record so that a key the schema does not know (or a value that
does not decode) becomes a row shown raw with the reason instead of ending the command.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from opendata_kv.cli.common import SchemaSpec, jsonable, load_schema, parse_hex
from opendata_kv.cli.layout_arg import check_layout, opendata_object, reads_as_opendata
from opendata_kv.errors import KeyDecodeError, UnknownRecordError, ValueDecodeError, show_bytes
from opendata_kv.keys import RecordType, Schema, parse_prefix
from opendata_kv.layouts import merge_frame, opendata
from opendata_kv.layouts.opendata_values import decode_value
from opendata_kv.values import Values, unpack


@dataclass
class Decoder:
    """Turns raw (key, value) pairs into dump rows with the schema, if any."""

    schema: Schema | None
    values: Values | None
    keyspace: bytes | None
    #: --layout (cli/layout_arg.py): how keys are read when there is no schema
    layout: str = "auto"
    #: how index keys (RFC 0010) are shown: cli/index_rows.IndexKeys, set once the database
    #: is open and stores indexes
    index_keys: Any = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Decoder:
        layout = check_layout(getattr(args, "layout", "auto"), bool(args.schema))
        spec: SchemaSpec | None = load_schema(args.schema) if args.schema else None
        keyspace = parse_hex(args.keyspace, "keyspace") if args.keyspace else None
        if spec is None:
            return cls(None, None, keyspace, layout)
        return cls(spec.schema, spec.values or Values(spec.schema), keyspace, layout)

    def is_opendata(self, key: bytes) -> bool:
        """True when `key` is read with OpenData's layouts (no schema, no keyspace)."""
        return self.schema is None and self.keyspace is None and reads_as_opendata(self.layout, key)

    def opendata_key(self, key: bytes) -> tuple[dict[str, Any], str | None]:
        """(JSON object of an OpenData key, None) or (a bare object, why it does not decode)."""
        try:
            decoded = opendata.decode_key(key)
        except KeyDecodeError as exc:
            bare = {"key_hex": key.hex(), "layout": "opendata", "subsystem": None}
            return {**bare, "record": None, "fields": None, "version": None}, str(exc)
        return opendata_object(key, decoded), None

    def opendata_value(self, obj: dict[str, Any], data: bytes) -> tuple[Any, str | None]:
        """(decoded value, None) or (None, why not) for the OpenData record `obj`."""
        try:
            return decode_value(obj["subsystem"], obj["record"], data), None
        except ValueDecodeError as exc:
            return None, f"value: {exc}"

    def _opendata_row(self, key: bytes, data: bytes, with_values: bool) -> Row:
        obj, key_error = self.opendata_key(key)
        obj.pop("rest_hex", None)
        value_error: str | None = None
        if with_values and key_error is None:
            value, value_error = self.opendata_value(obj, data)
            if value_error is None:
                obj["value"] = jsonable(value)
        if "value" not in obj:
            obj["value_hex"] = data.hex()
        obj["value_size"] = len(data)
        errors = [e for e in (key_error, value_error) if e is not None]
        obj["error"] = "; ".join(errors) if errors else None
        note = "no OpenData layout" if key_error else ""
        return Row(obj, key_error, value_error, None, note)

    def classify(self, key: bytes) -> tuple[bytes, RecordType | None, Any, str | None]:
        """(keyspace, owner, RecordPrefix or None, prefix error or None) of one key."""
        owner = self.schema.try_record_type_of(key) if self.schema is not None else None
        if self.keyspace is not None:
            keyspace = self.keyspace
        elif owner is not None:
            keyspace = owner.keyspace
        else:
            keyspace = b""
        try:
            return keyspace, owner, parse_prefix(key, keyspace), None
        except KeyDecodeError as exc:
            return keyspace, owner, None, str(exc)

    def row(self, key: bytes, data: bytes, *, with_values: bool) -> Row:
        """One record decoded as far as it goes; the reasons it went no further."""
        reason = merge_frame.failure(data)
        if reason is not None:  # the read-side merge operator could not keep this key's parts
            return failed_merge(self._row(key, b"", with_values=False), reason)
        row = self._row(key, data, with_values=with_values)
        if row.obj.get("value_hex") and merge_frame.is_frame(data):  # a merged key, raw
            public = merge_frame.shown(data)
            row.obj.update(value_hex=public.hex(), value_size=len(public))
        return row

    def _row(self, key: bytes, data: bytes, *, with_values: bool) -> Row:
        if self.index_keys is not None and self.layout != "none" and self.index_keys.owns(key):
            return self.index_keys.row(key, data, with_values)  # type: ignore[no-any-return]
        if self.is_opendata(key):
            return self._opendata_row(key, data, with_values=with_values)
        if self.layout == "none" and self.schema is None:
            raw: dict[str, Any] = {"key_hex": key.hex(), "layout": "none", "version": None}
            raw.update(record=None, fields=None, value_hex=data.hex(), value_size=len(data))
            raw["error"] = None
            return Row(raw, None, None, None, "bytes only")
        keyspace, owner, prefix, key_error = self.classify(key)
        short: str | None = None  # a shorter reason for the table, where it has one
        record: str | None = None
        fields: dict[str, Any] | None = None
        if self.schema is not None and key_error is None:
            try:
                # record_type_of raises UnknownRecordError naming the prefix nobody owns
                decoded = (owner or self.schema.record_type_of(key)).decode(key)
            except UnknownRecordError as exc:
                key_error = str(exc)
                short = "prefix not in the schema"
            except KeyDecodeError as exc:
                key_error = str(exc)
            else:
                record = decoded.record_type.name
                fields = {n: jsonable(v) for n, v in decoded.asdict().items()}
        obj: dict[str, Any] = {
            "key_hex": key.hex(),
            "version": prefix.version if prefix else None,
            "record_type": prefix.record_type if prefix else None,
            "reserved": prefix.reserved if prefix else None,
            "record": record,
            "fields": fields,
        }
        if keyspace:
            obj["keyspace_hex"] = keyspace.hex()
        value_error: str | None = None
        if with_values:
            value, value_error = self.value(owner if record else None, key, data)
            if value_error is None and not isinstance(value, bytes):
                obj["value"] = jsonable(value)
            else:
                obj["value_hex"] = data.hex()
        else:
            obj["value_hex"] = data.hex()
        obj["value_size"] = len(data)
        errors = [e for e in (key_error, value_error) if e is not None]
        obj["error"] = "; ".join(errors) if errors else None
        note = "" if prefix is not None else prefix_note(key, keyspace)
        return Row(obj, key_error, value_error, short, note)

    def value(self, owner: RecordType | None, key: bytes, data: bytes) -> tuple[Any, str | None]:
        """(decoded value, None) or (None, why it does not decode)."""
        try:
            if owner is not None and self.values is not None:
                return self.values.decode(owner, key, data, upgrade=False), None
            return unpack(data), None
        except ValueDecodeError as exc:
            return None, f"value: {exc}"
        except RecursionError:  # an upgrade or codec that walks a deep value recursively
            return None, "value: nested too deeply to decode (RecursionError)"


def failed_merge(row: Row, reason: str) -> Row:
    """`row` (decoded without its value) as the error row of a key whose merge failed: no value
    bytes to show (value_hex and value_size null), the reason as its value error."""
    obj = dict(row.obj, value_hex=None, value_size=None)
    obj.pop("value", None)
    value_error = f"value: the merge failed for this key: {reason}"
    obj["error"] = "; ".join(e for e in (row.key_error, value_error) if e is not None)
    return Row(obj, row.key_error, value_error, row.short_key_error, row.prefix_note)


def prefix_note(key: bytes, keyspace: bytes) -> str:
    """A few words on why `key` has no valid record prefix (for the table)."""
    k = len(keyspace)
    if len(key) < k + 2:
        return "too short"
    if not key.startswith(keyspace):
        return "not in keyspace"
    return "version 0" if key[k] == 0 else "record type 0"


@dataclass(frozen=True)
class Row:
    """One dump row: its JSON object and, apart, why the key or the value did not decode."""

    obj: dict[str, Any]
    key_error: str | None
    value_error: str | None
    short_key_error: str | None = None
    prefix_note: str = ""

    def reason(self, message: str) -> str:
        """`message` without the bytes the row already shows (key and value hex)."""
        key = show_bytes(bytes.fromhex(self.obj["key_hex"]))
        for noise in (f"key {key}: ", f"key {key} ", f"{key}: "):
            message = message.replace(noise, "")
        if self.obj["record"]:  # the RECORD column names it already
            message = message.removeprefix(f"value: {self.obj['record']} v{self.obj['version']} ")
        if self.obj.get("value_hex"):
            data = show_bytes(bytes.fromhex(self.obj["value_hex"]))
            for noise in (f": {data}", f" in {data}"):
                message = message.replace(noise, "")
        return message
