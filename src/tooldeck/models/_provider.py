"""What the hosted providers' adapters share: a turn asked in one request, or read whole
from the provider's stream (``stream=True``: a server that only streams works too), and
priced (``tooldeck.models.prices``) as it leaves the adapter; and the checks and client
settings every adapter's constructor applies the same way."""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import AsyncGenerator
from typing import Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.messages import AssistantOutput, ToolSpec
from tooldeck.models.base import Ask, AskModel, StreamItem, final_output, stream_of
from tooldeck.models.prices import priced


def spec_param(spec: ToolSpec, schema_key: str) -> dict[str, Any]:
    """A ToolSpec as the wire formats spell a tool or a typed answer: its name, its
    description when it has one, and its JSON Schema under ``schema_key``."""
    param: dict[str, Any] = {"name": spec.name}
    if spec.description:
        param["description"] = spec.description
    param[schema_key] = spec.parameters
    return param


class ProviderModel(AskModel):
    """A hosted provider's model (OpenAI, Anthropic, Gemini)."""

    def __init__(self, name: str, stream: bool) -> None:
        self.name = name
        self._stream = stream

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The turn, priced: asked in one request, or read whole from the stream."""
        if self._stream:
            return await final_output(self.name, stream_of(self, ask))
        output = await self._request_turn(ask)
        return priced(output, ask.settings.prices, self.name)

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn as the provider streams it: chunks, then the whole turn, priced."""
        items = self._stream_turn(ask)
        try:
            async for item in items:
                if isinstance(item, AssistantOutput):
                    item = priced(item, ask.settings.prices, self.name)
                yield item
        finally:
            await items.aclose()

    @abstractmethod
    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """The turn, asked in one request and answered whole."""

    @abstractmethod
    def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn from the provider's stream: chunks, then the whole turn."""


def require_name(provider: str, name: str) -> None:
    """Refuse an empty or blank model name, naming the provider."""
    if not name or not name.strip():
        raise ModelNotConfigured(f"{provider} needs a model name, got {name!r}")


def refuse_beside_client(**options: object) -> None:
    """Refuse connection options given beside a client: they would be ignored (``None`` is
    an option not given). The error names them in the order given."""
    named = [name for name, value in options.items() if value is not None]
    if named:
        raise ModelNotConfigured(
            f"a client was passed, so {', '.join(named)} would be ignored: set them on "
            "the client, or pass them without a client"
        )


NO_KEY = "no-key-needed"
"""The key sent to a ``base_url`` server when none is configured (local servers need none)."""


def key_or_placeholder(
    key: str | None, base_url: str | None, base_url_env: str, missing: str
) -> str:
    """The key to send: ``key`` when there is one; for a server named by ``base_url`` (or
    the ``base_url_env`` environment variable) without one, ``NO_KEY``; otherwise
    ModelNotConfigured with ``missing``."""
    if key:
        return key
    if base_url is None and not os.environ.get(base_url_env):
        raise ModelNotConfigured(missing)
    return NO_KEY


def client_settings(max_retries: int | None, timeout: float | None) -> dict[str, Any]:
    """The SDK client's ``max_retries`` and ``timeout`` keywords, those that were given."""
    settings: dict[str, Any] = {}
    if max_retries is not None:
        settings["max_retries"] = max_retries
    if timeout is not None:
        settings["timeout"] = timeout
    return settings
