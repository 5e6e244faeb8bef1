"""A small TCP proxy on 127.0.0.1 that a test can cut and restore: an object-store outage
without losing the (in-memory) moto server behind it.

    with TcpProxy(("127.0.0.1", moto_port)) as proxy:   # listens on proxy.port
        ... point the client at proxy.endpoint ...
        proxy.cut("refuse")      # listener closed, open connections reset: connection refused
        proxy.cut("blackhole")   # connections accepted and held, nothing forwarded: a hang
        proxy.stall_after(20)    # answer 20 HTTP requests, then hold every connection silent
        proxy.restore()          # forward again (same port)

Threads only; every socket has a timeout and every loop ends when the proxy stops.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
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
