"""Key field values written as command-line text, parsed by the field's codec (key encode).

integers (u8..u128, i32, i64, var_u32, var_u64, url_key)   decimal, or 0x / 0o / 0b
f64                                                         a float, also nan / inf / -inf
bool                                                        true / false (1 / 0, yes / no)
bytes, trailing_bytes, fixed(n)                             hex (as `key inspect` reads)
muid                                                        its string form
string, trailing_string, tid, rkey                          the text itself
desc(f)                                                     as f
"""

from __future__ import annotations

from typing import Any

from opendata_kv.cli.common import CliError, parse_hex
from opendata_kv.errors import IdError, show_text
from opendata_kv.ids.muid import Muid
from opendata_kv.keys.fields import Desc, Field, Fixed

_INTEGERS = frozenset(
    {"u8", "u16", "u32", "u64", "u128", "i32", "i64", "var_u32", "var_u64", "url_key"}
)
_BYTES = frozenset({"bytes", "trailing_bytes"})
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def parse_field(record: str, name: str, field: Field, text: str) -> Any:
    """The value of field `name` of `record` written as `text`; CliError naming both."""
    base = field.inner if isinstance(field, Desc) else field
    kind = base.kind

    def bad(expected: str) -> CliError:
        return CliError(
            f"{record}: field {name!r} ({field.kind}): {show_text(text)} is not {expected}"
        )

    if kind in _INTEGERS:
        try:
            return int(text.replace("_", ""), 0)
        except ValueError:
            raise bad("an integer (decimal, or 0x.. hex)") from None
    if kind == "f64":
        try:
            return float(text)
        except ValueError:
            raise bad("a number") from None
    if kind == "bool":
        lowered = text.strip().lower()
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        raise bad("true or false")
    if kind in _BYTES or isinstance(base, Fixed):
        if text == "" and kind in _BYTES:
            return b""
        try:
            return parse_hex(text, f"{record} field {name!r}")
        except CliError:
            raise bad("hex bytes") from None
    if kind == "muid":
        try:
            return Muid.parse(text)
        except IdError as exc:
            raise CliError(f"{record}: field {name!r} ({field.kind}): {exc}") from None
    return text
