"""The Anthropic Messages wire format, coming out: a Message (or a streamed one) -> AssistantOutput.

Only this module and ``_stream`` know how the Messages API spells an answer:
``text`` and ``tool_use`` blocks, thinking blocks (kept, with their signatures, for the next
request), the ``stop_reason`` and ``usage``. ``_stream`` assembles a streamed
message into the same MessageTurn a whole Message gives; ``to_output`` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused, ProviderError
from tooldeck.messages import AssistantOutput, ToolCall, Usage

if TYPE_CHECKING:
    from anthropic.types import Message
    from anthropic.types import Usage as AnthropicUsage

_FINISHED = frozenset({"end_turn", "tool_use", "stop_sequence"})
PAUSED = "pause_turn"
"""The API paused a long server-tool loop (its own tool search, here): the turn goes on
when its content so far is sent back as the conversation's last assistant message."""
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


@dataclass(slots=True)
class MessageTurn:
    """One answer, streamed or not, before it becomes an AssistantOutput."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Blocks other than text and tool_use (thinking, server tools), as the API's JSON."""
    stop_reason: str | None = None
    refusal: str = ""
    """The refusal's explanation (``stop_details``), when the API gave one."""
    usage: Usage | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """Every content block as the API's JSON, in order (what a paused turn sends back)."""

    def add_call(self, id: str, name: str, given: object) -> None:
        """A ``tool_use`` block; input that is not a JSON object is kept as raw text."""
        if isinstance(given, dict):
            self.calls.append(ToolCall(id=id, name=name, arguments=given))
        elif isinstance(given, str):
            self.calls.append(ToolCall.from_json(id, name, given))
        else:
            self.calls.append(ToolCall(id=id, name=name, raw_arguments=json.dumps(given)))


def turn_from_message(model: str, message: Message) -> MessageTurn:
    """A whole Message; anything else in its place (a gateway's page) is a request failure."""
    from anthropic.types import Message as MessageType

    if not isinstance(message, MessageType):
        raise ProviderError(f"{model}: the response is not a Message: {message!r:.200}")
    turn = MessageTurn(stop_reason=message.stop_reason, usage=_usage(message.usage))
    if message.stop_details is not None:
        turn.refusal = message.stop_details.explanation or ""
    for block in message.content:
        turn.blocks.append(block.to_dict(mode="json"))
        if block.type == "text":
            turn.text.append(block.text)
        elif block.type == "tool_use":
            turn.add_call(block.id, block.name, block.input)
        else:
            turn.kept.append(block.to_dict(mode="json"))
    return turn


def joined(turns: Sequence[MessageTurn]) -> MessageTurn:
    """One turn of a paused turn's parts, in order: their text, calls and kept blocks one
    after another, their usage added up, the last one's stop reason."""
    whole = MessageTurn(stop_reason=turns[-1].stop_reason, refusal=turns[-1].refusal)
    for turn in turns:
        whole.text += turn.text
        whole.calls += turn.calls
        whole.kept += turn.kept
        if turn.usage is not None:
            whole.usage = turn.usage if whole.usage is None else whole.usage + turn.usage
    return whole


def continued(request: dict[str, Any], paused: Sequence[MessageTurn]) -> dict[str, Any]:
    """``request`` asking a paused turn to go on: the content so far, every block as it
    came, as the last message (Anthropic: "send the assistant content back to continue")."""
    if not paused:
        return request
    so_far = {"role": "assistant", "content": [block for turn in paused for block in turn.blocks]}
    return {**request, "messages": [*request["messages"], so_far]}


def to_output(model: str, turn: MessageTurn) -> AssistantOutput:
    """The AssistantOutput of a turn; a refusal or truncation raises a ModelError."""
    content = "".join(turn.text)
    reason = turn.stop_reason
    if reason == "refusal":
        refusal = turn.refusal or content
        raise ModelRefused(
            f"{model}: the model refused (stop_reason 'refusal'): {refusal!r}", refusal
        )
    if reason in _TRUNCATED:
        raise ModelOutputTruncated(
            f"{model}: the response stopped early (stop_reason {reason!r}) after "
            f"{len(content)} characters; raise ModelSettings.max_tokens or shorten the task",
            content,
        )
    if reason is not None and reason not in _FINISHED:
        raise ModelError(
            f"{model}: the response stopped with stop_reason {reason!r}, which tooldeck does "
            "not handle"
        )
    return AssistantOutput(
        content=content,
        tool_calls=tuple(turn.calls),
        usage=turn.usage,
        provider_items=tuple(turn.kept),
    )


def revealed_tools(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tools Anthropic's own tool search found in a turn (its ``provider_items``): the
    ``tool_name`` of each ``tool_reference`` of each ``tool_search_tool_result``, in order."""
    names: list[str] = []
    for item in items:
        content = item.get("content") if item.get("type") == "tool_search_tool_result" else None
        if isinstance(content, Mapping) and content.get("type") == "tool_search_tool_search_result":
            references = content.get("tool_references")
            for reference in references if isinstance(references, list) else ():
                name = reference.get("tool_name") if isinstance(reference, Mapping) else None
                if isinstance(name, str):
                    names.append(name)
    return names


def _usage(usage: AnthropicUsage) -> Usage:
    """Input counts cached tokens too: the API reports them apart from ``input_tokens``."""
    cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return Usage(input_tokens=usage.input_tokens + cached, output_tokens=usage.output_tokens)
