"""A small TCP proxy on 127.0.0.1 that a test can cut and restore: an object-store outage
without losing the (in-memory) moto server behind it.

    with TcpProxy(("127.0.0.1", moto_port)) as proxy:   # listens on proxy.port
        ... point the client at proxy.endpoint ...
        proxy.cut("refuse")      # listener closed, open connections reset: connection refused
        proxy.cut("blackhole")   # connections accepted and held, nothing forwarded: a hang
        proxy.stall_after(20)    # answer 20 HTTP requests, then hold every connection silent
        proxy.restore()          # forward again (same port)

`DelayProxy.fail(times, *match)` answers the next `times` requests whose head holds `match`
with a 500 InternalError of its own (S3's transient error), as a loaded server can.

`DelayProxy` also reads HTTP/1.1 request by request: it holds each request `delay` seconds
before forwarding it and logs it (method, path, start, end, status), and `waves()` counts the
round trips in sequence, a wave being requests that started before any of them could have seen
another's answer. Counts carry over to real S3; the test never asserts a wall time.

    with DelayProxy(("127.0.0.1", moto_port), delay=0.02) as proxy:
        with proxy.measure() as m:
            ... the operation, through proxy.endpoint ...
        assert m.waves() <= 10 and len(m.requests) <= 30

Threads only; every socket has a timeout and every loop ends when the proxy stops.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["forward", "refuse", "blackhole", "stall"]


class TcpProxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.mode: Mode = "forward"
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopped = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.requests = 0  # HTTP requests forwarded (request lines seen from clients)
        self._stall_after: int | None = None
        self.stalled_at: float | None = None  # time.monotonic() when stall_after went silent
        self.port = self._listen(0)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    # --- control ---------------------------------------------------------------------------

    def cut(self, mode: Literal["refuse", "blackhole"]) -> None:
        """Start an outage: every open connection is dropped; new ones are refused (refuse) or
        accepted and never answered (blackhole)."""
        with self._lock:
            self.mode = mode
        self._drop_connections()
        if mode == "refuse":
            self._close_listener()

    def stall_after(self, requests: int) -> None:
        """Forward `requests` more HTTP requests, then go silent: open connections stay open
        and new ones are accepted, and nothing more is forwarded either way (a server that
        froze mid-command)."""
        with self._lock:
            self._stall_after = self.requests + requests

    def _count(self, data: bytes) -> bool:
        """Count the client's request lines in `data`; False once past stall_after."""
        with self._lock:
            self.requests += data.count(b" HTTP/1.1\r\n")
            if self._stall_after is not None and self.requests > self._stall_after:
                if self.mode != "stall":
                    self.stalled_at = time.monotonic()
                self.mode = "stall"
            return self.mode == "forward"

    def restore(self) -> None:
        """End the outage: forward new connections again, on the same port."""
        self._drop_connections()  # blackholed connections: the client sees them fail
        with self._lock:
            self.mode = "forward"
            self._stall_after = None
        if self._listener is None:
            self._listen(self.port)

    def stop(self) -> None:
        self._stopped.set()
        self._close_listener()
        self._drop_connections()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- internals -------------------------------------------------------------------------

    def _listen(self, port: int) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True)
        self._threads.append(thread)
        thread.start()
        bound: int = listener.getsockname()[1]
        return bound

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _drop_connections(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                # RST instead of FIN, like a dead host: linger on, timeout 0
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopped.is_set() and self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # listener closed
            self.connections += 1
            self._track(client)
            if self.mode != "forward":
                continue  # blackhole: hold it open, never answer
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                with contextlib.suppress(OSError):
                    client.close()
                continue
            self._track(upstream)
            thread = threading.Thread(target=self._pump, args=(client, upstream), daemon=True)
            thread.start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._stopped.is_set() and self.mode in ("forward", "stall"):
                if self.mode == "stall":  # hold both ends open, silent
                    self._stopped.wait(0.1)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.1)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is a and not self._count(data):
                        break  # past stall_after: this request is never forwarded
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            pass  # a socket was dropped by cut(), or closed by the other side
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._sockets.discard(a)
                self._sockets.discard(b)


# --- a delaying, logging HTTP proxy -------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One HTTP exchange seen by a DelayProxy (times from time.monotonic())."""

    method: str
    path: str
    start: float  # the request's first byte reached the proxy
    end: float  # the response's last byte left it
    status: int


def waves(requests: Sequence[Request]) -> int:
    """Round trips in sequence: a request is one wave after the latest wave of the requests
    that had answered before it started (requests started together share a wave)."""
    done: list[tuple[float, int]] = []  # (end, wave) of every earlier request
    depth = 0
    for request in sorted(requests, key=lambda r: r.start):
        wave = 1 + max((w for end, w in done if end <= request.start), default=0)
        done.append((request.end, wave))
        depth = max(depth, wave)
    return depth


@dataclass
class Window:
    """The requests a DelayProxy logged inside one `measure()` block."""

    requests: list[Request] = field(default_factory=list)

    def waves(self) -> int:
        return waves(self.requests)

    def count(self, method: str | None = None, contains: str = "") -> int:
        """How many requests had this method (any, if None) and a path containing `contains`."""
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method) and contains in r.path
        )

    def describe(self) -> str:
        """One line a request, for assertion messages."""
        first = min((r.start for r in self.requests), default=0.0)
        return "\n".join(
            f"{r.start - first:8.3f} {r.end - first:8.3f} {r.method:6} {r.status} {r.path}"
            for r in sorted(self.requests, key=lambda r: r.start)
        )


class DelayProxy(TcpProxy):
    """A TcpProxy that forwards HTTP/1.1 one exchange at a time per connection, holds each
    request `delay` seconds before forwarding it, and logs every exchange."""

    def __init__(
        self, target: tuple[str, int], host: str = "127.0.0.1", delay: float = 0.02
    ) -> None:
        self.delay = delay
        self.log: list[Request] = []
        self._failing: tuple[tuple[bytes, ...], int] = ((), 0)
        super().__init__(target, host)

    def fail(self, times: int, *match: bytes) -> None:
        """Answer the next `times` requests whose head holds every `match` with S3's
        transient 500 InternalError, without forwarding them (logged with status 500)."""
        with self._lock:
            self._failing = (match, times)

    def _fails(self, head: bytes) -> bool:
        with self._lock:
            match, times = self._failing
            if times <= 0 or not all(m in head for m in match):
                return False
            self._failing = (match, times - 1)
            return True

    @contextlib.contextmanager
    def measure(self) -> Iterator[Window]:
        """Collect the exchanges that start inside the block (they are finished at its end:
        the client awaited them, or they are cut off by the proxy's socket timeouts)."""
        window = Window()
        with self._lock:
            first = len(self.log)
        began = time.monotonic()
        try:
            yield window
        finally:
            with self._lock:
                window.requests = [r for r in self.log[first:] if r.start >= began]

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            client, upstream = _Reader(a, self._stopped), _Reader(b, self._stopped)
            while not self._stopped.is_set() and self.mode == "forward":
                head = client.head()
                if head is None:
                    return
                start = time.monotonic()
                method, path = _request_line(head)
                body = client.body(head, request=True)
                if not self._count(head):
                    return  # past stall_after: never forwarded
                if self.delay:
                    self._stopped.wait(self.delay)
                if self._fails(head):
                    with self._lock:
                        self.log.append(Request(method, path, start, time.monotonic(), 500))
                    a.sendall(_INTERNAL_ERROR)
                    continue
                b.sendall(head + body)
                answer = upstream.head()
                if answer is None:
                    return
                while _status(answer) == 100:  # Expect: 100-continue's interim answer
                    a.sendall(answer)
                    answer = upstream.head()
                    if answer is None:
                        return
                status = _status(answer)
                if method == "HEAD" or status in (204, 304):
                    rest = b""
                else:
                    rest = upstream.body(answer, request=False)
                # logged before the client has its answer, so a measure() the client ends
                # right after its last request returned always holds that request
                with self._lock:
                    self.log.append(Request(method, path, start, time.monotonic(), status))
                a.sendall(answer + rest)
        except (OSError, ValueError):
            pass
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._sockets.discard(a)
                self._sockets.discard(b)


_ERROR_BODY = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
_INTERNAL_ERROR = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_ERROR_BODY), _ERROR_BODY)
)


def _request_line(head: bytes) -> tuple[str, str]:
    method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    return method, path


def _status(head: bytes) -> int:
    return int(head.split(b"\r\n", 1)[0].split(b" ", 2)[1])


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


class _Reader:
    """Buffered reads of HTTP/1.1 messages from one socket (the proxy's sockets time out)."""

    def __init__(self, sock: socket.socket, stopped: threading.Event) -> None:
        sock.settimeout(0.2)
        self.sock = sock
        self.stopped = stopped
        self.buf = b""

    def _more(self) -> bool:
        while True:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if self.stopped.is_set():
                    return False
                continue  # an idle keep-alive connection, or a slow answer
            if not data:
                return False
            self.buf += data
            return True

    def head(self) -> bytes | None:
        """The start line and headers, through the blank line; None at a clean close."""
        while b"\r\n\r\n" not in self.buf:
            if not self._more():
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head + b"\r\n\r\n"

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._more():
                raise ValueError("connection closed inside a message body")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if not self._more():
                raise ValueError("connection closed inside a chunked body")
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line + b"\r\n"

    def body(self, head: bytes, request: bool) -> bytes:
        """The message body after `head`, as it was sent (chunked bodies stay chunked)."""
        length = _header(head, b"content-length")
        if length is not None:
            return self._exactly(int(length))
        encoding = _header(head, b"transfer-encoding")
        if encoding is not None and b"chunked" in encoding.lower():
            parts = []
            while True:
                line = self._line()
                parts.append(line)
                size = int(line.split(b";", 1)[0], 16)
                if size == 0:
                    while True:  # trailers, through the blank line
                        trailer = self._line()
                        parts.append(trailer)
                        if trailer == b"\r\n":
                            return b"".join(parts)
                parts.append(self._exactly(size + 2))
        if request:
            return b""  # a request without a length has no body
        while self._more():  # a response delimited by the connection's close
            pass
        out, self.buf = self.buf, b""
        return out
