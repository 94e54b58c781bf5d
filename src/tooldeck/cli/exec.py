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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from pydantic import TypeAdapter

from tooldeck.cli.approve import Approver, reachable_tools
from tooldeck.cli.args import EXIT_ANSWER, CliError
from tooldeck.cli.display import Console, RunDisplay, recovered_lines
from tooldeck.cli.interrupt import CTRL_C, Interrupted, interrupted, watched
from tooldeck.cli.sessions import paused_prompt, waiting_calls
from tooldeck.cli.totals import Tally, answer_forced, stop_text, unanswered
from tooldeck.cli.voice import Driven, Voice
from tooldeck.errors import (
    CheckpointError,
    LimitExceeded,
    ModelStreamMissing,
    RunStopped,
    SessionConflict,
    SessionError,
)
from tooldeck.results import Checkpoint, RunResult, ToolTrace
from tooldeck.run._engine.prompted import FORCED_CALL_REFUSED
from tooldeck.run.agent import Agent
from tooldeck.run.events import Event, RunRecovered
from tooldeck.run.handle import RunHandle
from tooldeck.run.handoff import judges_answers
from tooldeck.search import SEARCH_TOOL, searched

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
    connections stay on it); a new one by default. ``echo``: show the prompt as the user
    line (not in a chat, where it was just typed, unless a paused run is answered first).

    Raises:
        CliError: The run stopped without an answer (after its totals were reported).
        KeyboardInterrupt: Interrupted (after its totals were reported).
    """
    display = None
    if form == "display":
        display = RunDisplay(
            console or Console(),
            run.agent.model.name,
            verbose=run.verbose,
            hold_text=judges_answers(run.agent),
        )
        display.tally = run.tally
    voice = Voice(display.console if display is not None else None, echo)
    show = display.show if display is not None else partial(_plain_show, run.tally)
    started = time.perf_counter()

    def earlier_answered(result: RunResult[Any]) -> None:
        """The run left waiting in the conversation answered: show it as any run ends."""
        if display is not None and result.stop_reason != "paused":
            display.summary(result, time.perf_counter() - started)

    try:
        close = display.close if display is not None else _nothing
        if runner is None:
            with asyncio.Runner() as own:
                driven = drive(run, show, close, own, voice, earlier_answered)
        else:
            driven = drive(run, show, close, runner, voice, earlier_answered)
    except RunStopped as stopped:
        seconds = time.perf_counter() - started
        _report_stop(run, form, display, seconds, stopped)
        raise CliError(_why_stopped(run, stopped)) from stopped
    except SessionError as failed:
        if failed.result is None:  # nothing was answered: the error says it all
            raise
        message = _not_kept(run, failed)
        seconds = time.perf_counter() - started
        _report_answer(run, form, display, seconds, Driven(failed.result), message)
        raise CliError(message) from failed
    except Interrupted as cancelled:
        _report_cancel(run, form, display, time.perf_counter() - started, cancelled.driven)
        raise
    except KeyboardInterrupt:
        voice.end_line()
        _totals(run, display, time.perf_counter() - started, "interrupted", None)
        raise
    seconds = time.perf_counter() - started
    why = unanswered(driven.result)
    if why is not None:  # a limit ended it (--on-limit final-answer) and left no answer
        message = f"the run stopped without an answer: {why}"
        _report_answer(run, form, display, seconds, driven, message)
        raise CliError(message)
    _report_answer(run, form, display, seconds, driven)
    return EXIT_ANSWER, driven.result


def _why_stopped(run: Run, stopped: RunStopped) -> str:
    """Why the run stopped, in the command line's words where the library's are not."""
    if isinstance(stopped, ModelStreamMissing):
        said = f" (it said: {stopped.server_message})" if stopped.server_message else ""
        return (
            f"the run stopped without an answer: {run.agent.model.name} did not stream its "
            f"answer{said}; the server may not stream this request: run again with --no-stream"
        )
    if isinstance(stopped, LimitExceeded) and stopped.limit == "max_duration_s":
        bound = run.agent.limits.max_duration_s
        return f"the run stopped without an answer: it took longer than --timeout {bound:g} s"
    if FORCED_CALL_REFUSED in getattr(stopped, "__notes__", ()):
        return (
            f"the run stopped without an answer: {stopped}; the server may refuse the forced "
            "call of the final_answer tool that asks for the typed answer: run again with "
            "--output-mode prompted"
        )
    return f"the run stopped without an answer: {stopped}"


def _not_kept(run: Run, failed: SessionError) -> str:
    """A run that answered, but whose conversation could not keep the answer: another
    command changed it meanwhile, or its database failed."""
    session = run.session.session_id if run.session is not None else ""
    if failed.result is not None and failed.result.stop_reason == "session_error":
        return f"the run stopped: conversation {session!r} could not be written: {failed}"
    if not isinstance(failed, SessionConflict):
        return f"the answer above was not kept in conversation {session!r}: {failed}"
    return (
        f"the answer above was not kept in conversation {session!r}: another run changed "
        "the conversation while this one ran. Run the prompt again "
        f"(--session {session}) to go on from the conversation as it is now"
    )


def drive(
    run: Run,
    show: Callable[[Event], None],
    close: Callable[[], None],
    runner: asyncio.Runner,
    voice: Voice | None = None,
    earlier: Callable[[RunResult[Any]], None] = lambda result: None,
) -> Driven:
    """Run to the end on ``runner``, answering approvals as the run pauses for them.

    A conversation left with a run waiting for approval (the command was interrupted at
    the question) gets that run's question first (its result goes to ``earlier``), then
    the new prompt runs; ``voice`` says so. When a limit stops that run without an answer
    (``--on-limit final-answer``), it is the command's run: the new prompt does not run,
    as when a limit raises.
    """
    voice = voice or Voice(None, echo=False)

    def watch(start: Callable[[], RunHandle[Any]]) -> RunResult[Any]:
        return runner.run(watched(start, show, close, voice.end_line))

    resumed, session_id = None, run.session.session_id if run.session is not None else None
    if run.session is not None:
        stored = runner.run(run.session.pending())
        if stored is not None:
            resumed = _answer_stored(run, stored, watch, voice)
            interrupted(session_id, resumed)
            if unanswered(resumed) is not None:  # a limit stopped it, and it has no answer:
                return Driven(resumed)  # the command's run, reported as any stop; no prompt
            earlier(resumed)
    voice.prompt(run.prompt, after_other_run=resumed is not None)
    result = watch(
        lambda: run.agent.start(run.prompt, deps=run.deps, deltas=run.deltas, session=run.session)
    )
    if result.stop_reason == "paused" and result.checkpoint is not None:
        result = _settle(run, result.checkpoint, watch)
    interrupted(session_id, result, resumed)
    return Driven(result, resumed)


Watch = Callable[[Callable[[], RunHandle[Any]]], RunResult[Any]]
"""Start a run (the function given starts it), show it to its end, give its result."""


def _answer_stored(run: Run, stored: Checkpoint, watch: Watch, voice: Voice) -> RunResult[Any]:
    """The paused run a conversation holds, its questions asked and the run carried on."""
    assert run.session is not None
    session_id = run.session.session_id
    prompt, calls = paused_prompt(stored), waiting_calls(stored)
    discard = f"tooldeck sessions discard {session_id}"
    known = reachable_tools(run.agent, run.approver.tools if run.approver else None)
    missing = [p.call.name for p in stored.turn.pending if p.call.name not in known]
    if missing:
        raise CliError(
            f"conversation {session_id!r} waits for a decision on {calls} (the run of the "
            f"prompt {prompt!r}), but {', '.join(map(repr, missing))} is not among this run's "
            f"tools: run with the tools that have it, or drop that run with: {discard}"
        )
    voice.note(
        f"conversation {session_id!r} has a run waiting for a decision on {calls} (the run "
        f"of the prompt {prompt!r}): it goes on first, then your prompt runs"
    )
    try:
        resumed = _settle(run, stored, watch, discard)
    except CheckpointError as error:
        raise CliError(
            f"the paused run of conversation {session_id!r} cannot go on: {error}; drop it "
            f"with: {discard}"
        ) from error
    if unanswered(resumed) is not None:  # no empty answer shown as one
        voice.note(
            f"the run of the prompt {prompt!r} stopped without an answer: your prompt is not run"
        )
    elif voice.console is None and resumed.stop_reason != "cancelled":  # else ``earlier``
        voice.note(f"answer to {prompt!r}: {resumed.answer}")
    return resumed


def _settle(run: Run, checkpoint: Checkpoint, watch: Watch, discard: str = "") -> RunResult[Any]:
    """Decide a paused run's calls and resume it, until it no longer pauses."""
    while True:
        decisions = run.approver.decide(checkpoint.pending) if run.approver is not None else {}
        if not decisions:
            names = ", ".join(sorted({p.call.name for p in checkpoint.pending}))
            hint = f"; drop that run with: {discard}" if discard else ""
            raise CliError(f"the run waits for calls the command line cannot answer: {names}{hint}")
        resume = run.agent.start_resume
        options = {"deps": run.deps, "deltas": run.deltas, "session": run.session}
        result = watch(partial(resume, checkpoint, decisions, **options))
        if result.stop_reason != "paused" or result.checkpoint is None:
            return result
        checkpoint = result.checkpoint


def _nothing() -> None:
    return None


def _plain_show(tally: Tally, event: Event) -> None:
    """Without the display: count the event; a run met again is said on stderr at once
    (stdout holds only the answer)."""
    tally.show(event)
    if isinstance(event, RunRecovered):
        for line in recovered_lines(event):
            print(line, file=sys.stderr, flush=True)


def _report_answer(
    run: Run,
    form: Form,
    display: RunDisplay | None,
    seconds: float,
    driven: Driven,
    error: str | None = None,
) -> None:
    result = driven.result
    if form == "json":
        document = run_document(run, result, seconds, error)
        if driven.resumed is not None:
            document["resumed"] = _resumed_document(driven.resumed)
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return
    answer = None if unanswered(result) is not None else _answer_text(run, result)
    if display is not None:
        display.summary(result, seconds)
        if run.output_type is not None and answer is not None:
            print(answer, flush=True)
        return
    if answer is not None:  # stdout holds only an answer: none, nothing printed
        print(answer, flush=True)
    _totals(run, None, seconds, result.stop_reason, result)


def _report_cancel(
    run: Run, form: Form, display: RunDisplay | None, seconds: float, driven: Driven
) -> None:
    """A run cancelled by Ctrl-C (its calls were shown ending): its JSON document, or its
    totals."""
    if form != "json":
        _totals(run, display, seconds, f"cancelled ({CTRL_C})", driven.result)
        return
    document = run_document(run, driven.result, seconds, error=CTRL_C)
    if driven.resumed is not None:
        document["resumed"] = _resumed_document(driven.resumed)
    print(json.dumps(document, indent=2, ensure_ascii=False), flush=True)


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
    run: Run, display: RunDisplay | None, seconds: float, stop: str, result: RunResult[Any] | None
) -> None:
    """The totals line: on the display, else on stderr (stdout holds only the answer)."""
    if display is not None:
        display.totals(seconds, *run.tally.spent(result), stop_text(stop, result))
    else:
        print(run.tally.line(seconds, stop, result), file=sys.stderr, flush=True)


def _answer_text(run: Run, result: RunResult[Any]) -> str:
    if run.output_type is not None:
        return TypeAdapter(run.output_type).dump_json(result.output, indent=2).decode()
    return result.answer


def run_document(
    run: Run, result: RunResult[Any], seconds: float, error: str | None = None
) -> dict[str, Any]:
    """What ``--json`` prints: the run for a script to read."""
    document: dict[str, Any] = {"answer": "" if unanswered(result) else result.answer}
    if run.output_type is not None and result.output is not None:
        document["output"] = TypeAdapter(run.output_type).dump_python(result.output, mode="json")
    document |= {
        "stop_reason": str(result.stop_reason),
        "error": error,
        "run_id": result.run_id,
        "model": run.agent.model.name,
        "agent": result.agent,
        "session": run.session.session_id if run.session is not None else None,
        "calls": [_call_document(trace) for trace in result.tool_trace],
        "usage": result.usage.model_dump(),
        "duration_s": round(seconds, 3),
        "model_s": round(run.tally.model_s, 3),
    }
    if answer_forced(result):
        document["answer_forced"] = True
    if run.tally.unmetered:
        document["turns_without_usage"] = run.tally.unmetered
    if result.guardrails:
        document["guardrails"] = [decision.model_dump() for decision in result.guardrails]
    if result.tainted_by is not None:
        document["tainted_by"] = result.tainted_by.model_dump()
    revealed = [name for trace in result.tool_trace for name in _revealed(trace)]
    if revealed:
        document["revealed"] = list(dict.fromkeys(revealed))
    if run.tally.recovered:
        document["recovered"] = [_recovered_document(event) for event in run.tally.recovered]
    return document


def _recovered_document(event: RunRecovered) -> dict[str, Any]:
    """A run the conversation held unfinished (or finished already), met again (``--json``)."""
    return {
        "run_id": event.run_id,
        "how": event.how,
        "rounds": event.rounds,
        "settled": [_call_document(trace) for trace in event.settled],
    }


def _resumed_document(result: RunResult[Any]) -> dict[str, Any]:
    """The paused run a conversation held, answered before the prompt ran (``--json``)."""
    prompts = [m.content for m in result.messages if m.role == "user"]
    return {
        "prompt": prompts[-1] if prompts else "",
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "run_id": result.run_id,
        "calls": [_call_document(trace) for trace in result.tool_trace],
        "usage": result.usage.model_dump(),
    }


def _revealed(trace: ToolTrace) -> tuple[str, ...]:
    search = searched(trace.call.name, trace.call.arguments, trace.result.output)
    return () if search is None or not trace.result.ok else search.revealed


def _call_document(trace: ToolTrace) -> dict[str, Any]:
    call, outcome = trace.call, trace.result
    raised = trace.error
    document = {
        "id": call.id,
        "name": call.name,
        "arguments": call.raw_arguments if call.raw_arguments is not None else call.arguments,
        "ok": outcome.ok,
        "output": outcome.output,
        "error_code": None if outcome.error_code is None else str(outcome.error_code),
        "error": trace.model_dump(mode="json")["error"] if raised is not None else None,
        "duration_s": round(trace.duration_s, 6),
    }
    if call.name == SEARCH_TOOL:  # a tool search: the tools it revealed, for a script
        document["revealed"] = list(_revealed(trace))
    if trace.inner_trace is not None:  # the calls made inside it: an agent tool's, a program's
        document["inner"] = [_call_document(inner) for inner in trace.inner_trace]
    return document
