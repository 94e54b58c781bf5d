"""The Chat Completions wire format: Messages and ToolSpecs in, AssistantOutput out.

Only this module knows how Chat Completions spells a conversation: a leading system (or
developer) message, assistant ``tool_calls`` and ``tool`` messages paired by
``tool_call_id``, and ``finish_reason``. It serves OpenAI, Azure OpenAI and any
OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolSpec, Usage
from tooldeck.models._provider import spec_param
from tooldeck.models.base import Ask, TextChunk, ToolCallChunk

if TYPE_CHECKING:
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

InstructionsRole = Literal["system", "developer"]
MaxTokensParam = Literal["max_completion_tokens", "max_tokens"]


@dataclass(frozen=True, slots=True)
class RequestParts:
    """What goes into one ``chat.completions.create`` call besides the conversation."""

    model: str
    instructions_role: InstructionsRole = "system"
    max_tokens_param: MaxTokensParam = "max_completion_tokens"
    extra: Mapping[str, Any] | None = None


def build_request(parts: RequestParts, ask: Ask) -> dict[str, Any]:
    """The JSON body of a ``chat.completions.create`` call."""
    wire: list[dict[str, Any]] = []
    if ask.instructions:
        wire.append({"role": parts.instructions_role, "content": ask.instructions})
    wire.extend(chat_message(message) for message in ask.messages)
    request: dict[str, Any] = {"model": parts.model, "messages": wire}
    if ask.tools:
        request["tools"] = [function_tool(spec) for spec in ask.tools]
        request["tool_choice"] = tool_choice(ask.settings.tool_choice)
        if ask.settings.parallel_tool_calls is not None:
            request["parallel_tool_calls"] = ask.settings.parallel_tool_calls
    if ask.settings.temperature is not None:
        request["temperature"] = ask.settings.temperature
    if ask.settings.max_tokens is not None:
        request[parts.max_tokens_param] = ask.settings.max_tokens
    if ask.settings.output_schema is not None:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": json_schema_format(ask.settings.output_schema),
        }
    request.update(parts.extra or {})
    return request


def json_schema_format(spec: ToolSpec) -> dict[str, Any]:
    """A typed answer's schema as both APIs' ``json_schema`` format names it."""
    return {**spec_param(spec, "schema"), "strict": spec.strict}


def function_tool(spec: ToolSpec) -> dict[str, Any]:
    """A ToolSpec as a Chat Completions function tool, ``strict`` set when the schema is strict."""
    function = spec_param(spec, "parameters")
    if spec.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def chat_message(message: Message) -> dict[str, Any]:
    """One Message as a Chat Completions message; bad arguments go back as the model wrote them."""
    if message.role == "user":
        return {"role": "user", "content": message.content}
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ValueError(f"a tool message has no tool_call_id: {message.content[:60]!r}")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    # Content stays a string even when empty: llama.cpp's server refuses null here.
    return {
        "role": "assistant",
        "content": message.content,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in message.tool_calls
        ],
    }


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChatTurn:
    """One choice of a completion, streamed or not, before it becomes an AssistantOutput."""

    content: str = ""
    refusal: str = ""
    calls: list[_PendingCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls of kinds other than ``function``, as plain JSON."""


def turn_from_completion(model: str, completion: ChatCompletion) -> ChatTurn:
    if not completion.choices:
        raise ModelError(f"{model}: the completion has no choices")
    choice = completion.choices[0]
    message = choice.message
    turn = ChatTurn(
        content=message.content or "",
        refusal=message.refusal or "",
        finish_reason=choice.finish_reason,
        usage=_usage(completion.usage),
    )
    for call in message.tool_calls or ():
        if call.type == "function":
            turn.calls.append(_PendingCall(call.id, call.function.name, [call.function.arguments]))
        else:
            turn.kept.append(call.to_dict(mode="json"))
    return turn


class ChunkAssembler:
    """Assembles streamed chunks into a ChatTurn, and tells what each chunk added.

    Text and refusal deltas are joined; call fragments are gathered by their index; the
    usage chunk and the finish reason are kept.
    """

    def __init__(self) -> None:
        self._turn = ChatTurn()
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self.chunks = 0
        """Chunks received so far."""

    def add(self, chunk: ChatCompletionChunk) -> list[TextChunk | ToolCallChunk]:
        """Take one chunk; return the text and call pieces it carried."""
        self.chunks += 1
        added: list[TextChunk | ToolCallChunk] = []
        if chunk.usage is not None:
            self._turn.usage = _usage(chunk.usage)
        for choice in chunk.choices[:1] if chunk.choices else ():
            delta = choice.delta
            if delta.content:
                self._content.append(delta.content)
                added.append(TextChunk(delta.content))
            if delta.refusal:
                self._refusal.append(delta.refusal)
            for fragment in delta.tool_calls or ():
                added.append(self._add_fragment(fragment))
            self._turn.finish_reason = choice.finish_reason or self._turn.finish_reason
        return added

    def _add_fragment(self, fragment: ChoiceDeltaToolCall) -> ToolCallChunk:
        pending = self._calls.setdefault(fragment.index, _PendingCall())
        pending.id = pending.id or fragment.id or ""
        piece = ""
        if fragment.function is not None:
            # The first name wins: some servers repeat the whole name in every chunk.
            pending.name = pending.name or fragment.function.name or ""
            piece = fragment.function.arguments or ""
            pending.arguments.append(piece)
        return ToolCallChunk(fragment.index, pending.id, pending.name, piece)

    def turn(self) -> ChatTurn:
        """The turn the chunks so far make up."""
        turn = self._turn
        turn.content = "".join(self._content)
        turn.refusal = "".join(self._refusal)
        turn.calls = [self._calls[index] for index in sorted(self._calls)]
        return turn


def to_output(model: str, turn: ChatTurn) -> AssistantOutput:
    """The AssistantOutput of a turn; a refusal, filter stop or truncation raises a ModelError."""
    if turn.refusal:
        raise ModelRefused(f"{model}: the model refused: {turn.refusal!r}", turn.refusal)
    if turn.finish_reason == "content_filter":
        raise ModelRefused(f"{model}: the provider's content filter stopped the response")
    if turn.finish_reason == "length":
        raise ModelOutputTruncated(
            f"{model}: the response hit the token limit (finish_reason 'length') after "
            f"{len(turn.content)} characters; raise ModelSettings.max_tokens or shorten the task",
            turn.content,
        )
    calls = tuple(
        ToolCall.from_json(call.id or f"call_{index}", call.name, "".join(call.arguments))
        for index, call in enumerate(turn.calls)
    )
    return AssistantOutput(
        content=turn.content, tool_calls=calls, usage=turn.usage, provider_items=tuple(turn.kept)
    )


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
