"""Untrusted content: the policy for the calls that follow it (``UntrustedPolicy``), and a
model's turn made safe to keep, show, save and send back (see ``tooldeck._untrusted``)."""

from __future__ import annotations

from typing import get_args

from tooldeck._untrusted import repaired, valid_text
from tooldeck.messages import AssistantOutput, ToolCall
from tooldeck.run._engine.inherited import AfterUntrusted
from tooldeck.run.capabilities import Capability


class UntrustedPolicy(Capability):
    """What calls of ``side_effects`` or ``sensitive`` tools need once a
    ``trust="untrusted"`` tool's result is in the conversation: nothing more (``"allow"``),
    a person's approval (``"ask"``) or they are refused (``"refuse"``). The same as
    ``Agent(after_untrusted=...)``; it holds for the whole run when the run starts on its
    agent (``run_level``), and the stricter policy wins where two meet."""

    run_level = True

    def __init__(self, after: AfterUntrusted = "ask") -> None:
        if after not in get_args(AfterUntrusted):
            raise ValueError(f"after_untrusted must be 'allow', 'ask' or 'refuse', got {after!r}")
        self.after: AfterUntrusted = after

    def __repr__(self) -> str:
        return f"UntrustedPolicy(after={self.after!r})"


def safe_output(output: AssistantOutput) -> AssistantOutput:
    """The model's turn, safe to keep: text repaired, unusable arguments kept as text, each
    call id unique. The same object when nothing needed a change (the usual case)."""
    calls = output.tool_calls
    content = output.content
    if content.isascii() or valid_text(content):
        for call in calls:  # inline, as this runs every round: the usual call is ASCII
            name, call_id, raw = call.name, call.id, call.raw_arguments
            if not (name.isascii() and call_id.isascii()) and not (
                valid_text(name) and valid_text(call_id)
            ):
                break
            if raw is not None and not (raw.isascii() or valid_text(raw)):
                break  # (the arguments were checked as the call was made: ToolCall)
        else:
            if len(calls) < 2 or _unique(calls):
                return output
    safe = _unique_ids(tuple(_safe_call(call) for call in calls))
    return output.model_copy(update={"content": repaired(output.content), "tool_calls": safe})


def _unique(calls: tuple[ToolCall, ...]) -> bool:
    return len(calls) < 2 or len({call.id for call in calls}) == len(calls)


def _safe_call(call: ToolCall) -> ToolCall:
    name, call_id = repaired(call.name), repaired(call.id)
    raw = call.raw_arguments
    if raw is not None:
        raw = repaired(raw)
    if name is call.name and call_id is call.id and raw is call.raw_arguments:
        return call
    return call.model_copy(update={"name": name, "id": call_id, "raw_arguments": raw})


def _unique_ids(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """Calls whose ids repeat an earlier id in the turn get a suffix (``id#2``), so each
    result pairs with exactly one call."""
    if _unique(calls):
        return calls
    seen: set[str] = set()
    out = []
    for call in calls:
        call_id, number = call.id, 1
        while call_id in seen:
            number += 1
            call_id = f"{call.id}#{number}"
        seen.add(call_id)
        out.append(call if call_id == call.id else call.model_copy(update={"id": call_id}))
    return tuple(out)
