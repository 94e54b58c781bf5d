"""What the model reads when a call fails or is changed: the texts of the observations."""

from __future__ import annotations

import difflib
import json

from tooldeck._untrusted import argument_problem
from tooldeck.errors import ErrorCode, InvalidArguments, ModelRetry
from tooldeck.messages import ToolCall, ToolResult
from tooldeck.run.policy import Limits
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import SEARCH_TOOL, ToolEntry, ToolView
from tooldeck.tools.schema._argument_rules import shown

_MAY_STILL_COMPLETE = (
    "and may still complete in the background: check whether it took effect before "
    "calling it again, do not retry it blindly"
)
_MAX_PROBLEMS = 20
"""Problems listed in one ``invalid_arguments`` text; the rest are counted."""
_MAX_NAME = 200
"""Longer unknown tool names get no "did you mean" (matching them costs too much)."""


def with_edit_note(result: ToolResult, call: ToolCall) -> ToolResult:
    """The result, telling the model it ran with arguments a person edited."""
    note = f"\n(run with arguments edited by a person: {call.arguments_json})"
    return result.model_copy(update={"output": result.output + note})


def timeout_text(entry: ToolEntry) -> str:
    """What the model reads of a call past its ``timeout``: stopped, or still running."""
    within = f"{entry.name!r} did not finish within {entry.options.timeout:g} s"
    if keeps_running(entry):
        return f"{within} {_MAY_STILL_COMPLETE}"
    how = " (its process was killed)" if entry.options.isolation == "process" else ""
    return f"{within} and was stopped{how}; try smaller inputs or another approach"


def run_time_text(limits: Limits, entry: ToolEntry) -> str:
    """What the model reads of a call still running when the run reached ``max_duration_s``."""
    text = f"not finished: the run reached its time limit (max_duration_s={limits.max_duration_s})"
    return f"{text}; the call {_MAY_STILL_COMPLETE}" if keeps_running(entry) else text


def keeps_running(entry: ToolEntry) -> bool:
    """A sync function in a worker thread: a thread cannot be stopped, only abandoned."""
    handler = entry.handler
    return (
        isinstance(handler, FunctionTool)
        and not handler.external
        and not handler.is_async
        and entry.options.isolation == "thread"
    )


def error_result(entry: ToolEntry, error: Exception, include_details: bool) -> ToolResult:
    """What the model reads of a tool that raised: its ``on_error`` text, or a generic line."""
    if isinstance(error, ModelRetry):  # the tool asks the model to try again, saying why
        return ToolResult.failure(ErrorCode.TOOL_ERROR, str(error))
    handler = entry.options.on_error
    if callable(handler):
        try:
            return ToolResult.failure(ErrorCode.TOOL_ERROR, handler(error))
        except Exception:  # a broken on_error must not hide the tool's failure
            pass
    if include_details:
        text = f"{type(error).__name__}: {error}"
    else:
        text = f"the tool {entry.name!r} failed while running; try other arguments or another way"
    return ToolResult.failure(ErrorCode.TOOL_ERROR, text)


def unknown_tool_text(name: str, view: ToolView) -> str:
    """What the model reads of a call of a tool that does not exist, with the names that do
    (and, when tools are deferred, how to find them: ``search_tools``)."""
    names = view.names
    if view.deferred:
        if name in view.deferred:
            return (
                f"the tool {shown(name)} is not loaded yet: call {SEARCH_TOOL} with words for "
                "what you need; the tools it finds can be called from the next turn"
            )
        hint = f"; more tools can be found with {SEARCH_TOOL}"
    else:
        hint = ""
    if not names:
        return f"there is no tool named {shown(name)}; no tools are available, answer directly"
    text = f"there is no tool named {shown(name)}; available tools: {', '.join(names)}"
    close = difflib.get_close_matches(name, names, n=1) if len(name) <= _MAX_NAME else []
    return text + (f" (did you mean {close[0]!r}?)" if close else "") + hint


def invalid_json_text(call: ToolCall) -> str:
    """What the model reads of arguments that are not one JSON object."""
    raw = call.raw_arguments or ""
    name = shown(call.name)
    try:
        parsed = json.loads(raw)
    except RecursionError:
        return f"the arguments for {name} are nested too deeply to read; send one flat JSON object"
    except ValueError as error:
        return (
            f"the arguments for {name} are not valid JSON ({error}); send them as one JSON object"
        )
    if isinstance(parsed, dict):
        return f"the arguments for {name} {argument_problem(parsed) or 'could not be read'}"
    kind = type(parsed).__name__ if parsed is not None else "null"
    return f"the arguments for {name} must be a JSON object, got {_json_kind(kind)}"


def _json_kind(python_type: str) -> str:
    kinds = {"list": "an array", "str": "a string", "int": "a number", "float": "a number"}
    return kinds.get(python_type, "a boolean" if python_type == "bool" else python_type)


def invalid_arguments_text(call: ToolCall, error: InvalidArguments) -> str:
    """What the model reads of arguments its schema refuses: each problem, where and why."""
    listed = error.problems[:_MAX_PROBLEMS]
    problems = "\n".join(f"- {problem}" for problem in listed)
    more = len(error.problems) - len(listed)
    if more:
        problems += f"\n- ... and {more} more"
    return f"the arguments for {call.name!r} do not match its schema:\n{problems}"
