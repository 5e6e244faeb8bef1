"""slatedb's errors as opendata_kv errors (issue 13): damaged data is StoreDataError naming the
object, a refused access StorePermissionError, only an outage StoreUnavailableError; a Rust
panic never escapes as the binding's InternalError; an SST damaged after the open fails the
read at once with bounded retries; verify on S3."""

from __future__ import annotations

import asyncio
from pathlib import Path

import damaged_store as ds
import pytest
from hang_guard import hang_guard
from slatedb.uniffi import CloseReason, Error
from slatedb.uniffi._slatedb_uniffi.slatedb import InternalError

from opendata_kv.errors import (
    FencedError,
    StoreDataError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
)
from opendata_kv.native.errors import translate
from opendata_kv.store import Store, verify_sync

SST = "compacted/01M83V2RGXNK8QKH3EP4H1ZK6K.sst"


@pytest.mark.parametrize(
    ("exc", "kind", "named"),
    [
        (InternalError("Range must be non-empty"), StoreDataError, None),
        (
            Error.Internal(
                "Internal error: generic transactional object (e.g. manifest) error "
                "CallbackError(SignedOffsetOutOfBounds { soffset: 268435464 })"
            ),
            StoreDataError,
            None,
        ),
        (
            Error.Unavailable(
                "Unavailable error: object store error (Generic LocalFileSystem error: "
                "Requested range was invalid)"
            ),
            StoreDataError,
            None,
        ),
        (Error.Data(f"Data error: checksum mismatch in {SST}"), StoreDataError, SST),
        (Error.Invalid("Invalid error: invalid compaction"), StoreDataError, None),
        (
            Error.Unavailable(
                "Unavailable error: object store error (Generic LocalFileSystem error: "
                "Unable to open file /db/wal/1.sst: Permission denied (os error 13))"
            ),
            StorePermissionError,
            None,
        ),
        (
            Error.Unavailable("Unavailable error: Client error with status 403 Forbidden"),
            StorePermissionError,
            None,
        ),
        (
            Error.Unavailable("Unavailable error: error sending request: connection refused"),
            StoreUnavailableError,
            None,
        ),
        (
            Error.Closed(CloseReason.FENCED, "Closed error: detected newer DB client"),
            FencedError,
            None,
        ),
        (Error.Invalid("Invalid error: unknown setting l0_sst_size_bytes"), StoreError, None),
    ],
)
def test_translate_classifies_by_kind_and_text(
    exc: BaseException, kind: type[StoreError], named: str | None
) -> None:
    error = translate(exc, "open /db")
    assert type(error) is kind, error
    assert str(error).startswith("open /db: ") and "\n" not in str(error)
    if isinstance(error, StoreDataError):
        assert error.object_name == named and "opendata-kv verify" in str(error)
    if kind is StorePermissionError:
        assert isinstance(error, PermissionError) and "retrying will not help" in str(error)
    if kind is StoreUnavailableError:
        assert "reopen" in str(error)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("failures") / "base"
    ds.build(path)
    return path


def test_an_sst_truncated_after_the_open_fails_the_scan_at_once(base: Path, tmp_path: Path) -> None:
    """The open checks passed; the SST is cut short under the reader. With bounded retries
    the scan fails at once with a StoreDataError, not an endless retry, not an outage."""
    path = ds.copy(base, tmp_path / "db")

    async def main() -> None:
        async with Store.open_reader(path, ds.SCHEMA, object_store_max_retries=0) as reader:
            ds.damage(ds.targets(path)["SST"], "truncate")
            with pytest.raises(StoreDataError, match="shorter than the manifest says"):
                [record async for record in reader.scan(ds.item)]

    with hang_guard(60):
        asyncio.run(main())


@pytest.mark.s3
@pytest.mark.parametrize("listed", [True, False], ids=["listed", "probed"])
def test_verify_on_s3_reads_everything_and_names_a_deleted_sst(
    s3_url: str, s3_env: object, monkeypatch: pytest.MonkeyPatch, listed: bool
) -> None:
    """With static credentials verify lists the prefix; without (an instance role: no
    client to list with) it probes the objects. Both read every row and name a deleted SST."""
    from opendata_kv.checks import verify as verify_module
    from opendata_kv.store import SyncStore

    if not listed:
        monkeypatch.setattr(verify_module, "lister", lambda *args: None)
    with SyncStore.open(s3_url, ds.SCHEMA) as store:
        for n in range(30):
            store.put(ds.item, (n,), {"n": n})
            if n % 10 == 9:
                store.flush()
    with hang_guard(120):
        report = verify_sync(s3_url)
    assert report.ok, report.problems
    assert report.checked["rows read from SSTs"] == 30
    assert any("cannot be listed" in note for note in report.notes) is not listed
    client = s3_env.client()  # type: ignore[attr-defined]
    bucket, prefix = s3_url[len("s3://") :].split("/", 1)
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/compacted/")
    key = listed["Contents"][0]["Key"]
    client.delete_object(Bucket=bucket, Key=key)
    with hang_guard(120):
        report = verify_sync(s3_url)
    assert not report.ok
    assert key.split("/", 2)[-1] in {p.object_name for p in report.problems}, report.problems
