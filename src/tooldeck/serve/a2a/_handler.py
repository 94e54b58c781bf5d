"""a2a-sdk's request handler, with what a tooldeck task needs checked before it is queued.

A message is checked against its context's session before the SDK takes it: a reply that
names a call that is not pending, a prompt to a context whose run waits, a message to a task
that is not waiting for input are refused with a JSON-RPC ``InvalidParams`` error (HTTP 400
over HTTP+JSON) whose message says what to send, and the task is left as it was. A cancel of
a paused task also ends the paused run in the session (its calls read ``error[cancelled]``),
in whichever process the cancel arrives.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.types import AgentCard, CancelTaskRequest, Message, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError

from tooldeck.serve.a2a._executor import RunExecutor, asked_of
from tooldeck.serve.a2a._replies import ReplyError, Resume

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events import Event


class TaskHandler(DefaultRequestHandlerV2):
    """``DefaultRequestHandlerV2`` on the executor's store, checking messages first."""

    def __init__(self, executor: RunExecutor, card: AgentCard) -> None:
        self.tasks = executor.store.task_store()
        super().__init__(executor, self.tasks, card)
        self.executor = executor

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        await self._check(params, context)
        answered: Message | Task = await super().on_message_send(params, context)
        return answered

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        await self._check(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        task: Task | None = await super().on_cancel_task(params, context)
        if task is not None:
            await self.executor.close_paused(task.id, task.context_id)
        return task

    async def _check(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        message = params.message
        context_id = message.context_id
        if message.task_id:
            task = await self.tasks.get(message.task_id, context)
            if task is None:
                return  # the SDK answers TaskNotFound
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_")
                raise InvalidParamsError(
                    f"task {task.id!r} is {state}: only a task in INPUT_REQUIRED takes a "
                    f"reply; send a new message without a task id (context {task.context_id!r}) "
                    "to start a run"
                )
            context_id = task.context_id
        if not context_id:
            return  # a new conversation: nothing waits in it
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
