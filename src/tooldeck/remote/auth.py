"""The A2A auth schemes tooldeck speaks both ways: a bearer token or an API key.

A server declares one in its card and enforces it (``tooldeck.serve.a2a.app(auth=...)``);
a caller sends it (``A2AAgent(auth=...)``). One object says all three: how the card
declares it (``scheme``), the header a caller sends (``headers``), and whether a request
carries it (``accepts``, secrets compared in constant time). a2a-sdk is imported only by
``scheme``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a2a.types import SecurityScheme


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
        from a2a.types import HTTPAuthSecurityScheme, SecurityScheme

        return SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", description="Authorization: Bearer <token>"
            )
        )

    def headers(self) -> dict[str, str]:
        """The header a caller sends."""
        return {"Authorization": f"Bearer {self.token}"}

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
        from a2a.types import APIKeySecurityScheme, SecurityScheme

        return SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(
                location="header", name=self.header, description=f"{self.header}: <key>"
            )
        )

    def headers(self) -> dict[str, str]:
        """The header a caller sends."""
        return {self.header: self.key}

    def accepts(self, headers: dict[str, str]) -> bool:
        """Whether the request's headers (lower-case names) carry the key."""
        return _same(headers.get(self.header.lower(), ""), self.key)


Auth = BearerToken | ApiKey
"""How an A2A caller proves who it is."""


def _same(given: str, secret: str) -> bool:
    return hmac.compare_digest(given.encode(), secret.encode())


def _check_secret(secret: str, what: str) -> None:
    if len(secret) < 16:
        raise ValueError(
            f"{what} needs a secret of at least 16 characters (got {len(secret)}); make one "
            "with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
