"""The command line's own behaviour, run in-process through opendata_kv.cli.main.main: bounded
reads against S3 (wrong bucket, stopped endpoint), --timeout/--retries, Ctrl-C, --version,
--schema as a file, usage messages, long bad input cut short."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_schema import EVENT, LIKE, LIKE_V3, POST, POST_V2, SCHEMA, VALUES, Post
from conftest import S3_BUCKET, MotoServer, free_port
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tcp_proxy import TcpProxy

from opendata_kv import SyncStore
from opendata_kv.cli.main import main
from opendata_kv.ids.muid import Muid

MUID = Muid(1_700_000_000_000_000, 0x12345678901, 3)

REPO = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one in-process command; usage errors included."""
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse: usage errors and --version
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opendata-kv: error: "), err
    return lines[0]


@pytest.fixture
def s3_behind_proxy(s3_env: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[TcpProxy]:
    """The session's moto server reached through a TcpProxy (AWS_ENDPOINT_URL is the proxy):
    `proxy.cut("refuse")` stops the endpoint without stopping the shared server."""
    with TcpProxy(("127.0.0.1", s3_env.port)) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        yield proxy


@pytest.mark.s3
def test_read_commands_fail_fast_naming_endpoint_and_bucket(
    s3_behind_proxy: TcpProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = s3_behind_proxy.endpoint
    for command in ("dump", "stats"):
        status, out, err = run(capsys, command, "s3://no-such-bucket/db")
        assert status == 1 and out == ""
        line = one_error_line(err)
        assert f"endpoint {endpoint}, bucket no-such-bucket" in line
        assert "404 NoSuchBucket" in line  # the answer, at once, whatever --retries says

    # An existing bucket without a database is a different, precise error.
    status, _, err = run(capsys, "stats", f"s3://{S3_BUCKET}/nothing-here")
    line = one_error_line(err)
    assert status == 1 and "no SlateDB database at" in line and f"bucket {S3_BUCKET}" in line

    s3_behind_proxy.cut("refuse")  # now nothing listens on the endpoint
    status, _, err = run(capsys, "dump", f"s3://{S3_BUCKET}/db")
    line = one_error_line(err)
    assert status == 1 and f"endpoint {endpoint}, bucket {S3_BUCKET}" in line
    # A shorter --timeout gives up before the object store client's own retries are done.
    status, _, err = run(capsys, "stats", f"s3://{S3_BUCKET}/db", "--timeout", "0.2")
    line = one_error_line(err)
    assert status == 1 and endpoint in line
    assert "no answer within 0.2 s" in line or "Errno 111" in line


def test_a_closed_port_fails_with_the_endpoint_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    for name, value in MotoServer().env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    status, _, err = run(capsys, "dump", "s3://bucket/db", "--timeout", "1")
    line = one_error_line(err)
    assert status == 1 and f"endpoint {endpoint}, bucket bucket" in line
    # verify reads every object through slatedb's Admin, whose calls retry without end
    # against a dead endpoint: each is bounded by --timeout as well, and its first check
    # (the bucket probe) already reports the refused connection as no answer (issue 28.4)
    status, out, err = run(capsys, "verify", "s3://bucket/db", "--timeout", "1")
    line = one_error_line(err)
    assert status == 1 and out == ""
    assert endpoint in line and "bucket 'bucket'" in line and "no answer" in line


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--timeout", "-1", "timeout must be >= 0 seconds"),
        ("--timeout", "soon", "timeout must be seconds"),
        ("--retries", "-1", "retries must be >= 0, got -1"),
        ("--limit", "-1", "limit must be >= 0, got -1"),
    ],
)
def test_read_limits_and_limit_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str, message: str
) -> None:
    status, _, err = run(capsys, "dump", str(tmp_path), option, value)
    assert status == 2 and message in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from opendata_kv import __version__

    status, out, _ = run(capsys, "--version")
    assert status == 0 and out.startswith(f"opendata-kv {__version__} (slatedb 0.17")


def test_ctrl_c_exits_130() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "opendata_kv", "key", "inspect", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("0110\n")
    process.stdin.flush()
    assert '"key_hex": "0110"' in process.stdout.readline()  # running, waiting for more
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130
    assert err.strip() == "opendata-kv: interrupted"


SCHEMA_FILE = """
from opendata_kv import RecordType, Schema, fields

note = RecordType("note", 3, [("author", fields.string), ("n", fields.u32)])
SCHEMA = Schema(note)
"""


def test_schema_from_a_file_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my schema.py").write_text(SCHEMA_FILE)
    monkeypatch.chdir(tmp_path)
    key = "0130" + b"ada\x00".hex() + "00000007"
    for spec in ("./my schema.py:SCHEMA", f"{tmp_path}/my schema.py:SCHEMA"):
        status, out, err = run(capsys, "key", "inspect", key, "--schema", spec)
        assert status == 0, err
        assert "note" in out and "ada" in out

    status, _, err = run(capsys, "key", "inspect", key, "--schema", "./missing.py:SCHEMA")
    assert status == 1 and "there is no file ./missing.py" in one_error_line(err)
    status, _, err = run(capsys, "key", "inspect", key, "--schema", "no_such_mod_q:SCHEMA")
    line = one_error_line(err)
    assert status == 1 and "PYTHONPATH" in line and "./path/to/schema.py:ATTR" in line


def test_a_long_bad_line_is_cut_in_the_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    garbage = "z" * 200
    monkeypatch.setattr(sys, "stdin", io.StringIO(garbage + "\n"))
    status, out, _ = run(capsys, "key", "inspect", "-")
    assert status == 1
    row = json.loads(out)
    assert garbage not in out
    assert row["input"].endswith("... (200 characters)")
    assert "(200 characters)" in row["error"] and "not a hex digit" in row["error"]


# --- key encode, dump --type NAME, one JSON row shape, one record type style ------------------

SCHEMA_ARG = ("--schema", "cli_schema:SCHEMA")


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (("post", "did:plc:x", "3k2a"), POST_V2.encode("did:plc:x", "3k2a")),  # newest version
        (("post", "did:plc:x", "3k2a", "--version", "1"), POST.encode("did:plc:x", "3k2a")),
        (("like", "0x10"), LIKE_V3.encode(16)),
        (("event", str(MUID), "00ff", "-1.5"), EVENT.encode(MUID, b"\x00\xff", -1.5)),
        (("event", str(MUID), "", "nan"), EVENT.encode(MUID, b"", float("nan"))),
    ],
)
def test_key_encode_is_the_inverse_of_key_inspect(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], key: bytes
) -> None:
    status, out, err = run(capsys, "key", "encode", *argv, *SCHEMA_ARG)
    assert status == 0, err
    assert out == key.hex() + "\n"
    status, inspected, _ = run(capsys, "key", "inspect", out.strip(), *SCHEMA_ARG, "--json")
    assert status == 0
    status, encoded, _ = run(capsys, "key", "encode", *argv, *SCHEMA_ARG, "--json")
    assert status == 0 and json.loads(encoded) == json.loads(inspected)


@given(
    repo=st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s and s.strip() == s),
    n=st.integers(0, 2**64 - 1),
)
@example(repo="-:", n=0)  # found by hypothesis: a value that starts with "-"
@settings(max_examples=30)
def test_key_encode_round_trips_any_field_text(repo: str, n: int) -> None:
    import contextlib
    import io

    for options, values, key in (
        (("--version", "1"), ("post", repo, "3k2a"), POST.encode(repo, "3k2a")),
        ((), ("like", str(n)), LIKE_V3.encode(n)),
        ((), ("like", hex(n)), LIKE_V3.encode(n)),
    ):
        # options first, then `--`: a value such as "-x" is a value, not an option
        argv = ["key", "encode", *SCHEMA_ARG, *options, "--", *values]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        assert out.getvalue() == key.hex() + "\n"


def test_key_encode_prefix_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "key", "encode", "post", "did:plc:x", "--prefix", *SCHEMA_ARG)
    assert status == 0 and out == POST_V2.prefix("did:plc:x").hex() + "\n"
    for argv, message in (
        (("post", "did:plc:x"), "has 2 fields ['repo', 'rkey'], got 1 values; missing ['rkey']"),
        (("post", "a", "b", "c"), "got 3 values"),
        (("nope",), "no record type named 'nope'"),
        (("like", "ten"), "like: field 'n' (u64): 'ten' is not an integer"),
        (("event", "x" * 100, "00", "1"), "event: field 'id' (muid): muid string 'xxxx"),
        (("event", str(MUID), "0g", "1"), "event: field 'blob' (bytes): '0g' is not hex bytes"),
        (("event", str(MUID), "00", "many"), "field 'score' (f64): 'many' is not a number"),
        (("post", "did:plc:x", "3k2a", "--version", "7"), "'post' has no version 7"),
    ):
        status, _, err = run(capsys, "key", "encode", *argv, *SCHEMA_ARG)
        assert status == 1 and message in one_error_line(err), (argv, err)
    status, _, err = run(capsys, "key", "encode", "post", "a", "b")  # --schema is required
    assert status == 2 and "--schema" in err


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "db")
    with SyncStore.open(path, SCHEMA, values=VALUES) as store:
        store.put(POST, ("did:plc:a", "1"), {"text": "v1"})
        store.put(POST_V2, ("did:plc:a", "2"), Post("v2"))
        store.put(LIKE, (1,), {"n": 1})
        store.put(LIKE_V3, (3,), {"n": 3})
        store.put_raw(b"\x05\x10unowned", b"\x01")  # version 5 of record type 1: not in SCHEMA
        store.flush()
    return path


def dumped(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> list[dict[str, Any]]:
    status, out, err = run(capsys, "dump", *argv, "--json")
    assert status == code, err
    return [json.loads(line) for line in out.splitlines()]


def test_dump_type_by_record_name(capsys: pytest.CaptureFixture[str], small_db: str) -> None:
    rows = dumped(capsys, small_db, "--type", "post", "--values", "--schema", "cli_schema:VALUES")
    assert [(r["record"], r["version"], r["fields"]["rkey"]) for r in rows] == [
        ("post", 1, "1"),
        ("post", 2, "2"),
    ]  # every registered version; the unowned version-5 key of record type 1 is left out
    assert rows[1]["value"] == {"text": "v2", "lang": "en"}
    by_number = dumped(capsys, small_db, "--type", "0x1", *SCHEMA_ARG, code=1)
    assert len(by_number) == 3 and by_number[-1]["record"] is None
    rows = dumped(capsys, small_db, "--type", "like", "--version", "3", "--reverse", *SCHEMA_ARG)
    assert [r["key_hex"] for r in rows] == [LIKE_V3.encode(3).hex()]
    rows = dumped(capsys, small_db, "--type", "post", "--reverse", "--limit", "1", *SCHEMA_ARG)
    assert [r["version"] for r in rows] == [2]

    status, _, err = run(capsys, "dump", small_db, "--type", "post")
    assert status == 1 and "a record name needs --schema" in one_error_line(err)
    status, _, err = run(capsys, "dump", small_db, "--type", "nope", *SCHEMA_ARG)
    assert status == 1 and "no record type named 'nope'" in one_error_line(err)
    status, _, err = run(capsys, "dump", small_db, "--type", "like", "--version", "2", *SCHEMA_ARG)
    assert status == 1 and "no version 2 of 'like' (it has [1, 3])" in one_error_line(err)


def test_record_types_are_written_0xN_everywhere(
    capsys: pytest.CaptureFixture[str], small_db: str
) -> None:
    _, out, _ = run(capsys, "dump", small_db, "--type", "like", *SCHEMA_ARG)
    assert "like v1 0x2" in out and "like v3 0x2" in out
    _, out, _ = run(capsys, "stats", small_db, *SCHEMA_ARG)
    assert re.search(r"^ +1 +0x2 +like ", out, re.MULTILINE), out
    _, out, _ = run(capsys, "key", "inspect", LIKE.encode(1).hex())
    assert "record type: 0x2" in out
    status, _, err = run(capsys, "key", "inspect", "0530", *SCHEMA_ARG)
    assert status == 1 and "record type 0x3" in err
    assert "type=0x2" in repr(LIKE)
