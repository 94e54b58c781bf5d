"""A remote task waiting for input, as a pause of the caller's run, and the reply to it.

The one shape of docs/a2a.md, "Approvals and external tools over the hop" (the one a tooldeck
server sends and reads, ``tooldeck.serve.a2a``): the remote lists what waits in a data part
of its ``INPUT_REQUIRED`` status message::

    {"kind": "tooldeck.pending", "calls": [{"id": "c1", "name": "refund", "arguments": {...},
      "kind": "approval", "why": "...", "digest": "98e7...", "path": []}]}

and the caller's person decides, the reply being one data part on the same task::

    {"kind": "tooldeck.decisions", "decisions": [{"id": "c1", "decision": "approve",
      "digest": "98e7..."}]}

(``approve`` with ``arguments`` to edit, ``reject`` with a ``reason``, ``result`` with an
``output`` and ``error`` for an external call). A status message without that data part is a
plain question: one pending call ``input`` of kind ``external``, answered with text alone.

The caller's run pauses with a ``Pause`` whose state is a small checkpoint of the remote
task: one assistant turn whose calls are the remote's pending calls; the remote task's ids
and the remote's digest of each call are kept in ``capability_states["a2a_task"]`` (signed
with the rest), so a resume in another process replies on the same task, naming each call
as the remote stored it.
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

PENDING_KIND = "tooldeck.pending"
"""The ``kind`` of the data part listing the calls a paused remote run waits for."""
DECISIONS_KIND = "tooldeck.decisions"
"""The ``kind`` of the data part a caller replies with."""


@dataclass(frozen=True, slots=True)
class RemotePending:
    """One call a remote task waits on, as its input request listed it."""

    id: str
    """The remote's id for it (``c1``, or ``c1/c7`` inside its agent tools): the key of its
    decision."""
    name: str
    """The remote tool's name."""
    arguments: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    """Why it waits, in the remote's words."""
    kind: Literal["approval", "external"] = "approval"
    """``approval``: approve, edit or reject it; ``external``: send its result."""
    digest: str = ""
    """The remote's digest of the stored call, sent back with the decision (empty if none)."""
    path: tuple[str, ...] = ()
    """The remote's agent tools the call runs inside, outermost first."""


TASK_KEY = "a2a_task"
"""Where a remote pause keeps the remote task's ids in its state."""
QUESTION_ID = "input"
"""The id of the one pending call that stands for a plain question of the remote."""


def pending_part(data: Any) -> bool:
    """Whether a data part is the remote's list of pending calls (``kind`` says so)."""
    return isinstance(data, Mapping) and data.get("kind") == PENDING_KIND


def pending_from_data(data: Mapping[str, Any]) -> tuple[RemotePending, ...]:
    """The pending calls of an input request's ``tooldeck.pending`` data part.

    Raises:
        ToolDeckError: a shape other than the documented one, naming what is wrong.
    """
    items = data.get("calls")
    if not isinstance(items, list) or not items:
        raise ToolDeckError(
            f"the remote's input request lists no pending calls ('{PENDING_KIND}' with "
            "'calls': [...])"
        )
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
    kind, digest, path = item.get("kind", "approval"), item.get("digest", ""), item.get("path", [])
    if not (isinstance(call_id, str) and call_id):
        raise ToolDeckError(f"{where}: 'id' must be a non-empty string, got {call_id!r}")
    if not (isinstance(name, str) and name):
        raise ToolDeckError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    if not isinstance(arguments, dict) or not isinstance(why, str):
        raise ToolDeckError(f"{where}: 'arguments' must be an object and 'why' a string")
    if kind not in ("approval", "external"):
        raise ToolDeckError(f"{where}: 'kind' must be 'approval' or 'external', got {kind!r}")
    if not isinstance(digest, str):
        raise ToolDeckError(f"{where}: 'digest' must be a string, got {digest!r}")
    if not (isinstance(path, list) and all(isinstance(step, str) for step in path)):
        raise ToolDeckError(f"{where}: 'path' must be a list of names, got {path!r}")
    return RemotePending(call_id, name, whole_numbers(arguments), why, kind, digest, tuple(path))


def plain_question(text: str) -> RemotePending:
    """A remote's input request without a data part: a question answered with text."""
    return RemotePending(QUESTION_ID, "answer_remote", {"question": text}, text, "external")


def paused_state(
    agent: str, task_id: str, context_id: str, pending: tuple[RemotePending, ...]
) -> Checkpoint:
    """The checkpoint a remote pause holds: the remote's pending calls, its task, and the
    remote's digest of each call."""
    run_id = f"a2a:{task_id}"
    calls = tuple(ToolCall(id=p.id, name=p.name, arguments=p.arguments) for p in pending)
    waiting = tuple(
        PendingCall(
            call=call, kind=p.kind, digest=call_digest(run_id, call), reason=_reason(agent, p)
        )
        for call, p in zip(calls, pending, strict=True)
    )
    digests = {p.id: p.digest for p in pending if p.digest}
    question = pending == (plain_question(pending[0].why),)
    task: dict[str, Any] = {"task_id": task_id, "context_id": context_id, "digests": digests}
    task |= {"question": True} if question else {}
    return Checkpoint(
        run_id=run_id,
        messages=(Message.assistant(AssistantOutput(tool_calls=calls)),),
        trace=(),
        usage=Usage(),
        counters=RunCounters(),
        turn=PausedTurn(round=1, pending=waiting),
        agent=agent,
        capability_states={TASK_KEY: task},
    )


def _reason(agent: str, pending: RemotePending) -> str:
    why = f": {pending.why}" if pending.why else ""
    inside = f" (inside its agent tools {'/'.join(pending.path)})" if pending.path else ""
    return f"the remote agent {agent!r} waits for this call{inside}{why} (the remote's words)"


def _task(state: Checkpoint) -> dict[str, Any]:
    task = (state.capability_states or {}).get(TASK_KEY)
    if not isinstance(task, dict):
        raise CheckpointError(
            "the paused call holds no remote task (capability_states['a2a_task']): "
            "it was not paused by a remote agent"
        )
    return task


def task_of(state: Checkpoint) -> tuple[str, str]:
    """The remote task's id and context id kept in a remote pause's state.

    Raises:
        CheckpointError: the state is not one a remote pause makes.
    """
    task = _task(state)
    task_id, context_id = task.get("task_id"), task.get("context_id")
    if not (isinstance(task_id, str) and task_id and isinstance(context_id, str)):
        raise CheckpointError(f"the paused remote task is broken: {task!r}")
    return task_id, context_id


def reply_parts(
    state: Checkpoint, decisions: Mapping[str, Decision]
) -> tuple[dict[str, Any] | None, str]:
    """What a reply to a remote pause holds: the ``tooldeck.decisions`` data part for the
    decided calls, or, for a plain question, no data part and the answer's text.

    Raises:
        CheckpointError: a decision names a call the remote did not list.
    """
    pending = {p.call.id for p in state.turn.pending}
    unknown = sorted(set(decisions) - pending)
    if unknown:
        raise CheckpointError(f"decisions for calls the remote did not list: {unknown}")
    task = _task(state)
    if task.get("question"):
        return None, _answer_text(decisions.get(QUESTION_ID))
    digests = task.get("digests") or {}
    sent = [_decision(key, value, digests.get(key)) for key, value in decisions.items()]
    return {"kind": DECISIONS_KIND, "decisions": sent}, ""


def _answer_text(decision: Decision | None) -> str:
    if isinstance(decision, ToolResult):
        return decision.output
    if isinstance(decision, Reject):
        return f"(declined) {decision.message}".strip()
    return ""


def _decision(call_id: str, decision: Decision, digest: Any) -> dict[str, Any]:
    sent: dict[str, Any] = {"id": call_id, **({"digest": digest} if digest else {})}
    if isinstance(decision, Approve):
        edited = {} if decision.arguments is None else {"arguments": decision.arguments}
        return {**sent, "decision": "approve", **edited}
    if isinstance(decision, Reject):
        return {**sent, "decision": "reject", "reason": decision.message}
    code = decision.error_code
    output = decision.output.removeprefix(f"error[{code}]: ") if code else decision.output
    return {**sent, "decision": "result", "output": output, "error": not decision.ok}


def whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints: a data part's numbers all arrive as doubles
    (``google.protobuf.Value``), and JSON does not tell ``2`` from ``2.0``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value
