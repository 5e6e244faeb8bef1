"""Jetstream's JSON events, read into typed values: a commit (create, update or delete of one
record), an identity change (a DID's handle) or an account change (active or not, and why).

    {"did": "did:plc:...", "time_us": 1725911162329308, "kind": "commit",
     "commit": {"rev": "...", "operation": "create", "collection": "app.bsky.feed.like",
                "rkey": "3l3qo2vuowo2b", "record": {...}, "cid": "bafy..."}}
    {"did": ..., "time_us": ..., "kind": "identity", "identity": {"did", "handle", "seq", "time"}}
    {"did": ..., "time_us": ..., "kind": "account", "account": {"active", "did", "seq", "time"[,
     "status"]}}

Anything else raises JetstreamEventError naming the JSON path and the offending text, with the
event's `time_us` when it could be read: the consumer counts it and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, cast

from opendata_kv.errors import JetstreamEventError

Operation = Literal["create", "update", "delete"]
OPERATIONS: frozenset[str] = frozenset(("create", "update", "delete"))
#: how much of an offending message an error keeps
SHOWN = 120


@dataclass(frozen=True)
class Commit:
    """One record written or deleted in a repo (`record` is None for a delete)."""

    did: str
    time_us: int
    operation: Operation
    collection: str
    rkey: str
    record: dict[str, Any] | None
    cid: str | None
    rev: str | None


@dataclass(frozen=True)
class Identity:
    """A DID's identity changed (its handle, None when it has none)."""

    did: str
    time_us: int
    handle: str | None
    seq: int | None
    time: str | None


@dataclass(frozen=True)
class Account:
    """A DID's hosting status: `active`, and `status` ("deactivated", "takendown", ...) when
    it is not."""

    did: str
    time_us: int
    active: bool
    status: str | None
    seq: int | None
    time: str | None


@dataclass(frozen=True)
class Other:
    """An event of a kind this version does not know: counted, its time taken, not stored."""

    did: str
    time_us: int
    kind: str


Event = Commit | Identity | Account | Other


def shown(message: str | bytes) -> str:
    """The start of a message, for an error."""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 3]}..."


def _fast_loads() -> Callable[[str | bytes], Any] | None:
    """msgspec's JSON decoder when the `msgspec` extra is installed (about 2.5x json.loads
    on Jetstream's events), else None."""
    try:
        from msgspec.json import Decoder
    except ImportError:
        return None
    decode: Callable[[str | bytes], Any] = Decoder().decode
    return decode


_FAST_LOADS = _fast_loads()


def loads(message: str | bytes) -> Any:
    """json.loads(message): msgspec's decoder first when installed; whatever it refuses
    (NaN, a lone surrogate escape, a byte order mark, UTF-16...) json.loads decides, so a
    message is taken or refused, and its error worded, as json.loads alone would."""
    if _FAST_LOADS is not None:
        try:
            return _FAST_LOADS(message)
        except Exception:  # msgspec.DecodeError and the like: json.loads decides
            pass
    return json.loads(message)


_new = object.__new__


_DECODE_COMMIT: Callable[[str | bytes], Any] | None
try:  # the `msgspec` extra: commits decoded straight into typed Structs (plain_commit)
    import msgspec

    _Text = Annotated[str, msgspec.Meta(min_length=1)]

    class _Body(msgspec.Struct, gc=False):
        """A commit's body, with _Reader.commit's checks as msgspec constraints (not
        tracked by the cyclic collector: it holds no cycle, and 500 a batch set it off)."""

        operation: Operation
        collection: _Text
        rkey: _Text
        record: Any = None
        cid: _Text | None = None
        rev: _Text | None = None

    class _Message(msgspec.Struct, gc=False):
        """A message as a commit: unknown fields ignored, as the checked reader does."""

        did: _Text
        time_us: Annotated[int, msgspec.Meta(ge=0)]
        kind: str
        commit: _Body | None = None

    #: decodes a commit message, its checks done by the decoder; what it refuses,
    #: parse_event reads the checked way, so a refusal keeps its wording
    _DECODE_COMMIT = msgspec.json.Decoder(_Message).decode
except ImportError:  # pragma: no cover - without the extra, parse_event's checked path
    _DECODE_COMMIT = None


class PlainCommit(Protocol):
    """A commit message as plain_commit reads it: its fields, unchecked beyond the JSON
    types and non-empty strings (the consumer checks the DID, NSID and rkey)."""

    did: str
    time_us: int
    commit: Any  # .operation, .collection, .rkey, .record (a dict, None for a delete), .cid


def plain_commit(message: str | bytes) -> PlainCommit | None:
    """The message read into typed Structs when it is a commit whose every field is as
    _Reader.commit takes it (a create's or update's record a JSON object); None for anything
    else, and always without msgspec: parse_event then decides, with its errors."""
    if _DECODE_COMMIT is None:
        return None
    try:
        found = _DECODE_COMMIT(message)
    except Exception:  # msgspec's DecodeError, ValidationError: the checked reader decides
        return None
    body = found.commit
    if found.kind != "commit" or body is None:
        return None
    if body.operation == "delete":
        body.record = None
    elif body.record.__class__ is not dict:
        return None
    result: PlainCommit = found
    return result


def _as_commit(found: PlainCommit) -> Commit:
    """The Commit of a plain commit, built without the dataclass's frozen __init__."""
    body = found.commit
    commit: Commit = _new(Commit)
    commit.__dict__.update(
        did=found.did,
        time_us=found.time_us,
        operation=body.operation,
        collection=body.collection,
        rkey=body.rkey,
        record=body.record,
        cid=body.cid,
        rev=body.rev,
    )
    return commit


def _plain_commit(data: dict[str, Any], time_us: int) -> Commit | None:
    """The commit `data` holds when every field is as _Reader.commit takes it (strings where
    strings go, a JSON object as a create's or update's record), built without its checks
    and the dataclass's frozen __init__; None for anything else (_Reader then decides)."""
    part = data.get("commit")
    did = data.get("did")
    if part.__class__ is not dict or did.__class__ is not str or not did:
        return None
    operation, collection, rkey = part.get("operation"), part.get("collection"), part.get("rkey")
    cid, rev = part.get("cid"), part.get("rev")
    if (
        collection.__class__ is not str
        or not collection
        or rkey.__class__ is not str
        or not rkey
        or (cid is not None and (cid.__class__ is not str or not cid))
        or (rev is not None and (rev.__class__ is not str or not rev))
    ):
        return None
    if operation == "delete":
        record = None
    elif operation == "create" or operation == "update":
        record = part.get("record")
        if record.__class__ is not dict:
            return None
    else:
        return None
    commit: Commit = _new(Commit)
    commit.__dict__.update(
        did=did,
        time_us=time_us,
        operation=operation,
        collection=collection,
        rkey=rkey,
        record=record,
        cid=cid,
        rev=rev,
    )
    return commit


def parse_event(message: str | bytes) -> Event:
    """The event a Jetstream message holds; JetstreamEventError when it holds none."""
    found = plain_commit(message)
    if found is not None:
        return _as_commit(found)
    try:
        data = loads(message)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JetstreamEventError(
            f"Jetstream event is not JSON ({exc}): {shown(message)!r}",
            value=shown(message),
            time_us=None,
        ) from None
    if not isinstance(data, dict):
        raise JetstreamEventError(
            f"Jetstream event is not a JSON object: {shown(message)!r}",
            value=shown(message),
            time_us=None,
        )
    time_us = data.get("time_us")
    if type(time_us) is not int or time_us < 0:
        raise JetstreamEventError(
            f"Jetstream event: time_us must be a non-negative integer, got {time_us!r}",
            field="time_us",
            value=time_us,
            time_us=None,
        )
    if data.get("kind") == "commit":
        commit = _plain_commit(data, time_us)
        if commit is not None:
            return commit
    return _Reader(data, time_us).event()


class _Reader:
    """Reads one decoded event's fields, raising JetstreamEventError with its path and time."""

    def __init__(self, data: dict[str, Any], time_us: int) -> None:
        self.data = data
        self.time_us = time_us

    def fail(self, path: str, what: str, got: Any) -> JetstreamEventError:
        text = repr(got)
        text = text if len(text) <= SHOWN else f"{text[: SHOWN - 3]}..."
        return JetstreamEventError(
            f"Jetstream event at time_us {self.time_us}: {path} must be {what}, got {text}",
            field=path,
            value=got,
            time_us=self.time_us,
        )

    def text(self, part: dict[str, Any], path: str, name: str, *, optional: bool = False) -> Any:
        found = part.get(name)
        if found is None and optional:
            return None
        if not isinstance(found, str) or not found:
            raise self.fail(f"{path}{name}", "a non-empty string", found)
        return found

    def number(self, part: dict[str, Any], path: str, name: str) -> int | None:
        found = part.get(name)
        if found is not None and type(found) is not int:
            raise self.fail(f"{path}{name}", "an integer", found)
        return found

    def section(self, name: str) -> dict[str, Any]:
        found = self.data.get(name)
        if not isinstance(found, dict):
            raise self.fail(name, "a JSON object", found)
        return found

    def event(self) -> Event:
        did = self.text(self.data, "", "did")
        kind = self.data.get("kind")
        if kind == "commit":
            return self.commit(did)
        if kind == "identity":
            part = self.section("identity")
            return Identity(
                did,
                self.time_us,
                self.text(part, "identity.", "handle", optional=True),
                self.number(part, "identity.", "seq"),
                self.text(part, "identity.", "time", optional=True),
            )
        if kind == "account":
            part = self.section("account")
            active = part.get("active")
            if not isinstance(active, bool):
                raise self.fail("account.active", "true or false", active)
            return Account(
                did,
                self.time_us,
                active,
                self.text(part, "account.", "status", optional=True),
                self.number(part, "account.", "seq"),
                self.text(part, "account.", "time", optional=True),
            )
        if not isinstance(kind, str) or not kind:
            raise self.fail("kind", '"commit", "identity" or "account"', kind)
        return Other(did, self.time_us, kind)

    def commit(self, did: str) -> Commit:
        part = self.section("commit")
        operation = part.get("operation")
        if not isinstance(operation, str) or operation not in OPERATIONS:  # {} is unhashable
            raise self.fail("commit.operation", '"create", "update" or "delete"', operation)
        record = part.get("record")
        if operation == "delete":
            record = None
        elif not isinstance(record, dict):
            raise self.fail("commit.record", "a JSON object", record)
        return Commit(
            did,
            self.time_us,
            cast(Operation, operation),
            self.text(part, "commit.", "collection"),
            self.text(part, "commit.", "rkey"),
            record,
            self.text(part, "commit.", "cid", optional=True),
            self.text(part, "commit.", "rev", optional=True),
        )
