"""Gemini through the official ``google-genai`` SDK: ``generateContent`` and its stream.

The SDK is imported when a model is built, never by ``import tooldeck``; install it with
``pip install 'tooldeck[gemini]'``. Every request carries the whole conversation.

Mapping: instructions go in ``system_instruction``; each ToolSpec becomes a function
declaration whose JSON Schema is converted to the OpenAPI 3.0 subset Gemini takes (what
is kept, rewritten and dropped is listed in ``tooldeck.models.gemini._schema``; dropped
constraints are written into the description, and tooldeck validates every call against
the full schema itself) or, with ``tool_schema="json_schema"``, sent unchanged as
``parameters_json_schema`` (API version ``v1beta``). ``tool_choice`` ``auto`` /
``required`` / ``none`` / a tool's name becomes the mode ``AUTO`` / ``ANY`` / ``NONE`` /
``ANY`` with that one allowed function; Gemini has no switch for parallel calls, so
``parallel_tool_calls`` is not sent. Results go back as ``functionResponse`` parts by the
call's name (and id), in the calls' order. A model turn with thoughts or thought
signatures is kept whole in the assistant message's ``provider_items`` and sent back
exactly as it came. The SDK's automatic function calling is switched off: tooldeck runs
the tools. ``stream()`` yields the text as chunks arrive and each function call whole (Gemini
never sends a call's arguments piece by piece), then the same turn ``complete()`` gives.

Part of ``tooldeck.models``: may import what it may, and the ``google-genai`` SDK.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.messages import AssistantOutput, Message
from tooldeck.models._http import Endpoint
from tooldeck.models._loops import foreign_loop_errors
from tooldeck.models._provider import ProviderModel, refuse_beside_client, require_name
from tooldeck.models.base import Ask, StreamItem, ToolCallChunk
from tooldeck.models.gemini import _request as request_format
from tooldeck.models.gemini import _response as response_format
from tooldeck.models.gemini._errors import sdk_errors

if TYPE_CHECKING:
    from google.genai import Client

__all__ = ["GeminiModel"]

DEFAULT_MAX_RETRIES = 2
"""Retries when tooldeck builds the client (the SDK itself retries only when told to)."""

_ENDPOINT = "https://generativelanguage.googleapis.com"
_KEY_HINT = "set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key="


@dataclass(frozen=True, slots=True)
class _Connection:
    client: Client
    owns_client: bool
    """Close the client in ``aclose()`` (tooldeck built it; a client passed in stays open)."""
    endpoint: str
    max_retries: int | None


class GeminiModel(ProviderModel):
    """Gemini behind the Gemini API (or Vertex AI, through a client passed in).

    Args:
        model_name: The model, e.g. ``"gemini-2.5-flash"``.
        client: A ``google.genai.Client`` used as it is: the way to Vertex AI
            (``Client(vertexai=True, project=..., location=...)``), proxies and custom
            HTTP options. When given, pass no other connection option. The SDK keeps a
            connection pool per event loop itself, so one model serves many threads
            (``run_sync``) and ``asyncio.run`` calls, with a client given or not.
        api_key: The key; defaults to ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` (the SDK's
            order).
        base_url: Another endpoint of the same API.
        api_version: The API version, e.g. ``"v1beta"``; defaults to the SDK's.
        stream: Make ``complete()`` receive the response as server-sent events
            (``streamGenerateContent``) and assemble it (``stream()``, which a run with
            ``deltas=True`` calls, always streams).
        tool_schema: ``"openapi"`` converts tool schemas to the OpenAPI subset
            (``parameters``); ``"json_schema"`` sends them unchanged
            (``parameters_json_schema``).
        max_retries: Retries for 408, 429, 5xx and connection errors (default 2), with the
            SDK's exponential backoff. Only when tooldeck builds the client.
        timeout: Seconds per request. Only when tooldeck builds the client.
        request_options: Other ``GenerateContentConfig`` fields, e.g.
            ``{"thinking_config": {"include_thoughts": True}}``; they override tooldeck's.

    Examples:
        >>> model = GeminiModel("gemini-2.5-flash", api_key="AIza...")
        >>> model.name
        'gemini:gemini-2.5-flash'
    """

    def __init__(
        self,
        model_name: str,
        *,
        client: Client | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        stream: bool = False,
        tool_schema: request_format.ToolSchema = "openapi",
        max_retries: int | None = None,
        timeout: float | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        require_name("gemini", model_name)
        if tool_schema not in ("openapi", "json_schema"):
            raise ModelNotConfigured(
                f"tool_schema must be 'openapi' or 'json_schema', got {tool_schema!r}"
            )
        super().__init__(f"gemini:{model_name}", stream)
        options = _ClientOptions(api_key, base_url, api_version, max_retries, timeout)
        self._connection = _connect(client, options)
        self._parts = request_format.RequestParts(
            model_name, request_format.Declarations(tool_schema), dict(request_options or {})
        )

    @property
    def client(self) -> Client:
        """The SDK client requests go through."""
        return self._connection.client

    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """One ``generateContent`` request: an AssistantOutput."""
        request = request_format.build_request(self._parts, ask)
        with self._sdk_errors():
            response = await self.client.aio.models.generate_content(**request)
            turn = response_format.turn_from_response(response, _id_prefix(ask.messages))
        allowed = request_format.callable_names(ask.tools, ask.settings)
        return response_format.to_output(self.name, turn, allowed)

    async def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The response as server-sent events: its text as it comes, each call whole, then
        the whole turn. Closing the generator closes the HTTP response."""
        request = request_format.build_request(self._parts, ask)
        turn = response_format.GeminiTurn(_id_prefix(ask.messages))
        with self._sdk_errors(lambda: turn.chunks_read > 0):
            chunks = await self.client.aio.models.generate_content_stream(**request)
            async with _closing(chunks):
                async for chunk in chunks:
                    for piece in turn.read(chunk):
                        yield piece
        response_format.check_stream_ended(self.name, turn)
        output = response_format.to_output(
            self.name, turn, request_format.callable_names(ask.tools, ask.settings)
        )
        for index, call in enumerate(output.tool_calls[len(turn.calls) :], len(turn.calls)):
            yield ToolCallChunk(index, call.id, call.name, call.arguments_json)  # a malformed call
        yield output

    @contextmanager
    def _sdk_errors(self, streaming: Callable[[], bool] = lambda: False) -> Iterator[None]:
        connection = self._connection
        context = Endpoint(self.name, connection.endpoint, _KEY_HINT, connection.max_retries)
        given = not connection.owns_client
        with foreign_loop_errors(self.name, given), sdk_errors(context, streaming):
            yield

    async def aclose(self) -> None:
        """Close the SDK client, unless it was passed in (then its owner closes it)."""
        if self._connection.owns_client:
            await self._connection.client.aio.aclose()


def _id_prefix(messages: Sequence[Message]) -> str:
    """Ids for calls the API sends without one: ``call_<turn>_<index>``."""
    turn_number = 1 + sum(message.role == "assistant" for message in messages)
    return f"call_{turn_number}_"


@asynccontextmanager
async def _closing(chunks: AsyncIterator[object]) -> AsyncIterator[None]:
    """Close the SDK's chunk generator on the way out, so an early exit ends the response."""
    try:
        yield
    finally:
        if isinstance(chunks, AsyncGenerator):
            await chunks.aclose()


@dataclass(frozen=True, slots=True)
class _ClientOptions:
    api_key: str | None
    base_url: str | None
    api_version: str | None
    max_retries: int | None
    timeout: float | None


def _connect(client: Client | None, options: _ClientOptions) -> _Connection:
    """The caller's client as it is, or a new one from the options and the environment."""
    if client is not None:
        refuse_beside_client(**asdict(options))
        return _Connection(client, False, "the client's endpoint", None)
    try:
        from google import genai
        from google.genai import types
    except ImportError as error:
        raise ModelNotConfigured(
            "GeminiModel needs the google-genai package: pip install 'tooldeck[gemini]'"
        ) from error
    key = options.api_key or os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
    if not key:
        raise ModelNotConfigured(
            "no Gemini API key: set the GEMINI_API_KEY (or GOOGLE_API_KEY) environment "
            "variable or pass api_key=... (for Vertex AI pass client=genai.Client(vertexai=True, "
            "project=..., location=...))"
        )
    retries = DEFAULT_MAX_RETRIES if options.max_retries is None else options.max_retries
    http_options = types.HttpOptions(
        base_url=options.base_url,
        api_version=options.api_version,
        retry_options=types.HttpRetryOptions(attempts=retries + 1),
        timeout=None if options.timeout is None else round(options.timeout * 1000),
    )
    built = genai.Client(api_key=key, http_options=http_options)
    endpoint = options.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or _ENDPOINT
    return _Connection(built, True, endpoint, retries)
