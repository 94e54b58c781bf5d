"""A run started in the background and cancellable from anywhere: ``agent.start(prompt)``.

``RunHandle`` drives the run as a task: ``await handle`` (or ``await handle.result()``) gives
its RunResult, ``async for event in handle`` its events, and ``handle.cancel(reason=...)``,
from any task or thread, stops it. Cancelling reaches what is in flight: the model request
(its response closed), async tools (cancelled), process-isolated tools (killed), agent tools
(their inner runs), and sync tools through ``ctx.cancelled``, an event they can poll. The
run then ends with stop reason ``cancelled`` and a valid transcript: every call that did not
finish is answered ``error[cancelled]: ...``. In a session the cancelled run commits (what
was done is kept) unless the canceller says ``commit=False`` (the session then keeps
nothing of the run).

``handle.send(message)``, from any task or thread, adds a user message to the run while it
works: it joins the conversation after the current round's results, before the run's next
model request (a ``MessageJoined`` event says when). A message sent as the run answers makes
it ask again, so the message is answered; one still waiting when it pauses is kept in its
checkpoint and joins before the resumed run's first request; one still waiting when it is
cancelled or stops at a limit is kept at the end of its transcript, unanswered
(``MessageJoined(sent=False)``). Sending to a run that ended raises ``RunEnded``.

Only a run started with a handle pays for any of this: ``cancellable`` and ``listening``
wrap its events, and the loop tests one attribute per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Mapping
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar

from typing_extensions import Unpack

from tooldeck.errors import ErrorCode, RunEnded, RunStopped
from tooldeck.messages import Message, ToolResult
from tooldeck.results import Checkpoint, Decision, RunResult, StopReason, ToolTrace
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run._engine.state import RunState
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.events import (
    Event,
    FinalAnswer,
    MessageJoined,
    ModelRequest,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.run.options import RunArgs, RunOptions

OutputT = TypeVar("OutputT")


class RunHandle(Generic[OutputT]):
    """A run going on in a task of the event loop it was started on (``Agent.start``)."""

    def __init__(
        self, events: AsyncGenerator[Event, None], signal: CancelSignal, inbox: Inbox
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._signal = signal
        self._inbox = inbox
        self._events: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task = self._loop.create_task(self._drive(events))

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._signal.is_set()

    def done(self) -> bool:
        """Whether the run has ended."""
        return self._task.done()

    def cancel(self, reason: str = "cancelled by the application", *, commit: bool = True) -> None:
        """Stop the run (from any task or thread); it ends with stop reason ``cancelled``.

        Args:
            reason: Why, as the model and the transcript read it.
            commit: Whether the cancelled run commits to its session (default: yes, so
                nothing done is lost); ``False`` leaves the session as it was before the
                run (a resumed pause stays claimed). The first ``cancel`` decides.
        """
        self._signal.cancel(reason, commit=commit)
        if not self._task.done():
            self._loop.call_soon_threadsafe(self._interrupt)

    def send(self, message: str | Message) -> None:
        """Add a user message to the run while it works (from any task or thread): it joins
        the conversation before the run's next model request (``MessageJoined``).

        Args:
            message: The text, or a ``Message`` with role ``"user"``.

        Raises:
            RunEnded: the run has ended (answered, paused, cancelled or stopped), naming it
                and why; nothing was added.
            TypeError: ``message`` is neither text nor a user ``Message``.
        """
        send_to(self._inbox, self._signal, message)

    def _interrupt(self) -> None:
        """Cancel the run's task while its loop runs: not before (the run ends cancelled
        as its loop starts), nor after its FinalAnswer (its session may be committing)."""
        signal = self._signal
        if not self._task.done() and signal.started and not signal.ended:
            self._task.cancel()

    async def result(self) -> RunResult[OutputT]:
        """The run's result, once it ends (raises what the run raised)."""
        return await asyncio.shield(self._task)

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self.result().__await__()

    async def __aiter__(self) -> AsyncIterator[Event]:
        """The run's events as they happen (one reader), the last a FinalAnswer."""
        while (event := await self._events.get()) is not None:
            yield event

    async def _drive(self, events: AsyncGenerator[Event, None]) -> RunResult[OutputT]:
        result: RunResult[Any] | None = None
        try:
            async for event in events:
                if isinstance(event, FinalAnswer):
                    result = event.result
                self._events.put_nowait(event)
        finally:
            self._events.put_nowait(None)
        if result is None:
            raise AssertionError("the event stream ended without a final answer")
        return result


async def cancellable(
    events: AsyncGenerator[Event, None], state: RunState, signal: CancelSignal
) -> AsyncGenerator[Event, None]:
    """The run's events; when ``signal`` cancels it, a ToolCallFinished for each call that
    had not finished (answered ``error[cancelled]``), then its FinalAnswer with stop reason
    ``cancelled``."""
    finished: dict[tuple[int, str], ToolTrace] = {}  # by round: a call id may come again
    started: set[tuple[int, str]] = set()
    signal.started = True
    try:
        if signal.is_set():  # cancelled before its loop started
            raise asyncio.CancelledError
        async for event in events:
            if isinstance(event, ToolCallStarted):
                started.add((event.round, event.call.id))
            elif isinstance(event, ToolCallFinished):
                finished[event.round, event.trace.call.id] = event.trace
            elif isinstance(event, FinalAnswer):
                signal.ended = True
            yield event
    except asyncio.CancelledError:
        if not signal.is_set():
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the run ends here, normally: its session may commit
        signal.ended = True
        for answered in close_cancelled(state, finished, signal.reason, started):
            answered.agent = state.agent
            yield answered
        yield FinalAnswer(state.result("", StopReason.CANCELLED), state.agent)


def close_cancelled(
    state: RunState,
    finished: dict[tuple[int, str], ToolTrace],
    reason: str,
    started: set[tuple[int, str]],
) -> list[ToolCallFinished]:
    """Answer the open turn's calls as the run is cancelled (a call whose result was passed
    on keeps it, the others read ``error[cancelled]``); the events of the calls answered.

    A call that had started (``started``: by round and call id) may have done its work
    before it heard of the cancel: the model is told so, not to call it again blindly — the
    next run has another id, so no record would stop a second refund."""
    turn = state.turn
    if turn is None:
        return []
    never_ran = ToolResult.failure(
        ErrorCode.CANCELLED,
        f"the run was cancelled ({reason}) before this call ran: it did not run",
    )
    cut_short = ToolResult.failure(ErrorCode.CANCELLED, cancelled_while_running(reason))
    traces, ended = [], []
    for call in turn.calls:
        if call.id in turn.answered:
            continue
        trace = finished.get((turn.round, call.id))
        if trace is None:
            refusal = cut_short if (turn.round, call.id) in started else never_ran
            trace = ToolTrace(call=call, result=refusal, duration_s=0.0)
            ended.append(ToolCallFinished(turn.round, trace))
        traces.append(trace)
    turn.pending = ()
    state.close_round(turn, traces, ())
    return ended


def cancelled_while_running(reason: str) -> str:
    """What the model reads for a call that was running when its run was cancelled."""
    return (
        f"the run was cancelled ({reason}) before this call finished: it had started, so it "
        "may have done its work. Check whether it happened before calling it again"
    )


def send_to(inbox: Inbox, signal: CancelSignal, message: str | Message) -> Message:
    """``RunHandle.send`` for a front door that drives the run's stream itself
    (``stream_told(..., inbox=...)``): the message as the run will hold it.

    Raises:
        RunEnded: the run has ended or was cancelled (naming it and why).
    """
    sent = user_message(message)
    refused = f"it was cancelled ({signal.reason})" if signal.is_set() else None
    refused = refused or inbox.put(sent)
    if refused is not None:
        run = repr(inbox.run_id) if inbox.run_id else "(not started)"
        raise RunEnded(f"cannot send a message to run {run}: {refused}; it was not added")
    return sent


def user_message(message: str | Message) -> Message:
    """``message`` as the user message a run is sent (``RunHandle.send``)."""
    if isinstance(message, str):
        return Message.user(message)
    if isinstance(message, Message) and message.role == "user":
        return message
    got = f"a {message.role!r} message" if isinstance(message, Message) else repr(message)
    raise TypeError(f"send() takes text or a user Message (Message.user(...)), got {got}")


async def listening(
    events: AsyncGenerator[Event, None], state: RunState, inbox: Inbox
) -> AsyncGenerator[Event, None]:
    """The run's events; as it ends, its inbox closes, and a message still waiting (the run
    was cancelled, or stopped at a limit) is kept at the end of its transcript, unanswered:
    one ``MessageJoined(sent=False)``, then the FinalAnswer (or the RunStopped's result)
    holding them. A run that answered or paused closed its inbox itself (``run._engine``)."""
    inbox.run_id = state.run_id
    last_round = 0
    try:
        async for event in events:
            if isinstance(event, ModelRequest):
                last_round = event.round
            elif isinstance(event, FinalAnswer):
                result = event.result
                kept = inbox.close(f"it has ended (stop reason {result.stop_reason.value!r})")
                if kept:
                    yield MessageJoined(last_round, kept, False, event.agent)
                    event.result = _with(result, kept)
            yield event
    except RunStopped as stopped:
        kept = inbox.close(f"it has stopped: {stopped}")
        if kept and stopped.result is not None:
            stopped.result = _with(stopped.result, kept)
        raise
    finally:
        inbox.close("it has ended")


def _with(result: RunResult[Any], kept: tuple[Message, ...]) -> RunResult[Any]:
    """``result`` with the messages sent and never answered at the end of its transcript."""
    return result.model_copy(update={"messages": (*result.messages, *kept)})


class _Starts(Protocol):
    def _stream(self, prompt: str, opts: RunOptions) -> AsyncGenerator[Event, None]: ...

    def _resume(
        self,
        checkpoint: Checkpoint | str | None,
        decisions: Mapping[str, Decision] | None,
        opts: RunOptions,
    ) -> AsyncGenerator[Event, None]: ...


def start_run(agent: _Starts, prompt: str, **options: Unpack[RunArgs[Any]]) -> RunHandle[Any]:
    """``Agent.start``: run ``prompt`` in a task of the running event loop; its handle.

    ``options`` are those of ``Agent.run`` (``RunArgs``). Call it inside a running loop.
    """
    return start_carrying(agent, prompt, None, **options)


def start_carrying(
    agent: _Starts, prompt: str, carried: Mapping[str, Any] | None, **options: Unpack[RunArgs[Any]]
) -> RunHandle[Any]:
    """``Agent.start``, its capabilities started from ``carried`` (the states a session's
    last committed run ended with: ``Capability.next_run_state``), for a front door that
    keeps the session itself (``tooldeck.durable``)."""
    signal, inbox = CancelSignal(), Inbox()
    opts = replace(RunOptions.of(options), cancel=signal, inbox=inbox, carried=carried)
    return RunHandle(agent._stream(prompt, opts), signal, inbox)


def start_resumed_run(
    agent: _Starts,
    checkpoint: Checkpoint | str | None = None,
    decisions: Mapping[str, Decision] | None = None,
    **options: Unpack[RunArgs[Any]],
) -> RunHandle[Any]:
    """``Agent.start_resume``: ``Agent.resume`` in a task of the running event loop; its
    handle (``session=`` alone resumes the session's paused run, as ``resume`` does)."""
    signal, inbox = CancelSignal(), Inbox()
    opts = replace(RunOptions.of(options, resuming=True), cancel=signal, inbox=inbox)
    return RunHandle(agent._resume(checkpoint, decisions, opts), signal, inbox)


def stream_told(
    agent: _Starts,
    prompt: str,
    signal: CancelSignal,
    inbox: Inbox | None = None,
    **options: Unpack[RunArgs[Any]],
) -> AsyncGenerator[Event, None]:
    """``Agent.stream`` whose tools read ``signal`` as ``ctx.cancelled``: for a front door
    that stops the stream itself (its client went away). Closing a stream stops what the run
    awaits; setting ``signal`` as it closes tells the sync tools still running, at any depth.
    The run stops as a closed stream does (its session keeps its journal). Messages put in
    ``inbox`` (``send_to``) join the run as ``RunHandle.send``'s do."""
    return agent._stream(prompt, replace(RunOptions.of(options), cancel=signal, inbox=inbox))


def resume_stream_told(
    agent: _Starts,
    decisions: Mapping[str, Decision] | None,
    signal: CancelSignal,
    inbox: Inbox | None = None,
    **options: Unpack[RunArgs[Any]],
) -> AsyncGenerator[Event, None]:
    """``Agent.resume_stream`` of the session's paused run, its tools told and its
    ``inbox`` read as ``stream_told``'s are."""
    opts = replace(RunOptions.of(options, resuming=True), cancel=signal, inbox=inbox)
    return agent._resume(None, decisions, opts)
