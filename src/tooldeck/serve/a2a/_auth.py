"""Who may send tasks: a bearer token or an API key, declared in the card and enforced.

``BearerToken`` and ``ApiKey`` each say how the card declares them (a ``SecurityScheme``)
and whether a request carries the secret; ``Guard`` is the ASGI middleware that answers
every request but the card's ``401`` unless it does (no token, no task). Secrets are
compared in constant time.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a.types import APIKeySecurityScheme, HTTPAuthSecurityScheme, SecurityScheme

from tooldeck.serve.limits import refuse

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(frozen=True, slots=True)
class BearerToken:
    """Requests carry ``Authorization: Bearer <token>``."""

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        _check_secret(self.token, "BearerToken")

    @property
    def name(self) -> str:
        """The scheme's name in the card."""
        return "bearer"

    def scheme(self) -> SecurityScheme:
        """How the card declares it."""
        return SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", description="Authorization: Bearer <token>"
            )
        )

    def accepts(self, headers: dict[str, str]) -> bool:
        """Whether the request's headers (lower-case names) carry the token."""
        given = headers.get("authorization", "")
        kind, _, token = given.partition(" ")
        return kind.lower() == "bearer" and _same(token.strip(), self.token)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """Requests carry the key in a header (``X-API-Key`` unless told otherwise)."""

    key: str = field(repr=False)
    header: str = "X-API-Key"

    def __post_init__(self) -> None:
        _check_secret(self.key, "ApiKey")
        if not self.header or not self.header.isascii() or " " in self.header:
            raise ValueError(f"ApiKey header must be an HTTP header name, got {self.header!r}")

    @property
    def name(self) -> str:
        """The scheme's name in the card."""
        return "apiKey"

    def scheme(self) -> SecurityScheme:
        """How the card declares it."""
        return SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(
                location="header", name=self.header, description=f"{self.header}: <key>"
            )
        )

    def accepts(self, headers: dict[str, str]) -> bool:
        """Whether the request's headers (lower-case names) carry the key."""
        return _same(headers.get(self.header.lower(), ""), self.key)


Auth = BearerToken | ApiKey
"""How a served agent's clients prove who they are."""


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


def _same(given: str, secret: str) -> bool:
    return hmac.compare_digest(given.encode(), secret.encode())


def _check_secret(secret: str, what: str) -> None:
    if len(secret) < 16:
        raise ValueError(
            f"{what} needs a secret of at least 16 characters (got {len(secret)}); make one "
            "with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
