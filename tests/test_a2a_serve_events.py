"""A finished task's streamed events are pruned from the store's event log (a2a-sdk's
``task_events``) once the grace period (``--keep-events``) has passed since a server saw it
finished: all but the last, its finished status. A server following the task that lags past
the prune still reads the end, and its client's stream ends; GetTask, ListTasks and
SubscribeToTask of the task, and the next task in its context, read as before. An unfinished
task's events are never pruned. The log (in-process, SQLite and PostgreSQL) and two real
server processes on one SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from a2a.helpers import get_text_parts
from a2a.server.cluster import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Role,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import A2AError
from sqlalchemy import text

from _a2a import counting, prompt, send, status_text
from _a2a_cross import servers, silence, sqlite_writable, store
from tooldeck.serve.a2a._events import EventLog
from tooldeck.serve.a2a._store import Store
from tooldeck.testing import call, reply

__all__ = ["store"]  # the fixture, defined with the other helpers

KEEP_S = 2.0
"""The grace period of these tests."""
_STATES = (
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_WORKING,
    TaskState.TASK_STATE_WORKING,
    TaskState.TASK_STATE_COMPLETED,
)


async def _write(where: Store, task_id: str, states: tuple[TaskState, ...]) -> None:
    """Write task ``task_id`` through the SDK's cluster store, one state after another, each
    with its status event (as a server running it does)."""
    version = TaskVersion.MISSING
    for state in states:
        task = Task(id=task_id, context_id="context-1", status=TaskStatus(state=state))
        event = TaskStatusUpdateEvent(task_id=task_id, context_id="context-1", status=task.status)
        version = await where.versioned().save(
            task, event=event, prev_version=version, context=ServerCallContext()
        )


async def _logged(where: Store) -> dict[str, list[int]]:
    """Each task's logged events: the task version each produced, in order."""
    query = "SELECT task_id, task_version FROM task_events ORDER BY seq"
    async with where.task_store().engine.connect() as connection:
        rows = (await connection.execute(text(query))).all()
    logged: dict[str, list[int]] = {}
    for task_id, version in rows:
        logged.setdefault(task_id, []).append(int(version))
    return logged


async def test_the_log_keeps_a_finished_tasks_events_for_the_grace_then_only_its_end(
    store: str,
) -> None:
    where = Store(store)
    log = EventLog(where.task_store(), keep_s=1.0)
    try:
        await _write(where, "task-done", _STATES)
        await _write(where, "task-on", _STATES[:3])  # still working
        noted = await log.prune()  # sees task-done finished: its grace starts
        within_grace = await _logged(where)
        await asyncio.sleep(1.2)
        pruned = await log.prune()
        after = await _logged(where)
        again = await log.prune()
        kept = await where.versioned().get("task-done", ServerCallContext())
    finally:
        await where.aclose()
    assert noted == 0
    assert within_grace == {"task-done": [1, 2, 3, 4], "task-on": [1, 2, 3]}
    assert pruned == 1
    assert after == {"task-done": [4], "task-on": [1, 2, 3]}  # its end, its finished status
    assert again == 0
    assert kept is not None
    assert kept.task.status.state == TaskState.TASK_STATE_COMPLETED


def test_events_are_kept_over_0_s_or_always(tmp_path: Path) -> None:
    where = Store(tmp_path / "tasks.db")
    with pytest.raises(ValueError, match="keep_events_s=0") as refused:
        EventLog(where.task_store(), keep_s=0)
    assert str(refused.value) == (
        "keep_events_s=0: a finished task's events are kept over 0 s (None keeps them all)"
    )


def _count_events(store: str, task_id: str) -> int:
    with contextlib.closing(sqlite3.connect(store, timeout=5)) as db:
        query = "SELECT count(*) FROM task_events WHERE task_id = ?"
        return int(db.execute(query, [task_id]).fetchone()[0])


def _finished(store: str, task_id: str) -> bool:
    with contextlib.closing(sqlite3.connect(store, timeout=5)) as db:
        [status] = db.execute("SELECT status FROM a2a_tasks WHERE id = ?", [task_id]).fetchone()
        return '"TASK_STATE_COMPLETED"' in status


async def _until(holds: Callable[[], bool], within_s: float) -> float | None:
    """The seconds until ``holds()`` holds, polled every 0.1 s; None if not within ``within_s``."""
    started = time.monotonic()
    while not holds():
        if time.monotonic() - started > within_s:
            return None
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def _read_on(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


async def test_a_follower_lagging_past_the_prune_still_reads_the_end_and_the_task_stays(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3."), reply("Yes, to 3.")])
    store = str(tmp_path / "tasks.db")
    keep = ("--keep-events", str(KEEP_S))
    async with servers(tmp_path, sim, store, *keep, slow_s=5) as (_, a_client, b, b_client):
        running = await counting(a_client)
        follower = b_client.subscribe(SubscribeToTaskRequest(id=running.id))
        first = await anext(follower)  # B follows A's task...
        silence(b, lambda: sqlite_writable(store))  # ... and lags: stopped while it works
        try:
            finished = await _until(lambda: _finished(store, running.id), within_s=30)
            logged = _count_events(store, running.id)
            pruned_s = await _until(lambda: _count_events(store, running.id) == 1, within_s=30)
        finally:
            b.send_signal(signal.SIGCONT)
        rest = await asyncio.wait_for(_read_on(follower), timeout=30)  # B, woken, reads on
        task = await b_client.get_task(GetTaskRequest(id=running.id))
        listed = await b_client.list_tasks(ListTasksRequest(context_id=running.context_id))
        with pytest.raises(A2AError) as resubscribed:
            await _read_on(b_client.subscribe(SubscribeToTaskRequest(id=running.id)))
        _, later = await send(b_client, prompt("Did you count?", running.context_id))
    assert first.task.status.state == TaskState.TASK_STATE_WORKING
    assert finished is not None
    assert logged > 1  # not pruned the moment it finished
    assert pruned_s is not None, "the finished task's events were not pruned"
    assert pruned_s >= KEEP_S - 0.5  # the grace was kept
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(task) == "Counted to 3."
    assert [a.name for a in task.artifacts if a.name == "answer"] == ["answer"]
    users = [m for m in task.history if m.role == Role.ROLE_USER]
    assert ["".join(get_text_parts(m.parts)) for m in users] == ["Count to 3."]
    assert [t.id for t in listed.tasks] == [running.id]
    assert str(resubscribed.value) == (
        f"Task {running.id} is in terminal state: TASK_STATE_COMPLETED"
    )  # as before the prune: the SDK's answer to any finished task
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert "counted to 3" in str(sim.requests[-1]["messages"])  # the conversation stays
