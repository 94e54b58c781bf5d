"""Responses API bodies, built from the ``openai`` SDK's own types: a ``Response``, or the
events of a stream (``response.created`` ... text and argument deltas ...
``response.completed``), each with its ``sequence_number``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from openai.types.responses import (
    FunctionTool,
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
    Tool,
)
from openai.types.responses.response import ToolChoice
from openai.types.responses.response_output_message import Content
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel, TypeAdapter, ValidationError

from tooldeck.testing._answer import Planned, PlannedCall, argument_pieces, text_pieces

JSON = dict[str, Any]


def _message(planned: Planned, done: bool) -> ResponseOutputMessage:
    parts: list[Content] = [
        ResponseOutputText(type="output_text", text=planned.text, annotations=[])
    ]
    return ResponseOutputMessage(
        id=planned.message_id,
        type="message",
        role="assistant",
        status="completed" if done else "in_progress",
        content=parts if done else [],
    )


def _call(call: PlannedCall, done: bool) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=call.item_id,
        type="function_call",
        call_id=call.id,
        name=call.name,
        arguments=call.arguments if done else "",
        status="completed" if done else "in_progress",
    )


def _items(planned: Planned) -> list[ResponseOutputItem]:
    items: list[ResponseOutputItem] = [_call(call, True) for call in planned.calls]
    if planned.text or not planned.calls:
        items.insert(0, _message(planned, True))
    return items


def _usage(planned: Planned) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=planned.input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens=planned.output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=planned.input_tokens + planned.output_tokens,
    )


def _response(planned: Planned, body: Mapping[str, Any], done: bool) -> Response:
    instructions = body.get("instructions")
    return Response(
        id=planned.id,
        object="response",
        created_at=planned.created,
        model=planned.model,
        status="completed" if done else "in_progress",
        output=_items(planned) if done else [],
        parallel_tool_calls=body.get("parallel_tool_calls") is not False,
        tool_choice=_tool_choice(body.get("tool_choice")),
        tools=_function_tools(body.get("tools")),
        instructions=instructions if isinstance(instructions, str) else None,
        usage=_usage(planned) if done else None,
        error=None,
        incomplete_details=None,
    )


def _tool_choice(given: object) -> ToolChoice:
    """The request's tool choice echoed when it is one the API knows, else ``auto``."""
    try:
        return _TOOL_CHOICE.validate_python(given if given is not None else "auto")
    except ValidationError:
        return "auto"


_TOOL_CHOICE: TypeAdapter[ToolChoice] = TypeAdapter(ToolChoice)


def _function_tools(given: object) -> list[Tool]:
    """The request's function tools, echoed as the API does (others are left out)."""
    tools: list[Tool] = []
    for tool in given if isinstance(given, list) else ():
        if isinstance(tool, Mapping) and tool.get("type") == "function":
            try:
                tools.append(FunctionTool.model_validate(dict(tool)))
            except ValidationError:
                continue
    return tools


def response(planned: Planned, body: Mapping[str, Any]) -> JSON:
    """The whole response to a request that does not stream."""
    return _dump(_response(planned, body, True))


def events(planned: Planned, body: Mapping[str, Any]) -> list[tuple[str, JSON]]:
    """The stream's events, in order: (event type, its JSON)."""
    made = list(_event_models(planned, body))
    numbered = []
    for number, event in enumerate(made):
        dumped = _dump(event)
        dumped["sequence_number"] = number
        numbered.append((str(dumped["type"]), dumped))
    return numbered


def _event_models(planned: Planned, body: Mapping[str, Any]) -> Iterator[BaseModel]:
    started = _response(planned, body, False)
    yield ResponseCreatedEvent(type="response.created", response=started, sequence_number=0)
    yield ResponseInProgressEvent(type="response.in_progress", response=started, sequence_number=0)
    index = 0
    if planned.text or not planned.calls:
        yield from _message_events(planned, index)
        index += 1
    for call in planned.calls:
        yield from _call_events(call, index)
        index += 1
    finished = _response(planned, body, True)
    yield ResponseCompletedEvent(type="response.completed", response=finished, sequence_number=0)


def _message_events(planned: Planned, index: int) -> Iterator[BaseModel]:
    item_id = planned.message_id
    empty = ResponseOutputText(type="output_text", text="", annotations=[])
    whole = ResponseOutputText(type="output_text", text=planned.text, annotations=[])
    where: dict[str, Any] = {"item_id": item_id, "output_index": index, "content_index": 0}
    yield ResponseOutputItemAddedEvent(
        type="response.output_item.added",
        item=_message(planned, False),
        output_index=index,
        sequence_number=0,
    )
    yield ResponseContentPartAddedEvent(
        type="response.content_part.added", part=empty, sequence_number=0, **where
    )
    for piece in text_pieces(planned.text):
        yield ResponseTextDeltaEvent(
            type="response.output_text.delta", delta=piece, logprobs=[], sequence_number=0, **where
        )
    yield ResponseTextDoneEvent(
        type="response.output_text.done", text=planned.text, logprobs=[], sequence_number=0, **where
    )
    yield ResponseContentPartDoneEvent(
        type="response.content_part.done", part=whole, sequence_number=0, **where
    )
    yield ResponseOutputItemDoneEvent(
        type="response.output_item.done",
        item=_message(planned, True),
        output_index=index,
        sequence_number=0,
    )


def _call_events(call: PlannedCall, index: int) -> Iterator[BaseModel]:
    yield ResponseOutputItemAddedEvent(
        type="response.output_item.added",
        item=_call(call, False),
        output_index=index,
        sequence_number=0,
    )
    for piece in argument_pieces(call.arguments):
        yield ResponseFunctionCallArgumentsDeltaEvent(
            type="response.function_call_arguments.delta",
            delta=piece,
            item_id=call.item_id,
            output_index=index,
            sequence_number=0,
        )
    yield ResponseFunctionCallArgumentsDoneEvent(
        type="response.function_call_arguments.done",
        arguments=call.arguments,
        item_id=call.item_id,
        output_index=index,
        sequence_number=0,
    )
    yield ResponseOutputItemDoneEvent(
        type="response.output_item.done",
        item=_call(call, True),
        output_index=index,
        sequence_number=0,
    )


def _dump(model: BaseModel) -> JSON:
    return model.model_dump(mode="json", exclude_unset=True, by_alias=True)
