"""Running one turn's tool calls: every model mistake becomes an observation, never a crash.

Each call is first checked (known tool, JSON object, within the run's budget, not a runaway
repeat, valid arguments); a valid call that needs a person's decision or belongs to the
application waits (it becomes pending); the others run — concurrently by default, a
``sequential`` tool alone — and the results are recorded in the model's order. A round
ends with a ``RoundOutcome``, the last item the runner yields.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck._observer import RunObserver
from tooldeck._state import OpenTurn
from tooldeck.checkpoint import Approve, Decision, Reject, call_digest
from tooldeck.contracts import PendingCall, PendingKind, ToolCall, ToolResult, ToolTrace
from tooldeck.errors import ErrorCode, InvalidArguments, ModelRetry
from tooldeck.events import Event, ToolCallFinished, ToolCallStarted
from tooldeck.policy import CallSignature, RunPolicy
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolEntry, ToolView


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The agent's settings that shape how calls run."""

    include_error_details: bool = False
    max_concurrency: int | None = None


@dataclass(slots=True)
class RoundContext:
    """What every call of a round shares (one per run; the loop updates view and round)."""

    view: ToolView
    policy: RunPolicy
    options: CallOptions
    deps: Any
    round: int
    run_id: str
    observer: RunObserver | None = None
    """Told about each call when the run is observed (traced)."""


@dataclass(slots=True)
class RoundOutcome:
    """What a round of calls ended with (the runner's last item)."""

    traces: tuple[ToolTrace, ...]
    """The calls answered in this step, in the model's order."""
    pending: tuple[PendingCall, ...]
    """Calls that still wait for a decision or a result."""
    raised: tuple[tuple[str, BaseException], ...]
    """(tool name, exception) of tools with ``on_error="raise"`` that raised."""
    over_call_limit: bool


@dataclass(slots=True)
class _Ready:
    index: int
    call: ToolCall
    entry: ToolEntry
    arguments: dict[str, Any]
    signature: CallSignature | None
    edited: bool = False
    """The arguments are a person's edit (the model is told, before the result)."""


RoundItem = Event | RoundOutcome


async def run_new_calls(
    calls: Sequence[ToolCall], ctx: RoundContext
) -> AsyncGenerator[RoundItem, None]:
    """Check a new turn's calls, run those that may run now, and say which must wait."""
    traces: list[ToolTrace | None] = [None] * len(calls)
    signatures: list[CallSignature | None] = [None] * len(calls)
    ready: list[_Ready] = []
    over_limit = False
    for index, call in enumerate(calls):
        checked = _check(index, call, ctx)
        if isinstance(checked, _Ready):
            ready.append(checked)
            signatures[index] = checked.signature
            continue
        trace, signatures[index] = checked
        traces[index] = trace
        over_limit = over_limit or trace.result.error_code is ErrorCode.CALL_LIMIT
        yield _not_run(trace, ctx)
    pending: list[PendingCall] = []
    if ctx.view.may_pause:
        ready = await _hold_back(ready, ctx, pending)
    if len(ready) == 1:  # the common case: no groups, no tasks, no extra generator
        item = ready[0]
        yield ToolCallStarted(ctx.round, item.call)
        trace = traces[item.index] = await _execute(item, ctx)
        yield ToolCallFinished(ctx.round, trace)
    elif ready:
        running = _execute_all(ready, traces, ctx)
        try:
            async for event in running:
                yield event
        except BaseException:  # closed or cancelled: stop the calls now, not at finalization
            await running.aclose()
            raise
    yield _outcome(traces, signatures, ctx, tuple(pending), over_limit)


async def run_decided_calls(
    turn: OpenTurn, decisions: Mapping[str, Decision], ctx: RoundContext
) -> AsyncGenerator[RoundItem, None]:
    """Carry out the decisions on a paused turn's calls; the others stay pending."""
    waiting = turn.pending
    traces: list[ToolTrace | None] = [None] * len(waiting)
    signatures: list[CallSignature | None] = [None] * len(waiting)
    ready: list[_Ready] = []
    still: list[PendingCall] = []
    for index, pending in enumerate(waiting):
        decision = decisions.get(pending.call.id)
        if decision is None:
            still.append(pending)
        elif isinstance(decision, Approve):
            checked = _approved(index, pending.call, decision, ctx)
            if isinstance(checked, _Ready):
                ready.append(checked)
            else:
                traces[index] = checked
                yield _not_run(checked, ctx)
        else:
            decided = traces[index] = _decided_trace(pending.call, decision)
            yield _not_run(decided, ctx)
    running = _execute_all(ready, traces, ctx)
    try:
        async for event in running:
            yield event
    except BaseException:  # closed or cancelled: stop the calls now, not at finalization
        await running.aclose()
        raise
    yield _outcome(traces, signatures, ctx, tuple(still), over_limit=False)


def _not_run(trace: ToolTrace, ctx: RoundContext) -> ToolCallFinished:
    """The event of a call answered without running (refused, rejected, or given a result)."""
    if ctx.observer is not None:
        ctx.observer.answered(trace)
    return ToolCallFinished(ctx.round, trace)


def _check(
    index: int, call: ToolCall, ctx: RoundContext
) -> _Ready | tuple[ToolTrace, CallSignature | None]:
    """The call ready to run, or the trace of why it is refused (with its signature)."""
    over_budget = ctx.policy.admit()
    if over_budget is not None:
        return _trace(call, over_budget, 0.0, None), None
    entry = ctx.view.dispatch.get(call.name)
    if entry is None:
        text = _unknown_tool_text(call.name, ctx.view)
        return _refused(call, ErrorCode.UNKNOWN_TOOL, text), None
    if call.raw_arguments is not None:
        return _refused(call, ErrorCode.INVALID_JSON, _invalid_json_text(call)), None
    repeated, signature = ctx.policy.check_repeat(call)
    if repeated is not None:
        return _trace(call, repeated, 0.0, None), signature
    try:
        return _Ready(index, call, entry, entry.handler.validate(call.arguments), signature)
    except InvalidArguments as error:
        return _invalid_arguments(call, error), signature


def _approved(
    index: int, call: ToolCall, decision: Approve, ctx: RoundContext
) -> _Ready | ToolTrace:
    """An approved call ready to run (with its edit, validated again), or why it cannot."""
    edited = decision.arguments is not None
    if decision.arguments is not None:
        call = call.model_copy(update={"arguments": decision.arguments})
    entry = ctx.view.dispatch[call.name]
    try:
        arguments = entry.handler.validate(call.arguments)
    except InvalidArguments as error:
        refused = _invalid_arguments(call, error)
        if edited:
            return refused.model_copy(update={"result": _with_edit_note(refused.result, call)})
        return refused
    return _Ready(index, call, entry, arguments, None, edited)


def _decided_trace(call: ToolCall, decision: Reject | ToolResult) -> ToolTrace:
    if isinstance(decision, Reject):
        text = decision.message or "a person rejected this call; do not make it again"
        return _refused(call, ErrorCode.REJECTED, text)
    return _trace(call, decision, 0.0, None)


async def _hold_back(
    ready: list[_Ready], ctx: RoundContext, pending: list[PendingCall]
) -> list[_Ready]:
    """Keep the calls that may run now; the others become pending (in the model's order)."""
    runnable = []
    for item in ready:
        kind: PendingKind | None = "external" if item.entry.external else None
        if kind is None and await _needs_approval(item, ctx):
            kind = "approval"
        if kind is None:
            runnable.append(item)
        else:
            digest = call_digest(ctx.run_id, item.call)
            pending.append(PendingCall(call=item.call, kind=kind, digest=digest))
    return runnable


async def _needs_approval(item: _Ready, ctx: RoundContext) -> bool:
    """The tool's rule for this call; a predicate that raises means yes (fail closed)."""
    rule = item.entry.options.requires_approval
    if isinstance(rule, bool):
        return rule
    context = RunContext(item.call.id, item.call.name, ctx.deps, ctx.round)
    try:
        verdict = rule(context, item.arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        return True
    return bool(verdict)


def _outcome(
    traces: list[ToolTrace | None],
    signatures: list[CallSignature | None],
    ctx: RoundContext,
    pending: tuple[PendingCall, ...],
    over_limit: bool,
) -> RoundOutcome:
    """Record the answered calls with the policy, in order, and sum up the round."""
    done: list[ToolTrace] = []
    raised: list[tuple[str, BaseException]] = []
    for index, trace in enumerate(traces):
        if trace is None:  # still pending
            continue
        done.append(trace)
        name = trace.call.name
        ctx.policy.record(name, trace.result, signatures[index])
        if trace.error is not None:
            entry = ctx.view.dispatch.get(name)
            if entry is not None and entry.options.on_error == "raise":
                raised.append((name, trace.error))
    return RoundOutcome(tuple(done), pending, tuple(raised), over_limit)


async def _execute_all(
    ready: list[_Ready], traces: list[ToolTrace | None], ctx: RoundContext
) -> AsyncGenerator[Event, None]:
    """Run the ready calls group by group; fill ``traces`` at each call's index."""
    for group in _groups(ready):
        for item in group:
            yield ToolCallStarted(ctx.round, item.call)
        if len(group) == 1:
            trace = await _execute(group[0], ctx)
            traces[group[0].index] = trace
            yield ToolCallFinished(ctx.round, trace)
            continue
        running = _run_concurrently(group, ctx)
        try:
            async for index, trace in running:
                traces[index] = trace
                yield ToolCallFinished(ctx.round, trace)
        except BaseException:  # closed or cancelled: cancel the calls now
            await running.aclose()
            raise


def _groups(ready: list[_Ready]) -> list[list[_Ready]]:
    """Split into groups that may run together; a sequential tool is a group of its own."""
    groups: list[list[_Ready]] = []
    current: list[_Ready] = []
    for item in ready:
        if item.entry.options.sequential:
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
    group: list[_Ready], ctx: RoundContext
) -> AsyncGenerator[tuple[int, ToolTrace], None]:
    """Run a group's calls concurrently; yield each (index, trace) as it finishes."""
    limit = ctx.options.max_concurrency
    semaphore = asyncio.Semaphore(limit) if limit is not None and limit < len(group) else None
    tasks = [asyncio.ensure_future(_run_one(item, ctx, semaphore)) for item in group]
    try:
        for finished in asyncio.as_completed(tasks):
            yield await finished
    finally:
        for task in tasks:
            task.cancel()


async def _run_one(
    item: _Ready, ctx: RoundContext, semaphore: asyncio.Semaphore | None
) -> tuple[int, ToolTrace]:
    if semaphore is None:
        return item.index, await _execute(item, ctx)
    async with semaphore:
        return item.index, await _execute(item, ctx)


def _execute(item: _Ready, ctx: RoundContext) -> Awaitable[ToolTrace]:
    """Run one call: under the run's observer (as a span) when there is one."""
    if ctx.observer is None:
        return _bounded(item, ctx)
    return ctx.observer.tool_call(item.call, lambda: _bounded(item, ctx))


async def _bounded(item: _Ready, ctx: RoundContext) -> ToolTrace:
    """Run one call within its own timeout and the run's remaining time."""
    limit = item.entry.options.timeout
    run_limited = False
    if ctx.policy.limits.max_duration_s is not None:
        remaining = ctx.policy.remaining_s()
        run_limited = remaining is not None and (limit is None or remaining < limit)
        if run_limited:
            limit = remaining
    call, entry = item.call, item.entry
    context = RunContext(call.id, call.name, ctx.deps, ctx.round)
    started = time.perf_counter()
    scope = None
    error: Exception | None = None
    try:
        if limit is None:
            output = await entry.handler.run(item.arguments, context)
        else:
            async with asyncio.timeout(limit) as scope:
                output = await entry.handler.run(item.arguments, context)
        result = output if isinstance(output, ToolResult) else ToolResult.success(output)
    except Exception as raised:  # the tool's own failure, kept whole for the host
        error = raised
        if scope is not None and scope.expired():
            text = _run_time_text(ctx) if run_limited else _timeout_text(entry)
            result = ToolResult.failure(ErrorCode.TOOL_TIMEOUT, text)
        else:
            result = _error_result(entry, raised, ctx.options)
    if item.edited:
        result = _with_edit_note(result, call)
    return _trace(call, result, time.perf_counter() - started, error)


def _with_edit_note(result: ToolResult, call: ToolCall) -> ToolResult:
    note = f"\n(run with arguments edited by a person: {call.arguments_json})"
    return result.model_copy(update={"output": result.output + note})


def _timeout_text(entry: ToolEntry) -> str:
    return (
        f"{entry.name!r} did not finish within {entry.options.timeout:g} s and was stopped; "
        "try smaller inputs or another approach"
    )


def _run_time_text(ctx: RoundContext) -> str:
    limit = ctx.policy.limits.max_duration_s
    return f"not finished: the run reached its time limit (max_duration_s={limit:g})"


def _error_result(entry: ToolEntry, error: Exception, options: CallOptions) -> ToolResult:
    if isinstance(error, ModelRetry):  # the tool asks the model to try again, saying why
        return ToolResult.failure(ErrorCode.TOOL_ERROR, str(error))
    handler = entry.options.on_error
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


def _invalid_arguments(call: ToolCall, error: InvalidArguments) -> ToolTrace:
    problems = "\n".join(f"- {problem}" for problem in error.problems)
    text = f"the arguments for {call.name!r} do not match its schema:\n{problems}"
    return _refused(call, ErrorCode.INVALID_ARGUMENTS, text, error)


def _refused(
    call: ToolCall, code: ErrorCode, text: str, error: BaseException | None = None
) -> ToolTrace:
    return _trace(call, ToolResult.failure(code, text), 0.0, error)


def _trace(
    call: ToolCall, result: ToolResult, duration_s: float, error: BaseException | None
) -> ToolTrace:
    return ToolTrace(call=call, result=result, duration_s=duration_s, error=error)
