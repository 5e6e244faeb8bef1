"""What every subcommand shares: JSON output, `-` for many values on stdin, exit codes."""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import datetime
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from opendata_kv.cli.text import json_text, printable
from opendata_kv.errors import OpendataKvError, show_text
from opendata_kv.keys import Schema
from opendata_kv.values import Values
from opendata_kv.values.schema_forms import schema_and_values

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
#: 128 + SIGINT, as shells report a command ended by Ctrl-C
EXIT_INTERRUPTED = 130

Result = Mapping[str, Any]


class CliError(OpendataKvError):
    """A failure the command line reports as one line on stderr with exit code 1."""


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Every subcommand takes --json."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def emit_json(obj: Any) -> None:
    """Print one JSON line (compact, UTF-8 kept readable, every control or format character
    written as \\uXXXX by cli.text.json_text, so the line is valid UTF-8 JSON that a terminal
    shows as it is)."""
    sys.stdout.write(json_text(obj) + "\n")


def fail(message: str) -> int:
    """Report one clear line on stderr and return the bad-input exit code."""
    sys.stderr.write(f"opendata-kv: error: {printable(message)}\n")
    return EXIT_BAD_INPUT


def stdin_values() -> Iterator[str]:
    """Lines of stdin without their line ending; blank lines are skipped."""
    for line in sys.stdin:
        value = line.rstrip("\r\n")
        if value:
            yield value


def run_each(
    values: list[str],
    compute: Callable[[str], Result],
    as_text: Callable[[Result], str],
    *,
    as_json: bool,
    ok: Callable[[Result], bool] = lambda _r: True,
) -> int:
    """Apply `compute` to one value, or to every stdin line when the value is `-`.

    A single value: its result as text or JSON; bad input exits 1 with one line on stderr.
    With `-`: one JSON line per input; a bad line prints {"input", "error"} and the run goes on,
    exiting 1 at the end. `ok` says whether a computed result counts as success (validate).
    """
    if values != ["-"]:
        status = EXIT_OK
        for value in values:
            try:
                result = compute(value)
            except OpendataKvError as exc:
                return fail(str(exc))
            if as_json:
                emit_json(result)
            else:
                sys.stdout.write(as_text(result) + "\n")
            if not ok(result):
                status = EXIT_BAD_INPUT
        return status
    status = EXIT_OK
    for value in stdin_values():
        try:
            result = compute(value)
        except OpendataKvError as exc:
            # the line as read (JSON escapes it and gives it back), cut when long
            shown = value if len(value) <= 48 else f"{value[:48]}... ({len(value)} characters)"
            emit_json({"input": shown, "error": str(exc)})
            status = EXIT_BAD_INPUT
            continue
        emit_json(result)
        if not ok(result):
            status = EXIT_BAD_INPUT
    return status


# --- shared helpers for the key and database commands ------------------------------------------

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: the separators parse_hex documents: ASCII whitespace, `_` and `:` (not every character
#: str.isspace() knows: \x1c-\x1f, U+0085, U+3000 and the like are refused as bad digits)
_HEX_SPACE = " \t\n\r\v\f"
_HEX_SEPARATORS = frozenset(_HEX_SPACE + "_:")
_DROP_SEPARATORS = str.maketrans("", "", _HEX_SPACE + "_:")


def parse_hex(text: str, what: str = "key") -> bytes:
    """Bytes from hex written by a person: `0x` optional, any case, whitespace anywhere.

    `0110 6469`, `0x01106469` and `0X0110_6469` are the same bytes; `_` and `:` separators
    are allowed too, and ASCII whitespace (space, tab, newline, CR, VT, FF). Anything else is
    a CliError that names the offending character.
    """
    body = text.strip(_HEX_SPACE)
    skipped = len(text) - len(text.lstrip(_HEX_SPACE))
    if body[:2] in ("0x", "0X"):
        body = body[2:]
        skipped += 2
    compact = body.translate(_DROP_SEPARATORS)
    if compact and len(compact) % 2 == 0 and all(c in _HEX_DIGITS for c in compact):
        return bytes.fromhex(compact)  # the common case; anything odd goes the slow way
    digits = []
    for pos, char in enumerate(body):
        if char in _HEX_DIGITS:
            digits.append(char)
        elif char not in _HEX_SEPARATORS:
            raise CliError(
                f"bad hex {what} {show_text(text)}: {char!r} at position {pos + skipped} "
                "is not a hex digit"
            )
    if not digits:
        raise CliError(f"bad hex {what} {show_text(text)}: no hex digits")
    if len(digits) % 2:
        raise CliError(
            f"bad hex {what} {show_text(text)}: odd number of hex digits ({len(digits)}); "
            "every byte needs two"
        )
    return bytes.fromhex("".join(digits))


def parse_base64(text: str, what: str = "key") -> bytes:
    """Bytes from standard or URL-safe base64, padding optional, whitespace ignored."""
    body = "".join(text.split())
    if not body:
        raise CliError(f"bad base64 {what} {show_text(text)}: empty")
    if "-" in body or "_" in body:
        body = body.replace("-", "+").replace("_", "/")
    body = body.rstrip("=")
    body += "=" * (-len(body) % 4)
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CliError(f"bad base64 {what} {show_text(text)}: {exc}") from None


def jsonable(obj: Any) -> Any:
    """A JSON-friendly copy of a decoded key field or value.

    bytes -> hex string; non-finite floats -> "nan"/"inf"/"-inf"; dataclasses -> objects;
    datetimes -> ISO 8601; tuples/sets -> lists; map keys -> strings; anything else (Muid,
    enums, ...) -> its str().
    """
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, Mapping):
        return {_json_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((jsonable(v) for v in obj), key=repr)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    stored_names = getattr(type(obj), "__struct_encode_fields__", None)  # a msgspec.Struct
    if isinstance(stored_names, tuple):
        names = type(obj).__struct_fields__
        return {s: jsonable(getattr(obj, n)) for n, s in zip(names, stored_names, strict=True)}
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    return str(obj)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    value = jsonable(key)
    return value if isinstance(value, str) else json.dumps(value)


def aligned(pairs: Iterable[tuple[str, str]], indent: str = "") -> str:
    """`label: value` lines with the values lined up in one column."""
    rows = list(pairs)
    width = max((len(label) for label, _ in rows), default=0) + 1
    return "\n".join(f"{indent}{label + ':':<{width}} {value}".rstrip() for label, value in rows)


@dataclasses.dataclass(frozen=True)
class SchemaSpec:
    """What `--schema module:attr` named: the Schema, and its Values when it carried some."""

    spec: str
    schema: Schema
    values: Values | None


def load_schema(spec: str) -> SchemaSpec:
    """Import `module:attr` or load `path/to/file.py:attr` (attr may be dotted) and find the
    Schema it names.

    The attribute may be a Schema, a Values (its schema and codecs), an object with a
    `.schema` (and optionally `.values`), a RecordType or a list of them, or a callable with
    no arguments returning any of those. A module is looked up on PYTHONPATH and in the
    current directory, as with `python -m`; a file is loaded with its own directory
    importable, as when it is run. Every failure is a CliError naming the spec, never a
    traceback.
    """
    obj = load_attr(spec, "--schema", "myapp.schema:SCHEMA or ./schema.py:SCHEMA")
    found = schema_and_values(obj)
    if found is None and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise CliError(
                f"--schema {spec}: calling it failed: {type(exc).__name__}: {exc}"
            ) from None
        found = schema_and_values(obj)
    if found is None:
        raise CliError(
            f"--schema {spec} is a {type(obj).__name__}, not a Schema (give a Schema, a Values, "
            "an object with a .schema, RecordTypes, or a callable returning one)"
        )
    schema, values = found
    return SchemaSpec(spec, schema, values)


def load_attr(spec: str, option: str, example: str) -> Any:
    """The object `module:attr` or `path/to/file.py:attr` names (attr may be dotted), for
    `option` (e.g. --schema); every failure is a CliError naming the option and the spec."""
    module_name, sep, attr_path = spec.rpartition(":")
    if not sep or not module_name or not attr_path:
        raise CliError(
            f"{option} wants MODULE:ATTR or FILE.py:ATTR (e.g. {example}), got {show_text(spec)}"
        )
    obj: Any = (
        _load_file(spec, module_name, option)
        if _is_path(module_name)
        else _import(spec, module_name, option)
    )
    walked = module_name
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{option} {spec}: {walked!r} has no attribute {part!r}")
        obj = getattr(obj, part)
        walked = f"{walked}.{part}" if ":" in walked else f"{walked}:{part}"
    return obj


def _is_path(module_name: str) -> bool:
    return module_name.endswith(".py") or "/" in module_name or os.sep in module_name


def _import(spec: str, module_name: str, option: str) -> Any:
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(
            f"{option} {spec}: cannot import module {module_name!r} ({exc}); modules are "
            "looked up in the current directory and on PYTHONPATH, or give a file: "
            "./path/to/schema.py:ATTR"
        ) from None
    except Exception as exc:  # the module itself raised while importing
        raise CliError(
            f"{option} {spec}: importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _load_file(spec: str, path: str, option: str) -> Any:
    """The module in the Python file `path`, run with its directory importable."""
    import importlib.util

    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise CliError(f"{option} {spec}: there is no file {path} ({full})")
    name = "_opendata_kv_schema_" + "".join(c if c.isalnum() else "_" for c in full)
    if name in sys.modules:  # --schema and --indexes from one file: run it once
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, full)
    if module_spec is None or module_spec.loader is None:
        raise CliError(f"{option} {spec}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    directory = os.path.dirname(full)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise CliError(
            f"{option} {spec}: running {path} failed: {type(exc).__name__}: {exc}"
        ) from None
    return module
