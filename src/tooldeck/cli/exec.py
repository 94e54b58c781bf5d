"""Running one prompt from the command line and reporting it, in one of three forms.

- the live display (default): the model's writing, each call and its result, the answer,
  the totals line;
- ``--no-display``: the answer alone on stdout, the totals line on stderr;
- ``--json``: one JSON document on stdout (answer, calls, usage, stop reason, totals).

Every exit reports its totals, answer or not: a run that stops at a limit or on a model
error (exit 1) and an interrupted one (exit 130) too.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import TypeAdapter

from tooldeck.cli.approve import Approver
from tooldeck.cli.args import EXIT_ANSWER, CliError
from tooldeck.cli.display import Console, RunDisplay, Tally
from tooldeck.errors import RunStopped
from tooldeck.results import Checkpoint, RunResult, ToolTrace
from tooldeck.run.agent import Agent
from tooldeck.run.events import Event, FinalAnswer

if TYPE_CHECKING:
    from tooldeck.sessions import Session

Form = Literal["display", "plain", "json"]


@dataclass
class Run:
    """One prompt to run and how to run it."""

    agent: Agent[Any, Any]
    prompt: str
    deps: Any = None
    session: Session | None = None
    """The conversation the run continues and is kept in (``tooldeck.sessions``)."""
    approver: Approver | None = None
    deltas: bool = True
    """Ask for the model's writing as it comes (``--no-stream``: no)."""
    output_type: Any = None
    """The ``--output-schema`` type: the answer is such a value, printed as JSON."""
    verbose: bool = False
    tally: Tally = field(default_factory=Tally)


def execute(
    run: Run,
    form: Form,
    console: Console | None = None,
    runner: asyncio.Runner | None = None,
    *,
    echo: bool = True,
) -> tuple[int, RunResult[Any]]:
    """Run and report in ``form``; the exit status and the result (partial if stopped).

    ``runner`` is the event loop to run on (a chat keeps one for all its runs: the model's
    connections stay on it); a new one by default.

    Raises:
        CliError: The run stopped without an answer (after its totals were reported).
        KeyboardInterrupt: Interrupted (after its totals were reported).
    """
    display = None
    if form == "display":
        display = RunDisplay(console or Console(), run.agent.model.name, verbose=run.verbose)
        display.tally = run.tally
        if echo:  # not in a chat, where the prompt was just typed
            display.console.line("")
            display.console.line(f"user: {run.prompt}", "bold")
    show = display.show if display is not None else run.tally.show
    started = time.perf_counter()
    try:
        close = display.close if display is not None else _nothing
        if runner is None:
            with asyncio.Runner() as own:
                result = drive(run, show, close, own)
        else:
            result = drive(run, show, close, runner)
    except RunStopped as stopped:
        seconds = time.perf_counter() - started
        _report_stop(run, form, display, seconds, stopped)
        raise CliError(f"the run stopped without an answer: {stopped}") from stopped
    except KeyboardInterrupt:
        _totals(run, display, time.perf_counter() - started, "interrupted", None)
        raise
    seconds = time.perf_counter() - started
    _report_answer(run, form, display, seconds, result)
    return EXIT_ANSWER, result


def drive(
    run: Run,
    show: Callable[[Event], None],
    close: Callable[[], None],
    runner: asyncio.Runner,
) -> RunResult[Any]:
    """Run to the end on ``runner``, answering approvals as the run pauses for them.

    A conversation left with a run waiting for approval (the command was interrupted at
    the question) gets that run's question first, then the new prompt.
    """
    if run.session is not None:
        stored = runner.run(run.session.pending())
        if stored is not None:
            _settle(run, stored, show, close, runner)
    events = run.agent.stream(run.prompt, deps=run.deps, deltas=run.deltas, session=run.session)
    result = runner.run(_consume(events, show, close))
    if result.stop_reason == "paused" and result.checkpoint is not None:
        result = _settle(run, result.checkpoint, show, close, runner)
    return result


def _settle(
    run: Run,
    checkpoint: Checkpoint,
    show: Callable[[Event], None],
    close: Callable[[], None],
    runner: asyncio.Runner,
) -> RunResult[Any]:
    """Decide a paused run's calls and resume it, until it no longer pauses."""
    while True:
        decisions = run.approver.decide(checkpoint.pending) if run.approver is not None else {}
        if not decisions:
            names = ", ".join(sorted({p.call.name for p in checkpoint.pending}))
            raise CliError(f"the run waits for calls the command line cannot answer: {names}")
        resumed = run.agent.resume_stream(
            checkpoint, decisions, deps=run.deps, deltas=run.deltas, session=run.session
        )
        result = runner.run(_consume(resumed, show, close))
        if result.stop_reason != "paused" or result.checkpoint is None:
            return result
        checkpoint = result.checkpoint


async def _consume(
    events: AsyncIterator[Event], show: Callable[[Event], None], close: Callable[[], None]
) -> RunResult[Any]:
    result = None
    try:
        async for event in events:
            show(event)
            if isinstance(event, FinalAnswer):
                result = event.result
    finally:
        close()
    if result is None:
        raise CliError("the run ended without a result")
    return result


def _nothing() -> None:
    return None


def _report_answer(
    run: Run, form: Form, display: RunDisplay | None, seconds: float, result: RunResult[Any]
) -> None:
    answer = _answer_text(run, result)
    if form == "json":
        print(json.dumps(run_document(run, result, seconds), indent=2, ensure_ascii=False))
        return
    if display is not None:
        display.summary(result, seconds)
        if run.output_type is not None:
            print(answer, flush=True)
        return
    print(answer, flush=True)
    _totals(run, None, seconds, result.stop_reason, result)


def _report_stop(
    run: Run, form: Form, display: RunDisplay | None, seconds: float, stopped: RunStopped
) -> None:
    partial = stopped.result
    reason = partial.stop_reason if partial is not None else "error"
    if form == "json" and partial is not None:
        document = run_document(run, partial, seconds, error=str(stopped))
        print(json.dumps(document, indent=2, ensure_ascii=False), flush=True)
        return
    _totals(run, display, seconds, reason, partial)


def _totals(
    run: Run,
    display: RunDisplay | None,
    seconds: float,
    stop_reason: str,
    result: RunResult[Any] | None,
) -> None:
    """The totals line: on the display, else on stderr (stdout holds only the answer)."""
    if display is not None:
        display.totals(seconds, *run.tally.spent(result), stop_reason)
    else:
        print(run.tally.line(seconds, stop_reason, result), file=sys.stderr, flush=True)


def _answer_text(run: Run, result: RunResult[Any]) -> str:
    if run.output_type is not None:
        return TypeAdapter(run.output_type).dump_json(result.output, indent=2).decode()
    return result.answer


def run_document(
    run: Run, result: RunResult[Any], seconds: float, error: str | None = None
) -> dict[str, Any]:
    """What ``--json`` prints: the run for a script to read."""
    document: dict[str, Any] = {"answer": result.answer}
    if run.output_type is not None and result.output is not None:
        document["output"] = TypeAdapter(run.output_type).dump_python(result.output, mode="json")
    document |= {
        "stop_reason": str(result.stop_reason),
        "error": error,
        "run_id": result.run_id,
        "model": run.agent.model.name,
        "session": run.session.session_id if run.session is not None else None,
        "calls": [_call_document(trace) for trace in result.tool_trace],
        "usage": result.usage.model_dump(),
        "duration_s": round(seconds, 3),
        "model_s": round(run.tally.model_s, 3),
    }
    if result.guardrails:
        document["guardrails"] = [decision.model_dump() for decision in result.guardrails]
    if result.tainted_by is not None:
        document["tainted_by"] = result.tainted_by.model_dump()
    return document


def _call_document(trace: ToolTrace) -> dict[str, Any]:
    call, outcome = trace.call, trace.result
    raised = trace.error
    return {
        "id": call.id,
        "name": call.name,
        "arguments": call.raw_arguments if call.raw_arguments is not None else call.arguments,
        "ok": outcome.ok,
        "output": outcome.output,
        "error_code": None if outcome.error_code is None else str(outcome.error_code),
        "error": trace.model_dump(mode="json")["error"] if raised is not None else None,
        "duration_s": round(trace.duration_s, 6),
    }
