"""Where a database lives: a URL or path turned into a slatedb ObjectStore and a DB path.

    memory://[name]          an in-process store (gone when the process exits)
    ./dir, /abs/dir          a local directory (the embedded default)
    file:///abs/dir          the same, as a URL
    s3://bucket/prefix       S3 or an S3-compatible endpoint, configured from AWS_* variables
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from slatedb.uniffi import ObjectStore

from opendata_kv.errors import InvalidInputError


@dataclass(frozen=True)
class Location:
    """A parsed database location: the object store URL to resolve and the DB path in it."""

    url: str
    scheme: str
    store_url: str
    path: str

    def object_store(self) -> Any:
        """Resolve the slatedb ObjectStore (a new one each call; memory stores are private)."""
        return ObjectStore.resolve(self.store_url)

    def __str__(self) -> str:
        return self.url


def parse_location(url: str | os.PathLike[str]) -> Location:
    """Parse `url`; a string without a scheme is a local directory (relative paths allowed)."""
    text = os.fspath(url)
    if not isinstance(text, str) or not text:
        raise InvalidInputError(f"database location must be a non-empty path or URL, got {url!r}")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        name = (parts.netloc + parts.path).strip("/") or "db"
        return Location(text, "memory", "memory:///", name)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidInputError(f"file URL {text!r} names a host; use file:///absolute/path")
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise InvalidInputError(f"file URL {text!r} needs an absolute path")
        return Location(text, "file", "file:///", os.path.normpath(path))
    if scheme in ("s3", "s3a"):
        if not parts.netloc:
            raise InvalidInputError(f"S3 URL {text!r} names no bucket: use s3://bucket/prefix")
        prefix = parts.path.strip("/") or "db"
        return Location(text, "s3", f"s3://{parts.netloc}", prefix)
    if scheme and len(scheme) > 1:  # one letter: a Windows drive, not a scheme
        raise InvalidInputError(
            f"unsupported database URL scheme {scheme!r} in {text!r}: use a directory, "
            "file:///, memory:// or s3://"
        )
    return Location(text, "file", "file:///", os.path.abspath(text))
