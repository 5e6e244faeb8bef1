"""Where a database lives: a URL or path turned into a slatedb ObjectStore and a DB path.

    memory://[name]          an in-process store (gone when the process exits)
    ./dir, /abs/dir          a local directory (the embedded default)
    file:///abs/dir          the same, as a URL
    s3://bucket/prefix       S3 or an S3-compatible endpoint, configured from AWS_* variables

S3 configuration
----------------
An ``s3://`` location is built with slatedb's ``ObjectStoreBuilder`` for S3, seeded from the
environment the way the ``object_store`` crate does it (every ``AWS_*`` variable it knows, plus
container / web-identity credentials), then adjusted from these variables, read when the store
is opened:

    AWS_ENDPOINT_URL         endpoint of an S3-compatible server, e.g. http://127.0.0.1:9000
      (or AWS_ENDPOINT)      (AWS_ENDPOINT_URL wins when both are set)
    AWS_REGION               region; AWS_DEFAULT_REGION when AWS_REGION is unset;
      (AWS_DEFAULT_REGION)   object_store's default (us-east-1) when neither is
    AWS_ACCESS_KEY_ID        static credentials; without them object_store falls back to its
    AWS_SECRET_ACCESS_KEY    credential providers (web identity, container, instance metadata)
    AWS_SESSION_TOKEN        temporary credentials' session token (optional)
    AWS_ALLOW_HTTP           "true"/"1" to allow a plain-http endpoint. When the endpoint URL
                             starts with http:// and AWS_ALLOW_HTTP is unset, it is allowed:
                             naming an http endpoint is the intent. An explicit false together
                             with an http endpoint is refused (object_store would otherwise
                             retry the refused requests for minutes before failing).

Requests are path-style (``endpoint/bucket/key``) unless AWS_VIRTUAL_HOSTED_STYLE_REQUEST is
true, which suits MinIO, moto and most S3-compatible servers.

Failures: slatedb retries failed object-store calls forever unless told otherwise, so
opening a bucket that does not exist, or an endpoint that is down, waits indefinitely. Pass
``object_store_max_retries=N`` to Store.open / Store.open_reader to get a
StoreUnavailableError instead (measured against moto: a missing bucket fails in ~0.5 s, a
closed port after object_store's own backoff, ~12 s).

``object_store_options`` (a mapping of object_store config keys such as ``endpoint``,
``region``, ``access_key_id``, ``allow_http``, ``virtual_hosted_style_request``) is applied
last and overrides the environment. The DB lives under ``prefix`` inside the bucket
(``db`` when the URL names no prefix).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from opendata_kv.errors import (
    InvalidInputError,
    StoreError,
    StoreLocationError,
    StoreNotFoundError,
)
from opendata_kv.native.slatedb import Error, ObjectStore, ObjectStoreBuilder, ObjectStoreType

_TRUE = frozenset({"1", "true", "yes", "on", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "n"})


def _flag(value: str) -> bool | None:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def s3_config(
    bucket: str,
    env: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The object_store S3 config entries applied on top of the crate's own environment
    reading: bucket, endpoint, region, credentials, allow_http, then `options` verbatim."""
    env = os.environ if env is None else env
    config: dict[str, str] = {"bucket": bucket}
    endpoint = env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT")
    if endpoint:
        config["endpoint"] = endpoint
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        config["region"] = region
    for name, key in (
        ("AWS_ACCESS_KEY_ID", "access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
        ("AWS_SESSION_TOKEN", "token"),
    ):
        if env.get(name):
            config[key] = env[name]
    allow = env.get("AWS_ALLOW_HTTP")
    if allow is not None and allow.strip():
        flag = _flag(allow)
        if flag is None:
            raise InvalidInputError(f"AWS_ALLOW_HTTP={allow!r} is not a boolean (true/false)")
        config["allow_http"] = "true" if flag else "false"
    for key, value in (options or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(
                f"object_store_options must map str to str, got {key!r}: {value!r}"
            )
        config[key] = value
    endpoint = config.get("endpoint", "")
    if endpoint.lower().startswith("http://"):
        allowed = config.get("allow_http")
        if allowed is None:
            config["allow_http"] = "true"
        elif _flag(allowed) is False:
            raise InvalidInputError(
                f"S3 endpoint {endpoint!r} is plain http but allow_http is false "
                "(set AWS_ALLOW_HTTP=true or use an https endpoint)"
            )
    return config


@dataclass(frozen=True)
class Location:
    """A parsed database location: the object store URL to resolve and the DB path in it."""

    url: str
    scheme: str
    store_url: str
    path: str

    @property
    def bucket(self) -> str | None:
        """The S3 bucket, for s3:// locations."""
        return urlsplit(self.store_url).netloc if self.scheme == "s3" else None

    @property
    def db_path(self) -> str:
        """The path handed to DbBuilder: a local store is rooted at the directory itself."""
        return "" if self.scheme == "file" else self.path

    def object_store(
        self, options: Mapping[str, str] | None = None, *, create: bool = False
    ) -> Any:
        """Build the slatedb ObjectStore (a new one each call; memory stores are private).

        `options`: object_store config entries (S3 only), applied over the environment.
        `create`: make a missing local directory (writers); readers never create anything.

        A local directory becomes a LOCAL store rooted at it, with the database at its root:
        handing the path to DbBuilder under `file:///` instead percent-encodes names with
        characters such as %, #, ? or non-ASCII and splits the files over two directories.
        """
        if self.scheme != "s3" and options:
            raise InvalidInputError(
                f"object_store_options apply to s3:// locations, not {self.scheme}:// "
                f"({sorted(options)})"
            )
        if self.scheme == "memory":
            return ObjectStore.resolve(self.store_url)
        if self.scheme == "file":
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                raise StoreLocationError(
                    f"{self.url}: {self.path} is a file, not a database directory",
                    value=self.path,
                )
            if create:
                os.makedirs(self.path, exist_ok=True)
            elif not os.path.isdir(self.path):
                raise StoreNotFoundError(
                    f"{self.url}: there is no database here ({self.path} does not exist)",
                    value=self.path,
                )
            try:
                builder = ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)
                builder.with_config("local_path", self.path)
                return builder.build()
            except Error as exc:
                message = getattr(exc, "message", None) or str(exc)
                raise StoreError(f"cannot open the directory {self.path}: {message}") from exc
        bucket = self.bucket or ""
        config = s3_config(bucket, options=options)
        try:
            builder = ObjectStoreBuilder.from_env(ObjectStoreType.S3)
            for key, value in config.items():
                builder.with_config(key, value)
            return builder.build()
        except Error as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise StoreError(
                f"cannot configure the object store for {self.url}: {message}"
            ) from exc

    def __str__(self) -> str:
        return self.url


def describe(location: Location, options: Mapping[str, str] | None) -> str:
    """The location, and for s3:// its bucket and endpoint, for an error message."""
    if location.scheme != "s3":
        return str(location)
    endpoint = s3_config(location.bucket or "", options=options).get("endpoint", "AWS default")
    return f"{location} (bucket {location.bucket!r}, endpoint {endpoint})"


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
