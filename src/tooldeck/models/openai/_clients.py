"""Building the SDK client an OpenAI adapter talks through, from arguments and environment.

A client passed in is used as it is; otherwise the key, base URL (and for Azure the endpoint
and API version) come from the arguments or the usual environment variables, and a missing
one is named in the error. A client tooldeck builds is kept per event loop
(``tooldeck.models._loops``): another loop gets its own, built with the same arguments.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from tooldeck.errors import ModelNotConfigured
from tooldeck.models._loops import LoopClients
from tooldeck.models._provider import client_settings, key_or_placeholder, refuse_beside_client

if TYPE_CHECKING:
    from openai import AsyncOpenAI


@dataclass(frozen=True, slots=True)
class Connection:
    """The SDK clients an adapter talks through (one per event loop when tooldeck built
    them; a client passed in on every loop), and how to fix a refused key."""

    clients: LoopClients[AsyncOpenAI]
    key_hint: str
    """How to supply a key, quoted when the provider refuses one."""


def _missing_sdk() -> ModelNotConfigured:
    return ModelNotConfigured(
        "the OpenAI models need the openai package: pip install 'tooldeck[openai]'"
    )


def connect(
    client: AsyncOpenAI | None,
    api_key: str | None,
    base_url: str | None,
    max_retries: int | None,
    timeout: float | None,
) -> Connection:
    """The client to use: the caller's as it is, or a new one from arguments and environment."""
    key_hint = "set OPENAI_API_KEY or pass api_key="
    if client is not None:
        refuse_beside_client(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )
        return Connection(LoopClients(client, None, _close), key_hint)
    try:
        from openai import AsyncOpenAI
    except ImportError as error:
        raise _missing_sdk() from error
    key = key_or_placeholder(
        api_key or os.environ.get("OPENAI_API_KEY"),
        base_url,
        "OPENAI_BASE_URL",
        "no OpenAI API key: set the OPENAI_API_KEY environment variable or pass "
        "api_key=... (for a local OpenAI-compatible server pass base_url=...)",
    )
    settings = client_settings(max_retries, timeout)
    make = partial(AsyncOpenAI, api_key=key, base_url=base_url, **settings)
    return Connection(LoopClients(make(), make, _close), key_hint)


def azure_connection(
    endpoint: str | None,
    api_version: str | None,
    api_key: str | None,
    max_retries: int | None,
    timeout: float | None,
) -> Connection:
    """Clients of an Azure OpenAI endpoint, from the arguments and the environment."""
    try:
        from openai import AsyncAzureOpenAI
    except ImportError as error:
        raise _missing_sdk() from error
    endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
    api_version = api_version or os.environ.get("OPENAI_API_VERSION")
    token = None if api_key else os.environ.get("AZURE_OPENAI_AD_TOKEN")
    api_key = api_key or (None if token else os.environ.get("AZURE_OPENAI_API_KEY"))
    missing = [
        hint
        for value, hint in (
            (endpoint, "AZURE_OPENAI_ENDPOINT (or pass endpoint=...)"),
            (api_version, "OPENAI_API_VERSION (or pass api_version=...)"),
            (api_key or token, "AZURE_OPENAI_API_KEY (or pass api_key=...)"),
        )
        if not value
    ]
    if missing:
        raise ModelNotConfigured(f"Azure OpenAI is not configured: set {', '.join(missing)}")
    make = partial(
        AsyncAzureOpenAI,
        azure_endpoint=endpoint or "",
        api_version=api_version,
        api_key=api_key,
        azure_ad_token=token,
        **client_settings(max_retries, timeout),
    )
    first: AsyncOpenAI = make()
    return Connection(LoopClients(first, make, _close), "set AZURE_OPENAI_API_KEY or pass api_key=")


async def _close(client: AsyncOpenAI) -> None:
    await client.close()
