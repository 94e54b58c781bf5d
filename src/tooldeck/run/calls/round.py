"""Running one turn's tool calls: every model mistake becomes an observation, never a crash.

Each call is first checked (known tool, JSON object, within the run's budget, not a runaway
repeat, valid arguments); a valid call that needs a person's decision or belongs to the
application waits (it becomes pending); the others run — concurrently by default, a
``sequential`` tool alone — and the results are recorded in the model's order. The runner
yields the round's events; as it ends it leaves the ``RoundOutcome`` on the RoundContext.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from tooldeck._untrusted import repaired, valid_text
from tooldeck.errors import ErrorCode, InvalidArguments
from tooldeck.messages import Message, ToolCall, ToolResult
from tooldeck.results import Checkpoint, PendingCall, PendingKind, ToolTrace
from tooldeck.run.agent_tool import AgentTool, Emit, NestedOutcome, NestedResume, decisions_inside
from tooldeck.run.calls.texts import (
    error_result,
    invalid_arguments_text,
    invalid_json_text,
    run_time_text,
    timeout_text,
    unknown_tool_text,
    with_edit_note,
)
from tooldeck.run.checkpoint import Approve, Decision, Reject, call_digest
from tooldeck.run.events import Event, NestedEvent, ToolCallFinished, ToolCallStarted
from tooldeck.run.middleware import MiddlewareStack
from tooldeck.run.observer import RunObserver
from tooldeck.run.policy import CallSignature, RunPolicy
from tooldeck.run.state import OpenTurn
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolEntry, ToolRegistry, ToolView


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The agent's settings that shape how calls run."""

    include_error_details: bool = False
    max_concurrency: int | None = None
    middleware: MiddlewareStack | None = None
    registry: ToolRegistry | None = None
    """The agent's registry, which tools may change (``ctx.tools``)."""


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
    messages: Sequence[Message] = ()
    outcome: RoundOutcome | None = None
    """What the last round of calls ended with (set by the round runner as it ends)."""


@dataclass(slots=True)
class RoundOutcome:
    """What a round of calls ended with (the runner's last item)."""

    traces: tuple[ToolTrace, ...]
    """The calls answered in this round, in the model's order."""
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
    resume: NestedResume | None = None
    """For a paused agent tool's call: its inner run, to go on with."""


T = TypeVar("T")

Slot = ToolTrace | PendingCall | None
"""One call of a round: its trace once answered, its PendingCall while it waits."""
Ran = ToolTrace | PendingCall
"""What running a call gives: its trace, or (an agent tool whose run paused) its PendingCall."""


async def run_new_calls(
    calls: Sequence[ToolCall], ctx: RoundContext
) -> AsyncGenerator[Event, None]:
    """Check a new turn's calls, run those that may run now, and say which must wait."""
    slots: list[Slot] = [None] * len(calls)
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
        slots[index] = trace
        over_limit = over_limit or trace.result.error_code is ErrorCode.CALL_LIMIT
        yield _not_run(trace, ctx)
    if ctx.view.may_pause:
        ready = await _hold_back(ready, ctx, slots)
    if len(ready) == 1 and not isinstance(ready[0].entry.handler, AgentTool):
        item = ready[0]  # the common case: no groups, no tasks, no extra generator
        yield ToolCallStarted(ctx.round, item.call)
        ran = slots[item.index] = await _start(item, ctx)
        if isinstance(ran, ToolTrace):
            yield ToolCallFinished(ctx.round, ran)
    elif ready:
        async with aclosing(_execute_all(ready, slots, ctx)) as running:
            async for event in running:
                yield event
    ctx.outcome = _outcome(slots, signatures, ctx, over_limit)


async def run_decided_calls(
    turn: OpenTurn, decisions: Mapping[str, Decision], ctx: RoundContext
) -> AsyncGenerator[Event, None]:
    """Carry out the decisions on a paused turn's calls; the others stay pending."""
    waiting = turn.pending
    slots: list[Slot] = [None] * len(waiting)
    ready: list[_Ready] = []
    for index, pending in enumerate(waiting):
        decision = decisions.get(pending.call.id)
        if pending.nested is not None:
            inner = decisions_inside(pending.call.id, decisions)
            if inner:
                ready.append(_going_on(index, pending, pending.nested, inner, ctx))
            else:
                slots[index] = pending
        elif decision is None:
            slots[index] = pending
        elif isinstance(decision, Approve):
            checked = _approved(index, pending.call, decision, ctx)
            if isinstance(checked, _Ready):
                ready.append(checked)
            else:
                slots[index] = checked
                yield _not_run(checked, ctx)
        else:
            decided = slots[index] = _decided_trace(pending.call, decision)
            yield _not_run(decided, ctx)
    async with aclosing(_execute_all(ready, slots, ctx)) as running:
        async for event in running:
            yield event
    ctx.outcome = _outcome(slots, [None] * len(waiting), ctx, over_limit=False)


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
        text = unknown_tool_text(call.name, ctx.view)
        return _refused(call, ErrorCode.UNKNOWN_TOOL, text), None
    if call.raw_arguments is not None:
        return _refused(call, ErrorCode.INVALID_JSON, invalid_json_text(call)), None
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
            return refused.model_copy(update={"result": with_edit_note(refused.result, call)})
        return refused
    return _Ready(index, call, entry, arguments, None, edited)


def _going_on(
    index: int,
    pending: PendingCall,
    nested: Checkpoint,
    decisions: dict[str, Decision],
    ctx: RoundContext,
) -> _Ready:
    """A paused agent tool's call, ready to go on with its inner run."""
    entry = ctx.view.dispatch[pending.call.name]
    resume = NestedResume(nested, decisions)
    return _Ready(index, pending.call, entry, pending.call.arguments, None, resume=resume)


def _decided_trace(call: ToolCall, decision: Reject | ToolResult) -> ToolTrace:
    if isinstance(decision, Reject):
        text = decision.message or "a person rejected this call; do not make it again"
        return _refused(call, ErrorCode.REJECTED, text)
    return _trace(call, decision, 0.0, None)


async def _hold_back(ready: list[_Ready], ctx: RoundContext, slots: list[Slot]) -> list[_Ready]:
    """Keep the calls that may run now; the others become pending (in their slots)."""
    runnable = []
    for item in ready:
        kind: PendingKind | None = "external" if item.entry.external else None
        if kind is None and await _needs_approval(item, ctx):
            kind = "approval"
        if kind is None:
            runnable.append(item)
        else:
            digest = call_digest(ctx.run_id, item.call)
            slots[item.index] = PendingCall(call=item.call, kind=kind, digest=digest)
    return runnable


async def _needs_approval(item: _Ready, ctx: RoundContext) -> bool:
    """The tool's rule for this call; a predicate that raises means yes (fail closed)."""
    rule = item.entry.options.requires_approval
    if isinstance(rule, bool):
        return rule
    context = _context(item.call, ctx)
    try:
        verdict = rule(context, item.arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        return True
    return bool(verdict)


def _outcome(
    slots: list[Slot],
    signatures: list[CallSignature | None],
    ctx: RoundContext,
    over_limit: bool,
) -> RoundOutcome:
    """Record the answered calls with the policy, in order, and sum up the round."""
    done: list[ToolTrace] = []
    pending: list[PendingCall] = []
    raised: list[tuple[str, BaseException]] = []
    for index, trace in enumerate(slots):
        if not isinstance(trace, ToolTrace):
            if trace is not None:
                pending.append(trace)
            continue
        done.append(trace)
        name = trace.call.name
        ctx.policy.record(name, trace.result, signatures[index])
        if trace.error is not None:
            entry = ctx.view.dispatch.get(name)
            if entry is not None and entry.options.on_error == "raise":
                raised.append((name, trace.error))
    return RoundOutcome(tuple(done), tuple(pending), tuple(raised), over_limit)


async def _execute_all(
    ready: list[_Ready], slots: list[Slot], ctx: RoundContext
) -> AsyncGenerator[Event, None]:
    """Run the ready calls group by group; fill each call's slot."""
    for group in _groups(ready):
        for item in group:
            yield ToolCallStarted(ctx.round, item.call)
        if len(group) == 1 and not isinstance(group[0].entry.handler, AgentTool):
            ran = slots[group[0].index] = await _start(group[0], ctx)  # no tasks, no queue
            if isinstance(ran, ToolTrace):
                yield ToolCallFinished(ctx.round, ran)
            continue
        async with aclosing(_run_together(group, ctx)) as together:
            async for got in together:
                if isinstance(got, NestedEvent):
                    yield got
                    continue
                index, ran = got
                slots[index] = ran
                if isinstance(ran, ToolTrace):
                    yield ToolCallFinished(ctx.round, ran)


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


async def _run_together(
    group: list[_Ready], ctx: RoundContext
) -> AsyncGenerator[NestedEvent | tuple[int, Ran], None]:
    """Run a group's calls concurrently; yield agent tools' inner events as they happen and
    each (index, outcome) as a call finishes."""
    queue: asyncio.Queue[NestedEvent | tuple[int, Ran] | Exception] = asyncio.Queue()
    limit = ctx.options.max_concurrency
    semaphore = asyncio.Semaphore(limit) if limit is not None and limit < len(group) else None

    async def run(item: _Ready) -> None:
        emit = queue.put_nowait if isinstance(item.entry.handler, AgentTool) else None
        try:
            async with semaphore or contextlib.nullcontext():
                ran = await _start(item, ctx, emit)
            queue.put_nowait((item.index, ran))
        except Exception as error:  # a middleware's failure: the round ends with it
            queue.put_nowait(error)

    tasks = [asyncio.ensure_future(run(item)) for item in group]
    try:
        left = len(tasks)
        while left:
            got = await queue.get()
            if isinstance(got, Exception):
                raise got
            left -= not isinstance(got, NestedEvent)
            yield got
    finally:
        for task in tasks:
            task.cancel()


def _start(item: _Ready, ctx: RoundContext, emit: Emit | None = None) -> Awaitable[Ran]:
    """Run one call: through the agent's middleware if it has any, and as a span of the
    run's observer when it is traced."""
    middleware = ctx.options.middleware
    if middleware is None and ctx.observer is None:
        return _bounded(item, ctx, emit)

    def execute() -> Awaitable[Ran]:
        if middleware is None:
            return _bounded(item, ctx, emit)
        return _layered(middleware, item, ctx, emit)

    return execute() if ctx.observer is None else ctx.observer.tool_call(item.call, execute)


def _layered(
    middleware: MiddlewareStack, item: _Ready, ctx: RoundContext, emit: Emit | None = None
) -> Awaitable[Ran]:
    """Run one call through the agent's middleware."""

    async def run(call: ToolCall) -> Ran:
        changed = item
        if call is not item.call:  # a middleware changed the arguments: validate them again
            arguments = item.entry.handler.validate(call.arguments)
            changed = replace(item, call=call, arguments=arguments)
        return await _bounded(changed, ctx, emit)

    before = item.resume is None  # a paused agent tool's call saw them when it started
    return middleware.call_tool(item.call, _context(item.call, ctx), run, before=before)


def _context(call: ToolCall, ctx: RoundContext) -> RunContext[Any]:
    return RunContext(call.id, call.name, ctx.deps, ctx.round, ctx.run_id, ctx.options.registry)


def _leg(
    item: _Ready, ctx: RoundContext, context: RunContext[Any], emit: Emit
) -> Awaitable[object]:
    """An agent tool's call: a leg of its inner run, whose events go to ``emit``."""
    handler = item.entry.handler
    assert isinstance(handler, AgentTool)  # only agent tools' calls get an ``emit``
    return handler.leg(item.arguments, context, emit, item.resume, ctx.messages, ctx.run_id)


async def _bounded(item: _Ready, ctx: RoundContext, emit: Emit | None = None) -> Ran:
    """Run one call within its own timeout and the run's remaining time."""
    limit = item.entry.options.timeout
    run_limited = False
    if ctx.policy.limits.max_duration_s is not None:
        remaining = ctx.policy.remaining_s()
        run_limited = remaining is not None and (limit is None or remaining < limit)
        if run_limited:
            limit = remaining
    call, entry = item.call, item.entry
    context = RunContext(call.id, call.name, ctx.deps, ctx.round, ctx.run_id, ctx.options.registry)
    started = time.perf_counter()
    scope = None
    error: BaseException | None = None
    inner: tuple[ToolTrace, ...] | None = None
    try:
        running: Awaitable[object]
        if emit is None:
            running = entry.handler.run(item.arguments, context)
        else:
            running = _leg(item, ctx, context, emit)
        if limit is None:
            output = await running
        else:
            async with asyncio.timeout(limit) as scope:
                output = await running
        if isinstance(output, str):
            result = ToolResult.success(output)
        elif isinstance(output, ToolResult):  # the handler decided the outcome itself
            result = output
        elif isinstance(output, Checkpoint):  # the inner run paused: so does this call
            digest = call_digest(ctx.run_id, call)
            return PendingCall(call=call, kind="agent", digest=digest, nested=output)
        else:
            assert isinstance(output, NestedOutcome)
            result, error, inner = output.result, output.error, output.trace
    except Exception as raised:  # the tool's own failure, kept whole for the host
        error = raised
        if scope is not None and scope.expired():
            text = run_time_text(ctx.policy.limits, entry) if run_limited else timeout_text(entry)
            result = ToolResult.failure(ErrorCode.TOOL_TIMEOUT, text)
        else:
            result = error_result(entry, raised, ctx.options.include_error_details)
    if item.edited:
        result = with_edit_note(result, call)
    trace = _trace(call, result, time.perf_counter() - started, error)
    return trace if inner is None else trace.model_copy(update={"inner_trace": inner})


def _invalid_arguments(call: ToolCall, error: InvalidArguments) -> ToolTrace:
    return _refused(call, ErrorCode.INVALID_ARGUMENTS, invalid_arguments_text(call, error), error)


def _refused(
    call: ToolCall, code: ErrorCode, text: str, error: BaseException | None = None
) -> ToolTrace:
    return _trace(call, ToolResult.failure(code, text), 0.0, error)


def _trace(
    call: ToolCall, result: ToolResult, duration_s: float, error: BaseException | None
) -> ToolTrace:
    output = result.output  # a tool's text is echoed and saved too: no lone surrogates
    if not output.isascii() and not valid_text(output):
        result = result.model_copy(update={"output": repaired(output)})
    return ToolTrace(call=call, result=result, duration_s=duration_s, error=error)
