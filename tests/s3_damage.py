"""The damage matrix's database on S3 (moto): built once per session under one prefix, copied
object by object to a fresh prefix for each trial, and damaged there through boto3."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import damaged_store as ds
from conftest import S3_BUCKET, MotoServer


class S3Db:
    """A database under `prefix` of the test bucket, with the object-level tools a trial needs."""

    def __init__(self, server: MotoServer, prefix: str) -> None:
        self.server, self.prefix = server, prefix
        self.client: Any = server.client()
        self._targets: dict[str, tuple[str, ds.Region]] | None = None
        self._names: dict[str, int] | None = None

    @property
    def url(self) -> str:
        return f"s3://{S3_BUCKET}/{self.prefix}"

    def names(self) -> dict[str, int]:
        """name (relative to the database root) -> size, of every object present."""
        found: dict[str, int] = {}
        pages = self.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=S3_BUCKET, Prefix=self.prefix + "/"):
            for entry in page.get("Contents", []):
                found[entry["Key"][len(self.prefix) + 1 :]] = entry["Size"]
        return found

    def read(self, name: str) -> bytes:
        body = self.client.get_object(Bucket=S3_BUCKET, Key=f"{self.prefix}/{name}")["Body"]
        data: bytes = body.read()
        return data

    def write(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=S3_BUCKET, Key=f"{self.prefix}/{name}", Body=data)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=S3_BUCKET, Key=f"{self.prefix}/{name}")

    def copy(self) -> S3Db:
        """Every object copied to a fresh prefix (8 at a time: one by one, the ~30 copies
        were a third of a trial's time)."""
        other = S3Db(self.server, f"damage/{uuid.uuid4().hex[:12]}")

        def one(name: str) -> None:
            other.client.copy_object(
                Bucket=S3_BUCKET,
                Key=f"{other.prefix}/{name}",
                CopySource={"Bucket": S3_BUCKET, "Key": f"{self.prefix}/{name}"},
            )

        if self._names is None:  # only the base is copied, and it is never written after build
            self._names = self.names()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, self._names))
        return other

    def digest(self) -> dict[str, tuple[int, str]]:
        """name -> (size, ETag) of every object: what verify must leave as it is."""
        found: dict[str, tuple[int, str]] = {}
        pages = self.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=S3_BUCKET, Prefix=self.prefix + "/"):
            for entry in page.get("Contents", []):
                found[entry["Key"]] = (entry["Size"], entry["ETag"])
        return found

    def targets(self) -> dict[str, tuple[str, ds.Region]]:
        """The matrix's targets (damaged_store.object_targets), read once per database: the
        base is never written after build (each trial damages a copy), and reading them
        opens slatedb's admin on S3, twice a trial before."""
        if self._targets is None:
            self._targets = ds.object_targets(self.names(), self.url)
        return self._targets

    def damage(self, target: tuple[str, ds.Region], how: str) -> None:
        name, region = target
        result = ds.damaged(self.read(name), how, region)
        if result is None:
            self.delete(name)
        else:
            self.write(name, result)


def build(server: MotoServer) -> S3Db:
    """The matrix's database (damaged_store.build) under a fresh prefix."""
    db = S3Db(server, f"base/{uuid.uuid4().hex[:12]}")
    ds.build(db.url, server.env())
    return db
