"""The Anthropic Messages wire format, going in: Messages and ToolSpecs -> a ``/v1/messages`` body.

Only this module knows how the Messages API spells a conversation: instructions in
``system``; an assistant turn as content blocks (its thinking blocks first, exactly as they
came, then the text, then one ``tool_use`` block per call); and every result of that turn
as ``tool_result`` blocks in ONE user message, in the calls' order, paired by
``tool_use_id``. Tool schemas go as ``input_schema`` unchanged: the API takes JSON Schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck.messages import Message, ToolSpec
from tooldeck.models._provider import spec_param
from tooldeck.models._turns import ToolResults, call_id, grouped, is_failure
from tooldeck.models.base import Ask, ModelSettings, NativeToolSearch

REPLAYED_BLOCK_TYPES = frozenset({"thinking", "redacted_thinking", "tool_search_tool_result"})
"""Assistant blocks sent back as they came: thinking (the API checks their signatures) and
the results of Anthropic's own tool search (their ``tool_reference`` blocks load the tools
found), with the ``server_tool_use`` blocks of ``SEARCH_TOOL_NAMES``.

Other blocks tooldeck does not read (other server tools' use and results) stay in the
assistant message's ``provider_items`` for the host and are not sent back."""

SEARCH_TOOL_NAMES = {"bm25": "tool_search_tool_bm25", "regex": "tool_search_tool_regex"}
"""Anthropic's tool search tools by ``NativeToolSearch.strategy``; the type adds its date."""

NAMED_PARAMETERS = frozenset({"model", "max_tokens", "messages", "system", "tools", "tool_choice"})
"""Body fields passed to ``messages.create`` by name; any other (``temperature``, the
``request_options``) goes in ``extra_body``, which the SDK merges into the same body."""


@dataclass(frozen=True, slots=True)
class RequestParts:
    """What goes into one ``messages.create`` call besides the conversation."""

    model: str
    max_tokens: int
    """Sent when ``ModelSettings.max_tokens`` is not set: the API requires the field."""
    extra: Mapping[str, Any] | None = None


def build_request(parts: RequestParts, ask: Ask) -> dict[str, Any]:
    """The JSON body of a ``messages.create`` call."""
    request: dict[str, Any] = {
        "model": parts.model,
        "max_tokens": ask.settings.max_tokens or parts.max_tokens,
        "messages": wire_messages(ask.messages),
    }
    if ask.instructions:
        request["system"] = ask.instructions
    if ask.tools:
        request["tools"] = tool_params(ask.tools, ask.settings.tool_search)
        request["tool_choice"] = tool_choice(ask.settings)
    if ask.settings.temperature is not None:
        request["temperature"] = ask.settings.temperature
    request.update(parts.extra or {})
    return request


def split_request(request: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body as ``create()`` takes it: named parameters, and the rest for ``extra_body``."""
    named = {key: value for key, value in request.items() if key in NAMED_PARAMETERS}
    extra = {key: value for key, value in request.items() if key not in NAMED_PARAMETERS}
    return named, extra


def tool_params(tools: Sequence[ToolSpec], search: NativeToolSearch | None) -> list[dict[str, Any]]:
    """The request's tools; with a ``NativeToolSearch`` whose local tool is among them,
    Anthropic's tool search tool in its place and the deferred tools after the rest, each
    with ``defer_loading: true`` (the API searches them and loads those it finds)."""
    if search is None or all(spec.name != search.local_tool for spec in tools):
        return [tool_param(spec) for spec in tools]
    name = SEARCH_TOOL_NAMES[search.strategy]
    native = {"type": f"{name}_20251119", "name": name}
    params = [native if spec.name == search.local_tool else tool_param(spec) for spec in tools]
    params.extend({**tool_param(spec), "defer_loading": True} for spec in search.deferred)
    return params


def tool_param(spec: ToolSpec) -> dict[str, Any]:
    """A ToolSpec as a Messages API tool: name, description, ``input_schema``."""
    return spec_param(spec, "input_schema")


def tool_choice(settings: ModelSettings) -> dict[str, Any]:
    """``auto`` / ``any`` / ``none`` / one ``tool``; ``parallel_tool_calls=False`` as
    ``disable_parallel_tool_use``."""
    choice = settings.tool_choice
    if choice == "none":
        return {"type": "none"}
    if choice == "auto":
        wire: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        wire = {"type": "any"}
    else:
        wire = {"type": "tool", "name": choice}
    if settings.parallel_tool_calls is False:
        wire["disable_parallel_tool_use"] = True
    return wire


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Messages API messages; an assistant turn with nothing is left out."""
    wire: list[dict[str, Any]] = []
    for turn in grouped(messages):
        if isinstance(turn, ToolResults):
            wire.append({"role": "user", "content": [tool_result(m) for m in turn.messages]})
        elif turn.role == "user":
            wire.append({"role": "user", "content": turn.content})
        else:
            blocks = assistant_blocks(turn)
            if blocks:
                wire.append({"role": "assistant", "content": blocks})
    return wire


def assistant_blocks(message: Message) -> list[dict[str, Any]]:
    """Thinking blocks as they came, then the text, then the calls.

    A call whose arguments were not a JSON object goes back with ``input: {}`` (the API
    takes only objects); the tool result after it tells the model what was wrong.
    """
    blocks = [dict(item) for item in message.provider_items if _replayed(item)]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.arguments if call.raw_arguments is None else {},
        }
        for call in message.tool_calls
    )
    return blocks


def _replayed(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "server_tool_use":
        return block.get("name") in SEARCH_TOOL_NAMES.values()
    return kind in REPLAYED_BLOCK_TYPES


def tool_result(message: Message) -> dict[str, Any]:
    """One tool message as a ``tool_result`` block; a failure is flagged ``is_error``."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id(message)}
    if message.content:
        block["content"] = message.content
    if is_failure(message):
        block["is_error"] = True
    return block
