"""The AgentExecutor: an A2A task is a tooldeck run, a context its session.

A message starts a run (its text is the prompt) in the session named by the task's context
id, with the task id as the run id; a reply to a task in ``INPUT_REQUIRED`` resumes the
session's paused run with its decisions (``_replies``). As the run goes, its text streams as
chunks of the artifact ``text-<round>``, each call's start and result as a ``WORKING``
status whose message has a data part (``tooldeck.tool_call``, ``tooldeck.tool_result``);
its end is the task's: ``COMPLETED`` (the answer also as the artifact ``answer``),
``INPUT_REQUIRED`` (the pending calls), ``CANCELED`` or ``FAILED`` (what stopped it).
``cancel`` is the run's cancellation (``RunHandle.cancel``): what it did is kept. A message
to the working task joins the run (``join``); it is recorded in the task's history as the
SDK records a message: a ``WORKING`` status carrying the message itself, which the next
status moves into the history.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, TaskState
from pydantic_core import to_jsonable_python

from tooldeck.errors import CheckpointError, RunEnded, RunStopped, ToolDeckError
from tooldeck.results import Checkpoint, RunResult, StopReason
from tooldeck.run.agent import Agent
from tooldeck.run.events import (
    FinalAnswer,
    MessageJoined,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.run.handle import RunHandle, start_resumed_run, start_run
from tooldeck.run.session import Session
from tooldeck.serve.a2a._events import EventLog
from tooldeck.serve.a2a._inbox import Inbox
from tooldeck.serve.a2a._replies import (
    TOOL_CALL_KIND,
    TOOL_RESULT_KIND,
    NewRun,
    ReplyError,
    Resume,
    pending_part,
    pending_text,
    plan,
)
from tooldeck.serve.a2a._runners import Runners, fail_orphans
from tooldeck.serve.a2a._store import Store

logger = logging.getLogger("tooldeck.serve.a2a")
"""Where an unexpected failure of a served run goes, with its traceback."""

CANCELLED_BY_CLIENT = "the A2A client cancelled the task"
JOINED_KIND = "tooldeck.message_joined"
"""The ``kind`` of a working status update's data part: messages sent to the working task
joined the run before the model request of ``round``."""


@dataclass(slots=True)
class Running:
    """A task's run in this process."""

    handle: RunHandle[Any]
    call_context: ServerCallContext | None
    """Whose task it is (the SDK's owner scope reads it)."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the task's last status is enqueued."""
    joining: deque[Message] = field(default_factory=deque)
    """Messages sent to the run that have not joined it yet, oldest first."""
    ended_elsewhere: str = ""
    """Why the run was stopped when another process ended its task (cancelled it, or
    failed it when this process's lease ran out)."""


async def asked_of(message: Message | None, session: Session, decided_by: str) -> NewRun | Resume:
    """What ``message`` asks of its context's session (``ReplyError`` if it cannot)."""
    if message is None:
        raise ReplyError("the request has no message")
    return plan(
        get_text_parts(message.parts),
        get_data_parts(message.parts),
        await session.pending(),
        decided_by,
    )


class RunExecutor(AgentExecutor):
    """Runs ``agent`` for the tasks of a2a-sdk's request handler."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        store: Store,
        *,
        deps: Any = None,
        decided_by: str = "a2a",
        heartbeat_s: float = 2.0,
        lease_s: float = 15.0,
        keep_events_s: float | None = 600.0,
    ) -> None:
        self.agent = agent
        self.store = store
        self.deps = deps
        self.decided_by = decided_by
        self.heartbeat_s = heartbeat_s
        engine = store.task_store().engine
        self.runners = Runners(engine, lease_s)
        self.inbox = Inbox(engine, poll_s=min(heartbeat_s, 0.5))
        self.events = None if keep_events_s is None else EventLog(store.task_store(), keep_events_s)
        """The event log of finished tasks, pruned at heartbeats; None keeps every event."""
        self.running: dict[str, Running] = {}
        """The tasks whose runs run in this process."""

    def join(self, task_id: str, message: Message) -> bool:
        """Send ``message``'s text to task ``task_id``'s run if it runs in this process (it
        joins the conversation before the run's next model request); False if it does not.

        Raises:
            RunEnded: the run has ended (naming how); nothing was added.
        """
        running = self.running.get(task_id)
        if running is None:
            return False
        running.joining.append(message)
        try:
            running.handle.send("\n".join(get_text_parts(message.parts)))
        except RunEnded:
            running.joining.pop()
            raise
        return True

    async def fail_orphans(self, context_id: str | None = None) -> int:
        """Mark ``FAILED`` the unfinished tasks (of ``context_id``, else all) whose server
        process was killed or stopped renewing its lease (``_runners``); how many were."""
        return await fail_orphans(self.runners, self.store.versioned(), context_id)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        owner = self.store.task_store().owner_resolver(context.call_context)
        await self.runners.hold(task_id, context_id, owner)  # before the task can be seen
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            submitted = TaskState.TASK_STATE_SUBMITTED
            await event_queue.enqueue_event(
                new_task(task_id, context_id, submitted, history=history)
            )
        session = self.store.session(context_id)
        try:
            try:
                asked = await asked_of(context.message, session, self.decided_by)
            except ReplyError as error:
                await self._refused(updater, context, str(error), session)
            else:
                await updater.start_work()
                await self._run(asked, session, updater, context.call_context)
            # not when killed: that row is how it shows; shielded, for the SDK cancels this
            # producer once another process's CANCELED stands, maybe while the row goes
            await asyncio.shield(self.runners.release(task_id))
        finally:
            await session.aclose()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run (it ends ``CANCELED``, keeping what it did); wait until its
        last status is enqueued. A paused run is closed by ``close_paused``."""
        running = self.running.get(context.task_id or "")
        if running is None:
            return
        running.handle.cancel(CANCELLED_BY_CLIENT)
        await running.ended.wait()

    async def close_paused(self, task_id: str, context_id: str) -> None:
        """End the context's paused run if it is task ``task_id``'s, as cancelled: its
        pending calls read ``error[cancelled]`` and the session takes new tasks again."""
        session = self.store.session(context_id)
        try:
            paused = await session.pending()
            if paused is None or paused.run_id != task_id:
                return
            handle = start_resumed_run(self.agent, session=session, deps=self.deps)
            handle.cancel(CANCELLED_BY_CLIENT)
            await handle.result()
        finally:
            await session.aclose()

    async def _run(
        self,
        asked: NewRun | Resume,
        session: Session,
        updater: TaskUpdater,
        call_context: ServerCallContext | None,
    ) -> None:
        task_id = updater.task_id
        handle: RunHandle[Any]
        paused = None
        if isinstance(asked, NewRun):
            handle = start_run(
                self.agent,
                asked.prompt,
                session=session,
                run_id=task_id,
                deltas=True,
                deps=self.deps,
            )
        else:
            paused = await session.pending()
            handle = start_resumed_run(
                self.agent, None, asked.decisions, session=session, deltas=True, deps=self.deps
            )
        running = self.running[task_id] = Running(handle, call_context)
        try:
            await _Relay(updater, paused, running.joining).relay(handle)
        except asyncio.CancelledError:  # the server shuts down: the run stops as it stands
            handle.cancel(running.ended_elsewhere or "the A2A server stopped")
            await asyncio.shield(handle.result())
            if running.ended_elsewhere:  # the task ended: its row goes (not a dead run's)
                await asyncio.shield(self.runners.release(task_id))
            raise
        finally:
            running.ended.set()
            self.running.pop(task_id, None)

    async def _refused(
        self, updater: TaskUpdater, context: RequestContext, problem: str, session: Session
    ) -> None:
        """A message the task cannot take: a paused task stays paused (its message says
        why the reply was refused); a new task is rejected."""
        paused = await session.pending()
        task = context.current_task
        if task is not None and paused is not None and paused.run_id == task.id:
            parts = [new_text_part(f"Refused: {problem}"), new_data_part(pending_part(paused))]
            await updater.requires_input(updater.new_agent_message(parts))
            return
        await updater.reject(updater.new_agent_message([new_text_part(problem)]))


class _Relay:
    """The run's events as the task's updates."""

    def __init__(
        self,
        updater: TaskUpdater,
        paused: Checkpoint | None = None,
        joining: deque[Message] | None = None,
    ) -> None:
        self.updater = updater
        self.paused = paused
        """The pause a reply resumes: it stays when the reply cannot resume it."""
        self.joining: deque[Message] = deque() if joining is None else joining
        """The A2A messages sent to the run, oldest first, until they join."""
        self._streamed: set[int] = set()

    async def relay(self, handle: RunHandle[Any]) -> None:
        ended = False
        async for event in handle:
            if isinstance(event, TextDelta) and event.text:
                await self._text(event)
            elif isinstance(event, ToolCallStarted | ToolCallFinished):
                await self._working(_call_data(event))
            elif isinstance(event, MessageJoined) and event.sent:
                await self._joined(event)
            elif isinstance(event, FinalAnswer):
                ended = True
                await self._finish(event.result)
        if not ended:
            await self._failed_with(handle)

    async def _text(self, event: TextDelta) -> None:
        first = event.round not in self._streamed
        self._streamed.add(event.round)
        await self.updater.add_artifact(
            [new_text_part(event.text)],
            artifact_id=f"text-{event.round}",
            name="text",
            append=not first,
        )

    async def _joined(self, event: MessageJoined) -> None:
        """Each joined message as a status of its own (the next status moves it into the
        task's history, as the SDK keeps a message), then what joined, for the model."""
        for _ in event.messages:
            if self.joining:
                message = Message()
                message.CopyFrom(self.joining.popleft())
                message.task_id, message.context_id = self.updater.task_id, self.updater.context_id
                await self.updater.update_status(TaskState.TASK_STATE_WORKING, message)
        texts = [m.content for m in event.messages]
        await self._working({"kind": JOINED_KIND, "texts": texts, "round": event.round})

    async def _working(self, data: dict[str, Any]) -> None:
        message = self.updater.new_agent_message([new_data_part(data)])
        await self.updater.update_status(TaskState.TASK_STATE_WORKING, message)

    async def _finish(self, result: RunResult[Any]) -> None:
        updater = self.updater
        if result.checkpoint is not None:
            paused = result.checkpoint
            parts = [new_text_part(pending_text(paused)), new_data_part(pending_part(paused))]
            await updater.requires_input(updater.new_agent_message(parts))
        elif result.stop_reason == StopReason.CANCELLED:
            await updater.cancel(
                updater.new_agent_message([new_text_part("The run was cancelled.")])
            )
        elif result.stop_reason != StopReason.ANSWER:
            text = f"The run stopped ({result.stop_reason}) before it answered."
            await updater.failed(updater.new_agent_message([new_text_part(text)]))
        else:
            parts = _answer_parts(result)
            await updater.add_artifact(parts, artifact_id="answer", name="answer", last_chunk=True)
            await updater.complete(updater.new_agent_message(parts))

    async def _failed_with(self, handle: RunHandle[Any]) -> None:
        """The run raised: the task fails with what stopped it."""
        try:
            await handle.result()
        except CheckpointError as error:
            if self.paused is None:
                raise
            text = " ".join(f"The reply could not resume the run: {error}".split())
            parts = [new_text_part(text), new_data_part(pending_part(self.paused))]
            await self.updater.requires_input(self.updater.new_agent_message(parts))
            return
        except (RunStopped, ToolDeckError) as error:
            text = " ".join(f"The run stopped: {error}".split())
        except Exception as error:
            logger.exception("a served run failed (task %s)", self.updater.task_id)
            text = f"The run failed: {type(error).__name__}: {error}"
        else:
            text = "The run ended without an answer."
        await self.updater.failed(self.updater.new_agent_message([new_text_part(text)]))


def _call_data(event: ToolCallStarted | ToolCallFinished) -> dict[str, Any]:
    """A call's start or result, as a working status's data part."""
    if isinstance(event, ToolCallStarted):
        call = event.call
        return {
            "kind": TOOL_CALL_KIND,
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "round": event.round,
        }
    trace = event.trace
    return {
        "kind": TOOL_RESULT_KIND,
        "id": trace.call.id,
        "name": trace.call.name,
        "ok": trace.result.ok,
        "output": trace.result.output,
        "round": event.round,
    }


def _answer_parts(result: RunResult[Any]) -> list[Part]:
    """The answer: its text, and a typed answer's data."""
    parts = [new_text_part(result.answer)] if result.answer else []
    if result.output is not None and not isinstance(result.output, str):
        parts.append(new_data_part(to_jsonable_python(result.output)))
    return parts or [new_text_part("")]
