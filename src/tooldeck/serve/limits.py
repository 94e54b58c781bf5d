"""How much an HTTP request may send: ``BodyLimit``, ASGI middleware for the served apps.

A body over the limit is answered ``413`` with a JSON body naming the limit, as soon as it
is known: at once when ``Content-Length`` declares more, else when the bytes read pass it (a
chunked body, whose size nobody declared). The rest of the body is never read. The AG-UI
app (``tooldeck.serve.agui.app``) and ``tooldeck web`` put it in front of every route, at
``DEFAULT_MAX_BODY_BYTES`` unless told otherwise (``max_body_bytes=``, ``--max-body``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

Header = tuple[bytes, bytes]
"""An HTTP header as ASGI sends it: (name, value)."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""1 MiB: a prompt of some 250,000 words, or a client's whole conversation sent back."""


class BodyTooLarge(Exception):
    """Raised to the app reading a body when the bytes read pass the limit."""


def size_text(count: int) -> str:
    """``1 MiB (1,048,576 bytes)``: a byte count as a person reads it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit} ({count:,} bytes)"
    return f"{count:,} bytes"


def checked(max_bytes: int) -> int:
    """``max_bytes`` if it can be a limit (at least 1).

    Raises:
        ValueError: It is 0 or less.
    """
    if max_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_bytes}")
    return max_bytes


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is refused with 413, unread."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = checked(max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, f"declares {size_text(declared)}")
            return
        read = 0
        started = False

        async def receiving() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except BodyTooLarge:
            if not started:  # else the response is cut where it was: nothing else to say
                await self._refuse(send, "sent more")

    async def _refuse(self, send: Send, what: str) -> None:
        problem = (
            f"the request body is too large: it {what}, and this server takes at most "
            f"{size_text(self.max_bytes)}; send less, or start the server with a higher limit "
            "(max_body_bytes=, tooldeck web --max-body BYTES)"
        )
        # No "connection: close": a server closing with the body unread resets the
        # connection, and a client still sending never reads the answer; the server reads
        # what still comes and drops it (uvicorn does), holding none of it.
        await refuse(send, 413, problem)


async def refuse(send: Send, status: int, problem: str, headers: Sequence[Header] = ()) -> None:
    """Answer ``status`` with the JSON body ``{"error": problem}`` (and ``headers``)."""
    body = json.dumps({"error": problem}).encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
