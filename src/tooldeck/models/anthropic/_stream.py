"""The Anthropic Messages event stream, read as it arrives: chunks while written, then the turn.

``message_start`` opens the message (with its usage so far), ``content_block_start`` /
``_delta`` / ``_stop`` write each block, ``message_delta`` carries the stop reason and the
cumulative usage, and ``message_stop`` closes it. Text and tool input come out as chunks
while they arrive; thinking blocks are assembled (text and signature) into the same turn a
whole Message gives, without chunks (there is no delta event for them). A stream that ends
without ``message_stop`` was cut short, and is an error rather than a shorter answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelError
from tooldeck.messages import Usage
from tooldeck.models.anthropic._response import MessageTurn
from tooldeck.models.base import TextChunk, ToolCallChunk

if TYPE_CHECKING:
    from anthropic.types import MessageDeltaUsage, RawContentBlockDelta, RawMessageStreamEvent
    from anthropic.types import Usage as AnthropicUsage

Chunk = TextChunk | ToolCallChunk


@dataclass(slots=True)
class _Block:
    """One content block being written: its start, then the pieces its deltas carry."""

    start: dict[str, Any]
    call_index: int | None
    """Its place among the turn's calls, for a ``tool_use`` block."""
    pieces: dict[str, list[str]] = field(default_factory=dict)
    signature: str | None = None

    def add(self, delta: RawContentBlockDelta) -> str:
        """Take a delta in; returns the text it adds to a text block or a call's input."""
        if delta.type == "text_delta":
            self.pieces.setdefault("text", []).append(delta.text)
            return delta.text
        if delta.type == "input_json_delta":
            self.pieces.setdefault("input", []).append(delta.partial_json)
            return delta.partial_json
        if delta.type == "thinking_delta":
            self.pieces.setdefault("thinking", []).append(delta.thinking)
        elif delta.type == "signature_delta":
            self.signature = delta.signature  # the whole signature, as the SDK reads it
        return ""

    def finish(self, turn: MessageTurn) -> None:
        block = dict(self.start)
        for key, pieces in self.pieces.items():
            opening = "" if key == "input" else str(block.get(key) or "")
            block[key] = opening + "".join(pieces)
        if self.signature is not None:
            block["signature"] = self.signature
        given = block.get("input")
        parsed = {**block, "input": _parsed_input(given)} if isinstance(given, str) else block
        turn.blocks.append(parsed)  # as a Message has it
        if block["type"] not in ("text", "tool_use"):
            block = parsed
        if block["type"] == "text":
            turn.text.append(block["text"])
        elif block["type"] == "tool_use":
            turn.add_call(block["id"], block["name"], block["input"])
        else:
            turn.kept.append(block)


def _parsed_input(text: str) -> object:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(slots=True)
class _UsageCounts:
    """The counts so far: ``message_start`` sets them, each ``message_delta`` overwrites the
    ones it carries (its counts are cumulative, and the ones it leaves out still stand)."""

    input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0

    def start(self, usage: AnthropicUsage) -> None:
        self.input = usage.input_tokens
        self.cache_creation = usage.cache_creation_input_tokens or 0
        self.cache_read = usage.cache_read_input_tokens or 0
        self.output = usage.output_tokens

    def update(self, usage: MessageDeltaUsage) -> None:
        self.output = usage.output_tokens
        if usage.input_tokens is not None:
            self.input = usage.input_tokens
        if usage.cache_creation_input_tokens is not None:
            self.cache_creation = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens

    def total(self) -> Usage:
        """Input counts cached tokens too, as for a whole Message."""
        cached = self.cache_creation + self.cache_read
        return Usage(input_tokens=self.input + cached, output_tokens=self.output)


class EventReader:
    """Reads the events of one message: ``add()`` each, then ``turn()``."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._blocks: dict[int, _Block] = {}
        self._calls = 0
        self._usage: _UsageCounts | None = None
        self._turn = MessageTurn()
        self._stopped = False

    def add(self, event: RawMessageStreamEvent) -> Chunk | None:
        """Take one event in; returns the text or call piece it carries, if any."""
        if event.type == "content_block_start":
            return self._start(event.index, event.content_block.to_dict(mode="json"))
        if event.type == "content_block_delta":
            return self._write(event.index, event.delta)
        if event.type == "message_start":
            self._usage = _UsageCounts()
            self._usage.start(event.message.usage)
        elif event.type == "message_delta":
            self._turn.stop_reason = event.delta.stop_reason or self._turn.stop_reason
            if event.delta.stop_details is not None:
                self._turn.refusal = event.delta.stop_details.explanation or ""
            if self._usage is not None:
                self._usage.update(event.usage)
        elif event.type == "message_stop":
            self._stopped = True
        return None

    def _start(self, index: int, start: dict[str, Any]) -> Chunk | None:
        if start["type"] == "tool_use":
            call_index = self._calls
            self._calls += 1
            self._blocks[index] = _Block(start, call_index)
            return ToolCallChunk(call_index, start["id"], start["name"], "")
        self._blocks[index] = _Block(start, None)
        opening = start.get("text") if start["type"] == "text" else None
        return TextChunk(opening) if opening else None

    def _write(self, index: int, delta: RawContentBlockDelta) -> Chunk | None:
        block = self._blocks.get(index)
        if block is None:
            raise ModelError(
                f"{self._model}: the stream sent a delta for content block {index}, which it "
                "never started"
            )
        written = block.add(delta)
        if not written:
            return None
        if block.call_index is None:
            return TextChunk(written) if block.start["type"] == "text" else None
        return ToolCallChunk(block.call_index, block.start["id"], block.start["name"], written)

    def turn(self) -> MessageTurn:
        """The whole message; an error if the stream ended before ``message_stop``."""
        if not self._stopped:
            raise ModelError(f"{self._model}: the stream ended before the response was complete")
        for index in sorted(self._blocks):
            self._blocks[index].finish(self._turn)
        self._turn.usage = self._usage.total() if self._usage is not None else None
        return self._turn
