"""A model's turn made safe to keep, show, save and send back (see ``tooldeck._untrusted``)."""

from __future__ import annotations

import json
from typing import Any

from tooldeck._untrusted import MAX_ARGUMENT_DEPTH, argument_problem, repaired, valid_text
from tooldeck.messages import AssistantOutput, ToolCall


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
            if raw is None:
                if argument_problem(call.arguments) is not None:
                    break
            elif not (raw.isascii() or valid_text(raw)):
                break
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
    arguments = call.arguments
    if raw is None and arguments and argument_problem(arguments) is not None:
        raw = _as_text(arguments)
        arguments = {}
    elif raw is not None:
        raw = repaired(raw)
    if name is call.name and call_id is call.id and raw is call.raw_arguments:
        return call
    update = {"name": name, "id": call_id, "raw_arguments": raw, "arguments": arguments}
    return call.model_copy(update=update)


def _as_text(arguments: dict[str, Any]) -> str:
    """Arguments as JSON text to keep in place of them (ASCII, so lone surrogates stay
    escapes); nesting past the limit is cut, as no encoder goes 100,000 levels deep."""
    return json.dumps(_cut(arguments, MAX_ARGUMENT_DEPTH + 1), default=repr)


def _cut(value: Any, levels: int) -> Any:
    if not isinstance(value, dict | list):
        return value
    if levels <= 0:
        return "..."
    if isinstance(value, dict):
        return {key: _cut(item, levels - 1) for key, item in value.items()}
    return [_cut(item, levels - 1) for item in value]


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
