"""Recording one run from its event stream: the events pass through unchanged.

On the event loop this only reads the clock and appends a record per event to the writer's
tape; rows are made by the writer's thread. A record holds plain values and objects the run
keeps anyway (its tool calls, the agent's settings), never one the run would let go: the
log adds no garbage for the collector to walk while runs go on.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator
from typing import Any

from tooldeck.errors import RunStopped
from tooldeck.models.base import ModelSettings
from tooldeck.results import Decision, RememberedApproval, RunResult
from tooldeck.run._engine.journal import this_process
from tooldeck.run.events import (
    Event,
    FinalAnswer,
    GuardrailChecked,
    HandedOff,
    MessageJoined,
    ModelRequest,
    ModelResponse,
    ToolCallFinished,
    ToolCallStarted,
    UntrustedContent,
)
from tooldeck.run.observer import RunInfo
from tooldeck.runlog._rows import (
    CALL,
    END,
    GUARD,
    HAND,
    PENDING,
    SENT,
    START,
    TAINT,
    TURN,
    error_text,
)
from tooldeck.runlog._writer import Put, Writer

CANCELLED = "cancelled"
"""The stop reason logged for a run whose stream was left or cancelled before its end."""
CRASHED = "error"
"""The stop reason logged for a run that ended with an unexpected exception."""


async def record_run(
    events: AsyncGenerator[Event, None], run: RunInfo, writer: Writer
) -> AsyncGenerator[Event, None]:
    """Yield the run's events, recording each on the writer's tape."""
    put, clock, run_id = writer.put, time.time, run.run_id
    started = asked_at = clock()
    _put_start(put, run, started)
    decisions: dict[str, Decision | RememberedApproval] = dict(run.decisions or {})
    settings = None
    call_started: dict[str, float] = {}
    finished = False
    try:
        async for event in events:
            if isinstance(event, ToolCallFinished):
                _put_call(put, run_id, event, call_started, decisions, clock())
            elif isinstance(event, ToolCallStarted):
                call_started[event.call.id] = clock()
                if event.remembered is not None:  # ran under a remembered approval
                    decisions[event.call.id] = event.remembered
            elif isinstance(event, ModelRequest):
                asked_at, settings = clock(), event.settings
            elif isinstance(event, ModelResponse):
                _put_turn(put, run_id, event, asked_at, clock(), settings)
            elif isinstance(event, FinalAnswer):
                _put_end(put, run_id, started, clock(), event.result, None)
                finished = True
            elif isinstance(event, GuardrailChecked):
                _put_guardrail(put, run_id, event, clock())
            elif isinstance(event, UntrustedContent):
                put((TAINT, run_id, event.source.call_id, event.source.tool_name))
            elif isinstance(event, HandedOff):
                put((HAND, run_id, event.round, event.call.id, event.source, event.target, clock()))
            elif isinstance(event, MessageJoined):
                at = clock()
                for message in event.messages:
                    put((SENT, run_id, event.round, message.content, int(event.sent), at))
            yield event
    except RunStopped as stopped:
        if not finished:
            _put_end(put, run_id, started, clock(), stopped.result, str(stopped))
        raise
    except (GeneratorExit, asyncio.CancelledError) as left:
        if not finished:
            why = "the run was cancelled"
            if isinstance(left, GeneratorExit):
                why = "the run's event stream was closed before its end"
            _put_stop(put, run_id, started, CANCELLED, why)
        await events.aclose()
        raise
    except BaseException as error:
        if not finished:
            _put_stop(put, run_id, started, CRASHED, f"{type(error).__name__}: {error}")
        raise
    finally:
        writer.wake()


def _put_start(put: Put, run: RunInfo, started: float) -> None:
    parent = run.parent
    put(
        (
            START,
            run.run_id,
            run.session_id,
            run.model,
            run.prompt,
            run.instructions,
            started,
            run.decisions is not None,
            "" if parent is None else parent.run_id,
            "" if parent is None else parent.call_id,
            *_this_process(),
        )
    )


_process: tuple[int, tuple[str, int, int]] = (-1, ("", -1, -1))
"""(the pid it was read in, this process as a run's row names it): read once per process."""


def _this_process() -> tuple[str, int, int]:
    """This process's host, id and start time (-1 when unknown), for a run's row: a reader
    tells by them whether the process of a run with no end is still there."""
    global _process
    pid = os.getpid()
    if _process[0] != pid:  # the first run, or a forked child's
        writer = this_process()
        started = -1 if writer.started is None else writer.started
        _process = (pid, (writer.host, writer.pid, started))
    return _process[1]


def _put_turn(
    put: Put,
    run_id: str,
    event: ModelResponse,
    asked_at: float,
    now: float,
    settings: ModelSettings | None,
) -> None:
    output = event.output
    usage = output.usage
    put(
        (
            TURN,
            run_id,
            event.round,
            asked_at,
            now - asked_at,
            -1 if usage is None else usage.input_tokens,
            -1 if usage is None else usage.output_tokens,
            settings,
            output.content,
            len(output.tool_calls),
            -1.0 if usage is None or usage.cost_usd is None else usage.cost_usd,
            output.model or "",
        )
    )


def _put_call(
    put: Put,
    run_id: str,
    event: ToolCallFinished,
    call_started: dict[str, float],
    decisions: dict[str, Decision | RememberedApproval],
    now: float,
) -> None:
    trace = event.trace
    call, result, error = trace.call, trace.result, trace.error
    code = result.error_code
    put(
        (
            CALL,
            run_id,
            event.round,
            call,
            call_started.pop(call.id, -1.0),
            now,
            trace.duration_s,
            result.output,
            "" if code is None else code.value,
            "" if error is None else error_text(error),
            decisions.pop(call.id, None) if decisions else None,
            trace.full_output or "",
        )
    )


def _put_guardrail(put: Put, run_id: str, event: GuardrailChecked, now: float) -> None:
    decision = event.decision
    put(
        (
            GUARD,
            run_id,
            decision.round,
            decision.call_id,
            decision.stage,
            decision.name,
            decision.verdict,
            decision.message,
            now,
        )
    )


def _put_end(
    put: Put,
    run_id: str,
    started: float,
    now: float,
    result: RunResult[Any] | None,
    error: str | None,
) -> None:
    if result is None:
        _put_stop(put, run_id, started, CRASHED, error)
        return
    checkpoint = result.checkpoint
    if checkpoint is not None:
        for pending in checkpoint.pending:
            put((PENDING, run_id, checkpoint.turn.round, pending.call, pending.kind, now))
    answer = result.answer if error is None else None
    usage = result.usage
    put(
        (
            END,
            run_id,
            now,
            now - started,
            str(result.stop_reason),
            answer,
            error,
            usage.input_tokens,
            usage.output_tokens,
            usage.requests,
            -1.0 if usage.cost_usd is None else usage.cost_usd,
        )
    )


def _put_stop(put: Put, run_id: str, started: float, reason: str, error: str | None) -> None:
    now = time.time()
    put((END, run_id, now, now - started, reason, None, error, None, None, None, None))
