"""A request the simulator received, read the same way whichever API it came by.

Chat Completions sends ``messages``; the Responses API sends ``instructions`` and ``input``
items. ``SimRequest.messages`` reads both as one list of ``SimMessage`` (role, text, the
tool calls an assistant made, the call a tool result answers), so a rule such as
``last_user_contains("refund")`` works with either API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["chat", "responses"]
Role = Literal["system", "developer", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class SimMessage:
    """One message of the conversation a request carries."""

    role: Role
    text: str = ""
    tool_calls: tuple[tuple[str, str], ...] = ()
    """An assistant's calls: (tool name, arguments JSON) pairs."""
    call_id: str | None = None
    """A tool result's call id."""


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request: its number (1, 2, ...), path, headers and parsed JSON body."""

    number: int
    """1 for the first request the simulator received, then 2, ..."""
    api: Api
    path: str
    headers: Mapping[str, str]
    """Lower-case names."""
    body: Mapping[str, Any]
    messages: tuple[SimMessage, ...] = field(default=())

    @property
    def stream(self) -> bool:
        """Whether the client asked for server-sent events."""
        return self.body.get("stream") is True

    @property
    def last(self) -> SimMessage | None:
        """The newest message, or None for an empty conversation."""
        return self.messages[-1] if self.messages else None

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The function tools offered, in order."""
        names = []
        for tool in self.body.get("tools") or ():
            if isinstance(tool, Mapping):
                function = tool.get("function", tool)
                name = function.get("name") if isinstance(function, Mapping) else None
                if isinstance(name, str):
                    names.append(name)
        return tuple(names)

    @property
    def trailing_results(self) -> tuple[SimMessage, ...]:
        """The tool results the request ends with (after the newest assistant turn)."""
        results: list[SimMessage] = []
        for message in reversed(self.messages):
            if message.role != "tool":
                break
            results.append(message)
        return tuple(reversed(results))

    def describe(self) -> str:
        """``request 3 (POST /v1/chat/completions, newest message: user 'Refund A1')``."""
        newest = self.last
        said = "no messages"
        if newest is not None:
            text = newest.text if len(newest.text) <= 60 else newest.text[:57] + "..."
            calls = ", ".join(name for name, _ in newest.tool_calls)
            said = f"newest message: {newest.role} {text!r}" + (
                f" calling {calls}" if calls else ""
            )
        return f"request {self.number} (POST {self.path}, {said})"


def read_request(
    number: int,
    api: Api,
    path: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    earlier: tuple[SimMessage, ...] = (),
) -> SimRequest:
    """The request with its conversation read from the body (what cannot be read is skipped:
    the body is still there whole), after ``earlier``: the stored conversation a Responses
    request continues by ``previous_response_id``."""
    messages = _chat_messages(body) if api == "chat" else _responses_messages(body)
    if earlier:
        system = [message for message in messages if message.role == "system"]
        rest = messages[len(system) :]
        messages = (*system, *earlier, *rest)
    return SimRequest(number, api, path, headers, body, messages)


def text_of(content: object) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


_ROLES: tuple[Role, ...] = ("system", "developer", "user", "assistant", "tool")


def _role(value: object) -> Role | None:
    for role in _ROLES:
        if value == role:
            return role
    return None


def _chat_messages(body: Mapping[str, Any]) -> tuple[SimMessage, ...]:
    read: list[SimMessage] = []
    for message in body.get("messages") or ():
        role = _role(message.get("role")) if isinstance(message, Mapping) else None
        if role is None:
            continue
        calls = tuple(
            (str(call["function"].get("name", "")), str(call["function"].get("arguments", "")))
            for call in message.get("tool_calls") or ()
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
        )
        call_id = message.get("tool_call_id")
        read.append(
            SimMessage(
                role,
                text_of(message.get("content")),
                calls,
                call_id if isinstance(call_id, str) else None,
            )
        )
    return tuple(read)


def _responses_messages(body: Mapping[str, Any]) -> tuple[SimMessage, ...]:
    read: list[SimMessage] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        read.append(SimMessage("system", instructions))
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given or ()
    for item in items:
        if isinstance(item, Mapping):
            _add_item(read, item)
    return tuple(read)


def _add_item(read: list[SimMessage], item: Mapping[str, Any]) -> None:
    kind = item.get("type", "message")
    if kind == "function_call":
        call = (str(item.get("name", "")), str(item.get("arguments", "")))
        previous = read[-1] if read else None
        if previous is not None and previous.role == "assistant":
            read[-1] = SimMessage("assistant", previous.text, (*previous.tool_calls, call))
        else:
            read.append(SimMessage("assistant", "", (call,)))
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        output = item.get("output")
        text = output if isinstance(output, str) else text_of(output)
        read.append(SimMessage("tool", text, (), call_id if isinstance(call_id, str) else None))
    elif kind == "message":
        role = _role(item.get("role"))
        if role is not None:
            read.append(SimMessage(role, text_of(item.get("content"))))
