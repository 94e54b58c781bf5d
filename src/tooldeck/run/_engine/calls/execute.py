"""Running one call: the one place a handler runs, through its capabilities' call hooks, as a span
when the run is traced, within the tool's timeout and the run's remaining time.

Whatever the handler returns (text, a ToolResult, a ToolOutcome, a Pause) becomes the call's
trace, or — for a Pause — its PendingCall; the round never asks what kind of handler ran.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolCall, ToolResult
from tooldeck.results import PendingCall, ToolTrace
from tooldeck.run._engine.calls.shared import CallRound, Emit, Ready, trace
from tooldeck.run._engine.calls.texts import (
    error_result,
    run_time_text,
    timeout_text,
    with_edit_note,
)
from tooldeck.run._engine.checkpoint import call_digest
from tooldeck.run._engine.contexts import run_context
from tooldeck.run._engine.once import run_once
from tooldeck.run._engine.records import succeeded
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.handler import HandlerOutput, Pause, ToolOutcome
from tooldeck.tools.outputs import limited
from tooldeck.tools.slots import slots_for

Ran = ToolTrace | PendingCall
"""What running a call gives: its trace, or (a handler that paused) its PendingCall."""
_UNREAD = run_context(call_id="", tool_name="", deps=None)
"""What a function tool that takes no ``RunContext`` is handed: it never reads it, so the
call's own is not built (fifteen fields a call, 1% of a W1a round)."""


def execute(item: Ready, round_: CallRound, emit: Emit | None = None) -> Awaitable[Ran]:
    """Run one call: through the agent's middleware if it has any, and as a span of the
    run's observer when it is traced."""
    hooks = round_.options.hooks
    observer = round_.observer
    if hooks is None and observer is None:
        return _bounded(item, round_, emit)

    def layered() -> Awaitable[Ran]:
        if hooks is None:
            return _bounded(item, round_, emit)

        async def run(call: ToolCall) -> Ran:
            changed = item
            if call is not item.call:  # a middleware changed the arguments: validate again
                arguments = item.entry.handler.validate(call.arguments)
                changed = replace(item, call=call, arguments=arguments)
            return await _bounded(changed, round_, emit)

        context = round_.context(item.call)
        # a paused call going on: its before-hooks saw it when it started
        return hooks.call_tool(item.call, context, run, before=item.resumed is None)

    return layered() if observer is None else observer.tool_call(item.call, layered)


async def _bounded(item: Ready, round_: CallRound, emit: Emit | None, once: bool = True) -> Ran:
    """Run the handler within the tool's timeout and the run's remaining time; a
    ``side_effects`` call at most once when the run records such calls (``once=False``:
    its record was read, run it)."""
    call, entry = item.call, item.entry
    options, handler = entry.options, entry.handler
    if type(handler) is FunctionTool and handler.context_parameter is None:
        context = _UNREAD  # a function that takes no RunContext: none is built for it
    else:
        context = round_.context(call, emit, item.resumed, item.caller)  # emit: inherits
    if round_.records is not None and once and options.side_effects:
        run = partial(_bounded, item, round_, emit, False)
        return await run_once(round_.records, item, round_.context(call, emit, item.resumed), run)
    limit, run_limited = options.timeout, False
    if round_.policy.limits.max_duration_s is not None:
        limit, run_limited = _time_limit(limit, round_)
    started = time.perf_counter()
    scope = None
    try:
        running = handler.run(item.arguments, context)
        if options.max_concurrency is not None:  # a slot first, within the timeout
            slots = slots_for(entry.origin, call.name, options.max_concurrency)
            running = slots.run(running)
        if limit is None:
            output: HandlerOutput = await running
        else:
            async with asyncio.timeout(limit) as scope:
                output = await running
    except Exception as error:  # the tool's own failure, kept whole for the host
        if scope is not None and scope.expired():
            limits = round_.policy.limits
            text = run_time_text(limits, entry) if run_limited else timeout_text(entry)
            result = ToolResult.failure(ErrorCode.TOOL_TIMEOUT, text)
        else:
            result = error_result(entry, error, round_.options.include_error_details)
        return _finished(item, ToolOutcome(result, error), started)
    max_chars = options.max_output_chars or round_.options.max_output_chars
    if isinstance(output, str) and not item.edited and max_chars is None:  # the usual call
        return trace(call, succeeded(output), time.perf_counter() - started)
    if isinstance(output, Pause):
        digest = call_digest(round_.run_id, call)
        return PendingCall(call=call, kind="agent", digest=digest, nested=output.state)
    done = _finished(item, output, started)
    if max_chars is not None and done.result.ok and len(done.result.output) > max_chars:
        return _too_large(done, item, round_, max_chars)
    return done


def _too_large(done: ToolTrace, item: Ready, round_: CallRound, max_chars: int) -> ToolTrace:
    """The trace of a call whose output is longer than its tool allows: what the model reads
    instead, the whole output kept beside it."""
    mode = item.entry.options.large_output or round_.options.large_output
    text = done.result.output
    shown = limited(text, item.call.name, item.call.id, max_chars, mode, round_.outputs)
    return done.model_copy(update={"result": shown, "full_output": text})


def _time_limit(timeout: float | None, round_: CallRound) -> tuple[float | None, bool]:
    """Seconds the call may take, and whether that is the run's remaining time (not the
    tool's own timeout)."""
    remaining = round_.policy.remaining_s()
    if remaining is not None and (timeout is None or remaining < timeout):
        return remaining, True
    return timeout, False


def _finished(item: Ready, output: str | ToolResult | ToolOutcome, started: float) -> ToolTrace:
    """The trace of a call that ran: its result (edited calls say so), exception and inner
    trace."""
    if isinstance(output, str):
        result, error, inner = ToolResult.success(output), None, None
    elif isinstance(output, ToolResult):
        result, error, inner = output, None, None
    else:
        result, error, inner = output.result, output.error, output.inner_trace
    if item.edited:
        result = with_edit_note(result, item.call)
    done = trace(item.call, result, time.perf_counter() - started, error)
    if inner is None:
        return done
    tainted = isinstance(output, ToolOutcome) and output.untrusted
    return done.model_copy(update={"inner_trace": inner, "untrusted": tainted})
