"""What a model returns is untrusted: make it safe to keep, show, save and send back.

A broken or hostile model can send arguments nested 100,000 levels deep, strings of
megabytes, text that is not valid Unicode (lone surrogates, which no UTF-8 encoder accepts)
or the same call id twice. Each would later crash something that only meant to show, save
or echo the turn (a JSON encoder, a terminal, the next request). The loop passes every
model turn through ``safe_output`` once, as it arrives; ``ToolCall.from_json`` applies the
same rules to argument text. Arguments that break them are kept as text and answered with
``invalid_json``, so the model reads why.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tooldeck.contracts import AssistantOutput, ToolCall

MAX_ARGUMENT_DEPTH = 64
"""Arguments nested deeper than this are refused (``invalid_json``); real tools need a few."""
SHORT_JSON = 2 * MAX_ARGUMENT_DEPTH + 1
"""JSON text this short cannot nest past the limit: each level takes two characters."""
REPLACEMENT = "\ufffd"
_SCALARS = frozenset((int, float, bool, type(None)))
_SURROGATE = re.compile("[\ud800-\udfff]")
"""A Python string holds astral characters whole, so any surrogate in one is lone."""


def argument_problem(arguments: dict[str, Any]) -> str | None:
    """Why parsed arguments cannot be used as they are, or None when they can."""
    for key, item in arguments.items():  # the usual case first: flat, ASCII
        if type(key) is not str or not key.isascii():
            break
        if type(item) is str:
            if not item.isascii():
                break
        elif type(item) not in _SCALARS:
            break
    else:
        return None
    return _nested_problem(arguments)


def _nested_problem(arguments: dict[str, Any]) -> str | None:
    pending: list[tuple[Any, int]] = [(arguments, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            return f"are nested more than {MAX_ARGUMENT_DEPTH} levels deep; send a flatter object"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if (isinstance(key, str) and not valid_text(key)) or (
                isinstance(item, str) and not valid_text(item)
            ):
                return (
                    "contain text that is not valid Unicode (a lone surrogate such as "
                    "'\\ud800'); send valid UTF-8 text"
                )
            if isinstance(item, dict | list):
                pending.append((item, depth + 1))
    return None


def valid_text(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (has no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def repaired(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (unchanged when valid)."""
    if valid_text(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


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
