"""A real HTTP server on 127.0.0.1 for the provider adapter tests: scripted replies, recorded requests.

A test queues replies (a JSON body, a server-sent event stream, or an error status), runs
a real provider SDK against ``server.root``, and reads back every request the SDK sent:
its path, headers and JSON body. The provider helpers (``_anthropic_server``,
``_gemini_server``) build the bodies in each API's wire format.
"""

from __future__ import annotations

import contextlib
import json
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a JSON body, or an event stream when ``events`` is set."""

    status: int = 200
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None
    """(event name or None, data) pairs; data is JSON, or a str sent as it is."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (to make a client time out)."""
    line_end: str = "\n"
    """What ends each line of an event stream (Gemini's API sends ``\r\n``)."""
    hold_after: int | None = None
    """Send this many events, then keep the response open until the client goes away."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LoopbackServer:
    """Queue replies with ``reply()``, read what came in from ``requests``.

    ``unscripted`` answers a request the test queued no reply for (a 500 in the API's
    error format), so a missing reply fails loudly instead of hanging. ``keep_alive`` speaks
    HTTP/1.1 and keeps connections open between requests, as providers do (by default each
    answer closes its connection).
    """

    def __init__(self, unscripted: Reply, keep_alive: bool = False) -> None:
        self.replies: deque[Reply] = deque()
        self.answer: Callable[[Recorded], Reply] | None = None
        """Answers every request from what it says, instead of the queued replies."""
        self.requests: list[Recorded] = []
        self.unscripted = unscripted
        self.client_left = threading.Event()
        """Set when a client closed a held response (see ``Reply.hold_after``)."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self, keep_alive))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON body of every request, in order."""
        return [request.body for request in self.requests]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def running(unscripted: Reply, keep_alive: bool = False) -> Iterator[LoopbackServer]:
    server = LoopbackServer(unscripted, keep_alive)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _handler_for(server: LoopbackServer, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def handle(self) -> None:
            # A client that lets a kept-alive connection go is not the server's failure.
            with contextlib.suppress(ConnectionResetError):
                super().handle()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {key.lower(): value for key, value in self.headers.items()}
            recorded = Recorded("POST", self.path, headers, body)
            server.requests.append(recorded)
            if server.answer is not None:
                reply = server.answer(recorded)
            else:
                reply = server.replies.popleft() if server.replies else server.unscripted
            time.sleep(reply.delay)
            if reply.events is not None:
                self._send_events(reply)
            else:
                self._send_json(reply)

        def _send_json(self, reply: Reply) -> None:
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_events(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for sent, (event, data) in enumerate(reply.events or []):
                if sent == reply.hold_after:
                    self._hold_until_client_leaves()
                    return
                text = data if isinstance(data, str) else json.dumps(data)
                prefix = f"event: {event}{reply.line_end}" if event else ""
                end = reply.line_end
                self.wfile.write(f"{prefix}data: {text}{end}{end}".encode())
                self.wfile.flush()
            self.close_connection = True

        def _hold_until_client_leaves(self, limit_s: float = 30.0) -> None:
            """Wait (bounded) until the client closes the connection, then record it."""
            self.close_connection = True
            deadline = time.monotonic() + limit_s
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1024):
                    server.client_left.set()
                    return

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read the recorded requests instead."""

    return Handler
