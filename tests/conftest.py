"""Shared fixtures. Conformance vectors come from tests/vectors (vendored) or $OPENDATA_KV_VECTORS;
a missing folder fails the tests that need it instead of skipping them."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def vectors_dir() -> Path:
    """The conformance vector folder, or a test failure naming what is missing."""
    configured = os.environ.get("OPENDATA_KV_VECTORS")
    path = Path(configured) if configured else REPO / "tests" / "vectors"
    if not path.is_dir():
        pytest.fail(
            f"conformance vectors not found at {path}: restore tests/vectors "
            "or set OPENDATA_KV_VECTORS to a copy of them",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def vectors() -> Path:
    return vectors_dir()


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache directory for the run, shared by the xdist workers (tests/mypykit.py
    takes turns on it): only the first mypy run of all checks the standard library stubs and
    opendata_kv. OPENDATA_KV_MYPY_CACHE names it instead: .ci/run's own mypy run of the
    package then starts warm."""
    named = os.environ.get("OPENDATA_KV_MYPY_CACHE")
    if named:
        path = Path(named)
        path.mkdir(parents=True, exist_ok=True)
        return path
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' basetemps share this parent, fresh per run
    path = root / "mypy-cache"
    path.mkdir(exist_ok=True)
    return path


# --- Ctrl-C: the tests that interrupt a pending call need Python's SIGINT handler -----------

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # a shell starts a background job with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: the Ctrl-C tests would wait on a signal nobody handles
    signal.signal(signal.SIGINT, signal.default_int_handler)


# --- hang guard: a hang fails the test instead of CI ----------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hang_guard(seconds): fail the test (tests/hang_guard.py) if it runs longer than this",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Moves what collection left alive (every test module, its strategies and parameters:
    ~370,000 objects) out of the garbage collector's sight: they live for the whole session,
    and a full collection would otherwise scan them all again (~0.2 s of CPU each; the
    benches under test run one before every timed sample)."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """Everything alive when the test starts kept out of the collector's sight during it,
    for tests that run tools calling gc.collect() in a loop (the benches' samples): each of
    those then scans only what the test made, not the worker's heap."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()  # what the test left as garbage, then frozen again as collection left it
        gc.freeze()


@pytest.fixture(autouse=True)
def _hang_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Arms tests/hang_guard.py for tests marked `hang_guard(seconds)` (module-wide with
    `pytestmark`); other tests run unguarded."""
    marker = request.node.get_closest_marker("hang_guard")
    if marker is None:
        yield
        return
    from hang_guard import hang_guard

    with hang_guard(float(marker.args[0])):
        yield


@pytest.fixture(params=["memory", "local"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database location: an in-process memory store, or a temporary directory."""
    return "memory://test" if request.param == "memory" else str(tmp_path / "db")


# --- hypothesis profiles ----------------------------------------------------------------------
# "ci" (the default) runs 50 examples a property, so that CI's 15 minutes on 2 cores hold the
# whole suite on both driver paths: the four heaviest property files (keys, scan decode
# errors, accel records and pack) took 94 s of CPU at hypothesis's usual 100 and 63 s at 50.
# OPENDATA_KV_FUZZ=full runs those 100, OPENDATA_KV_FUZZ=long 2,000 for a soak before a
# release. .ci/run's second pass (the ctypes driver, tests that also
# ran in the first) uses "driver", 20 a property. Tests may scale these
# (test_keys_properties does). No deadline: the machine is shared and timings jitter.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra; tests that need it fail on their own import
    pass
else:
    for profile, examples in (("ci", 50), ("full", 100), ("driver", 20), ("long", 2000)):
        settings.register_profile(
            profile,
            max_examples=examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
    settings.load_profile(os.environ.get("OPENDATA_KV_FUZZ", "ci"))


# --- S3: a moto_server on 127.0.0.1 -------------------------------------------------------------

S3_BUCKET = "opendata-kv-test"
S3_ACCESS_KEY = "testing"
S3_SECRET_KEY = "testing"
S3_REGION = "us-east-1"
MOTO_LAUNCHER = Path(__file__).resolve().parent / "moto_launcher.py"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class MotoServer:
    """A moto S3 server in a subprocess on 127.0.0.1, for tests.

        server = MotoServer()            # a free port, fixed for the life of the object
        server.start()                   # returns once the server answers HTTP
        server.create_bucket("b")
        server.env()                     # AWS_* variables that point opendata_kv / boto3 at it
        server.pause(); server.resume()  # SIGSTOP / SIGCONT: requests hang, state is kept
        server.restart()                 # stop + start on the same port (moto keeps its state
                                         # in memory: buckets and objects are gone afterwards)
        server.stop()                    # idempotent; also run at interpreter exit

    Reliability tests can use pause/resume to simulate an unresponsive endpoint and
    stop/start for a refused connection; they should use the `private_moto` fixture (a
    server of their own) rather than the session's shared `moto_server`. slatedb retries
    object-store failures forever unless a store is opened with object_store_max_retries.
    """

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"moto-{self.port}.log"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def env(self) -> dict[str, str]:
        """The AWS_* variables for this server (static test credentials, plain http)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": S3_REGION,
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self, timeout: float = 30.0) -> MotoServer:
        if self.running:
            return self
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                # moto.server's main, two per-request costs cached (tests/moto_launcher.py)
                [sys.executable, str(MOTO_LAUNCHER), "-H", self.host, "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() takes every child
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"moto_server exited with {self.process.returncode} on port {self.port}; "
                    f"see {self.log_path}"
                )
            if self._answers():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto_server did not answer on {self.endpoint} in {timeout}s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # an HTTP answer of any status: the server is up
        except OSError:
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)  # a paused server cannot handle SIGTERM
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def restart(self, timeout: float = 30.0) -> MotoServer:
        self.stop()
        return self.start(timeout)

    def pause(self) -> None:
        assert self.process is not None, "moto_server is not running"
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None, "moto_server is not running"
        os.killpg(self.process.pid, signal.SIGCONT)

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=S3_REGION,
            aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY,
        )

    def create_bucket(self, name: str = S3_BUCKET) -> str:
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if name not in existing:
            client.create_bucket(Bucket=name)
        return name

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_MOTO_SERVERS: list[MotoServer] = []


@atexit.register
def _stop_moto_servers() -> None:
    for server in _MOTO_SERVERS:
        server.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto S3 server for the session, with the test bucket created."""
    server = MotoServer()
    _MOTO_SERVERS.append(server)
    server.start()
    try:
        server.create_bucket(S3_BUCKET)
        yield server
    finally:
        server.stop()


def _point_aws_env_at(server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3_env(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """The AWS_* variables pointing at the session's moto server, for one test."""
    _point_aws_env_at(moto_server, monkeypatch)
    return moto_server


@pytest.fixture
def private_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    """A moto server of this test's own (its own process and port, the test bucket created,
    AWS_* set), for tests that stop, pause or restart the server without disturbing the
    shared one. Stopped at the end of the test whatever state it was left in."""
    server = MotoServer()
    _MOTO_SERVERS.append(server)
    server.start()
    try:
        server.create_bucket(S3_BUCKET)
        _point_aws_env_at(server, monkeypatch)
        yield server
    finally:
        server.stop()
        _MOTO_SERVERS.remove(server)


@pytest.fixture
def s3_url(s3_env: MotoServer) -> str:
    """A fresh s3://bucket/prefix on the moto server (AWS_* variables set for the test)."""
    return f"s3://{S3_BUCKET}/t/{uuid.uuid4().hex[:12]}"


# --- database locations for store tests ---------------------------------------------------------


@pytest.fixture(params=["local", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh location on a real object store (a local directory, or s3:// on moto): the
    backends the ops tests (feed, checkpoints, read-only) must hold on."""
    if request.param == "local":
        return str(tmp_path / "db")
    s3: str = request.getfixturevalue("s3_url")
    return s3


#: every kind of location Store.open accepts; tests narrow it with
#: @pytest.mark.parametrize("store_url", [...], indirect=True)
STORE_BACKENDS = ("memory", "local", "relative", "file_url", "s3")


@pytest.fixture(params=STORE_BACKENDS)
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh, empty database location of the parametrized kind."""
    kind = request.param
    if kind == "memory":
        return f"memory://{uuid.uuid4().hex[:8]}"
    if kind == "local":
        return str(tmp_path / "db")
    if kind == "relative":
        monkeypatch.chdir(tmp_path)
        return "rel/db"
    if kind == "file_url":
        return (tmp_path / "db").as_uri()
    if kind == "s3":
        url: str = request.getfixturevalue("s3_url")
        return url
    raise ValueError(f"unknown store backend {kind!r}")
