"""The Anthropic Messages wire format, coming out: a Message or its event stream -> AssistantOutput.

Only this module knows how the Messages API spells an answer: ``text`` and ``tool_use``
blocks, thinking blocks (kept, with their signatures, for the next request), the
``stop_reason`` and ``usage``. A streamed message is assembled block by block into the
same turn a whole Message gives.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldeck.contracts import AssistantOutput, ToolCall, Usage
from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused, ModelRequestFailed

if TYPE_CHECKING:
    from anthropic.types import (
        Message,
        MessageDeltaUsage,
        RawContentBlockDelta,
        RawMessageStreamEvent,
    )
    from anthropic.types import Usage as AnthropicUsage

_FINISHED = frozenset({"end_turn", "tool_use", "stop_sequence"})
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
        raise ModelRequestFailed(f"{model}: the response is not a Message: {message!r:.200}")
    turn = MessageTurn(stop_reason=message.stop_reason, usage=_usage(message.usage))
    if message.stop_details is not None:
        turn.refusal = message.stop_details.explanation or ""
    for block in message.content:
        if block.type == "text":
            turn.text.append(block.text)
        elif block.type == "tool_use":
            turn.add_call(block.id, block.name, block.input)
        else:
            turn.kept.append(block.to_dict(mode="json"))
    return turn


@dataclass(slots=True)
class _StreamedBlock:
    """One content block being streamed: its start, then the pieces its deltas carry."""

    start: dict[str, Any]
    pieces: dict[str, list[str]] = field(default_factory=dict)

    def add(self, delta: RawContentBlockDelta) -> None:
        if delta.type == "text_delta":
            self.pieces.setdefault("text", []).append(delta.text)
        elif delta.type == "input_json_delta":
            self.pieces.setdefault("input", []).append(delta.partial_json)
        elif delta.type == "thinking_delta":
            self.pieces.setdefault("thinking", []).append(delta.thinking)
        elif delta.type == "signature_delta":
            self.pieces.setdefault("signature", []).append(delta.signature)

    def finish(self, turn: MessageTurn) -> None:
        block = dict(self.start)
        for key, pieces in self.pieces.items():
            start = "" if key == "input" else str(block.get(key) or "")
            block[key] = start + "".join(pieces)
        if block["type"] == "text":
            turn.text.append(block["text"])
        elif block["type"] == "tool_use":
            turn.add_call(block["id"], block["name"], block.get("input"))
        else:
            turn.kept.append(block)


async def turn_from_stream(events: AsyncIterator[RawMessageStreamEvent]) -> MessageTurn:
    """Assemble ``message_start``, the content block events and ``message_delta``.

    A tool's input arrives as JSON fragments and is parsed whole at the end, so input
    that does not parse reaches the loop as the model's raw text.
    """
    turn = MessageTurn()
    blocks: dict[int, _StreamedBlock] = {}
    input_tokens = 0
    async for event in events:
        if event.type == "message_start":
            turn.usage = _usage(event.message.usage)
            input_tokens = turn.usage.input_tokens
        elif event.type == "content_block_start":
            blocks[event.index] = _StreamedBlock(event.content_block.to_dict(mode="json"))
        elif event.type == "content_block_delta":
            blocks[event.index].add(event.delta)
        elif event.type == "message_delta":
            turn.stop_reason = event.delta.stop_reason or turn.stop_reason
            if event.delta.stop_details is not None:
                turn.refusal = event.delta.stop_details.explanation or ""
            turn.usage = _delta_usage(event.usage, input_tokens)
    for index in sorted(blocks):
        blocks[index].finish(turn)
    return turn


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
            "not handle (pause_turn comes from server tools, which AnthropicModel does not run)"
        )
    return AssistantOutput(
        content=content,
        tool_calls=tuple(turn.calls),
        usage=turn.usage,
        provider_items=tuple(turn.kept),
    )


def _usage(usage: AnthropicUsage) -> Usage:
    """Input counts cached tokens too: the API reports them apart from ``input_tokens``."""
    cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return Usage(input_tokens=usage.input_tokens + cached, output_tokens=usage.output_tokens)


def _delta_usage(usage: MessageDeltaUsage, input_tokens: int) -> Usage:
    """``message_delta`` carries cumulative counts; input only when it changed."""
    if usage.input_tokens is not None:
        cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        input_tokens = usage.input_tokens + cached
    return Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens)
