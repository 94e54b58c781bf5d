"""The endpoint: a ``RunAgentInput`` in, the run's AG-UI events out over server-sent events.

Each thread is a tooldeck session: a new run continues its conversation, and a paused run
is resumed from it (claimed once, as ``agent.resume(session=...)`` does). What could not
run is a ``RUN_ERROR`` with a code and a message that says what to send instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TokenUsage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tooldeck.errors import CheckpointError, RunStopped, SessionConflict, ToolDeckError
from tooldeck.results import RunResult
from tooldeck.run._engine.in_session import retried_run
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run.agent import Agent
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.events import Event, FinalAnswer
from tooldeck.run.handle import resume_stream_told, stream_told
from tooldeck.run.handoff import judges_answers
from tooldeck.run.session import Session
from tooldeck.serve.agui._input import InputError, NewRun, Resume, describe, interrupts, plan
from tooldeck.serve.agui._messages import as_agui, client_ids, with_answered
from tooldeck.serve.agui._relay import Relay
from tooldeck.serve.agui._send import LiveRun, send_message

logger = logging.getLogger("tooldeck.serve.agui")
"""Where an unexpected failure of a run goes, with its traceback (the client reads a line)."""

SessionFactory = Callable[[str], Session]
"""Makes the session of a thread id (closed with ``aclose()`` after each request)."""

_MAX_THREAD_ID = 200
CLIENT_GONE = "the client went away"
"""Why a run's tools are told to stop when its client closed the stream."""


class Sessions:
    """The session of each thread: one given Session (its own thread only), a factory, or
    a ``SQLiteSession`` per thread in ``sessions.db`` under ``data_dir``."""

    def __init__(self, sessions: Session | SessionFactory | None, data_dir: Path | None) -> None:
        self._one: Session | None = None
        if sessions is None:
            from tooldeck.runlog import tooldeck_home
            from tooldeck.sessions import SQLiteSession

            database = (data_dir or tooldeck_home()) / "sessions.db"
            self.factory: SessionFactory = lambda thread: SQLiteSession(database, thread)
        elif isinstance(sessions, type) or not isinstance(sessions, Session):
            self.factory = sessions
        else:
            self._one = sessions
            self.factory = self._only

    def _only(self, thread_id: str) -> Session:
        assert self._one is not None  # the factory of a single given session
        if thread_id != self._one.session_id:
            raise InputError(
                f"this endpoint serves the thread {self._one.session_id!r} only, not {thread_id!r}",
                "unknown_thread",
            )
        return self._one

    def open(self, thread_id: str) -> Session:
        if not thread_id or len(thread_id) > _MAX_THREAD_ID:
            raise InputError(
                f"a thread id is 1 to {_MAX_THREAD_ID} characters, got {len(thread_id)}",
                "invalid_thread",
            )
        return self.factory(thread_id)

    async def close(self, session: Session) -> None:
        if session is not self._one:
            await session.aclose()


class AguiEndpoint:
    """Runs an agent for AG-UI clients; ``handle`` is the Starlette endpoint (POST)."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        sessions: Sessions,
        *,
        deps: Any = None,
        show_exceptions: bool = False,
        decided_by: str = "ag-ui",
    ) -> None:
        self.agent = agent
        self.sessions = sessions
        self.deps = deps
        self.show_exceptions = show_exceptions
        self.decided_by = decided_by
        self.hold_answer = judges_answers(agent)
        """The runs judge their answers: none is sent before its output guardrails passed."""
        self._busy: set[str] = set()
        self._live: dict[str, LiveRun] = {}
        """Each thread's run going on, which ``POST /messages`` adds messages to."""

    async def send(self, request: Request) -> Response:
        """``POST /messages``: a message added to a thread's run going on (``_send``)."""
        return await send_message(request, self._live)

    async def handle(self, request: Request) -> Response:
        try:
            run_input = RunAgentInput.model_validate_json(await request.body())
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()[:5]
            )
            return JSONResponse({"error": f"not an AG-UI RunAgentInput: {problems}"}, 422)
        encoder = EventEncoder(accept=request.headers.get("accept") or "text/event-stream")
        body = (encoder.encode(event) async for event in self.events(run_input))
        return StreamingResponse(
            body,
            media_type=encoder.get_content_type(),
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def events(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        """The events of the run the input asks for (one run per thread at a time)."""
        thread = run_input.thread_id
        if thread in self._busy:
            yield _error(f"thread {thread!r} has a run going on: wait for its end", "thread_busy")
            return
        self._busy.add(thread)
        try:
            async for event in self._on_thread(run_input):
                yield event
        finally:
            self._busy.discard(thread)

    async def _on_thread(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        try:
            session = self.sessions.open(run_input.thread_id)
        except InputError as error:
            yield _error(str(error), error.code)
            return
        try:
            try:
                planned = plan(run_input, await session.pending(), self.decided_by)
            except (InputError, ToolDeckError) as error:
                yield _failure(error)
                return
            yield RunStartedEvent(
                thread_id=run_input.thread_id,
                run_id=run_input.run_id,
                protocol_version=PROTOCOL_VERSION,
            )
            async for event in self._run(planned, session, run_input):
                yield event
        finally:
            await self.sessions.close(session)

    async def _run(
        self, planned: NewRun | Resume, session: Session, run_input: RunAgentInput
    ) -> AsyncIterator[BaseEvent]:
        gone = CancelSignal()  # set when the client goes away: the sync tools running are told
        live = self._live[run_input.thread_id] = LiveRun(run_input.run_id, Inbox(), gone)
        relay = Relay(self.show_exceptions, self.hold_answer, live=live)
        try:
            async for event in self._driven(planned, session, run_input, relay):
                yield event
        finally:
            del self._live[run_input.thread_id]

    async def _driven(
        self, planned: NewRun | Resume, session: Session, run_input: RunAgentInput, relay: Relay
    ) -> AsyncIterator[BaseEvent]:
        assert relay.live is not None  # made by _run
        gone, inbox = relay.live.signal, relay.live.inbox
        if isinstance(planned, NewRun):
            run_id = await _run_id(session, planned.prompt, run_input.run_id)
            stream = stream_told(
                self.agent,
                planned.prompt,
                gone,
                inbox,
                session=session,
                deltas=True,
                deps=self.deps,
                run_id=run_id,
            )
        else:
            turn = planned.checkpoint.messages[-1]
            relay.turn_at, relay.turn_calls = len(planned.checkpoint.messages) - 1, turn.tool_calls
            stream = resume_stream_told(
                self.agent,
                planned.decisions,
                gone,
                inbox,
                session=session,
                deltas=True,
                deps=self.deps,
            )
        try:
            async with aclosing(stream):
                async for event in stream:
                    for translated in self._translated(event, relay, planned, run_input):
                        yield translated
        except (asyncio.CancelledError, GeneratorExit):  # the client went away
            gone.cancel(CLIENT_GONE)
            raise
        except (RunStopped, ToolDeckError) as error:
            yield _failure(error)
        except Exception as error:
            logger.exception("the run of thread %r failed", run_input.thread_id)
            yield _error(f"the run failed: {type(error).__name__}: {error}", "internal_error")

    def _translated(
        self, event: Event, relay: Relay, planned: NewRun | Resume, run_input: RunAgentInput
    ) -> Iterator[BaseEvent]:
        if not isinstance(event, FinalAnswer):
            yield from relay.events(event)
            return
        result = event.result
        yield from relay.answer()
        yield from relay.results_from(result.messages)
        yield from relay.subagents.ended(result)
        paused = result.checkpoint
        conversation = paused.messages if paused is not None else result.messages
        sent = relay.live.joined if relay.live is not None else []
        ids = client_ids(conversation, [*run_input.messages, *sent])
        messages = (
            with_answered(paused.messages, paused.turn.answered, ids)
            if paused is not None
            else as_agui(result.messages, ids)
        )
        for position, note in relay.withheld.items():
            messages[position] = messages[position].model_copy(update={"content": note})
        yield MessagesSnapshotEvent(messages=messages)
        yield StateSnapshotEvent(snapshot={"tooldeck": self._state(result, run_input)})
        yield self._finished(result, planned, run_input)

    def _state(self, result: RunResult[Any], run_input: RunAgentInput) -> dict[str, Any]:
        """What the thread's client may want to show: the tooldeck run, its usage, what it
        waits for."""
        return {
            "threadId": run_input.thread_id,
            "runId": result.run_id,
            "model": self.agent.model.name,
            "stopReason": result.stop_reason,
            "answered": bool(result.answer) or result.output is not None,
            "usage": {
                "inputTokens": result.usage.input_tokens,
                "outputTokens": result.usage.output_tokens,
                "requests": result.usage.requests,
            },
            "pending": [describe(p) for p in result.pending],
        }

    def _finished(
        self, result: RunResult[Any], planned: NewRun | Resume, run_input: RunAgentInput
    ) -> RunFinishedEvent:
        """RUN_FINISHED: the answer, the interrupts of the calls awaiting approval, or the
        external calls left for the client."""
        outcome: RunFinishedSuccessOutcome | RunFinishedInterruptOutcome
        answer = None
        if result.checkpoint is None:
            outcome, answer = RunFinishedSuccessOutcome(), to_jsonable_python(result.output)
        elif asked := interrupts(result.checkpoint, self.agent.tools):
            outcome = RunFinishedInterruptOutcome(interrupts=asked)
        else:
            external = [p.id for p in result.pending]
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=external)
        return RunFinishedEvent(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            outcome=outcome,
            result=answer,
            usage=self._usage(result, planned),
        )

    def _usage(self, result: RunResult[Any], planned: NewRun | Resume) -> list[TokenUsage] | None:
        """The tokens of this request's model calls only (a resume's, not the paused
        part's); none when the model reported none."""
        before = planned.checkpoint.usage if isinstance(planned, Resume) else None
        spent_in = result.usage.input_tokens - (before.input_tokens if before else 0)
        spent_out = result.usage.output_tokens - (before.output_tokens if before else 0)
        if not spent_in and not spent_out:
            return None
        return [
            TokenUsage(
                model=self.agent.model.name,
                input_tokens=spent_in,
                output_tokens=spent_out,
                total_tokens=spent_in + spent_out,
            )
        ]


async def _run_id(session: Session, prompt: str, run_id: str) -> str:
    """The run id of a new run: the client's, so a run it sends again after the thread
    stored it is known (its stored answer comes back, nothing runs again); or, when this
    prompt is the thread's unfinished run's own sent again (its run was cut off: the page
    closed, the server killed), that run's, which then goes on."""
    return retried_run(await session.load(), prompt) or run_id


def _failure(error: Exception) -> RunErrorEvent:
    """The RUN_ERROR of a run that could not start or go on."""
    if isinstance(error, InputError):
        return _error(str(error), error.code)
    if isinstance(error, RunStopped):
        code = error.result.stop_reason if isinstance(error.result, RunResult) else None
        notes = " ".join(getattr(error, "__notes__", ()))
        return _error(f"{error} {notes}", str(code or type(error).__name__))
    if isinstance(error, SessionConflict):
        return _error(str(error), "session_conflict")
    if isinstance(error, CheckpointError):
        return _error(str(error), "checkpoint")
    return _error(str(error), type(error).__name__)


def _error(message: str, code: str) -> RunErrorEvent:
    return RunErrorEvent(message=" ".join(message.split()), code=code)
