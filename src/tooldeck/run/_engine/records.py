"""The records the loop makes every round, from values it has already checked.

A tool message from the text a call's result holds, the assistant message of a turn that
``safe_output`` made safe, a success from a tool's text, a call's trace from the call and
its result: each is made with ``_fast_records.trusted`` (no second validation of values that are
validated records or the loop's own text), which halves what they cost. The public
constructors (``Message.tool``, ``ToolResult.success``, ...) validate as always.
"""

from __future__ import annotations

from tooldeck._fast_records import trusted
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult
from tooldeck.results import ToolTrace

_TOOL_GIVEN = ("role", "content", "tool_call_id")
_UNTRUSTED_GIVEN = ("role", "content", "tool_call_id", "untrusted")
_ASSISTANT_GIVEN = ("role", "content", "tool_calls", "provider_items")
_SUCCESS_GIVEN = ("ok", "output")
_TRACE_GIVEN = ("call", "result", "duration_s", "error")


def tool_message(call_id: str, text: str, untrusted: bool = False) -> Message:
    """``Message.tool(call_id, text)``: the observation the model reads for a call (marked
    ``untrusted`` when its tool's results come from the outside world)."""
    fields = {
        "role": "tool",
        "content": text,
        "tool_calls": (),
        "tool_call_id": call_id,
        "provider_items": (),
        "untrusted": untrusted,
    }
    return trusted(Message, fields, _UNTRUSTED_GIVEN if untrusted else _TOOL_GIVEN)


def assistant_message(output: AssistantOutput) -> Message:
    """``Message.assistant(output)``: the turn, as the conversation keeps it."""
    fields = {
        "role": "assistant",
        "content": output.content,
        "tool_calls": output.tool_calls,
        "tool_call_id": None,
        "provider_items": output.provider_items,
        "untrusted": False,
    }
    return trusted(Message, fields, _ASSISTANT_GIVEN)


def succeeded(text: str) -> ToolResult:
    """``ToolResult.success(text)`` for a tool's text (a str: the caller checked)."""
    return trusted(ToolResult, {"ok": True, "output": text, "error_code": None}, _SUCCESS_GIVEN)


def traced(
    call: ToolCall, result: ToolResult, duration_s: float, error: BaseException | None
) -> ToolTrace:
    """The trace of a call, from the call and its result (records already)."""
    fields = {
        "call": call,
        "result": result,
        "duration_s": duration_s,
        "error": error,
        "inner_trace": None,
        "full_output": None,
        "untrusted": False,
    }
    return trusted(ToolTrace, fields, _TRACE_GIVEN)
