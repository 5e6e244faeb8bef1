"""One listing of a database on s3:// (what list_local is for a directory): its manifest,
WAL, SST and compactions directories listed together, so the open checks see every object
in one round trip (one request per directory and 1,000 objects) instead of probing for them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from opendata_kv.objstore.deadline import in_thread
from opendata_kv.objstore.location import Location, s3_config
from opendata_kv.objstore.objects import LISTED_DIRS, Listing, listing_of
from opendata_kv.objstore.s3http import S3Client, client_for


def lister(
    location: Location, options: Mapping[str, str] | None, timeout: float | None = None
) -> S3Client | None:
    """The S3 client that lists `location`, or None where it cannot be listed (not s3://,
    or no static credentials: the binding's own object store is used instead)."""
    if location.scheme != "s3":
        return None
    bucket = location.bucket or ""
    return client_for(bucket, s3_config(bucket, options=options), timeout)


async def list_remote(location: Location, client: S3Client) -> Listing:
    """Every object of the database under its four directories, with sizes (the directories
    listed at once; an S3 error answer or no answer raises its OpendataKvError)."""
    root = f"{location.path}/" if location.path else ""

    async def one(directory: str) -> dict[str, int]:
        found = await in_thread(client.list_sizes, f"{root}{directory}/")
        return {key[len(root) :]: size for key, size in found.items()}

    parts = await asyncio.gather(*(one(directory) for directory in LISTED_DIRS))
    merged: dict[str, int] = {}
    for part in parts:
        merged.update(part)
    return listing_of(merged)
