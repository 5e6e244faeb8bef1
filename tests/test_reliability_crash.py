"""Crash test: SIGKILL a writer at random moments; nothing it acknowledged may be lost.

Each round lets a tests/crash_writer.py writer loose on the same database. The writer
resumes after the last batch present and appends atomic batches, printing `ack <id>` only
after Store.flush() returned. The round kills it with SIGKILL -- while it opens the database
and replays the WAL, at a random time while writing, or right after its k-th
acknowledgement -- then reopens the database (as the writer on even rounds, as a read-only
reader on odd ones) and checks that

* every acknowledged batch is present, and every record of it decodes to exactly the value
  its batch prescribes (no damaged or half-decoded values);
* every batch present is complete (a batch is one atomic write: all of it or nothing);
* the batches present are exactly 0..n-1 (no holes) and at most one past the last
  acknowledgement (the one that was in flight when the kill came);
* the next writer resumes exactly where the database ends.

Writers are forked from one warm process (crash_writer.py --fork-server) that has imported
Python and slatedb once, so a round costs only its database work; a kill never lands in an
interpreter's start-up, where no database has been touched yet.

The rounds of a backend are split over two databases whose rounds run side by side (each
round mostly waits), so 10 rounds take about the time of 5.

OPENDATA_KV_CRASH_ROUNDS overrides the number of rounds per backend (default 10, within CI's
time; 20 or more for a deeper run) and
OPENDATA_KV_CRASH_SEED fixes the random schedule (the seed is printed and named on failure).
Marked slow: `pytest -m "not slow"` skips it locally; CI runs it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from pathlib import Path
from typing import Any

import crash_writer as cw
import pytest
from side_by_side import side_by_side
from writer_process import ForkedWriter, ForkServer

from opendata_kv.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.hang_guard(600)]

ROUNDS = int(os.environ.get("OPENDATA_KV_CRASH_ROUNDS", "10"))


def _seed() -> int:
    configured = os.environ.get("OPENDATA_KV_CRASH_SEED")
    return int(configured) if configured else random.SystemRandom().randrange(1 << 32)


async def _verify(url: str, as_reader: bool, env_settings: dict[str, Any]) -> cw.Check:
    if as_reader:
        opening = Store.open_reader(url, cw.SCHEMA, values=cw.VALUES)
    else:
        opening = Store.open(url, cw.SCHEMA, values=cw.VALUES, settings=env_settings)
    async with opening as store:
        return await cw.check_database(store)


#: independent databases whose rounds run side by side: a round mostly waits (for the object
#: store, for a kill timer, for acknowledgements), so two chains of ROUNDS/2 take about the
#: time of one, with every round's checks unchanged
CHAINS = 2


def crash_rounds(
    url: str,
    rounds: int,
    workdir: Path,
    *,
    settings: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    label: str,
) -> dict[str, int]:
    """Run `rounds` kill-and-verify rounds in total, split over CHAINS databases (`url` with
    the chain number appended) that run side by side; returns the summed counts."""
    seed = _seed()
    shares = [rounds // CHAINS + (chain < rounds % CHAINS) for chain in range(CHAINS)]
    started = time.monotonic()
    results = side_by_side(
        {
            f"chain {chain}": functools.partial(
                _chain,
                f"{url}-{chain}",
                share,
                workdir / f"chain-{chain}",
                random.Random(f"{seed}:{chain}"),
                f"[{label} seed={seed} chain {chain}]",
                settings=settings,
                env=env,
            )
            for chain, share in enumerate(shares)
        }
    ).values()
    counts = {name: sum(r[name] for r in results) for name in next(iter(results))}
    counts["seconds"] = round(time.monotonic() - started, 1)
    print(f"\ncrash {label}: seed={seed} {counts}")
    return counts


def _chain(
    url: str,
    rounds: int,
    workdir: Path,
    rng: random.Random,
    where: str,
    *,
    settings: dict[str, Any] | None,
    env: dict[str, str] | None,
) -> dict[str, int]:
    """`rounds` kill-and-verify rounds, one after the other, on one database."""
    counts = {
        "rounds": 0,
        "acked_batches": 0,
        "acked_records": 0,
        "verified_records": 0,
        "startup_kills": 0,
        "timer_kills": 0,
        "ack_kills": 0,
        "unacked_survivors": 0,
    }
    expected_next = 0
    acked_total: set[int] = set()
    workdir.mkdir()
    with ForkServer(url, workdir, settings=settings, env=env) as server:
        for round_no in range(rounds):
            expected_next = _round(
                url,
                server.writer(),
                rng,
                f"{where} round {round_no}",
                as_reader=round_no % 2 == 1,
                expected_next=expected_next,
                acked_total=acked_total,
                counts=counts,
                settings=settings,
            )
    counts["final_batches"] = expected_next
    return counts


def _round(
    url: str,
    writer: ForkedWriter,
    rng: random.Random,
    where: str,
    *,
    as_reader: bool,
    expected_next: int,
    acked_total: set[int],
    counts: dict[str, int],
    settings: dict[str, Any] | None,
) -> int:
    """One kill-and-verify round; the next batch the database expects after it."""
    mode = rng.choices(["startup", "timer", "ack"], weights=[2, 5, 3])[0]
    try:
        writer.go()
        if mode == "startup":
            # Anywhere in opening the database and replaying its WAL.
            time.sleep(rng.uniform(0.0, 0.5))
        else:
            opened = writer.wait_open()
            assert opened == expected_next, (
                f"{where}: writer resumed at batch {opened}, expected {expected_next}"
            )
            if mode == "timer":
                time.sleep(rng.uniform(0.0, 0.25))
            else:
                writer.wait_acks(rng.randint(1, 40))
    finally:
        writer.kill()
    counts[f"{mode}_kills"] += 1
    if writer.opened_at is not None:
        assert writer.opened_at == expected_next, f"{where}: resume point"
    acked = writer.acked
    assert acked == list(range(expected_next, expected_next + len(acked))), (
        f"{where}: acknowledgements out of order: {acked[:5]}..."
    )
    check = asyncio.run(_verify(url, as_reader=as_reader, env_settings=settings or {}))
    acked_total.update(acked)
    missing = acked_total - check.batches
    assert not missing, f"{where}: acknowledged batches lost: {missing}"
    assert check.batches == set(range(check.next_batch)), f"{where}: holes in the batches present"
    last_acked = max(acked_total, default=-1)
    assert check.next_batch <= last_acked + 2, (
        f"{where}: batches up to {check.next_batch - 1} present but the "
        f"last acknowledged was {last_acked}"
    )
    counts["unacked_survivors"] += check.next_batch - 1 - last_acked
    # The survivor (if any) is now part of the database: later rounds must keep it too.
    acked_total.update(check.batches)
    counts["rounds"] += 1
    counts["acked_batches"] += len(acked)
    counts["acked_records"] += sum(cw.records_per_batch(b) for b in acked)
    counts["verified_records"] += check.records
    return check.next_batch


def test_crash_local_directory(tmp_path: Path) -> None:
    counts = crash_rounds(str(tmp_path / "db"), ROUNDS, tmp_path, label="local")
    assert counts["rounds"] == ROUNDS
    assert counts["acked_batches"] > 0


@pytest.mark.s3
def test_crash_s3(s3_url: str, tmp_path: Path) -> None:
    """The same rounds against moto's S3 (the session's server; s3_url sets AWS_* in this
    process, and the writer inherits them). Bounded retries: a broken server fails the test
    instead of leaving the writer retrying forever."""
    settings = {"object_store_max_retries": 3}
    counts = crash_rounds(s3_url, ROUNDS, tmp_path, settings=settings, label="s3")
    assert counts["rounds"] == ROUNDS
    assert counts["acked_batches"] > 0
