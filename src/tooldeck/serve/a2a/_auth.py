"""Who may send tasks: a bearer token or an API key, declared in the card and enforced.

``BearerToken`` and ``ApiKey`` (``tooldeck.remote.auth``, shared with callers) each say how
the card declares them and whether a request carries the secret; ``Guard`` is the ASGI
middleware that answers every request but the card's ``401`` unless it does (no token, no
task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tooldeck.remote.auth import ApiKey, Auth, BearerToken
from tooldeck.serve.limits import refuse

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ApiKey", "Auth", "BearerToken", "Guard"]


class Guard:
    """ASGI middleware: a request to any path but ``open_paths`` without the secret is
    answered 401 (a JSON body saying what to send), unread."""

    def __init__(self, app: ASGIApp, *, auth: Auth, open_paths: frozenset[str]) -> None:
        self.app = app
        self.auth = auth
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", ())
        }
        if self.auth.accepts(headers):
            await self.app(scope, receive, send)
            return
        await _unauthorized(send, self.auth)


async def _unauthorized(send: Send, auth: Auth) -> None:
    if isinstance(auth, BearerToken):
        what, challenge = "an Authorization: Bearer <token> header", b'Bearer realm="a2a"'
    else:
        what, challenge = f"the API key in the {auth.header} header", b'ApiKey realm="a2a"'
    problem = (
        f"this agent takes tasks only from clients that send {what}; the agent card "
        "(/.well-known/agent-card.json) declares it"
    )
    await refuse(send, 401, problem, [(b"www-authenticate", challenge)])
