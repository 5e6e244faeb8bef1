"""Generated Jetstream streams for the ingest tests: commits built with the atproto SDK's
models (posts with fields the SDK does not declare, likes, reposts, follows, profiles; updates
and deletes, some of records never created), identity and account events, and malformed
messages; with the model of what a consumer must end up holding."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from atproto import models
from atproto_client.models.utils import get_model_as_dict

from opendata_kv.ids import tid

POST = "app.bsky.feed.post"
LIKE = "app.bsky.feed.like"
REPOST = "app.bsky.feed.repost"
FOLLOW = "app.bsky.graph.follow"
PROFILE = "app.bsky.actor.profile"
START_US = 1_725_000_000_000_000


@dataclass
class Stream:
    """The messages in order, the time each stands at (a message whose time_us cannot be
    read stands at the one before it), and what a consumer of all of them must hold."""

    messages: list[str] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    records: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    identities: dict[str, str | None] = field(default_factory=dict)
    accounts: dict[str, tuple[bool, str | None]] = field(default_factory=dict)

    def likes_of(self, uri: str) -> list[tuple[str, str]]:
        """(rkey, liker DID) of the live likes of `uri`, in rkey order."""
        return sorted(
            (rkey, did)
            for (did, coll, rkey), value in self.records.items()
            if coll == LIKE and value["subject"]["uri"] == uri
        )

    def count(self, collection: str, subject: str) -> int:
        """How many live records of `collection` point at `subject` (a URI or DID)."""
        total = 0
        for (_, coll, _), value in self.records.items():
            if coll != collection:
                continue
            target = value["subject"] if coll == FOLLOW else value["subject"]["uri"]
            total += target == subject
        return total


def did_of(n: int) -> str:
    return "did:plc:" + tid.encode(n + 1).rjust(24, "a")[:24]


def generate(seed: int, size: int, *, users: int = 12) -> Stream:
    """A stream of about `size` messages (see the module docstring)."""
    rng = random.Random(seed)
    dids = [did_of(n) for n in range(users)]
    out = Stream()
    now = START_US
    clock = 0

    def rkey() -> str:
        nonlocal clock
        clock += 1
        return tid.from_parts(now + clock, clock % 1024)

    def emit(message: str, stands_at: int | None = None) -> None:
        out.messages.append(message)
        out.times.append(now if stands_at is None else stands_at)

    def commit(did: str, op: str, coll: str, key: str, record: dict[str, Any] | None) -> None:
        body: dict[str, Any] = {"rev": rkey(), "operation": op, "collection": coll, "rkey": key}
        if record is not None:
            body["record"] = record
            body["cid"] = "bafyreib2rxk3rh6kzwq3xg6ahqmbt3vwmsbkfdbqs5axg4ty7qj7q6qqbe"
        emit(json.dumps({"did": did, "time_us": now, "kind": "commit", "commit": body}))
        key3 = (did, coll, key)
        if op == "delete":
            out.counts["deletes"] += 1
            if out.records.pop(key3, None) is None:
                out.counts["unknown_deletes"] += 1
        else:
            out.counts["creates" if op == "create" else "updates"] += 1
            if op == "update" and key3 not in out.records:
                out.counts["unknown_updates"] += 1
            assert record is not None
            out.records[key3] = record

    def post_value(n: int) -> dict[str, Any]:
        post = models.AppBskyFeedPost.Record(
            text=f"post {n}", created_at="2024-09-01T00:00:00.000Z", langs=["en"]
        )
        value = get_model_as_dict(post)
        if rng.random() < 0.3:  # a field a newer lexicon added: kept as it came
            value["futureField"] = {"kind": "new", "n": n}
        return value

    for n in range(size):
        now += rng.choice((0, 1, 1, 3, 17)) if n else 0  # some messages share a time_us
        did = rng.choice(dids)
        mine = [k for k in out.records if k[0] == did]
        posts = [k for k in out.records if k[1] == POST]
        roll = rng.random()
        if roll < 0.22 or not posts:
            commit(did, "create", POST, rkey(), post_value(n))
        elif roll < 0.47:
            target = rng.choice(posts)
            ref = models.ComAtprotoRepoStrongRef.Main(
                uri=f"at://{target[0]}/{POST}/{target[2]}", cid="bafyreib2rxk3rh6kzwq"
            )
            coll = LIKE if rng.random() < 0.8 else REPOST
            model: Any = (
                models.AppBskyFeedLike.Record(
                    subject=ref, created_at=f"2024-09-01T00:{n % 60:02d}Z"
                )
                if coll == LIKE
                else models.AppBskyFeedRepost.Record(subject=ref, created_at="2024-09-01T00:00Z")
            )
            commit(did, "create", coll, rkey(), get_model_as_dict(model))
        elif roll < 0.57:
            follow = models.AppBskyGraphFollow.Record(
                subject=rng.choice(dids), created_at="2024-09-01T00:00:00Z"
            )
            commit(did, "create", FOLLOW, rkey(), get_model_as_dict(follow))
        elif roll < 0.63:
            profile = models.AppBskyActorProfile.Record(display_name=f"user {n}")
            op = "update" if (did, PROFILE, "self") in out.records else "create"
            commit(did, op, PROFILE, "self", get_model_as_dict(profile))
        elif roll < 0.70 and mine:
            target = rng.choice(mine)
            if target[1] == POST:
                commit(did, "update", POST, target[2], post_value(n))
            elif target[1] == FOLLOW:  # a follow moved to another subject
                value = dict(out.records[target], subject=rng.choice(dids))
                commit(did, "update", FOLLOW, target[2], value)
            else:
                commit(did, "delete", target[1], target[2], None)
        elif roll < 0.80 and mine:
            target = rng.choice(mine)
            commit(did, "delete", target[1], target[2], None)
        elif roll < 0.83:
            commit(did, "delete", LIKE, rkey(), None)  # a record never seen
        elif roll < 0.87:
            handle = None if rng.random() < 0.2 else f"user{n}.test"
            body = {"did": did, "seq": n, "time": "2024-09-01T00:00:00Z"}
            if handle is not None:
                body["handle"] = handle
            emit(json.dumps({"did": did, "time_us": now, "kind": "identity", "identity": body}))
            out.identities[did] = handle
            out.counts["identities"] += 1
        elif roll < 0.90:
            active = rng.random() < 0.5
            body = {"active": active, "did": did, "seq": n, "time": "2024-09-01T00:00:00Z"}
            status = None if active else "deactivated"
            if status is not None:
                body["status"] = status
            emit(json.dumps({"did": did, "time_us": now, "kind": "account", "account": body}))
            out.accounts[did] = (active, status)
            out.counts["accounts"] += 1
        else:
            emit(*malformed(rng, did, now, out.times[-1] if out.times else now, rkey()))
            out.counts["malformed"] += 1
        out.counts["events"] += 1
    return out


def malformed(rng: random.Random, did: str, now: int, before: int, key: str) -> tuple[str, int]:
    """A message that holds no valid event, and the time it stands at."""
    like = {"$type": LIKE, "subject": {"uri": "at://x/y/z", "cid": "b"}, "createdAt": "t"}
    good = {"rev": key, "operation": "create", "collection": LIKE, "rkey": key, "record": like}
    choices: list[tuple[Any, int]] = [
        ("{not json", before),
        ('["a list"]', before),
        (json.dumps({"did": did, "kind": "commit", "commit": good}), before),  # no time_us
        (json.dumps({"did": did, "time_us": now, "kind": "commit"}), now),
        (
            json.dumps(
                {
                    "did": did,
                    "time_us": now,
                    "kind": "commit",
                    "commit": {**good, "operation": "upsert"},
                }
            ),
            now,
        ),
        (json.dumps({"did": "not-a-did", "time_us": now, "kind": "commit", "commit": good}), now),
        (
            json.dumps(
                {
                    "did": did,
                    "time_us": now,
                    "kind": "commit",
                    "commit": {**good, "rkey": "no/slash"},
                }
            ),
            now,
        ),
        (
            json.dumps(
                {
                    "did": did,
                    "time_us": now,
                    "kind": "commit",
                    "commit": {**good, "record": {**like, "$type": POST}},
                }
            ),
            now,
        ),
        (
            json.dumps(
                {
                    "did": did,
                    "time_us": now,
                    "kind": "commit",
                    "commit": {**good, "collection": "not an nsid"},
                }
            ),
            now,
        ),
        (
            json.dumps(
                {"did": did, "time_us": now, "kind": "account", "account": {"active": "yes"}}
            ),
            now,
        ),
        (b"\xff\xfe not utf-8".decode("latin-1"), before),
    ]
    text, at = rng.choice(choices)
    return (text if isinstance(text, str) else json.dumps(text)), at
