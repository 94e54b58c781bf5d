"""tooldeck's messages as AG-UI messages, under ids that stay the same across runs.

A prompt keeps the id its client gave it (the input's user messages are paired with the
conversation's prompts, from the last back, while their texts agree); every other message's
id is its position in the thread's conversation (``msg-1`` is the message after the first
prompt), so the events that stream a message and every later ``MESSAGES_SNAPSHOT`` name it
alike, and a client reconciling a snapshot by id keeps what it shows, in its order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    TextPart,
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

ClientIds = Mapping[int, str]
"""The ids a client gave the conversation's prompts, by position."""


def message_id(position: int) -> str:
    """The id tooldeck gives the thread's message at ``position`` (0 is the first)."""
    return f"msg-{position}"


def client_ids(conversation: Sequence[Message], sent: Sequence[AguiMessage]) -> dict[int, str]:
    """The ids the input's user messages give the conversation's prompts, by position.

    A client sends its messages back with each run (the official client: all of them), the
    last being the new prompt; they are paired with the conversation's prompts from the last
    one back while the texts agree, so a client that sent fewer, or another history, keeps
    the ids of what matched. An id that another message of the conversation has already
    (``msg-3`` for the answer at position 3), or that two prompts would share, is not taken.
    """
    prompts = [p for p, message in enumerate(conversation) if message.role == "user"]
    given = [m for m in sent if isinstance(m, UserMessage)]
    taken = {message_id(p) for p in range(len(conversation) + _most_results(conversation))}
    ids: dict[int, str] = {}
    for position, message in zip(reversed(prompts), reversed(given), strict=False):
        if _text(message) != conversation[position].content:
            break
        if message.id != message_id(position) and message.id in taken:
            continue
        taken.add(message.id)
        ids[position] = message.id
    return ids


def _most_results(conversation: Sequence[Message]) -> int:
    """How many results a paused last turn may add after the conversation."""
    return len(conversation[-1].tool_calls) if conversation else 0


def _text(message: UserMessage) -> str | None:
    """A user message's text (None when it has parts other than text)."""
    if isinstance(message.content, str):
        return message.content
    parts = [part.text for part in message.content if isinstance(part, TextPart)]
    return "".join(parts) if len(parts) == len(message.content) else None


def as_agui(messages: Sequence[Message], ids: ClientIds | None = None) -> list[AguiMessage]:
    """The conversation as AG-UI messages: a prompt under its client's id (``ids``), the
    others under their position's."""
    given = ids or {}
    return [
        _one(message, given.get(position) or message_id(position))
        for position, message in enumerate(messages)
    ]


def with_answered(
    messages: Sequence[Message], answered: Mapping[str, ToolResult], ids: ClientIds | None = None
) -> list[AguiMessage]:
    """A paused run's conversation as AG-UI messages, with the results its paused turn has
    already (tooldeck adds them to the transcript when the turn is over) at the positions
    they will have: after the turn, in the model's order."""
    converted = as_agui(messages, ids)
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
