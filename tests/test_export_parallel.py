"""`opendata-kv export --format parquet` (typed columns, cli/export_parquet.py) and
`--parallel N` (a dataset of one file per split, cli/export_parallel.py), and `import` of a
file or a directory of them: byte-identical round trips, expiries too; DuckDB reads the
dataset as the scan reads the store; the export's checkpoint is gone afterwards."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cli_schema import BLOB, LIKE, POST, POST_V2, SCHEMA, VALUES, Post
from test_clone_raw import _rows
from test_export_import import fails, ok

from opendata_kv.store import SyncStore

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SPEC = ("--schema", "cli_schema:VALUES")
SMALL_SSTS = {"l0_sst_size_bytes": 4096, "flush_interval": "60s"}


def build(db: Path, count: int = 600) -> None:
    """Posts (v1 msgpack maps, v2 dataclasses), likes and raw blobs over several SSTs, some
    with a TTL, the last writes maybe only in the WAL."""
    rng = random.Random(5)
    with SyncStore.open(str(db), VALUES, settings=SMALL_SSTS) as store:
        for start in range(0, count, 100):
            with store.batch() as b:
                for n in range(start, start + 100):
                    b.put(POST, (f"did:{n % 7}", f"r{n:05d}"), {"t": "x" * rng.randrange(40)})
                    b.put(POST_V2, (f"did:{n % 5}", f"s{n:05d}"), Post(f"post {n}", "en"))
                    b.put(BLOB, (f"b{n:05d}",), rng.randbytes(rng.randrange(1, 80)))
            store.flush()
        for n in range(40):
            store.put(LIKE, (n,), {"by": f"u{n}"}, ttl=3600)
        store.flush()


def raw_rows(db: Path) -> list[tuple[bytes, bytes, int | None]]:
    """Every (key, value, expiry) stored, as test_clone_raw reads them."""
    from storekit import run

    return list(run(_rows(db)))


def checkpoints(db: Path) -> list[str]:
    with SyncStore.open_reader(str(db), SCHEMA) as reader:
        return [cp.id for cp in reader.checkpoints()]


@pytest.fixture(scope="module")
def store_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("export") / "db"
    build(db)
    return db


def test_parallel_export_and_import_are_byte_identical(store_db: Path, tmp_path: Path) -> None:
    before = checkpoints(store_db)
    out = tmp_path / "dataset"
    ok(
        "export",
        str(store_db),
        *SPEC,
        "--format",
        "parquet",
        "--output",
        str(out),
        "--parallel",
        "2",
    )
    files = sorted(out.glob("*.parquet"))
    assert len(files) >= 2
    assert checkpoints(store_db) == before  # the export's pin is deleted
    copy = tmp_path / "copy"
    result = ok("import", str(copy), str(out), *SPEC, "--batch-size", "97")
    stored = raw_rows(store_db)
    assert result.stderr == f"imported {len(stored):,} records\n"
    assert raw_rows(copy) == stored  # every key, value and expiry
    assert any(expiry is not None for _, _, expiry in stored)
    # every file has the same columns, and together the rows of the store, each once
    schemas = {pq.read_schema(f) for f in files}
    assert len(schemas) == 1
    keys = [k for f in files for k in pq.read_table(f, columns=["_key"]).column(0).to_pylist()]
    assert keys == [k for k, _, _ in stored]


def test_single_file_parquet_has_typed_columns(store_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "posts.parquet"
    ok("export", str(store_db), *SPEC, "--record", "post", "--output", str(out))
    table = pq.read_table(out)
    types = {f.name: str(f.type) for f in table.schema}
    assert types["repo"] == types["rkey"] == "string"
    assert types["text"] == "string"  # post v2's dataclass field
    assert types["_version"] == "uint8"  # post has two versions
    assert types["_key"] == types["_raw_value"] == "binary"
    assert types["_expires"] == "timestamp[ms, tz=UTC]"
    copy = tmp_path / "copy"
    ok("import", str(copy), str(out), *SPEC)
    posts = [r for r in raw_rows(store_db) if r[0][1] == 0x10]
    assert raw_rows(copy) == posts


def test_duckdb_reads_the_dataset_as_the_scan_reads_the_store(
    store_db: Path, tmp_path: Path
) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "dataset"
    ok("export", str(store_db), *SPEC, "--record", "post", "--output", str(out), "--parallel", "3")
    assert len(list(out.glob("*.parquet"))) >= 2
    with SyncStore.open_reader(str(store_db), VALUES) as reader:
        scanned = reader.scan("post").to_arrow(raw_key=True).read_all()
    columns = ", ".join(f'"{name}"' for name in scanned.schema.names)
    con = duckdb.connect()
    got = con.sql(f"SELECT {columns} FROM read_parquet('{out}/*.parquet') ORDER BY _key").fetchall()
    con.register("scanned", scanned)
    want = con.sql(f"SELECT {columns} FROM scanned ORDER BY _key").fetchall()
    assert len(got) == len(want) == scanned.num_rows > 1000
    assert got == want


def test_an_empty_selection_writes_one_file_with_the_columns(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with SyncStore.open(str(db), VALUES) as store:
        store.put(LIKE, (1,), {"by": "u"})
    out = tmp_path / "dataset"
    ok("export", str(db), *SPEC, "--record", "blob", "--output", str(out), "--parallel", "2")
    (only,) = out.glob("*.parquet")
    table = pq.read_table(only)
    assert table.num_rows == 0 and "_raw_value" in table.schema.names


def test_parallel_refusals(store_db: Path, tmp_path: Path) -> None:
    err = fails(
        "export",
        str(store_db),
        "--format",
        "csv",
        "--output",
        str(tmp_path / "d"),
        "--parallel",
        "2",
    )
    assert "--parallel writes a Parquet dataset" in err
    err = fails("export", str(store_db), "--parallel", "2")
    assert "give --output DIR" in err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "part-00000.parquet").write_bytes(b"")
    err = fails("export", str(store_db), "--output", str(taken), "--parallel", "2")
    assert "already holds Parquet files" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    err = fails("import", str(tmp_path / "c"), str(empty))
    assert "without Parquet files" in err


def test_the_older_string_parquet_form_still_imports(tmp_path: Path) -> None:
    key, value = POST.encode("did:a", "r1"), b"\x81\xa1t\xa1x"
    table = pa.table(
        {
            "key_hex": [key.hex()],
            "value_hex": [value.hex()],
            "expire_at": pa.array([None], pa.int64()),
        }
    )
    pq.write_table(table, tmp_path / "old.parquet")
    ok("import", str(tmp_path / "copy"), str(tmp_path / "old.parquet"), *SPEC)
    assert [(k, v) for k, v, _ in raw_rows(tmp_path / "copy")] == [(key, value)]


def test_parallel_export_on_s3(s3_url: str, tmp_path: Path) -> None:
    """The same round trip on the moto S3 endpoint: the workers (spawned processes, the AWS_*
    variables inherited) read the pinned checkpoint there; it is gone afterwards."""
    rng = random.Random(8)
    with SyncStore.open(s3_url, VALUES, settings=SMALL_SSTS) as store:
        for start in range(0, 300, 100):
            with store.batch() as b:
                for n in range(start, start + 100):
                    b.put(POST_V2, (f"did:{n % 3}", f"s{n:05d}"), Post("x" * rng.randrange(60)))
            store.flush()
        store.put(LIKE, (1,), {"by": "u"}, ttl=3600)
        store.flush()
        with SyncStore.open_reader(s3_url, SCHEMA) as reader:
            before = {cp.id for cp in reader.checkpoints()}
        out = tmp_path / "dataset"
        ok("export", s3_url, *SPEC, "--output", str(out), "--parallel", "2")
        assert len(list(out.glob("*.parquet"))) >= 2
        with SyncStore.open_reader(s3_url, SCHEMA) as reader:
            assert {cp.id for cp in reader.checkpoints()} == before
            stored = [(r.raw_key, r.value) for r in reader.scan_all()]
    copy = tmp_path / "copy"
    ok("import", str(copy), str(out), *SPEC)
    with SyncStore.open_reader(str(copy), SCHEMA) as reader:
        assert [(r.raw_key, r.value) for r in reader.scan_all()] == stored


def test_parallel_export_of_a_given_checkpoint_keeps_it(store_db: Path, tmp_path: Path) -> None:
    """--checkpoint NAME: the workers read that checkpoint, which the export leaves alone."""
    ok("checkpoint", "create", str(store_db), "--name", "nightly")
    try:
        out = tmp_path / "dataset"
        ok(
            "export",
            str(store_db),
            *SPEC,
            "--checkpoint",
            "nightly",
            "--output",
            str(out),
            "--parallel",
            "2",
            "--record",
            "like",
        )
        with SyncStore.open_reader(str(store_db), SCHEMA) as reader:
            assert [cp.name for cp in reader.checkpoints("nightly")] == ["nightly"]
            likes = [r.raw_key for r in reader.scan("like")]
        keys = [
            k
            for f in sorted(out.glob("*.parquet"))
            for k in pq.read_table(f).column("_key").to_pylist()
        ]
        assert keys == likes and len(likes) == 40
    finally:
        ok("checkpoint", "delete", str(store_db), "nightly")
