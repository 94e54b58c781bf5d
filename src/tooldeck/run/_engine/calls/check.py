"""Admitting calls: the checks a call passes before it may run, and what waits instead.

A new call is checked in order — within the run's call budget, a known tool, arguments that
parsed as a JSON object, not a runaway repeat, arguments its schema accepts — and refused
with an observation at the first check it fails. A valid call whose tool needs a person's
approval (or belongs to the application) becomes a PendingCall. A paused turn's calls are
admitted by the decisions made on them.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from tooldeck.errors import ErrorCode, InvalidArguments
from tooldeck.messages import ToolCall, ToolResult
from tooldeck.results import Approve, Decision, PendingCall, PendingKind, Reject, ToolTrace
from tooldeck.run._engine.calls.shared import CallRound, Ready, refused, trace
from tooldeck.run._engine.calls.texts import (
    invalid_arguments_text,
    invalid_json_text,
    unknown_tool_text,
    with_edit_note,
)
from tooldeck.run._engine.checkpoint import call_digest
from tooldeck.run._engine.remembered import approval_for
from tooldeck.run.policy import CallSignature
from tooldeck.tools.context import Resumption


def check_new(
    index: int, call: ToolCall, round_: CallRound
) -> Ready | tuple[ToolTrace, CallSignature | None]:
    """The call ready to run, or the trace of why it is refused (with its signature)."""
    policy = round_.policy
    entry = round_.view.dispatch.get(call.name)
    if entry is not None and entry.options.max_calls is not None:
        spent = policy.admit_tool(call.name, entry.options.max_calls)
        if spent is not None:
            return trace(call, spent, 0.0), None  # not counted against the run's calls
    over_budget = policy.admit()
    if over_budget is not None:
        return trace(call, over_budget, 0.0), None
    if entry is None:
        text = unknown_tool_text(call.name, round_.view)
        return refused(call, ErrorCode.UNKNOWN_TOOL, text), None
    if call.raw_arguments is not None:
        return refused(call, ErrorCode.INVALID_JSON, invalid_json_text(call)), None
    repeated, signature = policy.check_repeat(call)
    if repeated is not None:
        return trace(call, repeated, 0.0), signature
    try:
        return Ready(index, call, entry, entry.handler.validate(call.arguments), signature)
    except InvalidArguments as error:
        return invalid_arguments(call, error), signature


async def hold_back(
    ready: Sequence[Ready], round_: CallRound
) -> tuple[list[Ready], list[tuple[int, PendingCall]]]:
    """The calls that may run now, and (by their index) those that wait: for a person's
    decision, or for the application's result."""
    runnable: list[Ready] = []
    waiting: list[tuple[int, PendingCall]] = []
    for item in ready:
        kind: PendingKind | None = "external" if item.entry.external else None
        if kind is None and (item.ask or await _needs_approval(item, round_)):
            kind = "approval"
            if not item.ask:  # untrusted content: a person is asked each time
                item.remembered = approval_for(round_.states, item.call.name)
                kind = None if item.remembered is not None else kind
        if kind is None:
            runnable.append(item)
        else:
            digest = call_digest(round_.run_id, item.call)
            pending = PendingCall(
                call=item.call,
                kind=kind,
                digest=digest,
                reason=item.ask,
                reaches=item.entry.reaches,
            )
            waiting.append((item.index, pending))
    return runnable, waiting


async def _needs_approval(item: Ready, round_: CallRound) -> bool:
    """The tool's rule for this call; a predicate that raises means yes (fail closed)."""
    rule = item.entry.options.requires_approval
    if isinstance(rule, bool):
        return rule
    try:
        verdict = rule(round_.context(item.call), item.arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        return True
    return bool(verdict)


def check_decided(
    index: int, pending: PendingCall, decisions: Mapping[str, Decision], round_: CallRound
) -> Ready | ToolTrace | None:
    """A paused turn's call with the decisions made on it: ready to run (approved, or a
    paused call going on), answered without running (rejected, an external result, an edit
    its schema refuses), or None while it still waits."""
    if pending.nested is not None:
        inner = decisions_inside(pending.call.id, decisions)
        if not inner:
            return None
        entry = round_.view.dispatch[pending.call.name]
        resumed = Resumption(pending.nested, inner)
        call = pending.call
        return Ready(index, call, entry, call.arguments, None, resumed=resumed)
    decision = decisions.get(pending.call.id)
    if decision is None:
        return _remembered(index, pending, round_)
    if isinstance(decision, Approve):
        return _approved(index, pending.call, decision, round_)
    return _decided_trace(pending.call, decision)


def _remembered(index: int, pending: PendingCall, round_: CallRound) -> Ready | ToolTrace | None:
    """A call of the paused turn left without a decision: approved by the approval its tool
    gained in this resume (``Approve(scope=...)`` on another of its calls), or still waiting
    (asked because of untrusted content, it waits for its own decision)."""
    if pending.kind != "approval" or pending.reason:
        return None
    remembered = approval_for(round_.states, pending.call.name)
    if remembered is None:
        return None
    ready = _approved(index, pending.call, Approve(), round_)
    if isinstance(ready, Ready):
        ready.remembered = remembered
    return ready


def _approved(
    index: int, call: ToolCall, decision: Approve, round_: CallRound
) -> Ready | ToolTrace:
    """An approved call ready to run (with its edit, validated again), or why it cannot."""
    edited = decision.arguments is not None
    if decision.arguments is not None:
        call = call.model_copy(update={"arguments": decision.arguments})
    entry = round_.view.dispatch[call.name]
    try:
        arguments = entry.handler.validate(call.arguments)
    except InvalidArguments as error:
        refusal = invalid_arguments(call, error)
        if edited:
            return refusal.model_copy(update={"result": with_edit_note(refusal.result, call)})
        return refusal
    return Ready(index, call, entry, arguments, None, edited)


def _decided_trace(call: ToolCall, decision: Reject | ToolResult) -> ToolTrace:
    if isinstance(decision, Reject):
        text = decision.message or "a person rejected this call; do not make it again"
        return refused(call, ErrorCode.REJECTED, text)
    return trace(call, decision, 0.0)


def decisions_inside(call_id: str, decisions: Mapping[str, Decision]) -> dict[str, Decision]:
    """The decisions on the calls inside the paused call ``call_id``, keyed for its run."""
    prefix = f"{call_id}/"
    size = len(prefix)
    return {key[size:]: value for key, value in decisions.items() if key.startswith(prefix)}


def invalid_arguments(call: ToolCall, error: InvalidArguments) -> ToolTrace:
    """The trace of a call whose arguments its schema refuses."""
    return refused(call, ErrorCode.INVALID_ARGUMENTS, invalid_arguments_text(call, error), error)
