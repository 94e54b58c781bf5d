"""a2a-sdk's request handler, with what a tooldeck task needs checked before it is queued.

A message is checked against its context's session before the SDK takes it: a reply that
names a call that is not pending, a prompt to a context whose run waits, a message to a
finished task are refused with a JSON-RPC ``InvalidParams`` error (HTTP 400 over HTTP+JSON)
whose message says what to send, and the task is left as it was. A text message to a
``WORKING`` task joins its run (``RunHandle.send``): at once when this process runs it, else
through the store (``_inbox``) to the process that does, whose answer this one waits for. A
task whose server process was killed is marked ``FAILED`` before the message is looked at
(``_runners``). A cancel of a paused task also ends the paused run in the session (its
calls read ``error[cancelled]``), in whichever process the cancel arrives; a cancel of a
task running in another process is the SDK's (``CANCELED`` in the shared store), which that
process's heartbeat turns into its run's cancellation (``_beat``). The handler runs in the
SDK's cluster mode (its versioned store and event stream), so SubscribeToTask streams a
task from any server process.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from a2a.helpers import get_data_parts, get_text_parts
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from tooldeck.errors import RunEnded
from tooldeck.remote._pending import DECISIONS_KIND
from tooldeck.serve.a2a._executor import RunExecutor, asked_of
from tooldeck.serve.a2a._inbox import JOINED
from tooldeck.serve.a2a._replies import ReplyError, Resume

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events import Event

_UNFINISHED = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


class TaskHandler(DefaultRequestHandlerV2):
    """``DefaultRequestHandlerV2`` on the executor's store, checking messages first."""

    def __init__(self, executor: RunExecutor, card: AgentCard) -> None:
        store = executor.store
        self.tasks = store.task_store()
        stream = store.event_stream(poll_s=min(executor.heartbeat_s, 0.5))
        super().__init__(executor, store.versioned(), card, event_stream=stream)
        self.executor = executor

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        joined = await self._check(params, context)
        if joined is not None:  # the task as it stands: its run goes on with the message
            task: Task = await self.on_get_task(GetTaskRequest(id=joined), context)
            return task
        answered: Message | Task = await super().on_message_send(params, context)
        return answered

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        joined = await self._check(params, context)
        if joined is not None:  # the running task's stream, from where it stands
            again = SubscribeToTaskRequest(id=joined)
            async for event in self.on_subscribe_to_task(again, context):
                yield event
            return
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        task: Task | None = await super().on_cancel_task(params, context)
        if task is not None:
            await self.executor.close_paused(task.id, task.context_id)
        return task

    async def _check(self, params: SendMessageRequest, context: ServerCallContext) -> str | None:
        """Refuse (``InvalidParamsError``) a message its task or context cannot take; the
        task id when it was sent to a task running here (it joined the run)."""
        message = params.message
        context_id = message.context_id
        if message.task_id:
            task = await self.tasks.get(message.task_id, context)
            if task is None:
                return None  # the SDK answers TaskNotFound
            if task.status.state in _UNFINISHED and await self.executor.fail_orphans(
                task.context_id
            ):
                task = await self.tasks.get(message.task_id, context) or task
            state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_")
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED and _decides(message):
                raise InvalidParamsError(
                    f"task {task.id!r} is {state} and waits for no decisions: a pause takes one "
                    "reply, and if it paused, another reply answered it; this one was not used"
                )
            if task.status.state in _UNFINISHED:
                return await self._join(task, message)
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                raise InvalidParamsError(
                    f"task {task.id!r} is {state}: only a task in INPUT_REQUIRED takes a "
                    "reply, and a WORKING one a message; send a new message without a task id "
                    f"(context {task.context_id!r}) to start a run"
                )
            context_id = task.context_id
        if not context_id:
            return None  # a new conversation: nothing waits in it
        await self.executor.fail_orphans(context_id)
        if message.task_id:  # a reply to a paused task
            await self._claim(message, context_id, context)
        else:
            await self._check_reply(message, context_id)
        return None

    async def _claim(self, message: Message, context_id: str, context: ServerCallContext) -> None:
        """Take the paused task for this reply, so one reply resumes it across the server
        processes on the store; then check the reply against the pause as it is now. A
        second reply is refused, the task left to the first."""
        runners, task_id = self.executor.runners, message.task_id
        holder = await runners.claim(task_id, context_id, self.tasks.owner_resolver(context))
        if holder is not None:
            where = "this server" if holder == runners.me else f"another server process ({holder})"
            raise InvalidParamsError(_answered(task_id, f"by another reply, in {where}"))
        task = await self.tasks.get(task_id, context)
        try:
            waiting = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            if not waiting or not await self._waits(context_id, task_id):
                raise InvalidParamsError(_answered(task_id, "by another reply"))
            await self._check_reply(message, context_id)
        except BaseException:  # refused (or failed): the task is free for another reply
            await runners.release(task_id)
            raise

    async def _waits(self, context_id: str, task_id: str) -> bool:
        """Whether the run paused in the context is task ``task_id``'s."""
        session = self.executor.store.session(context_id)
        try:
            paused = await session.pending()
        finally:
            await session.aclose()
        return paused is not None and paused.run_id == task_id

    async def _check_reply(self, message: Message, context_id: str) -> None:
        session = self.executor.store.session(context_id)
        try:
            asked = await asked_of(message, session, self.executor.decided_by)
            paused = await session.pending()
        except ReplyError as error:
            raise InvalidParamsError(str(error)) from None
        finally:
            await session.aclose()
        if isinstance(asked, Resume) and paused is not None and paused.run_id != message.task_id:
            raise InvalidParamsError(
                f"the run waiting in context {context_id!r} is task {paused.run_id!r}'s: send "
                "the reply to that task (with its task id)"
            )

    async def _join(self, task: Task, message: Message) -> str:
        """Send a message's text to the task's running run (``RunHandle.send``)."""
        text = "\n".join(get_text_parts(message.parts))
        if get_data_parts(message.parts) or not text.strip():
            raise InvalidParamsError(
                f"task {task.id!r} is working: a message to it is text only, which joins its "
                "run before the run's next model request"
            )
        try:
            if self.executor.join(task.id, message):
                return task.id
        except RunEnded as error:
            raise _ending(task, str(error)) from None
        runners = self.executor.runners
        runner = await runners.runner(task.id)
        if runner is None or runner == runners.me:
            where = "in no server process this one knows of"
            if runner == runners.me:
                where = "in this server, starting or ending: send it again"
            raise InvalidParamsError(
                f"task {task.id!r} is working {where}: a message joins a run only in the "
                "process running it; the message was not added"
            )
        answer = await self.executor.inbox.ask(task.id, message, wait_s=runners.lease)
        if answer == JOINED:
            return task.id
        if answer is None:
            raise InvalidParamsError(
                f"task {task.id!r} is working in another server process ({runner}), which did "
                f"not take the message within its lease ({runners.lease:g} s): the message was "
                "not added"
            )
        raise _ending(task, answer)


def _ending(task: Task, why: str) -> InvalidParamsError:
    return InvalidParamsError(
        f"task {task.id!r} is ending: {why}; send a new message without a task id "
        f"(context {task.context_id!r})"
    )


def _decides(message: Message) -> bool:
    """Whether the message is a reply with decisions (``tooldeck.decisions``)."""
    return any(
        isinstance(data, dict) and data.get("kind") == DECISIONS_KIND
        for data in get_data_parts(message.parts)
    )


def _answered(task_id: str, how: str) -> str:
    return (
        f"the pause of task {task_id!r} was already answered {how}: a pause takes one reply; "
        "this one was not used. Read the task (GetTask) to see how it goes on."
    )
