"""The Gemini API wire format, coming out: a response or its chunks -> AssistantOutput.

Only this module knows how Gemini spells an answer: the first candidate's parts (text,
``functionCall``, thought parts, thought signatures), its ``finishReason``, the prompt's
``blockReason`` and ``usageMetadata``. A streamed response is assembled chunk by chunk
into the same turn (each chunk's answer text and calls handed back as they come: Gemini
sends a call whole, never its arguments piece by piece); adjacent plain text pieces are
joined, and a part that carries a thought signature is never merged with another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused
from tooldeck.messages import AssistantOutput, ToolCall, Usage
from tooldeck.models.base import TextChunk, ToolCallChunk
from tooldeck.models.gemini._request import PARTS_ITEM

if TYPE_CHECKING:
    from google.genai.types import (
        GenerateContentResponse,
        GenerateContentResponseUsageMetadata,
        Part,
    )

_FINISHED = frozenset({"STOP", "FINISH_REASON_UNSPECIFIED"})
_REFUSED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
_MERGEABLE_KEYS = frozenset({"text", "thought"})

StreamChunk = TextChunk | ToolCallChunk


@dataclass(slots=True)
class GeminiTurn:
    """One answer, streamed or not, before it becomes an AssistantOutput."""

    id_prefix: str
    """Ids for calls the API sent without one: ``<prefix><index in the turn>``."""
    received: list[tuple[Part, str | None]] = field(default_factory=list)
    """Every part in order, with the id of its call (filled in when the API sent none)."""
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    verbatim: bool = False
    """A part must go back exactly as it came: a thought, a signature, another kind."""
    chunks_read: int = 0
    """Responses taken in: one for ``generateContent``, one per chunk of a stream."""
    answered: bool = False
    """A candidate came (a response can have none: a blocked prompt, a broken gateway)."""
    finish_reason: str | None = None
    finish_message: str = ""
    block_reason: str | None = None
    block_message: str = ""
    usage: Usage | None = None

    def add(self, part: Part) -> StreamChunk | None:
        """Take one part in; returns it as a chunk when it is answer text or a call."""
        call = part.function_call
        id = None
        chunk: StreamChunk | None = None
        if call is not None:
            id = call.id or f"{self.id_prefix}{len(self.calls)}"
            made = ToolCall(id=id, name=call.name or "", arguments=call.args or {})
            chunk = ToolCallChunk(len(self.calls), id, made.name, made.arguments_json)
            self.calls.append(made)
        elif part.text is not None and not part.thought:
            self.text.append(part.text)
            chunk = TextChunk(part.text) if part.text else None
        if part.thought or part.thought_signature or (call is None and part.text is None):
            self.verbatim = True
        self.received.append((part, id))
        return chunk

    def kept_parts(self) -> list[dict[str, Any]]:
        """The parts as the API's JSON, call ids filled in, adjacent plain text joined."""
        kept: list[dict[str, Any]] = []
        for part, id in self.received:
            data = part.model_dump(mode="json", by_alias=True, exclude_none=True)
            if id is not None:
                data["functionCall"]["id"] = id
            if data == {"text": ""}:
                continue
            last = kept[-1] if kept else None
            plain = data.keys() <= _MERGEABLE_KEYS and "text" in data
            if plain and last is not None and _same_kind(last, data):
                last["text"] += data["text"]
            else:
                kept.append(data)
        return kept

    def read(self, response: GenerateContentResponse) -> list[StreamChunk]:
        """Take in one response (or one chunk of a stream); returns its text and calls."""
        self.chunks_read += 1
        if response.usage_metadata is not None:
            self.usage = _usage(response.usage_metadata)
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.block_reason = feedback.block_reason.value
            self.block_message = feedback.block_reason_message or ""
        if not response.candidates:
            return []
        self.answered = True
        candidate = response.candidates[0]
        if candidate.finish_reason is not None:
            self.finish_reason = candidate.finish_reason.value
            self.finish_message = candidate.finish_message or ""
        parts = candidate.content.parts if candidate.content is not None else None
        chunks = (self.add(part) for part in parts or ())
        return [chunk for chunk in chunks if chunk is not None]


def _same_kind(last: dict[str, Any], part: dict[str, Any]) -> bool:
    """Two plain text parts that can be one: the same fields, both thoughts or neither."""
    return last.keys() == part.keys() and last.get("thought") == part.get("thought")


def turn_from_response(response: GenerateContentResponse, id_prefix: str) -> GeminiTurn:
    turn = GeminiTurn(id_prefix)
    turn.read(response)
    return turn


def check_stream_ended(model: str, turn: GeminiTurn) -> None:
    """A stream's last chunk carries the finish reason; without it the stream was cut short."""
    if turn.answered and turn.finish_reason is None and turn.block_reason is None:
        raise ModelError(f"{model}: the stream ended before the response was complete")


def to_output(model: str, turn: GeminiTurn, callable_names: Sequence[str]) -> AssistantOutput:
    """The AssistantOutput of a turn; a block, refusal or truncation raises a ModelError.

    A malformed function call (``MALFORMED_FUNCTION_CALL``) of the one function the request
    allowed becomes a call with raw (unparsable) arguments, so the loop answers it with
    ``invalid_json`` and the model tries again.
    """
    content = "".join(turn.text)
    reason = turn.finish_reason
    if turn.block_reason is not None and reason is None:
        explained = f": {turn.block_message}" if turn.block_message else ""
        raise ModelRefused(
            f"{model}: the prompt was blocked (blockReason {turn.block_reason!r}){explained}",
            turn.block_message,
        )
    if not turn.answered:
        raise ModelError(f"{model}: the response has no candidate and no block reason")
    if reason == "MALFORMED_FUNCTION_CALL":
        return _malformed_call(model, turn, callable_names)
    _check_finish(model, turn, content)
    items = ({"type": PARTS_ITEM, "parts": turn.kept_parts()},) if turn.verbatim else ()
    return AssistantOutput(
        content=content, tool_calls=tuple(turn.calls), usage=turn.usage, provider_items=items
    )


def _check_finish(model: str, turn: GeminiTurn, content: str) -> None:
    reason = turn.finish_reason
    if reason is None or reason in _FINISHED:
        return
    explained = f": {turn.finish_message}" if turn.finish_message else ""
    if reason == "MAX_TOKENS":
        raise ModelOutputTruncated(
            f"{model}: the response hit the token limit (finishReason 'MAX_TOKENS') after "
            f"{len(content)} characters; raise ModelSettings.max_tokens or shorten the task",
            content,
        )
    if reason in _REFUSED:
        raise ModelRefused(
            f"{model}: the provider stopped the response (finishReason {reason!r}){explained}",
            turn.finish_message,
        )
    raise ModelError(f"{model}: the response stopped with finishReason {reason!r}{explained}")


def _malformed_call(model: str, turn: GeminiTurn, callable_names: Sequence[str]) -> AssistantOutput:
    """The call Gemini could not parse, when the request allowed only one function.

    Gemini does not say which function the broken call was for (the Gemini API does not
    even return ``finishMessage``), so with several to choose from the turn is an error.
    """
    if len(callable_names) != 1:
        said = f": {turn.finish_message}" if turn.finish_message else ""
        raise ModelError(
            f"{model}: the model wrote a malformed function call (finishReason "
            f"'MALFORMED_FUNCTION_CALL'){said}; with {len(callable_names)} functions allowed "
            "Gemini does not say which one it meant (ask again, or force one with tool_choice)"
        )
    id = f"{turn.id_prefix}{len(turn.calls)}"
    call = ToolCall(id=id, name=callable_names[0], raw_arguments=turn.finish_message)
    return AssistantOutput(
        content="".join(turn.text), tool_calls=(*turn.calls, call), usage=turn.usage
    )


def _usage(usage: GenerateContentResponseUsageMetadata) -> Usage:
    """Input counts tool-use prompt tokens; output counts thinking tokens (both are billed)."""
    prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return Usage(input_tokens=prompt, output_tokens=output)
