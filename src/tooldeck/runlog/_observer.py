"""Recording one run from its event stream: the events pass through unchanged.

On the event loop this only reads the clock and appends a tuple to the writer's queue per
event; rows are made by the writer's thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

from tooldeck._observer import RunInfo
from tooldeck.contracts import RunResult
from tooldeck.errors import RunStopped
from tooldeck.events import (
    Event,
    FinalAnswer,
    ModelRequest,
    ModelResponse,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.runlog._rows import CALL, END, PENDING, START, TURN
from tooldeck.runlog._writer import Writer

CANCELLED = "cancelled"
"""The stop reason logged for a run whose stream was left or cancelled before its end."""
CRASHED = "error"
"""The stop reason logged for a run that ended with an unexpected exception."""


async def record_run(
    events: AsyncGenerator[Event, None], run: RunInfo, writer: Writer
) -> AsyncGenerator[Event, None]:
    """Yield the run's events, queueing a record of each for the writer."""
    put, clock, run_id = writer.put, time.time, run.run_id
    started = asked_at = clock()
    resumed = run.decisions is not None
    put(
        (
            START,
            run_id,
            run.session_id,
            run.model,
            run.prompt,
            run.instructions,
            started,
            resumed,
            run.parent,
        )
    )
    decisions = dict(run.decisions) if run.decisions else {}
    settings = None
    call_started: dict[str, float] = {}
    finished = False
    try:
        async for event in events:
            now = clock()
            if isinstance(event, ToolCallFinished):
                trace = event.trace
                call_id = trace.call.id
                began = call_started.pop(call_id, None)
                decision = decisions.pop(call_id, None) if decisions else None
                put((CALL, run_id, event.round, trace, began, now, decision))
            elif isinstance(event, ToolCallStarted):
                call_started[event.call.id] = now
            elif isinstance(event, ModelRequest):
                asked_at, settings = now, event.settings
            elif isinstance(event, ModelResponse):
                put((TURN, run_id, event.round, asked_at, now - asked_at, settings, event.output))
            elif isinstance(event, FinalAnswer):
                _put_end(writer, run_id, started, now, event.result, None)
                finished = True
            yield event
    except RunStopped as stopped:
        if not finished:
            _put_end(writer, run_id, started, clock(), stopped.result, str(stopped))
        raise
    except (GeneratorExit, asyncio.CancelledError) as left:
        if not finished:
            why = "the run was cancelled"
            if isinstance(left, GeneratorExit):
                why = "the run's event stream was closed before its end"
            _put_stop(writer, run_id, started, CANCELLED, why)
        await events.aclose()
        raise
    except BaseException as error:
        if not finished:
            _put_stop(writer, run_id, started, CRASHED, f"{type(error).__name__}: {error}")
        raise
    finally:
        writer.wake()


def _put_end(
    writer: Writer,
    run_id: str,
    started: float,
    now: float,
    result: RunResult[Any] | None,
    error: str | None,
) -> None:
    if result is None:
        _put_stop(writer, run_id, started, CRASHED, error)
        return
    checkpoint = result.checkpoint
    if checkpoint is not None:
        for pending in checkpoint.pending:
            writer.put((PENDING, run_id, checkpoint.turn.round, pending, now))
    answer = result.answer if error is None else None
    end = (END, run_id, now, now - started, result.stop_reason, answer, error, result.usage)
    writer.put(end)


def _put_stop(writer: Writer, run_id: str, started: float, reason: str, error: str | None) -> None:
    now = time.time()
    writer.put((END, run_id, now, now - started, reason, None, error, None))
