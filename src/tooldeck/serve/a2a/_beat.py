"""A server process's heartbeat: what ties the server processes on one store together.

Every ``heartbeat_s`` seconds (one sleeping task per process, no busy loop), a server:

- renews the lease of the rows of the tasks it runs (``Runners.renew``), when it runs any;
- stops the run of a task another process ended: cancelled it (the SDK's CancelTask writes
  ``CANCELED`` to the shared store when the task runs elsewhere) or failed it (this process
  stopped beating long enough for its lease to run out);
- sends its runs the messages other processes left for them (``Inbox``) and answers each;
- fails the tasks whose runner is gone (killed on this machine, or its lease ran out
  anywhere), so no task stays ``WORKING`` for ever;
- now and then (at most every minute), prunes the event log of finished tasks (``_events``).

With nothing running, a beat is one read of ``a2a_task_runners`` (and, at a sweep, a few
small queries of the event log).
"""

from __future__ import annotations

import asyncio
import logging

from a2a.types import TaskState

from tooldeck.errors import RunEnded
from tooldeck.serve.a2a._executor import CANCELLED_BY_CLIENT, RunExecutor
from tooldeck.serve.a2a._inbox import JOINED

logger = logging.getLogger("tooldeck.serve.a2a")

FAILED_ELSEWHERE = "another A2A server took this one for stopped (its lease ran out)"
"""Why a run stops when its task was failed by another process."""
_ENDED = {
    TaskState.TASK_STATE_CANCELED: CANCELLED_BY_CLIENT,
    TaskState.TASK_STATE_FAILED: FAILED_ELSEWHERE,
}


async def beat_forever(executor: RunExecutor) -> None:
    """Beat every ``executor.heartbeat_s`` seconds until cancelled; a failed beat (the
    database away for a moment) is logged and the next one tried."""
    while True:
        await asyncio.sleep(executor.heartbeat_s)
        try:
            await beat(executor)
        except Exception:
            logger.exception("an A2A server's heartbeat failed; trying again")


async def beat(executor: RunExecutor) -> None:
    """One heartbeat (see the module)."""
    if executor.running:
        await executor.runners.renew()
        await _stop_ended_elsewhere(executor)
        await _deliver(executor)
    await executor.fail_orphans()
    if executor.events is not None:
        await executor.events.sweep_if_due()


async def _stop_ended_elsewhere(executor: RunExecutor) -> None:
    tasks = executor.store.task_store()
    for task_id, running in list(executor.running.items()):
        if running.ended_elsewhere or running.call_context is None:
            continue
        task = await tasks.get(task_id, running.call_context)
        why = _ENDED.get(task.status.state, "") if task is not None else ""
        if why and not running.ended.is_set():
            running.ended_elsewhere = why
            running.handle.cancel(why)


async def _deliver(executor: RunExecutor) -> None:
    for row_id, task_id, message in await executor.inbox.waiting(list(executor.running)):
        try:
            joined = executor.join(task_id, message)
            answer = JOINED if joined else "its run ended in the server process running it"
        except RunEnded as error:
            answer = str(error)
        await executor.inbox.answer(row_id, answer)
