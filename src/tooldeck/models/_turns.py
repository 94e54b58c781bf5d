"""The conversation as the block-based APIs (Anthropic Messages, Gemini) take it.

Both send every result of one assistant turn together, in one user turn, so the tool
messages that follow an assistant message are grouped here once for both adapters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tooldeck.messages import Message

_FAILURE = re.compile(r"error\[[a-z_]+\]: ")
"""How a failed ToolResult's text starts (``ToolResult.failure``): ``error[<code>]: ``."""


@dataclass(frozen=True, slots=True)
class ToolResults:
    """Consecutive tool messages: the results of one assistant turn, in the model's order."""

    messages: tuple[Message, ...]


def grouped(messages: Sequence[Message]) -> list[Message | ToolResults]:
    """User and assistant messages as they are; each run of tool messages as one ToolResults."""
    turns: list[Message | ToolResults] = []
    pending: list[Message] = []
    for message in messages:
        if message.role == "tool":
            pending.append(message)
            continue
        if pending:
            turns.append(ToolResults(tuple(pending)))
            pending = []
        turns.append(message)
    if pending:
        turns.append(ToolResults(tuple(pending)))
    return turns


def is_failure(result: Message) -> bool:
    """Whether a tool message reports a failure (its text starts ``error[<code>]: ``)."""
    return _FAILURE.match(result.content) is not None


def call_id(result: Message) -> str:
    """The id of the call a tool message answers; a message without one cannot be sent."""
    if result.tool_call_id is None:
        raise ValueError(f"a tool message has no tool_call_id: {result.content[:60]!r}")
    return result.tool_call_id
