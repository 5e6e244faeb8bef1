"""Helpers for the operations tests (change feed, checkpoints, clones, read-only proofs):
object-store fingerprints, a one-shot garbage collection, a write-refusing S3 proxy."""

from __future__ import annotations

import hashlib
import http.client
import http.server
import os
import threading
from pathlib import Path
from typing import Any

from slatedb.uniffi import AdminBuilder, GarbageCollectorDirectoryOptions, GarbageCollectorOptions

from opendata_kv.objstore.location import parse_location


def fingerprint(url: str) -> dict[str, str]:
    """sha256 of every object of the database at `url` (a directory or s3://), by name."""
    location = parse_location(url)
    if location.scheme == "file":
        root = Path(location.path)
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
    assert location.scheme == "s3", url
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    )
    out: dict[str, str] = {}
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=location.bucket, Prefix=location.path + "/"
    )
    for page in pages:
        for obj in page.get("Contents", []):
            body = client.get_object(Bucket=location.bucket, Key=obj["Key"])["Body"].read()
            out[obj["Key"]] = hashlib.sha256(body).hexdigest()
    return out


def object_store(url: str) -> Any:
    """A fresh slatedb ObjectStore for the database at `url` (its path: parse_location)."""
    return parse_location(url).object_store()


async def collect_garbage(url: str) -> None:
    """Run slatedb's garbage collector once with no minimum age: everything no manifest or
    checkpoint needs (old WAL files, compacted SSTs, manifests) is deleted now."""
    location = parse_location(url)
    admin = AdminBuilder(location.db_path, location.object_store()).build()
    now = GarbageCollectorDirectoryOptions(min_age_ms=0, dry_run=False)
    await admin.run_gc_once(
        GarbageCollectorOptions(
            manifest_options=now, wal_options=now, compacted_options=now, compactions_options=now
        )
    )


class WriteRefusingProxy:
    """An HTTP proxy in front of an S3 endpoint that forwards GET and HEAD and answers every
    other method (PUT, POST, DELETE: any write) with 403 AccessDenied, counting them.

        with WriteRefusingProxy("http://127.0.0.1:5000") as proxy:
            ... AWS_ENDPOINT_URL=proxy.endpoint ...
            assert proxy.refused == []
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.removeprefix("http://").partition(":")
        self.refused: list[str] = []
        self.forwarded = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _refuse(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                proxy.refused.append(f"{self.command} {self.path}")
                body = (
                    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                    b"<Message>this proxy refuses every write</Message></Error>"
                )
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                proxy.forwarded += 1
                upstream = http.client.HTTPConnection(host, int(port), timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = f"{host}:{port}"
                upstream.request(self.command, self.path, headers=headers)
                response = upstream.getresponse()
                body = response.read()
                self.send_response(response.status)
                head = self.command == "HEAD"  # keeps the object's own Content-Length
                skip = {"transfer-encoding", "connection"} | (set() if head else {"content-length"})
                for name, value in response.getheaders():
                    if name.lower() not in skip:
                        self.send_header(name, value)
                if not head:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                upstream.close()

            def do_GET(self) -> None:
                self._forward()

            def do_HEAD(self) -> None:
                self._forward()

            do_PUT = do_POST = do_DELETE = do_PATCH = _refuse

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WriteRefusingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
