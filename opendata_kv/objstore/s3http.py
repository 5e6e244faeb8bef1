"""A minimal S3 client (SigV4 over urllib) for what the slatedb binding cannot do on S3.

The binding builds its own object store and offers no call to list, read or write a single
object, and it retries a refused request (404 NoSuchBucket, 403 AccessDenied) forever. This
client does one request at a time, retries only S3's transient answers (5xx: RETRIED_STATUSES,
as AWS asks), and turns any other S3 error answer into the OpendataKvError that says what S3
said (the bucket and the S3 error code), at once:

- `probe` lists one key under the database prefix before an open, so a missing bucket, a bad
  key or a refused credential fails at once instead of hanging in slatedb's retry loop;
- `get`/`put`/`delete`/`list_keys` read and write the few small objects opendata_kv keeps
  beside the database (sidecar.py).

It signs with static credentials (AWS_ACCESS_KEY_ID/SECRET, or object_store_options); with
none (instance or web-identity credentials), `client_for` returns None and callers skip what
needs it. Transport failures (refused connection, timeout) and a 5xx answer still there after
ANSWER_ATTEMPTS raise StoreUnavailableError.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import html
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from opendata_kv.errors import (
    StoreError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnavailableError,
)
from opendata_kv.objstore.deadline import budget

#: seconds one request may take when the caller gives no bound
REQUEST_TIMEOUT = 10.0
#: S3's transient answers (InternalError, a bad gateway, SlowDown, a gateway timeout): AWS
#: asks clients to retry them, and its SDKs try such a request 3 times in all
RETRIED_STATUSES = frozenset({500, 502, 503, 504})
ANSWER_ATTEMPTS = 3
#: seconds before the first retry (doubled for the next, with jitter)
RETRY_BASE = 0.05

_PERMISSION_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{0,300})</Message>")
_KEY = re.compile(rb"<Key>([^<]*)</Key>")
_TRUNCATED = re.compile(rb"<IsTruncated>true</IsTruncated>")
_TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")
_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.S)
_SIZE = re.compile(rb"<Size>([0-9]+)</Size>")


def error_code(body: bytes) -> tuple[str | None, str | None]:
    """The <Code> and <Message> of an S3 error document (None where absent)."""
    code = _CODE.search(body)
    message = _MESSAGE.search(body)
    return (
        code.group(1).decode("utf-8", "replace") if code else None,
        message.group(1).decode("utf-8", "replace") if message else None,
    )


def code_in(text: str) -> str | None:
    """The S3 error code an error message quotes ("<Code>NoSuchBucket</Code>"), if any: the
    one useful word of a long XML body, kept when the message is shortened."""
    found = re.search(r"<Code>([^<]{1,100})</Code>", text)
    return found.group(1) if found else None


def answer_error(
    status: int, body: bytes, bucket: str, key: str, method: str, endpoint: str = ""
) -> StoreError:
    """The error for an S3 error answer: StoreNotFoundError for a missing bucket,
    StorePermissionError for a refused credential or access, else StoreError (4xx) or
    StoreUnavailableError (5xx)."""
    code, message = error_code(body)
    what = code or f"HTTP {status}"
    said = f"S3 answered {status} {what}" + (f" ({message})" if message else "")
    target = (f"endpoint {endpoint}, " if endpoint else "") + f"bucket {bucket}"
    target += f", key {key}" if key else ""
    if code == "NoSuchBucket" or (status == 404 and not key):
        return StoreNotFoundError(
            f"{method} ({target}): {said}: the bucket does not exist (check the bucket "
            "name and the endpoint)",
            value=bucket,
        )
    if status == 403 or code in _PERMISSION_CODES:
        return StorePermissionError(
            f"{method} ({target}): {said}: the credentials are refused or may not do this "
            "(check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the bucket policy); "
            "retrying will not help"
        )
    if status >= 500:
        return StoreUnavailableError(f"{method} ({target}): {said}", value=bucket)
    return StoreError(f"{method} ({target}): {said}")


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class S3Client:
    """One bucket on one endpoint, with static credentials."""

    bucket: str
    endpoint: str
    region: str
    access_key: str
    secret_key: str
    token: str | None = None
    virtual_hosted: bool = False
    timeout: float = REQUEST_TIMEOUT

    def _url(self, key: str, query: Mapping[str, str]) -> tuple[str, str, str]:
        """(url, host, canonical path) of `key` (path-style unless virtual-hosted)."""
        parts = urllib.parse.urlsplit(self.endpoint)
        quoted = urllib.parse.quote(key, safe="/~")
        if self.virtual_hosted:
            host = f"{self.bucket}.{parts.netloc}"
            path = "/" + quoted
        else:
            host = parts.netloc
            base = parts.path.rstrip("/")
            path = f"{base}/{self.bucket}" + (f"/{quoted}" if key else "")
        text = "&".join(
            f"{urllib.parse.quote(k, safe='~')}={urllib.parse.quote(v, safe='~')}"
            for k, v in sorted(query.items())
        )
        url = f"{parts.scheme}://{host}{path}" + (f"?{text}" if text else "")
        return url, host, path

    def request(
        self,
        method: str,
        key: str = "",
        body: bytes = b"",
        query: Mapping[str, str] | None = None,
        unsigned: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """Send one signed request (plus `unsigned` headers, such as a Range); (status, body)
        for any HTTP answer, StoreUnavailableError when none comes (refused, timed out)."""
        query = dict(query or {})
        url, host, path = self._url(key, query)
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        digest = hashlib.sha256(body).hexdigest()
        headers = {"host": host, "x-amz-content-sha256": digest, "x-amz-date": stamp}
        if self.token:
            headers["x-amz-security-token"] = self.token
        names = sorted(headers)
        canonical_query = url.partition("?")[2]
        canonical = "\n".join(
            [
                method,
                path,
                canonical_query,
                "".join(f"{n}:{headers[n].strip()}\n" for n in names),
                ";".join(names),
                digest,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        signing = _sign(
            _sign(_sign(_sign(f"AWS4{self.secret_key}".encode(), day), self.region), "s3"),
            "aws4_request",
        )
        signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        del headers["host"]
        headers.update(unsigned or {})
        if method == "PUT":  # urllib's default (a form) makes some servers parse the body
            headers["content-type"] = "application/octet-stream"
        req = urllib.request.Request(
            url, data=body if method in ("PUT", "POST") else None, method=method, headers=headers
        )
        for attempt in range(ANSWER_ATTEMPTS):
            status, answer = self._send(req, method)
            if status not in RETRIED_STATUSES or attempt == ANSWER_ATTEMPTS - 1:
                break
            time.sleep(min(RETRY_BASE * 2**attempt * random.uniform(0.5, 1.0), budget(1.0) or 1.0))
        return status, answer

    def _send(self, req: urllib.request.Request, method: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(req, timeout=budget(self.timeout)) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read() or b"")
        except (OSError, ValueError) as exc:
            raise StoreUnavailableError(
                f"{method} on bucket {self.bucket!r} at {self.endpoint}: no answer "
                f"({type(exc).__name__}: {exc}); check that the endpoint is up",
                value=self.bucket,
            ) from exc

    def _checked(self, method: str, key: str, status: int, body: bytes) -> None:
        if status >= 300:
            raise answer_error(status, body, self.bucket, key, method, self.endpoint)

    def probe(self, prefix: str) -> None:
        """List at most one key under `prefix`: an S3 error answer raises at once."""
        status, body = self.request(
            "GET", "", query={"list-type": "2", "max-keys": "1", "prefix": prefix + "/"}
        )
        self._checked("list", "", status, body)

    def get(self, key: str) -> bytes | None:
        """The object's bytes, None when it does not exist."""
        status, body = self.request("GET", key)
        if status == 404 and error_code(body)[0] in (None, "NoSuchKey"):
            return None
        self._checked("get", key, status, body)
        return body

    def get_range(self, key: str, offset: int, length: int) -> bytes | None:
        """`length` bytes of the object from `offset`, None when it does not exist (or holds
        fewer: a server that ignores the Range sends the whole object, cut here)."""
        ranged = {"range": f"bytes={offset}-{offset + length - 1}"}
        status, body = self.request("GET", key, unsigned=ranged)
        if status == 404 and error_code(body)[0] in (None, "NoSuchKey"):
            return None
        self._checked("get", key, status, body)
        if status == 200:
            body = body[offset : offset + length]
        return body if len(body) == length else None

    def put(self, key: str, data: bytes) -> None:
        status, body = self.request("PUT", key, data)
        self._checked("put", key, status, body)

    def delete(self, key: str) -> None:
        status, body = self.request("DELETE", key)
        if status != 404:
            self._checked("delete", key, status, body)

    def list_keys(self, prefix: str, limit: int = 100_000) -> list[str]:
        """Every key under `prefix` (at most `limit`), in S3's (lexicographic) order."""
        keys: list[str] = []
        query = {"list-type": "2", "prefix": prefix}
        while len(keys) < limit:
            status, body = self.request("GET", "", query=query)
            self._checked("list", prefix, status, body)
            keys.extend(k.decode("utf-8", "replace") for k in _KEY.findall(body))
            token = _TOKEN.search(body)
            if not _TRUNCATED.search(body) or token is None:
                break
            query = {**query, "continuation-token": token.group(1).decode()}
        return keys[:limit]

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under `prefix` with its size in bytes (one request per 1,000 keys)."""
        found: dict[str, int] = {}
        query = {"list-type": "2", "prefix": prefix}
        while True:
            status, body = self.request("GET", "", query=query)
            self._checked("list", prefix, status, body)
            for entry in _CONTENTS.findall(body):
                key, size = _KEY.search(entry), _SIZE.search(entry)
                if key is not None:
                    name = html.unescape(key.group(1).decode("utf-8", "replace"))
                    found[name] = int(size.group(1)) if size is not None else 0
            token = _TOKEN.search(body)
            if not _TRUNCATED.search(body) or token is None:
                return found
            query = {**query, "continuation-token": html.unescape(token.group(1).decode())}


def client_for(
    bucket: str, config: Mapping[str, str], timeout: float | None = None
) -> S3Client | None:
    """An S3Client from an s3_config mapping, or None without static credentials."""
    access, secret = config.get("access_key_id"), config.get("secret_access_key")
    if not access or not secret:
        return None
    region = config.get("region") or "us-east-1"
    endpoint = config.get("endpoint") or f"https://s3.{region}.amazonaws.com"
    virtual = str(config.get("virtual_hosted_style_request", "")).lower() in ("1", "true")
    if not config.get("endpoint"):
        virtual = True
    return S3Client(
        bucket,
        endpoint,
        region,
        access,
        secret,
        config.get("token") or config.get("session_token"),
        virtual,
        REQUEST_TIMEOUT if timeout is None else timeout,
    )
