"""The Jetstream websocket, as an async iterator of messages: the one module that imports
`websockets` (the `jetstream` extra: pip install 'opendata-kv[jetstream]').

Every wait has a bound: opening the connection (`open_timeout`) and each message
(`idle_timeout`: Jetstream sends continuously, so a silent socket is a dead one). A closed or
failed connection raises JetstreamConnectionError naming the URL; a normal close by the
server ends the iteration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from opendata_kv.errors import JetstreamConnectionError, MissingExtraError

#: the largest message taken (Jetstream's events are far smaller; records are capped at 1 MB)
MAX_MESSAGE = 4 * 1024 * 1024
#: messages the websocket itself buffers ahead of the consumer's queue
SOCKET_QUEUE = 64


def _connect() -> Any:
    """websockets' client `connect` (the asyncio implementation from websockets 13 on, the
    legacy one of 12)."""
    try:
        from websockets.asyncio.client import connect
    except ImportError:
        try:
            from websockets.client import connect  # type: ignore[no-redef,attr-defined]  # v12
        except ImportError:
            raise MissingExtraError(
                "reading Jetstream from a websocket needs the websockets package: "
                "pip install 'opendata-kv[jetstream]' (or pass any async iterator of messages)",
                field="jetstream",
                value="websockets",
            ) from None
    return connect


async def messages(
    url: str, *, open_timeout: float = 10.0, idle_timeout: float = 60.0
) -> AsyncIterator[str | bytes]:
    """The messages of the websocket at `url`, as they arrive."""
    connect = _connect()
    from websockets.exceptions import ConnectionClosedOK, WebSocketException

    opened = False
    try:
        async with connect(
            url,
            open_timeout=open_timeout,
            max_size=MAX_MESSAGE,
            max_queue=SOCKET_QUEUE,
            compression=None,
        ) as socket:
            opened = True
            while True:
                try:
                    message = await asyncio.wait_for(socket.recv(), idle_timeout)
                except ConnectionClosedOK:
                    return
                yield message
    except (OSError, asyncio.TimeoutError, WebSocketException) as exc:
        what = (
            (f"no message for {idle_timeout} s" if opened else f"not open in {open_timeout} s")
            if isinstance(exc, asyncio.TimeoutError)
            else f"{type(exc).__name__}: {exc}"
        )
        raise JetstreamConnectionError(f"Jetstream at {url}: {what}", value=url) from exc
