"""The sync face (issue 19, items 2, 4, 5, 7): every sync method runs its async counterpart on
the calling thread (inline through the native driver where every wait is a native call), the
two faces have the same signatures, the drifts the issue lists are fixed, readers have no write
methods, and the conveniences (db[key], key in db, keys/values scans, count) work."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import re
import signal
import sys
import textwrap
import threading
import typing
from pathlib import Path
from typing import Any

import pytest
from mypykit import mypy_strict
from storekit import SCHEMA, VALUES, Post, aio, like, post1, post2

from opendata_kv.errors import ArgumentTypeError, InvalidArgumentError, StoreClosedError
from opendata_kv.native import calls
from opendata_kv.store import (
    Batch,
    RawRecord,
    Record,
    Scan,
    ScanOptions,
    Snapshot,
    Store,
    StoreReader,
    SyncBatch,
    SyncChanges,
    SyncScan,
    SyncSnapshot,
    SyncStore,
    SyncStoreReader,
    SyncTransaction,
    Transaction,
    clone,
    clone_sync,
)
from opendata_kv.store.indexes.read import IndexScan
from opendata_kv.store.sync import SyncIndexScan, SyncView
from opendata_kv.store.views import ReadView

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import gen_sync

# --- one definition: signatures -----------------------------------------------------------------

#: every class tools/gen_sync.py generates, with its async source
PAIRS = [
    (Store, SyncStore),
    (StoreReader, SyncStoreReader),
    (Transaction, SyncTransaction),
    (Snapshot, SyncSnapshot),
    (Batch, SyncBatch),
    (Scan, SyncScan),
    (IndexScan, SyncIndexScan),
    (ReadView, SyncView),
]
#: async names the sync face renames in annotations
RENAMED = {
    "Batch": "SyncBatch",
    "IndexScan": "SyncIndexScan",
    "Scan": "SyncScan",
    "Store": "SyncStore",
    "StoreReader": "SyncStoreReader",
    "Transaction": "SyncTransaction",
    "Snapshot": "SyncSnapshot",
    "ScanIteration": "SyncScan",  # SyncScan's hand-written base, in its methods' `self`
}
#: public async members with no sync counterpart, and why
ASYNC_ONLY = {
    "location",
    "checkpoint_id",
    "poll_interval",
    "check_expiry",  # attributes, not methods
}


def _public(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name in dir(cls)
        if not name.startswith("_") and name not in ASYNC_ONLY
        for member in [inspect.getattr_static(cls, name)]
        if callable(member) or isinstance(member, (property, staticmethod))
    }


def _shape(function: Any) -> list[tuple[str, str, str, str]]:
    """(name, kind, default, annotation) of each parameter, async names mapped to sync ones."""
    function = getattr(function, "__func__", function)
    out = []
    for parameter in inspect.signature(function).parameters.values():
        annotation = str(parameter.annotation)
        for old, new in RENAMED.items():
            annotation = annotation.replace(f"[{old}]", f"[{new}]")
            annotation = re.sub(rf"^{old}\[", f"{new}[", annotation)  # `self: Scan[...]`
            if annotation == old:
                annotation = new
        out.append((parameter.name, str(parameter.kind), repr(parameter.default), annotation))
    return out


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=[p[1].__name__ for p in PAIRS])
def test_every_public_method_has_a_sync_twin_with_the_same_signature(
    async_cls: type, sync_cls: type
) -> None:
    async_members, sync_members = _public(async_cls), _public(sync_cls)
    missing = sorted(set(async_members) - set(sync_members))
    assert not missing, f"{sync_cls.__name__} lacks {missing}"
    for name, member in async_members.items():
        twin = sync_members[name]
        if isinstance(member, property):
            assert isinstance(twin, property), name
            continue
        assert _shape(member) == _shape(twin), f"{sync_cls.__name__}.{name}"
        overloads = [_shape(o) for o in typing.get_overloads(getattr(member, "__func__", member))]
        twins = [_shape(o) for o in typing.get_overloads(getattr(twin, "__func__", twin))]
        assert overloads == twins, f"{sync_cls.__name__}.{name} overloads"


def test_the_pairs_are_every_generated_class() -> None:
    """A store class gen_sync.py generates is compared here (a new one cannot go unchecked;
    the collections' are in test_collections_sync_face.py)."""
    generated = {face.name for face in gen_sync.FACES}
    assert generated == {sync_cls.__name__ for _, sync_cls in PAIRS}


@pytest.mark.parametrize("target", gen_sync.TARGETS, ids=lambda t: t.path)
def test_the_sync_face_on_disk_is_what_the_generator_writes(target: Any) -> None:
    """The file is gen_sync.py's output for today's async source (CI also runs --check)."""
    assert gen_sync.render(target) == (gen_sync.ROOT / target.path).read_text()


def test_an_async_method_without_a_runner_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = gen_sync.TARGETS[0]
    view = store.faces[0]
    runners = {name: how for name, how in view.runners.items() if name != "count"}
    target = dataclasses.replace(store, faces=(dataclasses.replace(view, runners=runners),))
    with pytest.raises(gen_sync.Error, match=r"ReadView\.count has no runner"):
        gen_sync.render(target)


def test_the_feed_objects_match_too() -> None:
    for name in ("close", "__iter__", "__next__", "__enter__", "__exit__"):
        assert callable(getattr(SyncChanges, name))
    assert inspect.signature(SyncStore.changes).parameters.keys() == (
        inspect.signature(Store.changes).parameters.keys()
    )


# --- every sync method runs (inline where it can) -----------------------------------------------


def test_every_sync_method_works(tmp_path: Path) -> None:
    assert calls.active()  # the inline driver: anything but a native wait would raise
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, values=VALUES) as db:
        db.put(like, (1,), "one")
        db.put(like.key(2), "two", ttl=60)
        db.put_raw(like.encode(3), VALUES.encode(like, "three"))
        assert db.get(like, (1,)) == "one"
        assert db.get_raw(like.encode(3)) == VALUES.encode(like, "three")
        assert db.get_many(like, [(1,), (9,), (2,)], default="-") == ["one", "-", "two"]
        assert db.get_many([like.key(3)]) == ["three"]
        assert db.exists(like, (1,)) and not db.exists(like, (9,))
        db.delete(like, (3,))
        assert db.put_many((like, (n,), str(n)) for n in range(10, 20)) == 10
        db.flush()
        assert [r.key.n for r in db.scan(like, limit=3)] == [1, 2, 10]
        assert len(db.scan_all().to_list()) == 12
        with db.batch() as batch:
            batch.put(like, (30,), "x")
            batch.put_raw(like.encode(31), VALUES.encode(like, "y"))
            batch.delete(like, (1,))
            batch.delete_raw(like.encode(2))
            assert batch.delete_range(like, start=(10,), end=(15,)) == 5
        assert db.count(like) == 7
        lone = SyncBatch(db)
        lone.put(like, (40,), "z")
        db.write(lone, durable=True)
        with db.transaction() as tx:
            assert tx.get(like, (40,)) == "z"
            tx.put(like, (41,), "tx")
            tx.delete(like, (40,))
        assert db.get(like, (41,)) == "tx" and not db.exists(like, (40,))
        with db.snapshot() as snap:
            db.put(like, (42,), "after")
            assert not snap.exists(like, (42,))
            assert snap.count(like) == 8
        assert db.delete_range(like, start=(40,)) == 2
        db.put_raw(post1.encode("did", "a"), VALUES.encode(post1, {"t": "old"}))
        assert db.migrate("post") == 1
        assert db.get(post2, ("did", "a")) == Post("old")
        checkpoint = db.checkpoint("sync")
        assert [c.id for c in db.checkpoints("sync")] == [checkpoint.id]
        db.refresh_checkpoint(checkpoint.id, 3600)
        changes = list(db.changes(limit=3))
        assert len(changes) == 3
        assert sum(map(len, db.change_batches(limit=3))) == 3
        assert db.delete_checkpoint(checkpoint.id).id == checkpoint.id


def test_open_reader_takes_a_checkpoint_and_clone_runs_inside_an_event_loop(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, values=VALUES) as db:
        db.put(like, (1,), "pinned")
        pinned = db.checkpoint()
        db.put(like, (2,), "later")
        db.flush()
    with SyncStore.open_reader(url, SCHEMA, values=VALUES, checkpoint=pinned.id) as reader:
        assert isinstance(reader, SyncStoreReader) and not hasattr(reader, "put")
        assert [r.key.n for r in reader.scan(like)] == [1]

    async def inside_a_loop() -> Any:
        return SyncStore.clone(url, str(tmp_path / "copy"), checkpoint=pinned.id)

    result = asyncio.run(inside_a_loop())
    assert result.destination
    with SyncStore.open_reader(str(tmp_path / "copy"), SCHEMA, values=VALUES) as copy:
        assert copy.count(like) == 1


def test_clone_sync_takes_clones_arguments_and_runs_inside_an_event_loop(
    tmp_path: Path,
) -> None:
    """The drift issue 29 names: clone_sync lacked batch_size and progress, and its
    asyncio.run failed inside a running loop."""
    assert _shape(clone_sync) == _shape(clone)
    url = str(tmp_path / "db")
    with SyncStore.open(url, SCHEMA, values=VALUES) as db:
        db.put_many((like, (n,), str(n)) for n in range(5))
    seen: list[int] = []

    async def inside_a_loop() -> Any:
        return clone_sync(
            url, str(tmp_path / "copy"), batch_size=2, progress=lambda n, _: seen.append(n)
        )

    assert asyncio.run(inside_a_loop()).destination
    assert seen and seen[-1] == 5
    with SyncStore.open_reader(str(tmp_path / "copy"), SCHEMA, values=VALUES) as copy:
        assert copy.count(like) == 5


def test_a_closed_store_and_its_feed_raise_store_closed() -> None:
    db = SyncStore.open("memory://closing", SCHEMA, values=VALUES)
    db.put(like, (1,), "x")
    changes = db.changes()
    db.close()
    assert db.closed
    with pytest.raises(StoreClosedError, match="memory://closing"):
        next(changes)
    for call in (lambda: db.get(like, (1,)), lambda: db.count(like), db.flush):
        with pytest.raises(StoreClosedError, match="memory://closing"):
            call()


def test_sync_scans_count_their_failures() -> None:
    with SyncStore.open("memory://failures", SCHEMA, values=VALUES) as db:
        db.put(post2, ("r", "a"), Post("fine"))
        db.put_raw(post2.encode("r", "b"), b"\xc1")
        scan = db.scan(post2, on_error="skip")
        assert [r.key.rkey for r in scan] == ["a"]
        assert scan.failed == 1 and scan.last_error is not None
        raw = db.scan(post2, on_error="raw").to_list()
        assert [type(r) for r in raw] == [Record, RawRecord]


# --- threads and Ctrl-C ---------------------------------------------------------------------------


def test_eight_threads_on_one_sync_store_never_read_wrong() -> None:
    wrong: list[str] = []
    with SyncStore.open("memory://threads", SCHEMA, values=VALUES) as db:

        def work(thread: int) -> None:
            for n in range(300):
                key = thread * 1000 + n
                db.put(like, (key,), f"{thread}:{n}")
                if db.get(like, (key,)) != f"{thread}:{n}":
                    wrong.append(f"{thread}:{n}")
                if db[like, (thread * 1000,)] != f"{thread}:0":
                    wrong.append(f"first of {thread}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wrong == []
        assert db.count(like) == 8 * 300


def test_an_interrupt_during_calls_leaves_the_store_usable(tmp_path: Path) -> None:
    """KeyboardInterrupts raised by a signal handler while the main thread writes, flushes (a
    flush pends on the object store) and reads each cancel the call they land in; the store
    stays usable and holds what it acknowledged.

    The handler raises only inside the store calls (not in the test's own bookkeeping, nor
    inside the driver's continuation callback, from which an exception cannot
    propagate out of ctypes: reported to the lead)."""
    armed = [False]
    raised = [0]
    delivered = threading.Event()
    done = threading.Event()

    def interrupt(signum: int, frame: Any) -> None:
        delivered.set()
        if not armed[0] or frame is None or frame.f_code.co_name == "_continuation":
            return
        if frame.f_code is not step.__code__ and "opendata_kv" not in frame.f_code.co_filename:
            return
        raised[0] += 1
        if raised[0] >= 20:
            armed[0] = False
            done.set()
        raise KeyboardInterrupt

    def sender() -> None:
        while not done.is_set():
            delivered.clear()
            signal.pthread_kill(main, signal.SIGUSR1)
            delivered.wait()  # one signal at a time
            done.wait(0.0005)

    def step(n: int) -> None:
        db.put(like, (n,), str(n))
        db.flush()
        db.get(like, (n,))

    main = threading.get_ident()
    previous = signal.signal(signal.SIGUSR1, interrupt)
    thread = threading.Thread(target=sender)
    try:
        with SyncStore.open(str(tmp_path / "db"), SCHEMA, values=VALUES) as db:
            thread.start()
            n = 0
            armed[0] = True
            while not done.is_set():
                n += 1
                with contextlib.suppress(KeyboardInterrupt):
                    step(n)
            thread.join()
            db.put(like, (0,), "after")
            db.flush()
            assert db.get(like, (0,)) == "after"
            assert all(r.value == str(r.key.n) for r in db.scan(like, start=(1,)))
    finally:
        armed[0] = False
        done.set()
        if thread.is_alive():
            thread.join()
        signal.signal(signal.SIGUSR1, previous)
    assert raised[0] == 20


# --- options and conveniences -------------------------------------------------------------------


def test_scan_options_are_one_value_and_keywords_override_them() -> None:
    with SyncStore.open("memory://options", SCHEMA, values=VALUES) as db:
        for n in range(5):
            db.put(like, (n,), str(n))
        newest = ScanOptions(reverse=True, limit=2)
        assert [r.key.n for r in db.scan(like, options=newest)] == [4, 3]
        assert [r.key.n for r in db.scan(like, options=newest, limit=3)] == [4, 3, 2]
        assert [r.key.n for r in db.scan_all(options=newest.but(reverse=False))] == [0, 1]
        with pytest.raises(ArgumentTypeError, match="revrse"):
            db.scan(like, revrse=True)  # type: ignore[call-overload]
        with pytest.raises(InvalidArgumentError, match="on_error='raw'"):
            ScanOptions(on_error="raw")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="limit"):
            ScanOptions(limit=-1)


def test_mapping_conveniences_keys_values_and_count() -> None:
    with SyncStore.open("memory://conveniences", SCHEMA, values=VALUES) as db:
        for n in range(6):
            db.put(like, (n,), str(n))
        db.put(post2, ("r", "a"), Post("p"))
        assert db[like.key(1)] == "1" and db[like, (2,)] == "2"
        with pytest.raises(KeyError):
            db[like, (99,)]
        assert like.key(1) in db and (like, (99,)) not in db
        assert [k.n for k in db.scan(like).keys()] == list(range(6))  # noqa: SIM118
        assert list(db.scan(like, start=(4,)).values()) == ["4", "5"]
        assert db.count(like) == 6 and db.count(like, start=(2,), end=(4,)) == 2
        assert db.count() == 7 and db.scan(like, limit=4).count() == 4
        db.put_raw(like.encode(7), b"\xc1")  # a keys-only scan never decodes the value
        assert [k.n for k in db.scan(like, start=(7,)).keys()] == [7]  # noqa: SIM118


@aio
async def test_the_async_face_has_the_same_conveniences() -> None:
    async with Store.open("memory://aconv", SCHEMA, values=VALUES) as store:
        for n in range(4):
            await store.put(like, (n,), str(n))
        assert await store.count(like) == 4
        assert [k.n async for k in store.scan(like).keys()] == [0, 1, 2, 3]  # noqa: SIM118
        assert [v async for v in store.scan(like, options=ScanOptions(limit=2)).values()] == [
            "0",
            "1",
        ]


def test_types_say_what_a_store_can_do(tmp_path: Path, mypy_cache: Path) -> None:
    """A reader has no write methods (mypy flags them); Store.open's type can be named."""
    source = tmp_path / "client.py"
    source.write_text(
        textwrap.dedent(
            """
            from opendata_kv import RecordType, Schema, Store, SyncStore, fields
            from opendata_kv.keys import Key
            from opendata_kv.store import Opening, ScanOptions, StoreReader, SyncStoreReader

            like = RecordType("like", 3, [("n", fields.u64)])
            schema = Schema(like)

            async def main() -> None:
                opening: Opening[Store] = Store.open("memory://", schema)
                async with opening as store:
                    await store.put(like, (1,), "x")
                    n: int = await store.count(like)
                    keys: list[Key] = [k async for k in store.scan(like).keys()]  # noqa: SIM118
                reader: StoreReader = await Store.open_reader("memory://", schema)
                await reader.get(like, (1,))
                await reader.put(like, (1,), "x")  # E1
                store.scan(like, options=ScanOptions(limit=1), revrse=True)  # E2

            def sync(db: SyncStore, ro: SyncStoreReader) -> None:
                value = db[like, (1,)]
                present: bool = like.key(1) in db
                with db.batch() as batch:
                    batch.delete_range(like) + 1
                ro.put(like, (1,), "x")  # E3
                ro.flush()  # E4
            """
        )
    )
    _, out = mypy_strict(tmp_path, [source.name], mypy_cache)
    flagged = {line.split(":")[1] for line in out.splitlines() if ": error:" in line}
    expected = {
        str(i + 1) for i, text in enumerate(source.read_text().splitlines()) if "# E" in text
    }
    assert flagged == expected, out
