"""What a served task's messages say: the calls a paused run waits for, and a client's reply.

A run that pauses becomes a task in ``INPUT_REQUIRED`` whose status message carries a data
part ``{"kind": "tooldeck.pending", "calls": [...]}`` (``pending_part``). The client answers
in a message to that task with a data part ``{"kind": "tooldeck.decisions", "decisions":
[...]}`` (``read_decisions``): each names a pending call by its ``id`` (and may repeat its
``digest``, which must then match), and says ``approve`` (with ``arguments`` to run an
edited call), ``reject`` (with a ``reason`` the model reads) or, for an external tool,
``result`` (its ``output``, ``error: true`` for a failure) or ``reject``. A decision for a
call that is not pending, or of the wrong kind, is refused with a ``ReplyError`` naming what
waits: never guessed. The client side of the same shape is ``tooldeck.remote._pending``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolResult
from tooldeck.remote._pending import DECISIONS_KIND, PENDING_KIND, whole_numbers
from tooldeck.results import Approve, Checkpoint, Decision, PendingCall, Reject

TOOL_CALL_KIND = "tooldeck.tool_call"
"""The ``kind`` of a working status update's data part: a call starts."""
TOOL_RESULT_KIND = "tooldeck.tool_result"
"""The ``kind`` of a working status update's data part: a call finished."""


class ReplyError(ValueError):
    """A message that cannot go to this task or context; the text says what to send."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """A message that starts a run: its text is the prompt."""

    prompt: str


@dataclass(frozen=True, slots=True)
class Resume:
    """A reply that resumes the paused run with these decisions, by pending call id."""

    decisions: dict[str, Decision]


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    decision: Literal["approve", "reject", "result"]
    digest: str | None = None
    arguments: dict[str, Any] | None = None
    reason: str = ""
    output: str | None = None
    error: bool = False


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["tooldeck.decisions"]
    decisions: list[_Decision] = Field(min_length=1)


def why_pending(pending: PendingCall) -> str:
    """Why a call waits, in words for the client's person."""
    if pending.kind == "external":
        return "an external tool: the client runs it and replies with its result"
    if pending.reason:
        return pending.reason
    return "its tool requires a person's approval"


def describe(pending: PendingCall) -> dict[str, Any]:
    """One pending call as the ``tooldeck.pending`` data part lists it."""
    return {
        "id": pending.id,
        "name": pending.call.name,
        "arguments": pending.call.arguments,
        "kind": pending.kind,
        "why": why_pending(pending),
        "digest": pending.digest,
        "path": list(pending.path),
    }


def pending_part(paused: Checkpoint) -> dict[str, Any]:
    """The data part of a paused run's ``INPUT_REQUIRED`` status message."""
    return {"kind": PENDING_KIND, "calls": [describe(p) for p in paused.pending]}


def pending_text(paused: Checkpoint) -> str:
    """The text part beside it: what waits, and how to answer."""
    waiting = "; ".join(
        f"{p.call.name} (call {p.id!r}, {p.kind}: {why_pending(p)})" for p in paused.pending
    )
    return (
        f"The run waits for: {waiting}. Reply to this task with a data part "
        f'{{"kind": "{DECISIONS_KIND}", "decisions": [...]}}: one decision per call.'
    )


def waiting(paused: Checkpoint) -> str:
    """The pending calls, named for an error message."""
    return ", ".join(f"{p.call.name} (call {p.id!r}, {p.kind})" for p in paused.pending)


def plan(
    texts: Sequence[str], data: Sequence[Any], paused: Checkpoint | None, decided_by: str
) -> NewRun | Resume:
    """What a message asks (its text parts, its data parts), given the paused run of its
    context's session, if any.

    Raises:
        ReplyError: It is a reply with nothing to answer, a prompt while a run waits, or a
            reply that does not fit the pending calls.
    """
    replies = [part for part in data if isinstance(part, Mapping) and part.get("kind")]
    if paused is None:
        if replies:
            raise ReplyError(
                "this conversation has no paused run: the decisions answer nothing (were "
                "they sent already?)"
            )
        prompt = "\n".join(texts)
        if not prompt.strip():
            raise ReplyError("the message has no text: send the prompt as a text part")
        return NewRun(prompt)
    if not replies:
        raise ReplyError(
            f"a run of this conversation waits for {waiting(paused)}: reply to task "
            f'{paused.run_id!r} with a data part {{"kind": "{DECISIONS_KIND}", ...}} first'
        )
    if len(replies) > 1 or texts:
        raise ReplyError(
            f'a reply is one data part {{"kind": "{DECISIONS_KIND}", ...}} and no text'
        )
    return Resume(read_decisions(replies[0], paused, decided_by))


def read_decisions(part: Any, paused: Checkpoint, decided_by: str) -> dict[str, Decision]:
    """The decisions of a ``tooldeck.decisions`` data part, each bound to its pending call.

    Raises:
        ReplyError: The part is malformed, names a call that is not pending (or twice), or
            gives a decision its call cannot take.
    """
    try:
        reply = _Reply.model_validate(part)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'part'}: {e['msg']}" for e in error.errors()[:5]
        )
        raise ReplyError(
            f'the reply is not {{"kind": "{DECISIONS_KIND}", "decisions": [{{"id": ..., '
            f'"decision": "approve"|"reject"|"result", ...}}]}}: {problems}'
        ) from None
    by_id = {p.id: p for p in paused.pending}
    decisions: dict[str, Decision] = {}
    for given in reply.decisions:
        pending = by_id.get(given.id)
        if pending is None:
            raise ReplyError(
                f"call {given.id!r} is not pending in task {paused.run_id!r} (decided "
                f"already, or of another run): it waits for {waiting(paused)}"
            )
        if given.digest is not None and given.digest != pending.digest:
            raise ReplyError(
                f"the digest given for call {given.id!r} is not the stored call's: the call "
                "named is not the one pending; read the task again"
            )
        if given.id in decisions:
            raise ReplyError(f"call {given.id!r} is decided twice")
        decisions[given.id] = _decision(given, pending, decided_by)
    return decisions


def _decision(given: _Decision, pending: PendingCall, decided_by: str) -> Decision:
    name = f"call {given.id!r} ({pending.call.name})"
    if pending.kind == "external":
        if given.decision == "reject":
            return Reject(message=given.reason, by=decided_by)
        if given.decision != "result" or given.output is None:
            raise ReplyError(
                f"{name} is an external tool's: reply with its result, "
                '{"decision": "result", "output": "...", "error": false} (or reject it)'
            )
        if given.error:
            return ToolResult.failure(ErrorCode.TOOL_ERROR, given.output)
        return ToolResult.success(given.output)
    if given.decision == "result":
        raise ReplyError(f"{name} waits for approval, not a result: approve or reject it")
    if given.decision == "reject":
        return Reject(message=given.reason, by=decided_by)
    arguments = whole_numbers(given.arguments) if given.arguments is not None else None
    return Approve(arguments=arguments, by=decided_by)
