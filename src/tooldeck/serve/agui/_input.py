"""What a ``RunAgentInput`` asks of a thread: a new run, or the answers a paused run waits for.

The thread's session holds the conversation, so of the input's messages only the last one
is read for a new run (a user message: the prompt), and tool messages that answer the paused
run's external calls. A call that needs approval is an ``Interrupt`` whose id is the call's
digest (of the run id, the call id, the tool and its arguments): a resume entry decides the
stored call it names and no other, and ``agent.resume`` checks the digests again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    TextPart,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import (
    Message as AguiMessage,
)
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError
from pydantic.alias_generators import to_camel

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolResult
from tooldeck.results import (
    APPROVAL_SCOPES,
    ApprovalScope,
    Approve,
    Checkpoint,
    Decision,
    PendingCall,
    Reject,
)
from tooldeck.tools.registry import ToolView

_NESTED_SCOPE = "the call is made inside an agent tool, whose run ends with it: approve it once"

CANCELLED = "the person closed this call's approval without deciding; it did not run"
"""What the model reads for a call whose interrupt was answered ``cancelled``."""


class InputError(Exception):
    """The input cannot be run on this thread; ``code`` goes in the RUN_ERROR event."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class NewRun:
    prompt: str


@dataclass(frozen=True, slots=True)
class Resume:
    checkpoint: Checkpoint
    decisions: dict[str, Decision]


class ApprovalAnswer(BaseModel):
    """The payload of a resume entry that answers an approval interrupt."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    approved: StrictBool
    edited_args: dict[str, Any] | None = None
    """Arguments to run the call with instead (all of them: they replace, not merge)."""
    reason: str | None = None
    """Why it was rejected, in words the model can act on."""
    scope: ApprovalScope = "once"
    """How long an approval lasts: this call, the tool's calls for the rest of the run, or
    for the session's next runs too (``Approve(scope=...)``). A rejection is for one call."""


def plan(run_input: RunAgentInput, paused: Checkpoint | None, decided_by: str) -> NewRun | Resume:
    """A new run from the last user message, or the paused run with the input's answers."""
    entries = run_input.resume or []
    if paused is None:
        if entries:
            raise InputError(
                f"thread {run_input.thread_id!r} has no paused run: the resume entries answer "
                "nothing (was it resumed already?)",
                "nothing_to_resume",
            )
        return NewRun(_prompt(run_input.messages))
    answers = _tool_answers(run_input.messages, paused)
    if (not entries and not answers) or _new_prompt(run_input.messages, paused):
        raise InputError(
            f"thread {run_input.thread_id!r} has a paused run waiting for {_waiting(paused)}: "
            "answer each interrupt with a resume entry and each external call with a tool "
            "message, then send a new message",
            "interrupt_pending",
        )
    return Resume(paused, {**answers, **_decisions(entries, paused, decided_by)})


def _new_prompt(messages: Sequence[AguiMessage], paused: Checkpoint) -> bool:
    """Whether the input ends with a user message other than the paused run's own prompt
    (which a client sending its whole history back ends with): one that would go unread."""
    if not messages or not isinstance(messages[-1], UserMessage):
        return False
    prompts = [m.content for m in paused.messages if m.role == "user"]
    return _text(messages[-1].content, "the user message") != (prompts[-1] if prompts else None)


def interrupts(paused: Checkpoint, view: ToolView) -> list[Interrupt]:
    """An interrupt per call of the paused run that waits for a person's decision."""
    return [_interrupt(p, view) for p in paused.pending if p.kind == "approval"]


_SCOPE = {
    "type": "string",
    "enum": list(APPROVAL_SCOPES),
    "default": "once",
    "description": "An approval's reach: this call, the tool's calls for the rest of the run, "
    "or in the session's next runs too",
}


def _interrupt(pending: PendingCall, view: ToolView) -> Interrupt:
    call = pending.call
    entry = view.dispatch.get(call.name) if pending.own else None
    arguments = entry.spec.parameters if entry is not None else {"type": "object"}
    schema = {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": {**arguments, "description": "All the arguments to run it with instead"},
            "reason": {"type": "string", "description": "Why it is rejected, for the model"},
            **({"scope": _SCOPE} if pending.own else {}),
        },
        "required": ["approved"],
        "additionalProperties": False,
    }
    inside = f" (inside {' > '.join(pending.path)})" if pending.path else ""
    why = f" It is asked because {pending.reason}." if pending.reason else ""
    where = f" The program makes it at {pending.where}." if pending.where else ""
    reach = f" The program may call {', '.join(pending.reaches)}." if pending.reaches else ""
    return Interrupt(
        id=pending.digest,
        reason="tool_call",
        message=f"Approve {call.name}({call.arguments_json}){inside}?{why}{where}{reach}",
        tool_call_id=pending.call_ids[0] if pending.call_ids else call.id,
        subagent_run_id=None if pending.own else pending.id.rpartition("/")[0],  # _subagents
        response_schema=schema,
        metadata={"tooldeck": describe(pending)},
    )


def describe(pending: PendingCall) -> dict[str, Any]:
    """A pending call as plain JSON, for interrupts and the state snapshot."""
    return {
        "id": pending.id,
        "callId": pending.call.id,
        "kind": pending.kind,
        "tool": pending.call.name,
        "arguments": pending.call.arguments,
        "path": list(pending.path),
        "interruptId": pending.digest if pending.kind == "approval" else None,
        "reason": pending.reason,
        "own": pending.own,
        "where": pending.where,
        "reaches": list(pending.reaches),
    }


def _waiting(paused: Checkpoint) -> str:
    return ", ".join(f"{p.call.name} ({p.kind}, call {p.id!r})" for p in paused.pending)


def _prompt(messages: Sequence[AguiMessage]) -> str:
    if not messages or not isinstance(messages[-1], UserMessage):
        raise InputError(
            "nothing to run: the input's last message is not a user message (the thread's "
            "session holds the conversation; send the new user message last)",
            "no_prompt",
        )
    text = _text(messages[-1].content, "the user message")
    if not text.strip():
        raise InputError("the user message is empty", "no_prompt")
    return text


def _text(content: str | Sequence[Any], what: str) -> str:
    """A message's text: a string, or its parts when all of them are text."""
    if isinstance(content, str):
        return content
    texts = [part.text for part in content if isinstance(part, TextPart)]
    if len(texts) < len(content):
        others = sorted({type(part).__name__ for part in content} - {"TextPart"})
        raise InputError(
            f"{what} has parts other than text ({', '.join(others)}): this agent reads text only",
            "unsupported_content",
        )
    return "".join(texts)


def _tool_answers(messages: Sequence[AguiMessage], paused: Checkpoint) -> dict[str, Decision]:
    """The results the input's tool messages give for the paused run's external calls."""
    pending = {p.id: p for p in paused.pending}
    answers: dict[str, Decision] = {}
    for message in messages:
        if not isinstance(message, ToolMessage) or message.tool_call_id not in pending:
            continue  # earlier calls' results: history the session already has
        waiting = pending[message.tool_call_id]
        if waiting.kind != "external":
            raise InputError(
                f"call {waiting.id!r} ({waiting.call.name}) waits for a person's approval, not "
                f"for a result: answer interrupt {waiting.digest!r} with a resume entry",
                "not_external",
            )
        text = _text(message.content, f"the result of call {waiting.id!r}")
        answers[waiting.id] = (
            ToolResult.failure(ErrorCode.TOOL_ERROR, message.error)
            if message.error
            else ToolResult.success(text)
        )
    return answers


def _decisions(
    entries: Sequence[ResumeEntry], paused: Checkpoint, decided_by: str
) -> dict[str, Decision]:
    by_interrupt = {p.digest: p for p in paused.pending if p.kind == "approval"}
    decisions: dict[str, Decision] = {}
    for entry in entries:
        pending = by_interrupt.get(entry.interrupt_id)
        if pending is None:
            raise InputError(
                f"resume entry for interrupt {entry.interrupt_id!r}: no call of this thread "
                f"waits for it (decided already, or of another run); waiting: {_waiting(paused)}",
                "unknown_interrupt",
            )
        if pending.id in decisions:
            raise InputError(f"interrupt {entry.interrupt_id!r} is answered twice", "duplicate")
        decisions[pending.id] = _decision(entry, pending, decided_by)
    return decisions


def _decision(entry: ResumeEntry, pending: PendingCall, decided_by: str) -> Decision:
    if entry.status == "cancelled":
        return Reject(message=CANCELLED, by=decided_by)
    try:
        answer = ApprovalAnswer.model_validate(entry.payload)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in error.errors()
        )
        raise InputError(
            f"the answer to interrupt {entry.interrupt_id!r} ({pending.call.name}) is not "
            f'{{"approved": true|false, "editedArgs"?: {{...}}, "reason"?: "...", '
            f'"scope"?: "once"|"run"|"session"}}: {problems}',
            "invalid_payload",
        ) from None
    if answer.scope != "once" and (not answer.approved or not pending.own):
        why = "a rejection is for one call" if not answer.approved else _NESTED_SCOPE
        raise InputError(
            f"the answer to interrupt {entry.interrupt_id!r} ({pending.call.name}) has "
            f"scope {answer.scope!r}: {why}",
            "invalid_payload",
        )
    if answer.approved:
        return Approve(arguments=answer.edited_args, by=decided_by, scope=answer.scope)
    return Reject(message=answer.reason or "", by=decided_by)
