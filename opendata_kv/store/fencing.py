"""A writer's account of being fenced: how many writes it acknowledged, how many of them a
flush() that returned covers, and the first FencedError, after which it refuses every write.

slatedb learns that another writer fenced this one only when it next touches the object store
(its WAL flush, a manifest poll, a read that misses memory), so a write slatedb accepts in
between returns normally and is lost. What the store can promise is counted here: every write
acknowledged before a flush() that returned is durable; a fenced store's flush() and close()
raise FencedError naming how many acknowledged writes came after that point (docs/store.md).
"""

from __future__ import annotations

from opendata_kv.errors import FencedError, OpendataKvError, StoreError
from opendata_kv.native.errors import FENCED, translate


class Fence:
    """One writer's counts: `acked` writes acknowledged (or whose outcome is unknown), `flushed`
    how many of them the last flush() that returned covers; `durable` slatedb's durable
    sequence number then (or at open), `wrote` whether a write slatedb numbered (a put, a
    batch with records) was acknowledged since; `error` the first FencedError."""

    __slots__ = ("acked", "durable", "error", "flushed", "wrote")

    def __init__(self) -> None:
        self.acked = 0
        self.flushed = 0
        self.durable: int | None = None
        self.wrote = False
        self.error: FencedError | None = None

    @property
    def unflushed(self) -> int:
        """Writes acknowledged after the last flush() that returned: lost if fenced now."""
        return self.acked - self.flushed

    def refusal(self, where: str) -> FencedError:
        """The error of a call refused because an earlier one reported the fence: slatedb can
        still accept a write between telling flush() and stopping the database, and that
        write would be lost."""
        assert self.error is not None
        return FencedError(
            f"{where}: {FENCED} (a call reported it before), and it refuses every call from "
            f"then on; {self._lost()} (reopen to continue as the writer)",
            unflushed=self.unflushed,
        )

    def saw(self, error: BaseException) -> None:
        """Remember the first FencedError a call raised."""
        if self.error is None and isinstance(error, FencedError):
            self.error = error
            error.unflushed = self.unflushed

    def translated(self, exc: BaseException, where: str) -> StoreError:
        """translate(exc, where), remembered when it is the fence (and then saying how many
        acknowledged writes it lost)."""
        error = translate(exc, where)
        if isinstance(error, FencedError):
            error = FencedError(f"{error}; {self._lost()}", unflushed=self.unflushed)
            self.saw(error)
        return error

    def uncertain(self, error: BaseException) -> None:
        """A write call that raised: refused (an OpendataKvError; the fence remembered), or cut
        short past slatedb (cancelled, ...) and so perhaps written: counted as acknowledged."""
        if isinstance(error, OpendataKvError):
            self.saw(error)
        else:
            self.acked += 1

    def covered(self, mark: int, durable: int | None) -> None:
        """A flush() that started when `mark` writes were acknowledged returned: they are
        durable, and `durable` is slatedb's durable sequence number now (None: unknown)."""
        if mark > self.flushed:
            self.flushed = mark
        self.durable, self.wrote = durable, False

    def closing_error(
        self, where: str, fenced: bool, durable_after: int | None = None
    ) -> FencedError | None:
        """What close() raises: FencedError when the store was fenced and acknowledged writes
        after its last flush() that returned (they are lost); None otherwise.

        `durable_after`, slatedb's durable sequence number once it shut down, catches a fence
        slatedb's close does not report: it marks itself closed before its final WAL write,
        so a refusal of that write can come back as a clean close (seen once in CI, on a
        loaded machine). A numbered write acknowledged since the last flush() while the
        number did not move was not written."""
        unflushed = self.unflushed
        if not unflushed:
            return None
        if fenced or self.error is not None:
            return FencedError(f"close of {where}: {FENCED}; {self._lost()}", unflushed=unflushed)
        if not self.wrote or self.durable is None or durable_after is None:
            return None
        if durable_after > self.durable:  # the final WAL write landed
            return None
        return FencedError(
            f"close of {where}: slatedb's close reported no error, but the writes acknowledged "
            "after the last flush() that returned did not become durable (its durable sequence "
            f"number stayed at {self.durable}): its final WAL write was refused, as when "
            f"{FENCED}; {self._lost()}",
            unflushed=unflushed,
        )

    def _lost(self) -> str:
        count = self.unflushed
        if not count:
            return "no write acknowledged after the last flush() that returned was lost"
        writes = "write" if count == 1 else "writes"
        return (
            f"{count} {writes} acknowledged after the last flush() that returned may be lost "
            "(all but those slatedb's background WAL flush wrote before the other writer "
            "opened; treat them as not written)"
        )
