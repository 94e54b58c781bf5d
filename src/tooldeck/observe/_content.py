"""Conversation content in the GenAI conventions' JSON shapes, recorded only when asked.

``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions``
are lists of ``{"role", "parts"}`` messages (parts: ``text``, ``tool_call``,
``tool_call_response``), sent to the tracer as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tooldeck.messages import AssistantOutput, Message, ToolCall


def finish_reason(output: AssistantOutput) -> str:
    """``tool_call`` when the turn called tools, else ``stop`` (truncation raises instead)."""
    return "tool_call" if output.tool_calls else "stop"


def input_messages(messages: Sequence[Message]) -> str:
    return _json([_message(message) for message in messages])


def output_messages(output: AssistantOutput) -> str:
    parts = _assistant_parts(output.content, output.tool_calls)
    return _json([{"role": "assistant", "parts": parts, "finish_reason": finish_reason(output)}])


def answer_messages(answer: str) -> str:
    message = {"role": "assistant", "parts": [_text(answer)], "finish_reason": "stop"}
    return _json([message])


def system_instructions(instructions: str) -> str:
    return _json([_text(instructions)])


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        response = {"type": "tool_call_response", "id": message.tool_call_id}
        return {"role": "tool", "parts": [{**response, "response": message.content}]}
    if message.role == "assistant":
        return {"role": "assistant", "parts": _assistant_parts(message.content, message.tool_calls)}
    return {"role": message.role, "parts": [_text(message.content)]}


def _assistant_parts(content: str, calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    parts = [_text(content)] if content else []
    parts.extend(
        {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments(call)}
        for call in calls
    )
    return parts


def arguments(call: ToolCall) -> Any:
    """The call's arguments: the parsed object, or the model's text when it did not parse."""
    return call.raw_arguments if call.raw_arguments is not None else call.arguments


def _text(content: str) -> dict[str, str]:
    return {"type": "text", "content": content}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)
