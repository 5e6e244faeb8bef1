"""The command line's own behaviour, run in-process through opendata_kv.cli.main.main: bounded
reads against S3 (wrong bucket, stopped endpoint), --timeout/--retries, Ctrl-C, --version,
--schema as a file, usage messages, long bad input cut short."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import S3_BUCKET, MotoServer, free_port

from opendata_kv.cli.main import main

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


@pytest.mark.s3
def test_read_commands_fail_fast_naming_endpoint_and_bucket(
    private_moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = private_moto.endpoint
    for command in ("dump", "stats"):
        status, out, err = run(capsys, command, "s3://no-such-bucket/db")
        assert status == 1 and out == ""
        line = one_error_line(err)
        assert f"endpoint {endpoint}, bucket no-such-bucket" in line
        assert "after 0 retries (--retries)" in line

    status, _, err = run(capsys, "dump", "s3://no-such-bucket/db", "--retries", "1")
    assert status == 1 and "after 1 retries (--retries)" in one_error_line(err)

    # An existing bucket without a database is a different, precise error.
    status, _, err = run(capsys, "stats", f"s3://{S3_BUCKET}/nothing-here")
    line = one_error_line(err)
    assert status == 1 and "no SlateDB database at" in line and f"bucket {S3_BUCKET}" in line

    private_moto.stop()  # now nothing listens on the endpoint
    status, _, err = run(capsys, "dump", f"s3://{S3_BUCKET}/db")
    line = one_error_line(err)
    assert status == 1 and f"endpoint {endpoint}, bucket {S3_BUCKET}" in line
    # A shorter --timeout gives up before the object store client's own retries are done.
    status, _, err = run(capsys, "stats", f"s3://{S3_BUCKET}/db", "--timeout", "0.2")
    line = one_error_line(err)
    assert status == 1 and "no answer within 0.2 s" in line and endpoint in line


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
    import json

    garbage = "z" * 200
    monkeypatch.setattr(sys, "stdin", io.StringIO(garbage + "\n"))
    status, out, _ = run(capsys, "key", "inspect", "-")
    assert status == 1
    row = json.loads(out)
    assert garbage not in out
    assert row["input"].endswith("... (200 characters)")
    assert "(200 characters)" in row["error"] and "not a hex digit" in row["error"]
