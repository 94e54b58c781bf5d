"""Running one turn's tool calls: every model mistake becomes an observation, never a crash.

Each call is first checked (known tool, JSON object, not a runaway repeat, valid arguments),
then the calls that passed run: concurrently by default, a ``sequential`` tool alone, and
the results are recorded in the model's order.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck._state import CallSignature, RunState, call_signature
from tooldeck.contracts import ToolCall, ToolResult, ToolTrace
from tooldeck.errors import ErrorCode, InvalidArguments
from tooldeck.events import Event, ToolCallFinished, ToolCallStarted
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolEntry, ToolView


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The agent's settings that shape how calls run."""

    include_error_details: bool = False
    repeat_limit: int | None = 3
    max_concurrency: int | None = None
    max_tool_calls: int | None = None


@dataclass(slots=True)
class _Ready:
    index: int
    call: ToolCall
    entry: ToolEntry
    arguments: dict[str, Any]


@dataclass(slots=True)
class TurnOutcome:
    """What the loop needs to know after a turn's calls were recorded."""

    raised: tuple[tuple[ToolTrace, BaseException], ...] = ()
    """Calls whose tool has ``on_error="raise"`` and raised."""
    over_call_limit: bool = False


async def run_turn(
    calls: Sequence[ToolCall],
    view: ToolView,
    state: RunState,
    options: CallOptions,
    deps: Any,
    outcome: TurnOutcome,
) -> AsyncIterator[Event]:
    """Check and run ``calls``, yield their events, then record them in ``state`` in order."""
    round_ = state.rounds
    traces: list[ToolTrace | None] = [None] * len(calls)
    signatures: list[CallSignature | None] = [None] * len(calls)
    ready: list[_Ready] = []
    allowed = _calls_left(state, options)
    for index, call in enumerate(calls):
        if allowed is not None and index >= allowed:
            traces[index] = _refused(call, ErrorCode.CALL_LIMIT, _limit_text(options))
            outcome.over_call_limit = True
        else:
            signature = call_signature(call) if options.repeat_limit is not None else None
            signatures[index] = signature
            checked = _check(call, view, state, options, signature)
            if isinstance(checked, ToolTrace):
                traces[index] = checked
            else:
                ready.append(_Ready(index, call, checked[0], checked[1]))
        refused = traces[index]
        if refused is not None:
            yield ToolCallFinished(round_, refused)
    for group in _groups(ready):
        for item in group:
            yield ToolCallStarted(round_, item.call)
        if len(group) == 1:  # the common case: no tasks, no extra generator
            trace = await _execute(group[0], options, deps, round_)
            traces[group[0].index] = trace
            yield ToolCallFinished(round_, trace)
            continue
        async for trace_index, trace in _run_concurrently(group, options, deps, round_):
            traces[trace_index] = trace
            yield ToolCallFinished(round_, trace)
    raised = []
    for index, maybe_trace in enumerate(traces):
        assert maybe_trace is not None  # every call was refused or ran
        state.record_call(maybe_trace, signatures[index])
        entry = view.dispatch.get(maybe_trace.call.name)
        if maybe_trace.error is not None and entry is not None and entry.on_error == "raise":
            raised.append((maybe_trace, maybe_trace.error))
    outcome.raised = tuple(raised)


def _calls_left(state: RunState, options: CallOptions) -> int | None:
    if options.max_tool_calls is None:
        return None
    return max(0, options.max_tool_calls - state.tool_calls)


def _limit_text(options: CallOptions) -> str:
    return (
        f"not run: this run reached its limit of {options.max_tool_calls} tool calls; "
        "answer with the results you have"
    )


def _check(
    call: ToolCall,
    view: ToolView,
    state: RunState,
    options: CallOptions,
    signature: CallSignature | None,
) -> ToolTrace | tuple[ToolEntry, dict[str, Any]]:
    """The entry and validated arguments of a call, or the trace of why it is refused."""
    entry = view.dispatch.get(call.name)
    if entry is None:
        return _refused(call, ErrorCode.UNKNOWN_TOOL, _unknown_tool_text(call.name, view))
    if call.raw_arguments is not None:
        return _refused(call, ErrorCode.INVALID_JSON, _invalid_json_text(call))
    if signature is not None:
        repeated = _repeat_refusal(call, state, options, signature)
        if repeated is not None:
            return repeated
    try:
        return entry, entry.handler.validate(call.arguments)
    except InvalidArguments as error:
        problems = "\n".join(f"- {problem}" for problem in error.problems)
        text = f"the arguments for {call.name!r} do not match its schema:\n{problems}"
        return _refused(call, ErrorCode.INVALID_ARGUMENTS, text, error)


def _repeat_refusal(
    call: ToolCall, state: RunState, options: CallOptions, signature: CallSignature
) -> ToolTrace | None:
    count = state.seen.get(signature, 0)
    state.seen[signature] = count + 1
    if options.repeat_limit is None or count < options.repeat_limit:
        return None
    previous = state.last_output.get(signature)
    text = (
        f"you already called {call.name!r} with these exact arguments {count} times; "
        "do not call it again with the same arguments"
    )
    if previous is not None:
        text += f". Its last result was:\n{previous}"
    return _refused(call, ErrorCode.REPEATED_CALL, text)


def _unknown_tool_text(name: str, view: ToolView) -> str:
    names = view.names
    if not names:
        return f"there is no tool named {name!r}; no tools are available, answer directly"
    text = f"there is no tool named {name!r}; available tools: {', '.join(names)}"
    close = difflib.get_close_matches(name, names, n=1)
    return text + (f" (did you mean {close[0]!r}?)" if close else "")


def _invalid_json_text(call: ToolCall) -> str:
    raw = call.raw_arguments or ""
    try:
        parsed = json.loads(raw)
    except ValueError as error:
        return (
            f"the arguments for {call.name!r} are not valid JSON ({error}); "
            "send them as one JSON object"
        )
    kind = type(parsed).__name__ if parsed is not None else "null"
    return f"the arguments for {call.name!r} must be a JSON object, got {_json_kind(kind)}"


def _json_kind(python_type: str) -> str:
    kinds = {"list": "an array", "str": "a string", "int": "a number", "float": "a number"}
    return kinds.get(python_type, "a boolean" if python_type == "bool" else python_type)


def _refused(
    call: ToolCall, code: ErrorCode, text: str, error: BaseException | None = None
) -> ToolTrace:
    return ToolTrace(call=call, result=ToolResult.failure(code, text), duration_s=0.0, error=error)


def _groups(ready: list[_Ready]) -> list[list[_Ready]]:
    """Split into groups that may run together; a sequential tool is a group of its own."""
    groups: list[list[_Ready]] = []
    current: list[_Ready] = []
    for item in ready:
        if item.entry.sequential:
            if current:
                groups.append(current)
                current = []
            groups.append([item])
        else:
            current.append(item)
    if current:
        groups.append(current)
    return groups


async def _run_concurrently(
    group: list[_Ready], options: CallOptions, deps: Any, round_: int
) -> AsyncIterator[tuple[int, ToolTrace]]:
    """Run a group's calls concurrently; yield each (index, trace) as it finishes."""
    limit = options.max_concurrency
    semaphore = asyncio.Semaphore(limit) if limit is not None and limit < len(group) else None
    tasks = [
        asyncio.ensure_future(_run_one(item, options, deps, round_, semaphore)) for item in group
    ]
    try:
        for finished in asyncio.as_completed(tasks):
            yield await finished
    finally:
        for task in tasks:
            task.cancel()


async def _run_one(
    item: _Ready,
    options: CallOptions,
    deps: Any,
    round_: int,
    semaphore: asyncio.Semaphore | None,
) -> tuple[int, ToolTrace]:
    if semaphore is None:
        return item.index, await _execute(item, options, deps, round_)
    async with semaphore:
        return item.index, await _execute(item, options, deps, round_)


async def _execute(item: _Ready, options: CallOptions, deps: Any, round_: int) -> ToolTrace:
    call, entry = item.call, item.entry
    context = RunContext(call.id, call.name, deps, round_)
    started = time.perf_counter()
    scope = None
    try:
        if entry.timeout is None:
            output = await entry.handler.run(item.arguments, context)
        else:
            async with asyncio.timeout(entry.timeout) as scope:
                output = await entry.handler.run(item.arguments, context)
    except Exception as error:  # the tool's own failure, kept whole for the host
        if scope is not None and scope.expired():
            result = ToolResult.failure(ErrorCode.TOOL_TIMEOUT, _timeout_text(entry))
        else:
            result = _error_result(entry, error, options)
        return _trace(call, result, started, error)
    return _trace(call, ToolResult.success(output), started, None)


def _timeout_text(entry: ToolEntry) -> str:
    return (
        f"{entry.name!r} did not finish within {entry.timeout:g} s and was stopped; "
        "try smaller inputs or another approach"
    )


def _error_result(entry: ToolEntry, error: Exception, options: CallOptions) -> ToolResult:
    handler = entry.on_error
    if callable(handler):
        try:
            return ToolResult.failure(ErrorCode.TOOL_ERROR, handler(error))
        except Exception:  # a broken on_error must not hide the tool's failure
            pass
    if options.include_error_details:
        text = f"{type(error).__name__}: {error}"
    else:
        text = f"the tool {entry.name!r} failed while running; try other arguments or another way"
    return ToolResult.failure(ErrorCode.TOOL_ERROR, text)


def _trace(
    call: ToolCall, result: ToolResult, started: float, error: BaseException | None
) -> ToolTrace:
    return ToolTrace(
        call=call, result=result, duration_s=time.perf_counter() - started, error=error
    )
