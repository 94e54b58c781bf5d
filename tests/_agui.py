"""An AG-UI client for the tests: requests built and events read with the protocol's own types.

Every event a response carries is parsed with ``ag_ui.core.Event`` (the discriminated union
of the protocol's pydantic models: an unknown type or a wrong field fails the test), and the
stream is checked against the protocol's ordering rules: it begins with RUN_STARTED or
RUN_ERROR, every message and tool call is opened once before its content and closed before
the run finishes, and nothing follows the terminal event. A subagent (an agent tool's run) is
started once before any event carries its id, and finished (or failed) before the run finishes.
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
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
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
    subagents: dict[str, bool] = {}
    for event in events:
        _check_subagent(event, subagents)
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
            assert ("call", _item_id(event)) not in open_items, "a result for an open call"
            assert _item_id(event) not in answered, f"{_item_id(event)} answered twice"
            answered.add(_item_id(event))
    if isinstance(events[-1], RunFinishedEvent):
        assert not open_items, f"left open at RUN_FINISHED: {open_items}"
        still = [run_id for run_id, open_now in subagents.items() if open_now]
        assert not still, f"subagents left open at RUN_FINISHED: {still}"


def _check_subagent(event: BaseEvent, subagents: dict[str, bool]) -> None:
    """SUBAGENT_STARTED once in a run (its id is one invocation's), before the events that
    carry its id, a parent's first; finished once. ``subagents``: id -> open."""
    run_id = event.model_dump(by_alias=True).get("subagentRunId")
    if isinstance(event, SubagentStartedEvent):
        assert run_id not in subagents, f"subagent {run_id} started twice in one run"
        parent = event.parent_subagent_run_id
        assert parent is None or subagents.get(parent), f"{run_id}'s parent {parent} is not open"
        subagents[event.subagent_run_id] = True
    elif isinstance(event, SubagentFinishedEvent | SubagentErrorEvent):
        assert subagents.get(run_id), f"subagent {run_id} finished, not open"
        subagents[event.subagent_run_id] = False
    elif run_id is not None:
        assert subagents.get(run_id), f"{event.type} of subagent {run_id}, which is not open"


def _item_id(event: BaseEvent) -> str:
    """The message's or the call's id, after its subagent's (call ids are the model's)."""
    value = event.model_dump(by_alias=True)
    item = str(value.get("messageId") or value.get("toolCallId"))
    if isinstance(event, ToolCallResultEvent):
        item = event.tool_call_id
    run_id = value.get("subagentRunId")
    return f"{run_id}/{item}" if run_id else item


def of_type(events: list[BaseEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


async def post(client: httpx.AsyncClient, body: dict[str, Any], path: str = "/") -> list[BaseEvent]:
    """Send one input, read the whole stream."""
    response = await client.post(path, json=body, headers={"accept": "text/event-stream"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse(response.text)
