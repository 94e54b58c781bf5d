"""Claude through the official ``anthropic`` SDK: the Messages API (``/v1/messages``).

The SDK is imported when a model is built, never by ``import tooldeck``; install it with
``pip install 'tooldeck[anthropic]'``. Every request carries the whole conversation.

Mapping: instructions go in ``system``; each ToolSpec becomes a tool with its JSON Schema
as ``input_schema``, unchanged (``ToolSpec.strict`` is not sent: Anthropic's strict mode
takes only a subset of JSON Schema, and tooldeck validates every call against the full
schema itself); ``tool_choice`` ``auto`` / ``required`` / ``none`` / a tool's name becomes
``auto`` / ``any`` / ``none`` / ``tool``, and ``parallel_tool_calls=False`` sets
``disable_parallel_tool_use``. Thinking blocks (``thinking``, ``redacted_thinking``) are
kept in the assistant message's ``provider_items`` and sent back unchanged, with their
signatures, before the text and calls of their turn. ``stream()`` yields text and tool
input pieces as the server-sent events bring them, then the same turn ``complete()`` gives.
A turn the API pauses in its own server-tool loop (``stop_reason: "pause_turn"``, e.g. a
long tool search) is asked to go on: the same request with the turn so far as the last
assistant message, up to ``MAX_CONTINUATIONS`` times; its parts make one turn.

Part of ``tooldeck.models``: may import what it may, and the ``anthropic`` SDK.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelError, ModelNotConfigured
from tooldeck.messages import AssistantOutput
from tooldeck.models._http import Endpoint
from tooldeck.models._loops import LoopClients, foreign_loop_errors
from tooldeck.models._provider import (
    ProviderModel,
    client_settings,
    key_or_placeholder,
    refuse_beside_client,
    require_name,
)
from tooldeck.models.anthropic import _request as request_format
from tooldeck.models.anthropic import _response as response_format
from tooldeck.models.anthropic._errors import refused_by_sdk, sdk_errors
from tooldeck.models.anthropic._stream import EventReader
from tooldeck.models.base import Ask, StreamItem

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel"]

MAX_CONTINUATIONS = 5
"""Requests that ask a turn paused by the API (``pause_turn``) to go on, at most, per turn."""
DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the model nor ``ModelSettings`` sets it (the API requires it)."""

_KEY_HINT = "set ANTHROPIC_API_KEY or pass api_key="


class AnthropicModel(ProviderModel):
    """Claude behind the Anthropic Messages API.

    Args:
        model_name: The model, e.g. ``"claude-sonnet-5"``.
        client: An ``anthropic.AsyncAnthropic`` used as it is, on every event loop: the way
            to other credentials (``auth_token=``, profiles), proxies and gateways. When
            given, pass no other connection option; its connections belong to the event
            loop that first used them, so a model shared by threads (``run_sync``) or
            ``asyncio.run`` calls needs no client given (tooldeck keeps one per loop), or a
            model built in each thread.
        api_key: The key; defaults to ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``).
        base_url: Another endpoint of the same API; defaults to ``ANTHROPIC_BASE_URL`` or
            Anthropic. It gets a placeholder key when none is set.
        max_tokens: Sent when ``ModelSettings.max_tokens`` is not set (the API requires a
            limit). Above ~21,000 the SDK insists on ``stream=True``.
        stream: Make ``complete()`` receive the message as server-sent events and assemble
            it (``stream()``, which a run with ``deltas=True`` calls, always streams).
        max_retries: The SDK's retries for 429, 5xx (529 overloaded too) and connection
            errors (SDK default 2). Only when tooldeck builds the client.
        timeout: Seconds per request. Only when tooldeck builds the client.
        request_options: Any other body fields, e.g. ``{"thinking": {"type": "adaptive"}}``
            or ``{"metadata": {"user_id": "u1"}}``; they override tooldeck's.

    ``ModelSettings.temperature`` is sent as ``temperature`` when set (the SDK no longer
    lists it; current models may refuse a value other than the default with HTTP 400).

    Examples:
        >>> model = AnthropicModel("claude-sonnet-5", api_key="sk-ant-...")
        >>> model.name
        'anthropic:claude-sonnet-5'
    """

    def __init__(
        self,
        model_name: str,
        *,
        client: AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        stream: bool = False,
        max_retries: int | None = None,
        timeout: float | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        require_name("anthropic", model_name)
        if max_tokens < 1:
            raise ModelNotConfigured(f"max_tokens must be at least 1, got {max_tokens!r}")
        super().__init__(f"anthropic:{model_name}", stream)
        self._clients = _connect(client, api_key, base_url, max_retries, timeout)
        self._parts = request_format.RequestParts(
            model_name, max_tokens, dict(request_options or {})
        )

    @property
    def client(self) -> AsyncAnthropic:
        """The SDK client requests on the running event loop go through (outside a loop, the
        first one built). A client passed in is this one on every loop; one tooldeck built
        is one per loop (docs/models/index.md, "One model, many threads and event loops")."""
        return self._clients.current()

    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """One Messages API request, as an AssistantOutput (a paused turn asked to go on)."""
        turns: list[response_format.MessageTurn] = []
        while not turns or _goes_on(self.name, turns):
            request = request_format.build_request(self._parts, ask)
            named, extra = request_format.split_request(response_format.continued(request, turns))
            with self._sdk_errors() as context:
                try:
                    message = await self.client.messages.create(**named, extra_body=extra or None)
                except ValueError as error:  # raised before sending, e.g. max_tokens too large
                    raise refused_by_sdk(context, error) from error
                turns.append(response_format.turn_from_message(self.name, message))
        return response_format.to_output(self.name, response_format.joined(turns))

    async def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The message as server-sent events: text and tool input pieces, then the whole turn
        (a paused turn asked to go on, its pieces after the first part's).

        Thinking is assembled into the turn (signatures kept for replay) without pieces.
        Closing the generator closes the HTTP response.
        """
        turns: list[response_format.MessageTurn] = []
        while not turns or _goes_on(self.name, turns):
            request = request_format.build_request(self._parts, ask)
            named, extra = request_format.split_request(response_format.continued(request, turns))
            reader = EventReader(self.name)
            with self._sdk_errors():
                events = await self.client.messages.create(
                    **named, extra_body=extra or None, stream=True
                )
                async with events:
                    async for event in events:
                        chunk = reader.add(event)
                        if chunk is not None:
                            yield chunk
            turns.append(reader.turn())
        yield response_format.to_output(self.name, response_format.joined(turns))

    @contextmanager
    def _sdk_errors(self) -> Iterator[Endpoint]:
        client = self._clients.first  # every loop's client has its settings
        context = Endpoint(self.name, str(client.base_url), _KEY_HINT, client.max_retries)
        with foreign_loop_errors(self.name, not self._clients.owned), sdk_errors(context):
            yield context

    async def aclose(self) -> None:
        """Close the SDK clients tooldeck built (a later request builds a new one); a client
        passed in is left open for its owner to close."""
        await self._clients.aclose()


def _goes_on(model: str, turns: list[response_format.MessageTurn]) -> bool:
    """Whether the turn paused (``pause_turn``) and may be asked to go on once more."""
    if turns[-1].stop_reason != response_format.PAUSED:
        return False
    if len(turns) > MAX_CONTINUATIONS:
        raise ModelError(
            f"{model}: the turn was still paused (stop_reason 'pause_turn') after "
            f"{MAX_CONTINUATIONS} requests to go on; the provider's server tools did not "
            "finish"
        )
    return True


def _connect(
    client: AsyncAnthropic | None,
    api_key: str | None,
    base_url: str | None,
    max_retries: int | None,
    timeout: float | None,
) -> LoopClients[AsyncAnthropic]:
    """The caller's client as it is, or new ones (one per event loop) from the arguments and
    the environment."""
    if client is not None:
        refuse_beside_client(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )
        return LoopClients(client, None, _close)
    try:
        from anthropic import AsyncAnthropic
    except ImportError as error:
        raise ModelNotConfigured(
            "AnthropicModel needs the anthropic package: pip install 'tooldeck[anthropic]'"
        ) from error
    key = api_key or os.environ.get("ANTHROPIC_API_KEY")
    token = None if key else os.environ.get("ANTHROPIC_AUTH_TOKEN")
    if not token:
        key = key_or_placeholder(
            key,
            base_url,
            "ANTHROPIC_BASE_URL",
            "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable or pass "
            "api_key=... (for other credentials pass client=anthropic.AsyncAnthropic(...))",
        )
    settings = client_settings(max_retries, timeout)
    make = partial(AsyncAnthropic, api_key=key, auth_token=token, base_url=base_url, **settings)
    return LoopClients(make(), make, _close)


async def _close(client: AsyncAnthropic) -> None:
    await client.close()
