"""Fuzzing the public decode entry points with random and mutated input.

Each entry point gets valid input, the same input damaged (bytes or characters flipped, set to
boundary values, inserted, deleted, duplicated, cut off) and plain random input. The contract:
it raises only its OpendataKvError subclass, or it returns a value that is exactly right --
checked against an independent oracle (a regular expression straight from DESIGN.md, a
re-encode that must give back the very same bytes, a class the value must be an instance of).
Nothing may hang (hypothesis deadline per example, plus a SIGALRM guard per test) and nothing
may take the interpreter down: the C-extension and CLI paths also run in child processes,
whose exit status must be an ordinary one.

Examples per test follow the hypothesis profile in conftest.py: OPENDATA_KV_FUZZ=long for a
soak run. Entry points: Schema.decode and RecordType.decode (a schema holding every field
codec), every field codec's decode/decode_all, Muid.parse/from_bytes, tid.decode,
rkey.validate, url_key/clean_url/normalize, the msgpack/dataclass/raw value codecs and
Values.decode (with an upgrade), and the `opendata-kv` id commands and `key inspect`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import fuzz_schema as fs
import msgpack
import pytest
from clikit import run_in_process_bytes
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from writer_process import child_env

from opendata_kv.errors import (
    KeyDecodeError,
    MuidError,
    OpendataKvError,
    RkeyError,
    TidError,
    UrlKeyError,
    ValueDecodeError,
    ValueLimitError,
)
from opendata_kv.ids import muid as muid_mod
from opendata_kv.ids import nsid, rkey, tid, urlkey
from opendata_kv.ids.muid import Muid
from opendata_kv.keys import Field, RecordType
from opendata_kv.values import DEFAULT_LIMITS, Values
from opendata_kv.values.codecs import DataclassCodec, MsgpackCodec, RawCodec

LONG = os.environ.get("OPENDATA_KV_FUZZ") == "long"
pytestmark = pytest.mark.hang_guard(3600 if LONG else 300)
#: per-example deadline: decoding a few hundred bytes takes microseconds, so a second means
#: "hangs" and not "the machine was busy"
FUZZ = settings(deadline=datetime.timedelta(seconds=1))
#: child-process examples are slow; a handful in CI, more in a long run
CHILD = settings(
    max_examples=40 if LONG else 4,
    deadline=datetime.timedelta(seconds=60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: CLI runs in-process (tests/clikit.py) cost milliseconds: more examples than CHILD
IN_PROCESS_CLI = settings(
    max_examples=200 if LONG else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- mutation ------------------------------------------------------------------------------------

BOUNDARY_BYTES = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xC0, 0xFE, 0xFF)


@st.composite
def mutated_bytes(draw: st.DrawFn, base: bytes) -> bytes:
    """`base` with 1-4 random edits."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut", "dup", "append"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            at = min(at, len(data) - 1)
            data[at] = draw(st.sampled_from(BOUNDARY_BYTES) | st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "cut":
            del data[at:]
        elif op == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 16))]
        else:
            data += draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


ODD_CHARS = "-_.:~ \t\n\r\x00\x7f\u00e9\u0663\uff21\u2028\ufeffZz9aAfFgG"


@st.composite
def mutated_text(draw: st.DrawFn, base: str) -> str:
    """`base` with 1-3 random character edits (case flips, odd characters, cuts, inserts)."""
    chars = list(base)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "insert", "delete", "case", "cut"]))
        at = draw(st.integers(0, len(chars)))
        odd = draw(st.sampled_from(ODD_CHARS) | st.characters(exclude_categories=("Cs",)))
        if op == "set" and chars:
            chars[min(at, len(chars) - 1)] = odd
        elif op == "insert":
            chars.insert(at, odd)
        elif op == "delete" and chars:
            del chars[min(at, len(chars) - 1)]
        elif op == "case" and chars:
            i = min(at, len(chars) - 1)
            chars[i] = chars[i].swapcase()
        else:
            del chars[at:]
    return "".join(chars)


def damaged(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Valid bytes, mutated bytes, or random bytes."""
    return st.one_of(
        valid,
        valid.flatmap(mutated_bytes),
        valid.flatmap(mutated_bytes),
        st.binary(max_size=64),
    )


def damaged_text(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        valid,
        valid.flatmap(mutated_text),
        valid.flatmap(mutated_text),
        st.text(max_size=40),
    )


# --- valid values for every field codec -----------------------------------------------------------

muids = st.binary(min_size=16, max_size=16).map(Muid.from_bytes)
tids = st.integers(0, (1 << 63) - 1).map(tid.encode)
rkeys = st.from_regex(r"\A[A-Za-z0-9._:~-]{1,40}\Z").filter(rkey.is_valid)
nsids = st.sampled_from(
    ["app.bsky.feed.post", "com.example.fooBar", "io.github.x-y.z", "a.b.c"]
) | st.from_regex(r"\A[a-z]{1,8}\.[a-z]{1,8}\.[a-zA-Z]{1,12}\Z").filter(nsid.is_valid)

_BY_KIND: dict[str, st.SearchStrategy[Any]] = {
    "u8": st.integers(0, 2**8 - 1),
    "u16": st.integers(0, 2**16 - 1),
    "u32": st.integers(0, 2**32 - 1),
    "u64": st.integers(0, 2**64 - 1),
    "u128": st.integers(0, 2**128 - 1),
    "i32": st.integers(-(2**31), 2**31 - 1),
    "i64": st.integers(-(2**63), 2**63 - 1),
    "f64": st.floats(allow_nan=True),
    "bool": st.booleans(),
    "fixed(3)": st.binary(min_size=3, max_size=3),
    "var_u32": st.integers(0, 2**32 - 1),
    "var_u64": st.integers(0, 2**64 - 1),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "trailing_string": st.text(max_size=12),
    "trailing_bytes": st.binary(max_size=12),
    "tid": tids,
    "muid": muids,
    "url_key": st.integers(0, (1 << 63) - 1),
    "rkey": rkeys,
    "rkey(tid)": tids,
    "rkey(nsid)": nsids,
}


def values_for(field: Field) -> st.SearchStrategy[Any]:
    kind = field.kind
    if kind.startswith("desc(") and kind.endswith(")"):
        kind = kind[5:-1]
    return _BY_KIND[kind]


def keys_of(record_type: RecordType) -> st.SearchStrategy[bytes]:
    parts = [values_for(f) for _, f in record_type.fields]
    return st.tuples(*parts).map(lambda values: record_type.encode(*values))


valid_keys = st.sampled_from(list(fs.SCHEMA)).flatmap(keys_of)


def test_every_codec_has_values() -> None:
    for record_type in fs.SCHEMA:
        for _, field in record_type.fields:
            values_for(field)  # KeyError if a codec was added to fuzz_schema without values


# --- keys ---------------------------------------------------------------------------------------


@FUZZ
@given(key=damaged(valid_keys) | st.binary(min_size=2, max_size=3).map(lambda b: b + b"\x00" * 9))
def test_schema_decode(key: bytes) -> None:
    """Schema.decode: KeyDecodeError, or a Key whose encoding is exactly the input."""
    try:
        decoded = fs.SCHEMA.decode(key)
    except KeyDecodeError:
        owner = fs.SCHEMA.try_record_type_of(key)
        if owner is not None:  # the prefix was fine, so the owner must reject it too
            with pytest.raises(KeyDecodeError):
                owner.decode(key)
        return
    assert decoded.encode() == key
    assert fs.SCHEMA.record_type_of(key) is decoded.record_type
    # Compare by bytes: a key holding a NaN never equals itself, exactly as a tuple would not.
    again = decoded.record_type.decode(key)
    assert type(again) is type(decoded) and again.encode() == key


@FUZZ
@given(data=st.data(), field=st.sampled_from(fs.CODECS))
def test_field_decode(data: st.DataObject, field: Field) -> None:
    """Every codec: KeyDecodeError, or (value, end) whose re-encoding is exactly the bytes
    consumed -- also when the field starts in the middle of a buffer."""
    valid = values_for(field).map(field.encode)
    body = data.draw(damaged(valid), label="body")
    junk = data.draw(st.binary(max_size=4), label="junk in front")
    buffer = junk + body
    try:
        value, end = field.decode(buffer, len(junk))
    except KeyDecodeError:
        pass
    else:
        assert len(junk) <= end <= len(buffer)
        assert field.encode(value) == buffer[len(junk) : end]
    try:
        whole = field.decode_all(body)
    except KeyDecodeError:
        pass
    else:
        assert field.encode(whole) == body


# --- identifiers ------------------------------------------------------------------------------

MUID_FORMS = re.compile(r"[0-9a-fA-F]{13}(-[0-9a-fA-F]{11}(-[0-9a-fA-F]{8})?)?|[0-9a-fA-F]{32}")
muid_strings = st.one_of(
    muids.map(str),
    muids.map(lambda m: str(m).lower()),
    muids.map(lambda m: str(m)[:25]),
    muids.map(lambda m: str(m)[:13]),
    muids.map(lambda m: bytes(m).hex()),
)


@FUZZ
@given(text=damaged_text(muid_strings))
def test_muid_parse(text: str) -> None:
    """Muid.parse accepts exactly the DESIGN forms and reads their hex digits."""
    try:
        parsed = Muid.parse(text)
    except MuidError:
        assert not MUID_FORMS.fullmatch(text), f"rejected a valid form {text!r}"
        return
    assert MUID_FORMS.fullmatch(text), f"accepted {text!r}"
    assert bytes(parsed) == bytes.fromhex("".join(text.split("-")).ljust(32, "0"))
    assert Muid.parse(str(parsed)) == parsed


@FUZZ
@given(data=damaged(muids.map(bytes)))
def test_muid_from_bytes(data: bytes) -> None:
    try:
        parsed = Muid.from_bytes(data)
    except MuidError:
        assert len(data) != muid_mod.SIZE
        return
    assert bytes(parsed) == data


TID_SYNTAX = re.compile(r"[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}")
TID_63 = re.compile(r"[234567ab][234567abcdefghijklmnopqrstuvwxyz]{12}")


@FUZZ
@given(text=damaged_text(tids))
def test_tid_decode(text: str) -> None:
    """tid.decode accepts exactly the DESIGN syntax (top bit 0) and round-trips."""
    try:
        n = tid.decode(text)
    except TidError:
        assert not TID_63.fullmatch(text), f"rejected a valid TID {text!r}"
    else:
        assert TID_63.fullmatch(text), f"accepted {text!r}"
        assert 0 <= n < 1 << 63 and tid.encode(n) == text
    try:
        wide = tid.decode(text, allow_top_bit=True)
    except TidError:
        assert not TID_SYNTAX.fullmatch(text)
    else:
        assert TID_SYNTAX.fullmatch(text) and tid.encode(wide, allow_top_bit=True) == text


RKEY_SYNTAX = re.compile(r"[A-Za-z0-9._:~-]{1,512}")
key_types = st.sampled_from(["any", "tid", "nsid", "literal:self", "literal:a.b"]) | st.text(
    max_size=12
)


@FUZZ
@given(text=damaged_text(rkeys | tids | nsids), key_type=key_types)
def test_rkey_validate(text: str, key_type: str) -> None:
    """rkey.validate: RkeyError, or the input back when it is a valid key of that type."""
    syntax_ok = bool(RKEY_SYNTAX.fullmatch(text)) and text not in (".", "..")
    try:
        result = rkey.validate(text, key_type)
    except RkeyError:
        if key_type == "any":
            assert not syntax_ok, f"rejected a valid rkey {text!r}"
        elif key_type == "tid":
            assert not (syntax_ok and TID_SYNTAX.fullmatch(text))
        elif key_type == "literal:self":
            assert text != "self"
        return
    assert result == text and syntax_ok, f"accepted {text!r} as {key_type!r}"
    if key_type == "tid":
        assert TID_SYNTAX.fullmatch(text)
    elif key_type == "nsid":
        assert nsid.is_valid(text)
    elif key_type.startswith("literal:"):
        assert text == key_type[len("literal:") :]
    else:
        assert key_type == "any"


urls = st.builds(
    "{}://{}{}{}{}{}".format,
    st.sampled_from(["http", "https", "HTTPS", "ftp", ""]),
    st.sampled_from(
        ["example.com", "Example.COM:8080", "[::1]:80", "user:pw@host", "xn--bcher-kva.de"]
    ),
    st.sampled_from(["", "/", "/a/b", "/a%20b", "/ü/%zz"]),
    st.sampled_from(["", "?utm_source=x&b=2&a=1", "?q=a+b&utm_medium=m", "?a=%41;b"]),
    st.sampled_from(["", "#frag", "#a%20b"]),
    st.just(""),
)


@FUZZ
@given(text=damaged_text(urls))
def test_url_key_and_clean_url(text: str) -> None:
    """UrlKeyError, or a 63-bit key; clean_url/normalize agree with url_key and are stable."""
    try:
        key = urlkey.url_key(text)
    except UrlKeyError:
        for other in (urlkey.clean_url, urlkey.normalize, urlkey.hostname):
            with pytest.raises(UrlKeyError):
                other(text)
        return
    assert 0 <= key < 1 << 63
    cleaned = urlkey.clean_url(text)
    clean_key = urlkey.url_key(text, clean=True)
    assert 0 <= clean_key < 1 << 63
    normal = urlkey.normalize(text)
    assert urlkey.key_for_string(normal, urlkey.hostname(text)) == key
    # Re-parsing our own output gives the same string, hence the same key.
    assert urlkey.normalize(normal) == normal
    assert urlkey.url_key(normal) == key
    assert urlkey.clean_url(cleaned) == cleaned
    assert urlkey.url_key(cleaned) == clean_key


def test_id_entry_points_reject_non_strings() -> None:
    for bad in (None, 12, b"3jzfcijpj2z2a", ["x"], 1.5):
        for call in (
            tid.decode,
            rkey.validate,
            Muid.parse,
            urlkey.url_key,
            urlkey.clean_url,
        ):
            with pytest.raises(OpendataKvError):
                call(bad)  # type: ignore[arg-type]
    for bad_bytes in (None, 12, "0" * 16, [0] * 16):
        with pytest.raises(MuidError):
            Muid.from_bytes(bad_bytes)  # type: ignore[arg-type]


# --- values -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Doc:
    title: str
    n: int
    tags: list[str] = dataclasses.field(default_factory=list)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10)
    | st.datetimes(timezones=st.just(datetime.timezone.utc)),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
docs = st.builds(Doc, st.text(max_size=10), st.integers(-5, 5), st.lists(st.text(max_size=3)))
packed = st.one_of(
    msgpack_values.map(MsgpackCodec().encode),
    st.integers(1, 3000).map(lambda depth: b"\x91" * depth + b"\xc0"),  # deep nesting
    docs.map(DataclassCodec(Doc).encode),
    # msgpack edge forms: huge declared lengths, deep nesting, timestamps of odd size
    st.sampled_from(
        [
            b"\xdb\xff\xff\xff\xff",
            b"\xdd\xff\xff\xff\xff",
            b"\xdf\xff\xff\xff\xff",
            b"\xd6\xff" + b"\x00" * 4,
            b"\xc7\x0c\xff" + b"\xff" * 12,
            b"\xc7\x03\xff\x00\x00\x00",
            b"\xc1",
            b"\x81\x80\x01",
            b"\x81\x90\x01",
        ]
    ),
)


def _upgrade_v1(old: Any) -> Doc:
    # Written like a real upgrade: trusts the old shape (so damaged input makes it raise).
    return Doc(title=old["t"].strip(), n=int(old["n"]) + 1)


V_OLD = RecordType("doc", 7, [("id", fs.F.u32)])
V_NEW = RecordType("doc", 7, [("id", fs.F.u32)], version=2)
V_RAW = RecordType("blob", 8, [("id", fs.F.u32)])
VALUES_SCHEMA = fs.Schema(V_OLD, V_NEW, V_RAW)
VALUES = (
    Values(VALUES_SCHEMA)
    .register(V_OLD, dict, upgrade=_upgrade_v1)
    .register(V_NEW, Doc)
    .register(V_RAW, bytes)
)


def same(a: Any, b: Any) -> bool:
    """Two decodes of the same bytes agree. Compared by repr: a NaN anywhere inside (even
    nested in a list, where `x != x` is False) makes == useless."""
    return type(a) is type(b) and repr(a) == repr(b)


def _reference(data: bytes) -> tuple[bool, Any]:
    """msgpack itself, called directly: (True, value) or (False, None)."""
    try:
        return True, msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)
    except Exception:
        return False, None


def _nesting(value: Any, stop: int = DEFAULT_LIMITS.max_depth + 1) -> int:
    """How deep lists and maps nest in `value`, counted up to `stop` (an independent,
    recursive count; stopping keeps it clear of the recursion limit on hostile values)."""
    if stop <= 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_nesting(v, stop - 1) for v in children), default=0)


#: a NaN nested in a list and a map: equal decodes that == calls unequal
NESTED_NAN = msgpack.packb([math.nan, {"a": math.nan}])


@FUZZ
@given(data=damaged(packed))
@example(data=NESTED_NAN)
def test_value_codecs(data: bytes) -> None:
    """msgpack: ValueDecodeError exactly when msgpack fails, else msgpack's value;
    dataclass: ValueDecodeError or a Doc; raw: the bytes themselves."""
    ok, expected = _reference(data)
    try:
        value = MsgpackCodec().decode(data)
    except ValueLimitError as exc:  # garbage may claim anything; of valid small values,
        # only the depth cap can refuse one, and only one nested deeper than it
        assert not ok or (exc.cap == "max_depth" and _nesting(expected) > DEFAULT_LIMITS.max_depth)
    except ValueDecodeError:
        assert not ok
    else:
        assert ok and same(value, expected)
    try:
        doc = DataclassCodec(Doc).decode(data)
    except ValueDecodeError:
        pass
    else:
        assert isinstance(doc, Doc) and ok
    assert RawCodec().decode(data) == data


@FUZZ
@given(
    data=damaged(
        packed
        | st.fixed_dictionaries({"t": st.text(), "n": st.integers(-(2**63), 2**63 - 1)}).map(
            MsgpackCodec().encode
        )
    ),
    which=st.sampled_from([V_OLD, V_NEW, V_RAW]),
    upgrade=st.booleans(),
)
@example(data=NESTED_NAN, which=V_OLD, upgrade=False)
def test_values_decode(data: bytes, which: RecordType, upgrade: bool) -> None:
    """Values.decode: ValueDecodeError naming the key, or a value of the promised model."""
    key = which.encode(7)
    try:
        value = VALUES.decode(which, key, data, upgrade=upgrade)
    except ValueDecodeError as exc:
        assert key.hex() in str(exc), f"error does not name the key: {exc}"
        return
    if which is V_RAW:
        assert value == data
    elif which is V_NEW or upgrade:
        assert isinstance(value, Doc)
    else:
        ok, expected = _reference(data)
        assert ok and same(value, expected)


# --- child processes: the interpreter must survive, the CLI must answer every line ---------------


def _run_child(
    args: list[str], stdin: bytes, *, strict_io: bool
) -> subprocess.CompletedProcess[bytes]:
    env = child_env({"PYTHONIOENCODING": "utf-8:strict"} if strict_io else None)
    if not strict_io:
        env.pop("PYTHONIOENCODING", None)
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, env=env, timeout=120
    )


FUZZ_CHILD = """
import sys, random
import msgpack
import fuzz_schema as fs
from opendata_kv.errors import OpendataKvError
from opendata_kv.ids import tid, rkey, urlkey
from opendata_kv.ids.muid import Muid
from opendata_kv.values.codecs import MsgpackCodec

rng = random.Random(int(sys.argv[1]))
seeds = [bytes.fromhex(h) for h in sys.argv[3:]]
codec = MsgpackCodec()
calls = 0
for i in range(int(sys.argv[2])):
    base = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, len(base))
        op = rng.random()
        if op < 0.4 and base:
            base[min(at, len(base) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op < 0.6:
            base[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op < 0.8:
            del base[at:at + rng.randint(1, 8)]
        else:
            base[at:at] = base[at:at + rng.randint(1, 64)]
    data = bytes(base)
    text = data.decode("latin-1")
    for call, arg in ((codec.decode, data), (fs.SCHEMA.decode, data), (Muid.parse, text),
                      (tid.decode, text), (rkey.validate, text), (urlkey.url_key, text),
                      (urlkey.clean_url, text)):
        try:
            call(arg)
        except OpendataKvError:
            pass
        calls += 1
print(calls)
"""


CHILD_INPUTS = 20_000 if LONG else 4_000


@CHILD
@given(seed=st.integers(0, 2**32 - 1), bases=st.lists(valid_keys | packed, min_size=1, max_size=8))
def test_decoders_survive_in_a_child_process(seed: int, bases: list[bytes]) -> None:
    """CHILD_INPUTS mutated inputs per example through msgpack (C), Schema.decode and the id parsers
    in a child: only OpendataKvError may escape, and the child must exit normally (a crash of
    the interpreter shows as a negative exit status)."""
    args = ["-c", FUZZ_CHILD, str(seed), str(CHILD_INPUTS), *(b.hex() or "00" for b in bases)]
    done = _run_child(args, b"", strict_io=False)
    assert done.returncode == 0, f"child died ({done.returncode}): {done.stderr[-3000:]!r}"
    assert int(done.stdout) == CHILD_INPUTS * 7


def _line(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    raw = raw.replace(b"\n", b" ").replace(b"\r", b" ")
    return raw or b"x"


def _check_cli(
    command: list[str],
    lines: list[bytes],
    strict_io: bool,
    oracle: Callable[[str], bool],
    *,
    process: bool = False,
) -> None:
    """Run `opendata-kv COMMAND - --json` on `lines` (in-process with byte-level stdio, or as a
    real process): exit 0/1, no traceback, one JSON line per input line, and an error exactly
    when `oracle(line)` says the line is bad."""
    stdin = b"\n".join(lines) + b"\n"
    if process:
        argv = ["-m", "opendata_kv", *command, "-", "--json"]
        done = _run_child(argv, stdin, strict_io=strict_io)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        status, stdout, stderr = run_in_process_bytes(
            *command, "-", "--json", stdin=stdin, strict_io=strict_io
        )
    assert status in (0, 1), f"{command}: status {status} {stderr[-3000:]!r}"
    assert b"Traceback" not in stderr, stderr[-3000:]
    # Split on b"\n" only: JSON may carry U+2028 and friends raw (ensure_ascii=False).
    out = [row.decode("utf-8", "surrogateescape") for row in stdout.split(b"\n")[:-1]]
    assert len(out) == len(lines), f"{command}: {len(lines)} lines in, {len(out)} out"
    any_bad = False
    for raw, row in zip(lines, out, strict=True):
        result = json.loads(row)
        text = raw.decode("utf-8", "surrogateescape")
        bad = result.get("error") is not None
        assert bad == oracle(text), f"{command} on {raw!r}: {result}"
        any_bad |= bad
    assert status == (1 if any_bad else 0)


cli_lines = st.lists(
    st.one_of(
        damaged_text(tids | muid_strings | rkeys | urls).map(_line),
        st.binary(min_size=1, max_size=20).map(_line),
    ),
    min_size=1,
    max_size=60,
)


def _tid_bad(text: str) -> bool:
    return not TID_63.fullmatch(text)


def _muid_bad(text: str) -> bool:
    return not MUID_FORMS.fullmatch(text)


def _url_bad(text: str) -> bool:
    try:
        urlkey.url_key(text)
    except OpendataKvError:
        return True
    return False


@IN_PROCESS_CLI
@given(lines=cli_lines, strict_io=st.booleans())
def test_cli_id_commands(lines: list[bytes], strict_io: bool) -> None:
    """`tid decode`, `muid parse`, `rkey validate`, `url-key` on damaged stdin, including bytes
    that are not UTF-8 and a strict-UTF-8 stdio (as PYTHONIOENCODING=utf-8:strict gives);
    in-process, so many more examples than child processes would allow.
    test_cli_lines_that_are_not_utf8 drives the same checks through real processes."""
    _check_cli(["tid", "decode"], lines, strict_io, _tid_bad)
    _check_cli(["muid", "parse"], lines, strict_io, _muid_bad)
    _check_cli(["url-key"], lines, strict_io, _url_bad)
    _check_cli(["rkey", "validate"], lines, strict_io, lambda t: not rkey.is_valid(t))


NOT_UTF8 = [b"\xff\xfe", b"3jzfcijpj2z2\xe9", b"\xc3", b"http://h/\x80", b"\xed\xa0\x80"]


@pytest.mark.parametrize("strict_io", [False, True], ids=["default-stdio", "strict-utf8-stdio"])
def test_cli_lines_that_are_not_utf8(strict_io: bool) -> None:
    """Bytes that are not UTF-8 are bad lines like any other (one JSON error line each, run
    goes on, exit 1), also when stdio is strict UTF-8 (as under a UTF-8 locale)."""
    lines = [b"3jzfcijpj2z2a", *NOT_UTF8, b"2222222222222"]
    _check_cli(["tid", "decode"], lines, strict_io, _tid_bad, process=True)
    _check_cli(["rkey", "validate"], lines, strict_io, lambda t: not rkey.is_valid(t), process=True)
    keys = [b"0110", b"\xff", b"0120" + b"\xc3"]
    schema = ["key", "inspect", "--schema", "fuzz_schema:SCHEMA"]
    _check_cli(schema, keys, strict_io, _key_bad, process=True)


def _key_bad(text: str) -> bool:
    try:
        fs.SCHEMA.decode(bytes.fromhex(text))
    except (ValueError, OpendataKvError):
        return True
    return False


@IN_PROCESS_CLI
@given(
    keys=st.lists(damaged(valid_keys).filter(bool), min_size=1, max_size=60),
    strict_io=st.booleans(),
)
def test_cli_key_inspect(keys: list[bytes], strict_io: bool) -> None:
    """`key inspect - --schema fuzz_schema:SCHEMA`: every damaged key gets a JSON line, an
    error exactly when Schema.decode rejects it, else the record name Schema.decode finds."""
    lines = [k.hex().encode() for k in keys]
    _check_cli(["key", "inspect", "--schema", "fuzz_schema:SCHEMA"], lines, strict_io, _key_bad)
