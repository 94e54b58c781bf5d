"""Chat Completions bodies, built from the ``openai`` SDK's own types: a ``ChatCompletion``,
or the ``ChatCompletionChunk`` events of a stream (text and argument deltas split over
several chunks, the usage chunk when ``stream_options.include_usage`` asks for it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageToolCallUnion,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
from openai.types.chat.chat_completion_chunk import (
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.chat.chat_completion_message import ChatCompletionMessage
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

from tooldeck.testing._answer import Planned, argument_pieces, text_pieces

JSON = dict[str, Any]


def usage(planned: Planned) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=planned.input_tokens,
        completion_tokens=planned.output_tokens,
        total_tokens=planned.input_tokens + planned.output_tokens,
    )


def completion(planned: Planned) -> JSON:
    """The whole response to a request that does not stream."""
    calls: list[ChatCompletionMessageToolCallUnion] = [
        ChatCompletionMessageFunctionToolCall(
            id=call.id, type="function", function=Function(name=call.name, arguments=call.arguments)
        )
        for call in planned.calls
    ]
    message = ChatCompletionMessage(
        role="assistant",
        content=planned.text or (None if calls else ""),
        refusal=None,
        tool_calls=calls or None,
    )
    body = ChatCompletion(
        id=planned.id,
        object="chat.completion",
        created=planned.created,
        model=planned.model,
        choices=[Choice(index=0, message=message, finish_reason=_finish(planned), logprobs=None)],
        usage=usage(planned),
        system_fingerprint="fp_tooldeck_sim",
    )
    return body.model_dump(mode="json", exclude_unset=True)


def _finish(planned: Planned) -> Literal["tool_calls", "stop"]:
    return "tool_calls" if planned.calls else "stop"


def chunks(planned: Planned, body: Mapping[str, Any]) -> list[JSON]:
    """The stream's chunks, in order (the ``[DONE]`` line is the server's to add)."""
    options = body.get("stream_options")
    with_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    deltas = [ChoiceDelta(role="assistant", content="", refusal=None)]
    deltas += [ChoiceDelta(content=piece) for piece in text_pieces(planned.text)]
    for index, call in enumerate(planned.calls):
        pieces = argument_pieces(call.arguments) or [""]
        first = ChoiceDeltaToolCallFunction(name=call.name, arguments="")
        deltas.append(_call_delta(index, first, call.id))
        deltas += [
            _call_delta(index, ChoiceDeltaToolCallFunction(arguments=piece)) for piece in pieces
        ]
    made = [_chunk(planned, delta, None, with_usage) for delta in deltas]
    made.append(_chunk(planned, ChoiceDelta(), _finish(planned), with_usage))
    if with_usage:
        last = ChatCompletionChunk(
            id=planned.id,
            object="chat.completion.chunk",
            created=planned.created,
            model=planned.model,
            choices=[],
            usage=usage(planned),
            system_fingerprint="fp_tooldeck_sim",
        )
        made.append(last.model_dump(mode="json", exclude_unset=True))
    return made


def _call_delta(
    index: int, function: ChoiceDeltaToolCallFunction, call_id: str | None = None
) -> ChoiceDelta:
    if call_id is None:
        call = ChoiceDeltaToolCall(index=index, function=function)
    else:
        call = ChoiceDeltaToolCall(index=index, id=call_id, type="function", function=function)
    return ChoiceDelta(tool_calls=[call])


def _chunk(
    planned: Planned,
    delta: ChoiceDelta,
    finish: Literal["tool_calls", "stop"] | None,
    with_usage: bool,
) -> JSON:
    chunk = ChatCompletionChunk(
        id=planned.id,
        object="chat.completion.chunk",
        created=planned.created,
        model=planned.model,
        choices=[ChunkChoice(index=0, delta=delta, finish_reason=finish, logprobs=None)],
        system_fingerprint="fp_tooldeck_sim",
    )
    if with_usage:
        chunk.usage = None  # the API sends "usage": null on every chunk but the last
    return chunk.model_dump(mode="json", exclude_unset=True)
