"""An ASGI application served by uvicorn on 127.0.0.1 in a thread of the test process, so a
test (or a browser) talks to it over a real socket while the test holds its objects."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def listening() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1 (``getsockname()[1]`` is the port)."""
    # IPPROTO_TCP named, or asyncio leaves Nagle on for the accepted sockets: each request
    # after the first on a kept-alive connection would wait 40 ms for a delayed ACK.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    return listener


@contextmanager
def serving(app: Any, listener: socket.socket | None = None) -> Iterator[str]:
    """Serve ``app`` on ``listener`` (default: a free port of 127.0.0.1); yields its root URL
    (``http://127.0.0.1:N``).

    The server's loop runs in a thread; it stops (and the thread ends) when the block ends,
    whatever happened in it.
    """
    listener = listener or listening()
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        if not _started(server, thread):
            raise RuntimeError("uvicorn did not start within 30 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


def _started(server: uvicorn.Server, thread: threading.Thread, limit_s: float = 30.0) -> bool:
    ready = threading.Event()
    deadline_steps = int(limit_s / 0.01)
    for _ in range(deadline_steps):
        if server.started or not thread.is_alive():
            return server.started
        ready.wait(0.01)
    return False
