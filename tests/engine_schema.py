"""The schema the engine tests read (tests/enginekit.py): importable by the Dask and Ray worker
processes, which load it again in every task."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

from opendata_kv import RecordType, Schema
from opendata_kv import fields as F
from opendata_kv.values import MsgpackCodec, Values

post = RecordType("post", 2, [("repo", F.string), ("n", F.u32)])
SCHEMA = Schema(post)


class KillOnceCodec:
    """msgpack values whose decoding kills its own process at the record whose `n` is
    `at`, once: when `armed` exists and `killed` does not (it creates `killed` first). The
    test arms it after planning, so the driver's own reads never die."""

    name = "msgpack"

    def __init__(self, armed: str, killed: str, at: int) -> None:
        self.armed, self.killed, self.at = armed, killed, at
        self.inner = MsgpackCodec()

    def encode(self, value: Any) -> bytes:
        return self.inner.encode(value)

    def decode(self, data: bytes) -> Any:
        value = self.inner.decode(data)
        if value.get("n") == self.at and os.path.exists(self.armed):
            try:
                fd = os.open(self.killed, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return value
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-read
        return value


def _killing_values(armed: str, killed: str, at: int) -> Values:
    return Values(SCHEMA).register(post, KillOnceCodec(armed, killed, at))


def killing_values(directory: Path, at: int) -> Any:
    """A schema source (a picklable function returning Values) whose decoding kills the
    reading process once, at record `at`, after `directory / "armed"` is created."""
    return functools.partial(
        _killing_values, str(directory / "armed"), str(directory / "killed"), at
    )
