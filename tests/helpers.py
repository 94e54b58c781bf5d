"""Small builders shared by the loop tests."""

from __future__ import annotations

import json
from typing import Any

from tooldeck import AssistantOutput, Message, ToolCall


def call(tool_name: str, call_id: str = "c1", /, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=tool_name, arguments=arguments)


def calls(*items: ToolCall) -> AssistantOutput:
    return AssistantOutput(tool_calls=items)


def answer(text: str) -> AssistantOutput:
    return AssistantOutput(content=text)


def raw_call(name: str, text: str, call_id: str = "c1") -> ToolCall:
    return ToolCall.from_json(call_id, name, text)


def tool_messages(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [message.content for message in messages if message.role == "tool"]


def as_json(value: Any) -> str:
    return json.dumps(value)
