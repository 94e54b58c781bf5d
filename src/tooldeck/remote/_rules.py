"""Where a remote agent may be reached: one origin, https (http only on loopback), allowed.

A card fetched from one place may name RPC URLs anywhere; a caller that followed them would
send its prompts (and its credentials) wherever a card says. So the card's own URL and every
URL it names must share one origin, use https (or http to a loopback address) and be in the
allow-list given to ``A2AAgent(allowed=[...])``. Imports nothing but the standard library.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from tooldeck.errors import ToolDeckError

DESCRIPTION_LIMIT = 1000
"""How much of a remote's self-description the model is shown (characters)."""


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port made explicit), lower case."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolDeckError(
            f"remote agent URL {url!r} is not an http(s) URL with a host: give the agent's "
            "base URL, e.g. 'https://agents.example.com'"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ToolDeckError(f"remote agent URL {url!r} has a port that is not a number") from None
    host = parts.hostname.lower()
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost`` or a loopback address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_origins(allowed: Iterable[str]) -> tuple[str, ...]:
    """The allow-list as origins; each entry must be an http(s) URL (a path is ignored)."""
    if isinstance(allowed, str):
        raise TypeError(
            f"A2AAgent(allowed=...) takes a list of URLs, got the string {allowed!r}: "
            f"write allowed=[{allowed!r}]"
        )
    origins = tuple(origin_of(url) for url in allowed)
    if not origins:
        raise ToolDeckError(
            "A2AAgent(allowed=[]) allows no remote: list the origins it may reach, "
            "e.g. allowed=['https://agents.example.com']"
        )
    return origins


def check_url(url: str, origin: str, allowed: Sequence[str], what: str) -> None:
    """Refuse ``url`` (the card's URL, or one the card names: ``what``) unless it is on
    ``origin``, uses https (or http to a loopback address) and is in ``allowed``.

    Raises:
        ToolDeckError: naming the URL and the rule it breaks.
    """
    found = origin_of(url)
    scheme, host = urlsplit(url).scheme, urlsplit(url).hostname or ""
    if scheme == "http" and not is_loopback(host):
        raise ToolDeckError(
            f"refusing {what} {url!r}: plain http is allowed only to a loopback address "
            "(127.0.0.1, ::1, localhost); use https"
        )
    if found != origin:
        raise ToolDeckError(
            f"refusing {what} {url!r}: it is not on the origin of the agent card ({origin}); "
            "a card and every URL it names must share one origin"
        )
    if found not in allowed:
        raise ToolDeckError(
            f"refusing {what} {url!r}: its origin {found} is not in A2AAgent(allowed=...) "
            f"({', '.join(allowed)}); add it there if you trust it"
        )


def capped(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying so when it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... cut: {len(text) - limit} more characters]"
