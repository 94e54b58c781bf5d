"""An AG-UI client for the tests: requests built and events read with the protocol's own types.

Every event a response carries is parsed with ``ag_ui.core.Event`` (the discriminated union
of the protocol's pydantic models: an unknown type or a wrong field fails the test), and the
stream is checked against the protocol's ordering rules: it begins with RUN_STARTED or
RUN_ERROR, every message and tool call is opened once before its content and closed before
the run finishes, and nothing follows the terminal event.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    ToolCallResultEvent,
)
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)

_OPENS = {EventType.TEXT_MESSAGE_START: "message", EventType.TOOL_CALL_START: "call"}
_CONTINUES = {
    EventType.TEXT_MESSAGE_CONTENT: "message",
    EventType.TEXT_MESSAGE_END: "message",
    EventType.TOOL_CALL_ARGS: "call",
    EventType.TOOL_CALL_END: "call",
}


def new_input(
    thread: str,
    prompt: str | None = None,
    *,
    resume: list[dict[str, Any]] | None = None,
    tool_results: list[tuple[str, str]] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """A RunAgentInput as a client sends it (wire names), checked with the protocol's type."""
    messages: list[dict[str, Any]] = []
    for call_id, content in tool_results or []:
        message = {"id": f"t-{uuid.uuid4().hex[:6]}", "role": "tool", "toolCallId": call_id}
        messages.append({**message, "content": content, **({"error": error} if error else {})})
    if prompt is not None:
        messages.append({"id": f"u-{uuid.uuid4().hex[:6]}", "role": "user", "content": prompt})
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    RunAgentInput.model_validate(body)
    return body


def approve(interrupt_id: str, **payload: Any) -> dict[str, Any]:
    """A resume entry that answers an approval interrupt."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def parse(text: str) -> list[BaseEvent]:
    """The events of a server-sent event stream, each validated, the sequence checked."""
    events: list[BaseEvent] = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        assert frame.startswith("data: "), frame
        events.append(EVENT.validate_json(frame.removeprefix("data: ")))
    check_sequence(events)
    return events


def check_sequence(events: list[BaseEvent]) -> None:
    """The protocol's ordering rules for one run's stream."""
    assert events, "an empty stream"
    assert events[0].type in (EventType.RUN_STARTED, EventType.RUN_ERROR), events[0]
    terminal = [i for i, e in enumerate(events) if isinstance(e, RunFinishedEvent | RunErrorEvent)]
    assert terminal == [len(events) - 1], f"one terminal event, last: {[e.type for e in events]}"
    open_items: set[tuple[str, str]] = set()
    answered: set[str] = set()
    for event in events:
        kind = _OPENS.get(event.type) or _CONTINUES.get(event.type)
        if kind is not None:
            key = (kind, _item_id(event))
            if event.type in _OPENS:
                assert key not in open_items, f"{key} opened twice"
                open_items.add(key)
            else:
                assert key in open_items, f"{event.type} for {key}, which is not open"
                if event.type in (EventType.TEXT_MESSAGE_END, EventType.TOOL_CALL_END):
                    open_items.discard(key)
        if isinstance(event, ToolCallResultEvent):
            assert ("call", event.tool_call_id) not in open_items, "a result for an open call"
            assert event.tool_call_id not in answered, f"{event.tool_call_id} answered twice"
            answered.add(event.tool_call_id)
    if isinstance(events[-1], RunFinishedEvent):
        assert not open_items, f"left open at RUN_FINISHED: {open_items}"


def _item_id(event: BaseEvent) -> str:
    value = event.model_dump(by_alias=True)
    return str(value.get("messageId") or value.get("toolCallId"))


def of_type(events: list[BaseEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


async def post(client: httpx.AsyncClient, body: dict[str, Any], path: str = "/") -> list[BaseEvent]:
    """Send one input, read the whole stream."""
    response = await client.post(path, json=body, headers={"accept": "text/event-stream"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse(response.text)
