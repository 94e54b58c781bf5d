"""tooldeck's messages as AG-UI messages, under ids that stay the same across runs.

A message's id is its position in the thread's conversation (``msg-0`` is the first
prompt), so the events that stream a message and every later ``MESSAGES_SNAPSHOT`` name it
alike, and a client reconciling a snapshot by id keeps what it already shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import (
    Message as AguiMessage,
)
from ag_ui.core import (
    ToolCall as AguiToolCall,
)

from tooldeck.messages import Message, ToolResult


def message_id(position: int) -> str:
    """The id of the thread's message at ``position`` (0 is the first)."""
    return f"msg-{position}"


def as_agui(messages: Sequence[Message]) -> list[AguiMessage]:
    """The conversation as AG-UI messages, each under its position's id."""
    converted: list[AguiMessage] = []
    for position, message in enumerate(messages):
        converted.append(_one(message, message_id(position)))
    return converted


def with_answered(
    messages: Sequence[Message], answered: Mapping[str, ToolResult]
) -> list[AguiMessage]:
    """A paused run's conversation as AG-UI messages, with the results its paused turn has
    already (tooldeck adds them to the transcript when the turn is over) at the positions
    they will have: after the turn, in the model's order."""
    converted = as_agui(messages)
    turn = messages[-1] if messages else None
    if turn is None or turn.role != "assistant":
        return converted
    for index, call in enumerate(turn.tool_calls):
        result = answered.get(call.id)
        if result is not None:
            position = len(messages) + index
            converted.append(
                ToolMessage(id=message_id(position), content=result.output, tool_call_id=call.id)
            )
    return converted


def _one(message: Message, id_: str) -> AguiMessage:
    if message.role == "user":
        return UserMessage(id=id_, content=message.content)
    if message.role == "tool":
        return ToolMessage(id=id_, content=message.content, tool_call_id=message.tool_call_id or "")
    calls = [
        AguiToolCall(
            id=call.id, function=FunctionCall(name=call.name, arguments=call.arguments_json)
        )
        for call in message.tool_calls
    ]
    return AssistantMessage(id=id_, content=message.content or None, tool_calls=calls or None)
