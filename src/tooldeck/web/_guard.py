"""Who may use the web app: the holder of its token, from its own pages only.

Every request needs the token printed when the server started: in the URL once
(``/?token=...``, which sets a cookie and redirects to the same page without it), then the
cookie (HttpOnly, SameSite=Strict, named after the port so two servers on one machine keep
theirs), or an ``Authorization: Bearer`` header for programs. A request whose ``Host`` is
not the server's (a DNS rebinding page) or whose ``Origin`` is another site's is refused
before the token is looked at. The app takes no WebSocket connections (its chat streams
over server-sent events): an upgrade is refused with 400 and a line that says so, whatever it
carries. Every response forbids framing and scripts from elsewhere.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import URL, Headers, QueryParams
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
"""Sent with every response. The referrer policy is ``same-origin``, not ``no-referrer``:
with the latter, browsers send ``Origin: null`` on the app's own form posts."""

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

NO_WEBSOCKETS = (
    "This tooldeck web server takes no WebSocket connections: its chat streams over HTTP "
    "(server-sent events from POST /agui/)."
)

REFUSED = (
    "This tooldeck web server needs its token: open the URL it printed when it started "
    "(http://HOST:PORT/?token=...)."
)


def allowed_hosts(host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` headers a server bound to ``host`` answers (None: any, for a server on
    every interface, which clients reach by names it cannot know)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    names = {*LOOPBACK, host if ":" not in host else f"[{host}]"}
    return frozenset(f"{name}:{port}" for name in names)


class Guard:
    """ASGI middleware: the Host, Origin and token checks, and the security headers."""

    def __init__(self, app: ASGIApp, *, token: str, port: int, hosts: frozenset[str] | None):
        self.app = app
        self.token = token
        self.cookie = f"tooldeck_token_{port}"
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None and scope["type"] == "websocket" and not _can_answer(scope):
            await send({"type": "websocket.close", "code": 1008})  # the server answers 403
            return
        if refusal is not None:
            await refusal(scope, receive, self._secured(send))
            return
        await self.app(scope, receive, self._secured(send))

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "").lower()
        if self.hosts is not None and host not in self.hosts:
            return PlainTextResponse(f"host {host!r} is not this server's: refused", 403)
        origin = headers.get("origin")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return PlainTextResponse(f"requests from {origin!r} are refused", 403)
        if headers.get("sec-fetch-site") == "cross-site":
            return PlainTextResponse("requests from other sites are refused", 403)
        if scope["type"] == "websocket":
            return PlainTextResponse(NO_WEBSOCKETS, 400)
        url = URL(scope=scope)
        if self._matches(QueryParams(url.query).get("token")):
            return self._let_in(url) if scope["method"] == "GET" else None
        if self._matches(_cookie(headers, self.cookie)) or self._matches(_bearer(headers)):
            return None
        return PlainTextResponse(REFUSED, 403)

    def _matches(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def _let_in(self, url: URL) -> Response:
        """The same page without the token in its URL, with the cookie that stands for it."""
        query = urlencode([(k, v) for k, v in parse_qsl(url.query) if k != "token"])
        response = RedirectResponse(url.path + (f"?{query}" if query else ""), 303)
        response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict")
        return response

    def _secured(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        return sending


def _can_answer(scope: Scope) -> bool:
    """Whether the server lets the app refuse a WebSocket upgrade with an HTTP response
    (the ASGI "websocket.http.response" extension; uvicorn has it)."""
    return "websocket.http.response" in scope.get("extensions", {})


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None
