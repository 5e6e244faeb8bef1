"""Identifier helpers on the command line: `tid`, `rkey`, `muid` and `url-key` subcommands.

Every value-taking command accepts `-` to read one value per stdin line (one JSON line out
each). JSON datetimes are ISO 8601 in UTC with microseconds and a `+00:00` offset.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from opendata_kv.cli.common import EXIT_OK, Result, add_json_flag, emit_json, run_each
from opendata_kv.cli.text import printable
from opendata_kv.errors import MuidError, RkeyError
from opendata_kv.ids import rkey, tid, urlkey
from opendata_kv.ids.muid import Muid, MuidGenerator


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the tid, rkey, muid and url-key command groups."""
    _register_tid(subparsers)
    _register_rkey(subparsers)
    _register_muid(subparsers)
    _register_url_key(subparsers)


# --- argument types (bad values are usage errors: exit 2) --------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _ranged_int(name: str, low: int, high: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} must be {low}..{high}, got {value}")
        return value

    return convert


def _key_type(text: str) -> rkey.KeyType:
    try:
        return rkey.KeyType.parse(text)
    except RkeyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _values_argument(parser: argparse.ArgumentParser, name: str, what: str) -> None:
    parser.add_argument(name, nargs="+", help=f"{what}; '-' reads one per line from stdin")


def _leaf(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=help_text, description=help_text)
    add_json_flag(parser)
    parser.set_defaults(handler=handler)
    return parser


def _print_text(line: str) -> None:
    sys.stdout.write(line + "\n")


def _validation(value: str, error: str | None) -> Result:
    return {"input": value, "valid": error is None, "error": error}


def _validation_text(result: Result) -> str:
    shown = printable(result["input"])  # the input as given, its control characters escaped
    if result["valid"]:
        return f"{shown}\tvalid"
    return f"{shown}\tinvalid: {printable(result['error'])}"


def _is_valid(result: Result) -> bool:
    return bool(result["valid"])


# --- tid ---------------------------------------------------------------------------------------


def _register_tid(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser(
        "tid", help="AT Protocol TIDs: make, decode, validate", description="AT Protocol TIDs"
    ).add_subparsers(dest="tid_command", metavar="ACTION", required=True)

    new = _leaf(group, "new", "print new TIDs (strictly increasing)", _tid_new)
    new.add_argument("-n", type=_count, default=1, metavar="N", help="how many (default 1)")
    new.add_argument(
        "--clock-id",
        type=_ranged_int("clock id", 0, tid.MAX_CLOCK_ID),
        help="10-bit clock id (default: random)",
    )

    decode = _leaf(group, "decode", "show the timestamp and clock id inside TIDs", _tid_decode)
    _values_argument(decode, "values", "TID strings")

    validate = _leaf(group, "validate", "check TID syntax (exit 1 if any is invalid)", _tid_check)
    _values_argument(validate, "values", "strings to check")


def _tid_fields(value: str) -> Result:
    n = tid.decode(value)
    return {
        "tid": tid.encode(n),
        "int": n,
        "timestamp_us": n >> tid.CLOCK_ID_BITS,
        "clock_id": n & tid.MAX_CLOCK_ID,
        "datetime": tid.to_datetime(n).isoformat(timespec="microseconds"),
    }


def _tid_text(result: Result) -> str:
    return (
        f"{result['tid']}\tint={result['int']}\ttimestamp_us={result['timestamp_us']}"
        f"\tclock_id={result['clock_id']}\tdatetime={result['datetime']}"
    )


def _tid_new(args: argparse.Namespace) -> int:
    generator = tid.TidGenerator(args.clock_id)
    for _ in range(args.n):
        made = generator.next()
        if args.json:
            emit_json(_tid_fields(made))
        else:
            _print_text(made)
    return EXIT_OK


def _tid_decode(args: argparse.Namespace) -> int:
    return run_each(args.values, _tid_fields, _tid_text, as_json=args.json)


def _tid_check(args: argparse.Namespace) -> int:
    def compute(value: str) -> Result:
        return _validation(value, tid.explain(value))

    return run_each(args.values, compute, _validation_text, as_json=args.json, ok=_is_valid)


# --- rkey --------------------------------------------------------------------------------------


def _register_rkey(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser(
        "rkey", help="AT Protocol record keys: validate", description="AT Protocol record keys"
    ).add_subparsers(dest="rkey_command", metavar="ACTION", required=True)
    validate = _leaf(
        group, "validate", "check record keys (exit 1 if any is invalid)", _rkey_validate
    )
    _values_argument(validate, "values", "record keys to check")
    validate.add_argument(
        "--type",
        dest="key_type",
        type=_key_type,
        default=rkey.KeyType("any"),
        metavar="T",
        help="Lexicon key type: any (default), tid, nsid or literal:<value>",
    )


def _rkey_validate(args: argparse.Namespace) -> int:
    key_type: rkey.KeyType = args.key_type

    def compute(value: str) -> Result:
        try:
            rkey.validate(value, key_type)
        except RkeyError as exc:
            return _validation(value, str(exc))
        return _validation(value, None)

    return run_each(args.values, compute, _validation_text, as_json=args.json, ok=_is_valid)


# --- muid --------------------------------------------------------------------------------------


def _register_muid(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser(
        "muid", help="Gink muids: make, parse, encode", description="Gink muids"
    ).add_subparsers(dest="muid_command", metavar="ACTION", required=True)

    new = _leaf(group, "new", "print muids of one new transaction (offsets 1..N)", _muid_new)
    new.add_argument("-n", type=_count, default=1, metavar="N", help="how many (default 1)")
    new.add_argument(
        "--medallion",
        type=_ranged_int("medallion", 1, (1 << 44) - 2),
        help="medallion to use (default: random in 0x10000000000..0x1FFFFFFFFFF)",
    )

    parse = _leaf(group, "parse", "show the fields of muid strings", _muid_parse)
    _values_argument(parse, "values", "muid strings (canonical, short or 32 hex digits)")

    encode_help = "build a muid from timestamp, medallion and offset"
    encode = group.add_parser("encode", help=encode_help, description=encode_help)
    add_json_flag(encode)
    encode.add_argument("ts", metavar="TS", help="timestamp µs (or '-': lines of TS MED OFF)")
    encode.add_argument("med", metavar="MED", nargs="?", help="medallion")
    encode.add_argument("off", metavar="OFF", nargs="?", help="offset (decimal or 0x hex)")
    encode.set_defaults(handler=lambda args: _muid_encode(args, encode))


def _muid_fields(m: Muid) -> dict[str, Any]:
    return {
        "timestamp": m.timestamp,
        "medallion": m.medallion,
        "offset": m.offset,
        "string": str(m),
        "hex": m.hex,
    }


def _muid_text(result: Result) -> str:
    return (
        f"{result['string']}\ttimestamp={result['timestamp']}\tmedallion={result['medallion']}"
        f"\toffset={result['offset']}\thex={result['hex']}"
    )


def _muid_new(args: argparse.Namespace) -> int:
    transaction = MuidGenerator(args.medallion).transaction()
    for _ in range(args.n):
        made = transaction.next()
        if args.json:
            emit_json(_muid_fields(made))
        else:
            _print_text(str(made))
    return EXIT_OK


def _muid_parse(args: argparse.Namespace) -> int:
    def compute(value: str) -> Result:
        return {"input": value, **_muid_fields(Muid.parse(value))}

    return run_each(args.values, compute, _muid_text, as_json=args.json)


def _parse_component(name: str, text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise MuidError(f"muid {name}: expected an integer, got {text!r}") from None


def _muid_from_words(line: str) -> Result:
    words = line.split()
    if len(words) != 3:
        raise MuidError(f"expected three integers TS MED OFF, got {len(words)} in {line!r}")
    ts, med, off = (
        _parse_component(name, word)
        for name, word in zip(("timestamp", "medallion", "offset"), words, strict=True)
    )
    return {"input": line, **_muid_fields(Muid(ts, med, off))}


def _muid_encode(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    words = [w for w in (args.ts, args.med, args.off) if w is not None]
    if words == ["-"]:
        return run_each(words, _muid_from_words, _muid_text, as_json=args.json)
    if len(words) != 3:
        parser.error(f"expected TS MED OFF (three integers) or '-', got {len(words)} value(s)")
    return run_each([" ".join(words)], _muid_from_words, _muid_text, as_json=args.json)


# --- url-key -----------------------------------------------------------------------------------


def _register_url_key(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_text = "scrape URL keys: the 63-bit key of each URL (as Go's net/url writes it)"
    parser = subparsers.add_parser("url-key", help=help_text, description=help_text)
    _values_argument(parser, "values", "URLs")
    parser.add_argument(
        "--clean", action="store_true", help="drop utm_* tracking parameters and the fragment first"
    )
    add_json_flag(parser)
    parser.set_defaults(handler=_url_key)


def _url_key(args: argparse.Namespace) -> int:
    clean: bool = args.clean

    def compute(value: str) -> Result:
        url = urlkey.clean_url(value) if clean else urlkey.normalize(value)
        key = urlkey.url_key(value, clean=clean)
        return {"input": value, "url": url, "key": key, "hex": f"0x{key:016x}"}

    def as_text(result: Result) -> str:
        return f"{result['hex']}\t{result['key']}\t{printable(result['url'])}"

    return run_each(args.values, compute, as_text, as_json=args.json)
