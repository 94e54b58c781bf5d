"""OpenAI models through the official ``openai`` SDK: the Responses API and Chat Completions.

``OpenAIResponsesModel`` talks to the Responses API (function tools plus hosted tools such
as web search); ``OpenAIChatModel`` talks to Chat Completions, which also covers Azure
OpenAI and any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio) by
``base_url``. The SDK is imported when a model is built, never by ``import tooldeck``;
install it with ``pip install 'tooldeck[openai]'``.

By default every request carries the whole conversation, so any gateway works and nothing
has to be stored server-side; ``OpenAIResponsesModel(server_state=True)`` continues stored
responses with ``previous_response_id`` instead.

Part of ``tooldeck.models``: may import what it may, and the ``openai`` SDK.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.messages import AssistantOutput
from tooldeck.models._http import Endpoint
from tooldeck.models._loops import foreign_loop_errors
from tooldeck.models._provider import ProviderModel, require_name
from tooldeck.models.base import Ask, StreamItem
from tooldeck.models.openai import _chat as chat
from tooldeck.models.openai import _responses as responses
from tooldeck.models.openai._clients import Connection, azure_connection, connect
from tooldeck.models.openai._errors import empty_stream, refuse_whole_body, sdk_errors

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["HostedTool", "OpenAIChatModel", "OpenAIResponsesModel"]


@dataclass(frozen=True, slots=True)
class HostedTool:
    """A tool the provider runs itself (Responses API only), offered next to function tools.

    Plain dicts in the API's own format work too, e.g. ``{"type": "web_search"}``. What
    the model did with a hosted tool is kept, as the API's JSON, in the assistant message's
    ``provider_items``.

    Examples:
        >>> HostedTool.file_search(["vs_123"]).to_param()
        {'type': 'file_search', 'vector_store_ids': ['vs_123']}
    """

    type: str
    """The API's tool type: ``web_search``, ``file_search``, ``code_interpreter``, ..."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """The tool's other fields, sent as they are."""

    @classmethod
    def web_search(cls, **options: Any) -> HostedTool:
        """Web search; options such as ``search_context_size="low"`` or ``filters=...``."""
        return cls("web_search", options)

    @classmethod
    def file_search(cls, vector_store_ids: Sequence[str], **options: Any) -> HostedTool:
        """Search the given vector stores; options such as ``max_num_results=5``."""
        return cls("file_search", {"vector_store_ids": list(vector_store_ids), **options})

    @classmethod
    def code_interpreter(cls, container: str | Mapping[str, Any] | None = None) -> HostedTool:
        """Run Python in a container: a container id, or by default a new automatic one."""
        return cls("code_interpreter", {"container": container or {"type": "auto"}})

    @classmethod
    def computer_use(cls, **options: Any) -> HostedTool:
        """Computer use: the model asks for clicks and keystrokes in ``computer_call`` items.

        tooldeck does not perform these actions; the host reads them from the result's
        ``provider_items``. For the preview tool pass
        ``{"type": "computer_use_preview", "display_width": ..., ...}`` as a dict instead.
        """
        return cls("computer", options)

    def to_param(self) -> dict[str, Any]:
        """The tool as the API's JSON."""
        return {"type": self.type, **self.options}


HostedToolLike = HostedTool | Mapping[str, Any]


def _hosted_params(tools: Sequence[HostedToolLike]) -> tuple[dict[str, Any], ...]:
    params = []
    for tool in tools:
        param = tool.to_param() if isinstance(tool, HostedTool) else dict(tool)
        if not isinstance(param.get("type"), str):
            raise ModelNotConfigured(f"a hosted tool needs a 'type' (e.g. 'web_search'): {param!r}")
        params.append(param)
    return tuple(params)


class _SDKModel(ProviderModel):
    """What both adapters share: the client, its lifetime, and error translation."""

    native_output = True
    """A typed answer goes as the API's ``json_schema`` format (structured outputs)."""

    def __init__(self, name: str, connection: Connection, stream: bool) -> None:
        super().__init__(name, stream)
        self._connection = connection

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client requests on the running event loop go through (outside a loop, the
        first one built). A client passed in is this one on every loop; one tooldeck built
        is one per loop (docs/models/index.md, "One model, many threads and event loops")."""
        return self._connection.clients.current()

    @contextmanager
    def _sdk_errors(self, reading: bool = False) -> Iterator[None]:
        """The SDK's errors as tooldeck's; ``reading``: inside a stream that has started."""
        clients = self._connection.clients
        client = clients.first  # every loop's client has its settings
        context = Endpoint(
            self.name, str(client.base_url), self._connection.key_hint, client.max_retries
        )
        with foreign_loop_errors(self.name, not clients.owned), sdk_errors(context, reading):
            yield

    async def aclose(self) -> None:
        """Close the SDK clients tooldeck built (a later request builds a new one); a client
        passed in is left open for its owner to close."""
        await self._connection.clients.aclose()


class OpenAIResponsesModel(_SDKModel):
    """A model behind the OpenAI Responses API.

    Args:
        model_name: The model, e.g. ``"gpt-4.1-mini"``.
        client: An ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) used as it is, on every
            event loop: the way to reach proxies and gateways. When given, pass no other
            connection option. Its connections belong to the event loop that first used
            them: a model shared by threads (``run_sync``) or ``asyncio.run`` calls needs
            no client given (tooldeck keeps one per loop), or a model built in each thread.
        api_key: The key; defaults to ``OPENAI_API_KEY``.
        base_url: Another endpoint of the same API; defaults to ``OPENAI_BASE_URL`` or OpenAI.
        hosted_tools: Tools the provider runs (web search, file search, code interpreter,
            computer use), as HostedTool or the API's dicts; sent after the function tools.
        stream: Receive the response as server-sent events and assemble it.
        store: Sent as ``store`` when set (``False`` keeps nothing on OpenAI's side).
        server_state: Continue stored responses by ``previous_response_id`` and send only
            the new messages, instead of the whole conversation every time.
        max_retries: The SDK's retries for rate limits, 5xx and connection errors (SDK
            default 2). Only when tooldeck builds the client.
        timeout: Seconds per request. Only when tooldeck builds the client.
        request_options: Any other ``responses.create`` parameters, e.g.
            ``{"reasoning": {"effort": "low"}}``; they override tooldeck's.

    Examples:
        >>> model = OpenAIResponsesModel("gpt-4.1-mini", api_key="sk-...")
        >>> model.name
        'openai:gpt-4.1-mini'
    """

    def __init__(
        self,
        model_name: str,
        *,
        client: AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        hosted_tools: Sequence[HostedToolLike] = (),
        stream: bool = False,
        store: bool | None = None,
        server_state: bool = False,
        max_retries: int | None = None,
        timeout: float | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        require_name("openai", model_name)
        if server_state and store is False:
            raise ModelNotConfigured(
                "server_state=True continues stored responses: drop store=False"
            )
        connection = connect(client, api_key, base_url, max_retries, timeout)
        super().__init__(f"openai:{model_name}", connection, stream)
        self._parts = responses.RequestParts(
            model_name, _hosted_params(hosted_tools), store, dict(request_options or {})
        )
        self._chain = responses.ResponseChain() if server_state else None

    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """One Responses API request, as an AssistantOutput."""
        request = self._request(ask)
        with self._sdk_errors():
            response = await self.client.responses.create(**request)
        output = responses.parse_response(self.name, response)
        if self._chain is not None:
            self._chain.remember(ask.messages, output, response.id)
        return output

    async def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn as server-sent events: text and argument deltas, then the whole turn."""
        request = self._request(ask)
        collector = responses.StreamCollector(self.name)
        with self._sdk_errors():
            async with await self.client.responses.create(**request, stream=True) as events:
                with self._sdk_errors(reading=True):
                    async for event in events:
                        chunk = collector.add(event)
                        if chunk is not None:
                            yield chunk
        response, items = collector.result()
        output = responses.parse_response(self.name, response, items)
        if self._chain is not None:
            self._chain.remember(ask.messages, output, response.id)
        yield output

    def _request(self, ask: Ask) -> dict[str, Any]:
        messages = ask.messages
        previous_id, new = self._chain.split(messages) if self._chain else (None, messages)
        request = responses.build_request(
            self._parts, responses.input_items(new), ask.tools, ask.settings, ask.instructions
        )
        if previous_id is not None:
            request["previous_response_id"] = previous_id
        return request


class OpenAIChatModel(_SDKModel):
    """A model behind Chat Completions: OpenAI, Azure OpenAI or any compatible server.

    Args:
        model_name: The model (for Azure: the deployment), e.g. ``"gpt-4.1-mini"``.
        client: An ``openai.AsyncOpenAI`` or ``AsyncAzureOpenAI`` used as it is, on every
            event loop. When given, pass no other connection option. Its connections belong
            to the event loop that first used them: a model shared by threads (``run_sync``)
            or ``asyncio.run`` calls needs no client given (tooldeck keeps one per loop), or
            a model built in each thread.
        base_url: An OpenAI-compatible server, e.g. ``"http://127.0.0.1:8000/v1"`` (vLLM,
            Ollama, llama.cpp, LM Studio). It gets a placeholder key when none is set.
        api_key: The key; defaults to ``OPENAI_API_KEY``.
        hosted_tools: Not supported by Chat Completions: any given is refused by name.
        stream: Receive the completion as chunks and assemble them.
        instructions_role: The role of the leading instructions message: ``"system"`` or
            ``"developer"``.
        max_tokens_param: The field that carries ``ModelSettings.max_tokens``:
            ``"max_completion_tokens"`` (OpenAI's, the default) or ``"max_tokens"`` (what
            older compatible servers read; the default when ``base_url`` is given).
        max_retries: The SDK's retries (SDK default 2). Only when tooldeck builds the client.
        timeout: Seconds per request. Only when tooldeck builds the client.
        request_options: Any other ``chat.completions.create`` parameters, e.g.
            ``{"seed": 7}``; they override tooldeck's.

    Examples:
        >>> model = OpenAIChatModel("qwen3", base_url="http://127.0.0.1:8000/v1")
        >>> model.name
        'openai-chat:qwen3'
    """

    def __init__(
        self,
        model_name: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        hosted_tools: Sequence[HostedToolLike] = (),
        stream: bool = False,
        instructions_role: chat.InstructionsRole = "system",
        max_tokens_param: chat.MaxTokensParam | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        require_name("openai-chat", model_name)
        if hosted_tools:
            names = ", ".join(repr(param["type"]) for param in _hosted_params(hosted_tools))
            raise ModelNotConfigured(
                f"hosted tool {names} needs the Responses API; Chat Completions runs only "
                "function tools. Use OpenAIResponsesModel (model string 'openai:...')"
            )
        if instructions_role not in ("system", "developer"):
            raise ModelNotConfigured(
                f"instructions_role must be 'system' or 'developer', got {instructions_role!r}"
            )
        connection = connect(client, api_key, base_url, max_retries, timeout)
        super().__init__(f"openai-chat:{model_name}", connection, stream)
        default_param: chat.MaxTokensParam = "max_tokens" if base_url else "max_completion_tokens"
        self._parts = chat.RequestParts(
            model_name,
            instructions_role,
            max_tokens_param or default_param,
            dict(request_options or {}),
        )

    @classmethod
    def azure(
        cls,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> OpenAIChatModel:
        """A deployment on Azure OpenAI, through ``openai.AsyncAzureOpenAI``.

        ``endpoint``, ``api_version`` and ``api_key`` default to ``AZURE_OPENAI_ENDPOINT``,
        ``OPENAI_API_VERSION`` and ``AZURE_OPENAI_API_KEY`` (or ``AZURE_OPENAI_AD_TOKEN``).
        ``options`` are OpenAIChatModel's (``stream=``, ``request_options=``, ...); pass
        ``client=AsyncAzureOpenAI(...)`` to OpenAIChatModel itself for Entra ID token providers.
        """
        require_name("azure", deployment)
        connection = azure_connection(endpoint, api_version, api_key, max_retries, timeout)
        model = cls(deployment, client=connection.clients.first, **options)
        model.name = f"azure:{deployment}"
        model._connection = connection
        return model

    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """One Chat Completions request, as an AssistantOutput."""
        request = chat.build_request(self._parts, ask)
        with self._sdk_errors():
            completion = await self.client.chat.completions.create(**request)
        return chat.to_output(self.name, chat.turn_from_completion(self.name, completion))

    async def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The completion as chunks: text and argument deltas, then the whole turn."""
        request = chat.build_request(self._parts, ask)
        request.setdefault("stream_options", {"include_usage": True})
        assembler = chat.ChunkAssembler()
        with self._sdk_errors():
            async with await self.client.chat.completions.create(**request, stream=True) as chunks:
                await refuse_whole_body(self.name, chunks.response)
                with self._sdk_errors(reading=True):
                    async for chunk in chunks:
                        for piece in assembler.add(chunk):
                            yield piece
        if not assembler.chunks:
            raise empty_stream(self.name)
        yield chat.to_output(self.name, assembler.turn())
