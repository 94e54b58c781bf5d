"""A remote task waiting for input, as a pause of the caller's run, and the reply to it.

The remote lists what waits in a data part of its ``INPUT_REQUIRED`` status message
(docs/a2a.md, "The approval data part")::

    {"pending": [{"id": "p1", "name": "send_email", "arguments": {...}, "why": "...",
                  "kind": "approval"}]}

(``kind`` is ``"approval"``, the default, or ``"external"``: a call whose result the caller
sends). A status message without that data part is a plain question: one pending call
``input`` of kind ``external``, answered with text.

The caller's run pauses with a ``Pause`` whose state is a small checkpoint of the remote
task: one assistant turn whose calls are the remote's pending calls, its ids kept in
``capability_states["a2a_task"]``, so a resume in another process replies on the same task.
The person's decisions travel back as one data part::

    {"decisions": {"p1": {"approve": true} | {"reject": "why"} | {"edit": {...}}
                         | {"result": "text"}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tooldeck.errors import CheckpointError, ToolDeckError
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, Usage
from tooldeck.results import (
    Approve,
    Checkpoint,
    Decision,
    PausedTurn,
    PendingCall,
    Reject,
    RunCounters,
)
from tooldeck.run._engine.checkpoint import call_digest


@dataclass(frozen=True, slots=True)
class RemotePending:
    """One call a remote task waits on, as its input request listed it."""

    id: str
    """The remote's id for it: the key of its decision."""
    name: str
    """The remote tool's name."""
    arguments: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    """Why it waits, in the remote's words."""
    kind: Literal["approval", "external"] = "approval"
    """``approval``: approve, edit or reject it; ``external``: send its result."""


TASK_KEY = "a2a_task"
"""Where a remote pause keeps the remote task's ids in its state."""
QUESTION_ID = "input"
"""The id of the one pending call that stands for a plain question of the remote."""


def pending_from_data(data: Mapping[str, Any]) -> tuple[RemotePending, ...]:
    """The pending calls of an input request's data part (``{"pending": [...]}``).

    Raises:
        ToolDeckError: a shape other than the documented one, naming what is wrong.
    """
    items = data.get("pending")
    if not isinstance(items, list) or not items:
        raise ToolDeckError("the remote's input request lists no pending calls ('pending': [...])")
    found = tuple(_pending_item(index, item) for index, item in enumerate(items))
    ids = [item.id for item in found]
    if len(set(ids)) != len(ids):
        raise ToolDeckError(f"the remote's input request repeats a pending id: {ids}")
    return found


def _pending_item(index: int, item: Any) -> RemotePending:
    where = f"the remote's pending call {index}"
    if not isinstance(item, dict):
        raise ToolDeckError(f"{where} is not an object")
    call_id, name = item.get("id"), item.get("name")
    arguments, why = item.get("arguments", {}), item.get("why", "")
    kind = item.get("kind", "approval")
    if not (isinstance(call_id, str) and call_id and "/" not in call_id):
        raise ToolDeckError(
            f"{where}: 'id' must be a non-empty string without '/', got {call_id!r}"
        )
    if not (isinstance(name, str) and name):
        raise ToolDeckError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    if not isinstance(arguments, dict) or not isinstance(why, str):
        raise ToolDeckError(f"{where}: 'arguments' must be an object and 'why' a string")
    if kind not in ("approval", "external"):
        raise ToolDeckError(f"{where}: 'kind' must be 'approval' or 'external', got {kind!r}")
    return RemotePending(call_id, name, arguments, why, kind)


def plain_question(text: str) -> RemotePending:
    """A remote's input request without a data part: a question answered with text."""
    return RemotePending(QUESTION_ID, "answer_remote", {"question": text}, text, "external")


def paused_state(
    agent: str, task_id: str, context_id: str, pending: tuple[RemotePending, ...]
) -> Checkpoint:
    """The checkpoint a remote pause holds: the remote's pending calls, and its task."""
    run_id = f"a2a:{task_id}"
    calls = tuple(ToolCall(id=p.id, name=p.name, arguments=p.arguments) for p in pending)
    waiting = tuple(
        PendingCall(
            call=call, kind=p.kind, digest=call_digest(run_id, call), reason=_reason(agent, p)
        )
        for call, p in zip(calls, pending, strict=True)
    )
    return Checkpoint(
        run_id=run_id,
        messages=(Message.assistant(AssistantOutput(tool_calls=calls)),),
        trace=(),
        usage=Usage(),
        counters=RunCounters(),
        turn=PausedTurn(round=1, pending=waiting),
        agent=agent,
        capability_states={TASK_KEY: {"task_id": task_id, "context_id": context_id}},
    )


def _reason(agent: str, pending: RemotePending) -> str:
    why = f": {pending.why}" if pending.why else ""
    return f"the remote agent {agent!r} waits for this call{why} (the remote's words)"


def task_of(state: Checkpoint) -> tuple[str, str]:
    """The remote task's id and context id kept in a remote pause's state.

    Raises:
        CheckpointError: the state is not one a remote pause makes.
    """
    task = (state.capability_states or {}).get(TASK_KEY)
    if not isinstance(task, dict):
        raise CheckpointError(
            "the paused call holds no remote task (capability_states['a2a_task']): "
            "it was not paused by a remote agent"
        )
    task_id, context_id = task.get("task_id"), task.get("context_id")
    if not (isinstance(task_id, str) and task_id and isinstance(context_id, str)):
        raise CheckpointError(f"the paused remote task is broken: {task!r}")
    return task_id, context_id


def decisions_data(state: Checkpoint, decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """The reply's data part: ``{"decisions": {id: ...}}`` for the decided pending calls."""
    pending = {p.call.id for p in state.turn.pending}
    unknown = sorted(set(decisions) - pending)
    if unknown:
        raise CheckpointError(f"decisions for calls the remote did not list: {unknown}")
    return {"decisions": {key: _decision(value) for key, value in decisions.items()}}


def answer_text(decisions: Mapping[str, Decision]) -> str:
    """The text of a reply to a plain question (its result), or empty."""
    answer = decisions.get(QUESTION_ID)
    return answer.output if isinstance(answer, ToolResult) else ""


def _decision(decision: Decision) -> dict[str, Any]:
    if isinstance(decision, Approve):
        if decision.arguments is not None:
            return {"edit": decision.arguments}
        return {"approve": True}
    if isinstance(decision, Reject):
        return {"reject": decision.message or "a person rejected this call"}
    return {"result": decision.output}
