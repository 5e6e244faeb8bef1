"""The public namespace of key field codecs (RFC 0002): `fields.u64`, `fields.string`,
`fields.tid`, `fields.desc(f)`, ... The scalar codecs live in keys/codecs.py, the identifier
fields in keys/idfields.py, the length-prefixed and type-selected ones (RFC 0009) in
keys/lenfields.py; this module only gathers them."""

from __future__ import annotations

from opendata_kv.keys.codecs import (
    Desc,
    Field,
    Fixed,
    boolean,
    bytes_,
    escape,
    f64,
    i32,
    i64,
    invert,
    string,
    trailing_bytes,
    trailing_string,
    u8,
    u16,
    u32,
    u64,
    u128,
    unescape,
    var_u32,
    var_u64,
)
from opendata_kv.keys.idfields import muid, rkey, tid, url_key
from opendata_kv.keys.lenfields import Typed, lp_bytes, lp_string, typed


def fixed(size: int) -> Field:
    """A field of exactly `size` raw bytes."""
    return Fixed(size)


def desc(field: Field) -> Field:
    """The same field in descending order (every encoded byte inverted)."""
    return Desc(field)


__all__ = [
    "Desc",
    "Field",
    "Fixed",
    "Typed",
    "boolean",
    "bytes_",
    "desc",
    "escape",
    "f64",
    "fixed",
    "i32",
    "i64",
    "invert",
    "lp_bytes",
    "lp_string",
    "muid",
    "rkey",
    "string",
    "tid",
    "trailing_bytes",
    "trailing_string",
    "typed",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "unescape",
    "url_key",
    "var_u32",
    "var_u64",
]
