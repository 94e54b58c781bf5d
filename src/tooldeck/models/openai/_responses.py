"""The Responses API wire format: Messages and ToolSpecs in, AssistantOutput out.

Only this module knows how the Responses API spells a conversation: user messages,
``function_call`` / ``function_call_output`` items paired by ``call_id``, hosted-tool items
kept as plain JSON and sent back, and the response's status.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused, ProviderError
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolSpec, Usage
from tooldeck.models._provider import spec_param
from tooldeck.models.base import ModelSettings, NativeToolSearch, TextChunk, ToolCallChunk
from tooldeck.models.openai._chat import json_schema_format

if TYPE_CHECKING:
    from openai.types.responses import Response, ResponseOutputItem, ResponseStreamEvent

REPLAYED_ITEM_TYPES = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_list_tools",
        "mcp_call",
        "compaction",
        "tool_search_call",
        "tool_search_output",
    }
)
"""Output items sent back as they came on the next request (the API accepts them as input).

Other items (a ``computer_call`` that needs the host's answer, types this version does not
know) stay in the result's ``provider_items`` for the host but are not sent back."""


@dataclass(frozen=True, slots=True)
class RequestParts:
    """What goes into one ``responses.create`` call besides the conversation."""

    model: str
    hosted_tools: tuple[dict[str, Any], ...] = ()
    store: bool | None = None
    extra: Mapping[str, Any] | None = None


def build_request(
    parts: RequestParts,
    items: list[dict[str, Any]],
    tools: Sequence[ToolSpec],
    settings: ModelSettings,
    instructions: str,
) -> dict[str, Any]:
    """The JSON body of a ``responses.create`` call."""
    request: dict[str, Any] = {"model": parts.model, "input": items}
    if instructions:
        request["instructions"] = instructions
    all_tools = [*function_tools(tools, settings.tool_search), *parts.hosted_tools]
    if all_tools:
        request["tools"] = all_tools
        hosted_types = {str(tool.get("type")) for tool in parts.hosted_tools}
        request["tool_choice"] = tool_choice(settings.tool_choice, hosted_types)
        if settings.parallel_tool_calls is not None:
            request["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.temperature is not None:
        request["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        request["max_output_tokens"] = settings.max_tokens
    if parts.store is not None:
        request["store"] = parts.store
    if settings.output_schema is not None:
        request["text"] = {
            "format": {"type": "json_schema", **json_schema_format(settings.output_schema)}
        }
    request.update(parts.extra or {})
    return request


def function_tools(
    tools: Sequence[ToolSpec], search: NativeToolSearch | None
) -> list[dict[str, Any]]:
    """The request's function tools; with a ``NativeToolSearch`` whose local tool is among
    them, the hosted ``tool_search`` tool in its place and the deferred tools after the rest,
    each with ``defer_loading: true`` (the API searches them and loads those it finds; it
    has one search, whatever the strategy)."""
    if search is None or all(spec.name != search.local_tool for spec in tools):
        return [function_tool(spec) for spec in tools]
    native = {"type": "tool_search"}
    params = [native if spec.name == search.local_tool else function_tool(spec) for spec in tools]
    params.extend({**function_tool(spec), "defer_loading": True} for spec in search.deferred)
    return params


def revealed_tools(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tools the hosted tool search loaded in a turn (its ``provider_items``): the name
    of each function tool of each ``tool_search_output`` item, in order."""
    names: list[str] = []
    for item in items:
        loaded = item.get("tools") if item.get("type") == "tool_search_output" else None
        for tool in loaded if isinstance(loaded, list) else ():
            if isinstance(tool, Mapping) and tool.get("type") == "function":
                name = tool.get("name")
                if isinstance(name, str):
                    names.append(name)
    return names


def function_tool(spec: ToolSpec) -> dict[str, Any]:
    """A ToolSpec as a Responses function tool, ``strict`` always sent (the API defaults it on)."""
    return {"type": "function", **spec_param(spec, "parameters"), "strict": spec.strict}


def tool_choice(choice: str, hosted_types: set[str]) -> str | dict[str, str]:
    """``auto``/``required``/``none`` as they are; a hosted tool's type or a function's name."""
    if choice in ("auto", "required", "none"):
        return choice
    if choice in hosted_types:
        return {"type": choice}
    return {"type": "function", "name": choice}


def input_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses input items, call ids paired exactly."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            items.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            if message.tool_call_id is None:
                raise ValueError(f"a tool message has no tool_call_id: {message.content[:60]!r}")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content,
                }
            )
        else:
            items.extend(_assistant_items(message))
    return items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    """Hosted-tool and reasoning items first (they came first), then the text, then the calls."""
    items = [
        dict(item) for item in message.provider_items if item.get("type") in REPLAYED_ITEM_TYPES
    ]
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments_json,
        }
        for call in message.tool_calls
    )
    return items


def parse_response(
    model: str, response: Response, items: Sequence[ResponseOutputItem] | None = None
) -> AssistantOutput:
    """A Response as an AssistantOutput; a refusal, truncation or failure raises a ModelError.

    ``items`` replaces ``response.output`` (a stream's items when its last event has none).
    """
    text: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    kept: list[dict[str, Any]] = []
    for item in response.output if items is None else items:
        if item.type == "function_call":
            calls.append(ToolCall.from_json(item.call_id, item.name, item.arguments))
        elif item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    text.append(part.text)
                elif part.type == "refusal":
                    refusals.append(part.refusal)
        else:
            kept.append(item.to_dict(mode="json"))
    content = "".join(text)
    _check_status(model, response, content)
    if refusals:
        refusal = " ".join(refusals)
        raise ModelRefused(f"{model}: the model refused: {refusal!r}", refusal)
    return AssistantOutput(
        content=content, tool_calls=tuple(calls), usage=_usage(response), provider_items=tuple(kept)
    )


def _check_status(model: str, response: Response, content: str) -> None:
    status = response.status
    if status is None or status == "completed":
        return
    if status == "failed":
        error = response.error
        detail = f"{error.code}: {error.message}" if error is not None else "no error given"
        raise ProviderError(f"{model}: the response failed ({detail})")
    if status == "incomplete":
        details = response.incomplete_details
        reason = details.reason if details is not None else None
        if reason == "content_filter":
            raise ModelRefused(f"{model}: the provider's content filter stopped the response")
        raise ModelOutputTruncated(
            f"{model}: the response is incomplete ({reason or 'no reason given'}) after "
            f"{len(content)} characters; raise ModelSettings.max_tokens or shorten the task",
            content,
        )
    raise ModelError(
        f"{model}: the response is {status!r}, not completed; background responses are not "
        "supported (do not pass background=True)"
    )


def _usage(response: Response) -> Usage | None:
    usage = response.usage
    if usage is None:
        return None
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


class StreamCollector:
    """Reads a response's event stream: what each event added, then the final Response.

    The items are the terminal response's own, or, when it carries none (as some gateways
    send it), the items the stream finished one by one.
    """

    def __init__(self, model: str) -> None:
        self._model = model
        self._done: dict[int, ResponseOutputItem] = {}
        self._final: Response | None = None
        self._calls: dict[int, ToolCallChunk] = {}
        """Output index -> the call's first chunk (its position among the turn's calls)."""

    def add(self, event: ResponseStreamEvent) -> TextChunk | ToolCallChunk | None:
        """Take one event; return the text or call piece it carried, if any."""
        if event.type == "response.output_text.delta":
            return TextChunk(event.delta)
        if event.type == "response.function_call_arguments.delta":
            call = self._calls.get(event.output_index)
            if call is None:
                return None
            return ToolCallChunk(call.index, call.call_id, call.name, event.delta)
        if event.type == "response.output_item.added" and event.item.type == "function_call":
            item = event.item
            call = ToolCallChunk(len(self._calls), item.call_id, item.name, item.arguments)
            self._calls[event.output_index] = call
            return call
        if event.type == "response.output_item.done":
            self._done[event.output_index] = event.item
        elif event.type in ("response.completed", "response.incomplete", "response.failed"):
            self._final = event.response
        elif event.type == "error":
            code = f"{event.code}: " if event.code else ""
            raise ProviderError(
                f"{self._model}: the stream reported an error: {code}{event.message}"
            )
        return None

    def result(self) -> tuple[Response, list[ResponseOutputItem]]:
        """The final Response and its output items; an error if the stream stopped short."""
        final = self._final
        if final is None:
            raise ModelError(f"{self._model}: the stream ended before the response was complete")
        return final, list(final.output) or [self._done[index] for index in sorted(self._done)]


class ResponseChain:
    """Server-side conversation state: which stored response each conversation prefix ends at.

    A conversation is identified by a hash of its messages up to an assistant turn; when
    the next request continues it, only the messages after that turn are sent, with the
    turn's ``previous_response_id``. Anything else is sent whole.
    """

    def __init__(self, capacity: int = 256) -> None:
        self._ids: OrderedDict[str, str] = OrderedDict()
        self._capacity = capacity

    def remember(
        self, messages: Sequence[Message], output: AssistantOutput, response_id: str
    ) -> None:
        self._ids[_fingerprint([*messages, Message.assistant(output)])] = response_id
        while len(self._ids) > self._capacity:
            self._ids.popitem(last=False)

    def split(self, messages: Sequence[Message]) -> tuple[str | None, Sequence[Message]]:
        """The response id to continue from and the messages after it (all, if none)."""
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "assistant":
                response_id = self._ids.get(_fingerprint(messages[: index + 1]))
                if response_id is not None:
                    return response_id, messages[index + 1 :]
                break
        return None, messages


def _fingerprint(messages: Sequence[Message]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(json.dumps(message.model_dump(mode="json"), sort_keys=True).encode())
    return digest.hexdigest()
