"""Pruning a2a-sdk's event log of finished tasks, so the store does not grow for ever.

Every write of a task logs its event in ``task_events`` (the SDK's cluster store: one row
per status update and artifact chunk), which a server following a task it does not run reads.
Once a task is finished (completed, failed, cancelled, rejected), no new follower reads its
events (SubscribeToTask of a finished task is refused), and GetTask and ListTasks read the
task's own row, which keeps its status, artifacts and history. Only a follower that was
already tailing the task may still be reading towards its end.

So a server notes when it first sees a task finished (table ``a2a_task_ends``, on the store's
clock: ``_clock``) and, ``keep_s`` seconds later, deletes the task's events but the last: its
finished status. A follower that lags even longer than that still reads the end, and its
stream ends; it misses only what came between. Every server sweeps (at a heartbeat, at most
every ``min(keep_s / 2, 60)`` seconds); the deletes are the same whoever makes them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from a2a.server.models import TaskEventModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import TaskState
from sqlalchemy import (
    JSON,
    Column,
    Float,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    type_coerce,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from tooldeck.serve.a2a._clock import StoreClock

ENDS_TABLE = "a2a_task_ends"
FINISHED = frozenset(
    TaskState.Name(state)
    for state in (
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    )
)
"""The states of a finished task, as its stored status names them."""

_META = MetaData()
_ENDS = Table(
    ENDS_TABLE,
    _META,
    Column("task_id", String(255), primary_key=True),
    Column("seen", Float, nullable=False),
)
_EVENTS = TaskEventModel


class EventLog:
    """The event log of the tasks in ``tasks``' database, pruned of each finished task's
    events (but the last) ``keep_s`` seconds after a server first saw it finished."""

    def __init__(
        self, tasks: DatabaseTaskStore, keep_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        if not keep_s > 0:
            raise ValueError(
                f"keep_events_s={keep_s:g}: a finished task's events are kept over 0 s (None keeps "
                "them all)"
            )
        self.tasks = tasks
        self.keep_s = keep_s
        self.every_s = min(keep_s / 2, 60.0)
        """The least time between two sweeps of this process."""
        self.time = StoreClock(tasks.engine, clock)
        self._created = False
        self._next_sweep = 0.0

    async def sweep_if_due(self) -> int:
        """``prune()`` unless this process swept less than ``every_s`` seconds ago."""
        if time.monotonic() < self._next_sweep:
            return 0
        self._next_sweep = time.monotonic() + self.every_s
        return await self.prune()

    async def prune(self) -> int:
        """Note the tasks newly seen finished; delete the events (but the last) of those
        seen finished ``keep_s`` seconds ago or more. How many tasks were pruned."""
        if not self._created:
            async with self.tasks.engine.begin() as connection:
                await connection.run_sync(_META.create_all)
            self._created = True
        with contextlib.suppress(IntegrityError):  # another server noted them at this moment
            async with self.tasks.engine.begin() as connection:
                await self._note_finished(connection)
        async with self.tasks.engine.begin() as connection:
            due = select(_ENDS.c.task_id).where(_ENDS.c.seen <= self.time.now() - self.keep_s)
            task_ids = list((await connection.execute(due)).scalars())
            if not task_ids:
                return 0
            lasts = select(_EVENTS.task_id, func.max(_EVENTS.seq)).group_by(_EVENTS.task_id)
            for task_id, last in (
                await connection.execute(lasts.where(_EVENTS.task_id.in_(task_ids)))
            ).all():
                await connection.execute(
                    delete(_EVENTS).where(_EVENTS.task_id == task_id, _EVENTS.seq < last)
                )
            await connection.execute(delete(_ENDS).where(_ENDS.c.task_id.in_(task_ids)))
        return len(task_ids)

    async def _note_finished(self, connection: AsyncConnection) -> None:
        """Note, at the time now, the finished tasks with events to prune not noted yet."""
        model = self.tasks.task_model
        with_events = select(_EVENTS.task_id).group_by(_EVENTS.task_id).having(func.count() > 1)
        query = select(model.id, type_coerce(model.status, JSON)).where(
            model.id.in_(with_events), model.id.not_in(select(_ENDS.c.task_id))
        )
        finished = [
            task_id
            for task_id, status in (await connection.execute(query)).all()
            if _state(status) in FINISHED
        ]
        if finished:
            noted = select(model.id, self.time.now()).where(model.id.in_(finished))
            await connection.execute(insert(_ENDS).from_select(["task_id", "seen"], noted))


def _state(status: Any) -> str:
    """The state a stored status names, "" if it names none."""
    return str(status.get("state", "")) if isinstance(status, dict) else ""
