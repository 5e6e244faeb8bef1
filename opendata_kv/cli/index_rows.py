"""dump rows of index keys (RFC 0010): entries by index name with their decoded field values
and the primary key they point to (aggregates: count and sum), metadata rows as the index's
metadata, the catalog as the list of names. The field codecs come from the stored definitions,
so no declaration is needed (a definition's functions are not needed to decode an entry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opendata_kv.cli.common import jsonable
from opendata_kv.cli.rows import Row
from opendata_kv.errors import OpendataKvError, StoreDataError, show_bytes
from opendata_kv.keys import Schema
from opendata_kv.keys.codec_names import field_named
from opendata_kv.keys.fields import Field
from opendata_kv.store.indexes.admin import stored_metas
from opendata_kv.store.indexes.kinds import KINDS
from opendata_kv.store.indexes.layout import (
    CATALOG,
    ENTRIES,
    META,
    ROOT,
    decode_entry,
    decode_meta,
    index_name_of,
)

if TYPE_CHECKING:
    from opendata_kv.store import StoreReader

Fields = tuple[tuple[str, Field], ...]


@dataclass
class IndexKeys:
    """What dump needs to show index keys: each stored index's kind and field codecs."""

    kinds: dict[str, str]
    #: the field codecs of each index, or why its definition names a codec we do not know
    fields: dict[str, Fields | str]
    schema: Schema | None

    @classmethod
    async def load(cls, store: StoreReader, schema: Schema | None) -> IndexKeys:
        kinds: dict[str, str] = {}
        fields: dict[str, Fields | str] = {}
        for name, meta in (await stored_metas(store)).items():
            definition = meta["definition"]
            kinds[name] = str(definition.get("kind"))
            try:
                fields[name] = tuple((str(n), field_named(c)) for n, c in definition["fields"])
            except (OpendataKvError, KeyError, TypeError, ValueError) as exc:
                fields[name] = f"its stored definition names an unknown codec: {exc}"
        return cls(kinds, fields, schema)

    @staticmethod
    def owns(key: bytes) -> bool:
        """True for the keys of the index key space."""
        return key.startswith(ROOT)

    def row(self, key: bytes, data: bytes, with_values: bool = True) -> Row:
        """One index key decoded as far as it goes; its value (metadata, catalog, count and
        sum, a unique entry's record key) decoded only `with_values`, as records' are."""
        obj: dict[str, Any] = {
            "key_hex": key.hex(),
            "layout": "index",
            "index": None,
            "entry": None,
            "record": None,
            "version": None,
            "fields": None,
        }
        error: str | None = None
        try:
            if key == CATALOG:
                obj["entry"] = "catalog"
                if with_values:
                    obj["value"] = jsonable(decode_meta_map(key, data))
            elif key.startswith(META):
                obj["entry"] = "metadata"
                obj["index"] = key[len(META) :].decode(errors="replace")
                if with_values:
                    obj["value"] = jsonable(decode_meta(key, data))
            elif key.startswith(ENTRIES):
                self._entry(obj, key, data, with_values)
            else:
                error = "not an index key RFC 0010 defines (catalog, metadata or entry)"
        except OpendataKvError as exc:
            error = str(exc)
        if "value" not in obj:
            obj["value_hex"] = data.hex()
        obj["value_size"] = len(data)
        obj["error"] = error
        return Row(obj, error, None)

    def _entry(self, obj: dict[str, Any], key: bytes, data: bytes, with_values: bool) -> None:
        name = index_name_of(key)
        if name is None:
            raise StoreDataError(
                "an index entry key without the 00 that ends its index name", value=key
            )
        obj["index"] = name
        fields = self.fields.get(name)
        if fields is None:
            raise StoreDataError(
                f"no index named {name!r} is stored (its metadata is missing)", field=name
            )
        if isinstance(fields, str):
            raise StoreDataError(f"index {name!r}: {fields}", field=name)
        obj["entry"] = self.kinds[name]
        kind = KINDS.get(self.kinds[name])
        if kind is None:
            raise StoreDataError(
                f"index {name!r} is of kind {self.kinds[name]!r}, which this version does not "
                f"know (it knows {list(KINDS)})",
                field=name,
            )
        values, rest = decode_entry(name, fields, key)
        obj["fields"] = {n: jsonable(v) for (n, _), v in zip(fields, values, strict=True)}
        shown = kind.shown_value(name, key, data) if with_values else None
        if shown is not None:
            obj["value"] = {n: jsonable(v) for n, v in shown.items()}
        # the record key: in the entry key, or (a unique entry's) the value, read only `with_values`
        primary = kind.primary(rest, data if with_values else None)
        if primary is not None:
            obj["primary"] = self._primary(primary)

    def _primary(self, primary: bytes) -> dict[str, Any]:
        out: dict[str, Any] = {"key_hex": primary.hex(), "record": None, "fields": None}
        owner = self.schema.try_record_type_of(primary) if self.schema is not None else None
        if owner is not None:
            try:
                decoded = owner.decode(primary)
            except OpendataKvError:
                return out
            out["record"] = owner.name
            out["fields"] = {n: jsonable(v) for n, v in decoded.asdict().items()}
        return out


def decode_meta_map(key: bytes, data: bytes) -> Any:
    """The catalog's value (msgpack {"indexes": [names]})."""
    import msgpack

    try:
        return msgpack.unpackb(data)
    except Exception as exc:
        raise StoreDataError(
            f"index catalog {show_bytes(key)} does not decode: {exc}", value=key
        ) from None
