"""Two ``tooldeck a2a serve`` processes on one store, for the tests of servers acting as one
(test_a2a_serve_cross*, test_a2a_serve_events): the store (a SQLite file, or a PostgreSQL
database), the two servers with a2a-sdk's client of each (over either binding), and what the
tests read back from the store itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from a2a.client import Client
from a2a.types import CancelTaskRequest, GetTaskRequest, StreamResponse, Task, TaskState

from _a2a import a2a_client, counting, message_data, prompt, send, served
from tooldeck.serve.a2a._executor import CANCELLED_BY_CLIENT
from tooldeck.serve.a2a._runners import Runners
from tooldeck.serve.a2a._store import Store
from tooldeck.testing import ProviderSimulator

HEARTBEAT_S = "0.25"
"""Both servers beat every 0.25 s."""
ADDED = "Also count to 5, please."
T = TypeVar("T")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store both servers share: a SQLite file, or a PostgreSQL database."""
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return dsn
    return str(tmp_path / "tasks.db")


@asynccontextmanager
async def servers(
    folder: Path,
    sim: ProviderSimulator,
    store: str,
    *options: str,
    slow_s: float = 30,
    lease_s: float = 30,
    binding: str = "JSONRPC",
    paths: list[str] | None = None,
) -> AsyncIterator[tuple[Any, Client, Any, Client]]:
    """Servers A and B on ``store`` (beating every 0.25 s, given ``options`` too), and
    a2a-sdk's client of each over ``binding``: (A's process, A's client, B's process, B's
    client). B's client adds the path of each request it makes to ``paths``."""
    beat = ("--heartbeat", HEARTBEAT_S, "--lease", str(lease_s), *options)
    with (
        served(folder, sim, *beat, store=store, slow_s=slow_s) as (a_url, a_process),
        served(folder, sim, *beat, store=store, slow_s=slow_s) as (b_url, b_process),
    ):
        async with (
            a2a_client(a_url, binding=binding) as a_client,
            a2a_client(b_url, binding=binding, paths=paths) as b_client,
        ):
            yield a_process, a_client, b_process, b_client


@asynccontextmanager
async def two_servers(
    folder: Path, sim: ProviderSimulator, store: str, slow_s: float, lease_s: float = 30
) -> AsyncIterator[tuple[Any, Client, Any, Client, Task]]:
    """Server A, counting a task (``slow_count`` sleeps ``slow_s`` s), and server B on the
    same store: (A's process, A's client, B's process, B's client, the task)."""
    async with servers(folder, sim, store, slow_s=slow_s, lease_s=lease_s) as (
        a_process,
        a_client,
        b_process,
        b_client,
    ):
        yield a_process, a_client, b_process, b_client, await counting(a_client)


async def holds_within(
    holds: Callable[[], Awaitable[bool]], within_s: float, every_s: float
) -> bool:
    """Whether ``holds()`` comes to hold within ``within_s`` seconds, asked every ``every_s``."""
    deadline = time.monotonic() + within_s
    while not await holds():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(every_s)
    return True


async def runner_row_gone(store: str, task_id: str, within_s: float) -> bool:
    """Whether the task's ``a2a_task_runners`` row goes within ``within_s`` seconds (the
    run ended in its process)."""
    where = Store(store)
    runners = Runners(where.task_store().engine)

    async def gone() -> bool:
        return await runners.runner(task_id) is None

    try:
        return await holds_within(gone, within_s, every_s=0.1)
    finally:
        await where.aclose()


async def committed(store: str, context_id: str, text: str, within_s: float) -> bool:
    """Whether a message holding ``text`` is committed to the context's conversation within
    ``within_s`` seconds (the run that wrote it ended in its process): read from the
    store's session, as the next run reads it."""
    where = Store(store)
    session = where.session(context_id)

    async def written() -> bool:
        return any(text in str(m.content) for m in (await session.load()).messages)

    try:
        return await holds_within(written, within_s, every_s=0.2)
    finally:
        await session.aclose()
        await where.aclose()


def silence(process: Any, probe: Callable[[], T | None]) -> T:
    """SIGSTOP ``process`` at a moment it holds no lock in the store (``probe``, run while
    it is stopped, answers None when a lock it needs is not had); what ``probe`` answered.
    A server stopped inside one of its (short) transactions would hold the database
    (SQLite) or its rows (PostgreSQL) until woken, which is not what a silent server on
    another machine does (its connection dies and the database rolls it back)."""
    for _ in range(50):
        process.send_signal(signal.SIGSTOP)
        found = probe()
        if found is not None:
            return found
        process.send_signal(signal.SIGCONT)
        time.sleep(0.3)  # time to end its transaction
    raise AssertionError("the server held the store each time it was stopped")


def sqlite_writable(path: str) -> bool | None:
    """True if a write lock on the SQLite file is had within half a second, else None."""
    with contextlib.closing(sqlite3.connect(path, timeout=0.5)) as db:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return None
        db.rollback()
        return True


def said(sim: ProviderSimulator) -> str:
    """Everything the model was sent, as one text."""
    return str([m for r in sim.requests for m in r["messages"]])


def statuses(events: list[StreamResponse]) -> list[dict[str, Any]]:
    """The data parts of the status updates among ``events``."""
    return [
        d
        for e in events
        if e.HasField("status_update")
        for d in message_data(e.status_update.status.message)
    ]


def assert_followed_to_the_end(events: list[StreamResponse], task_id: str) -> None:
    """Assert that ``events``, a subscription to a counting task (``counting``), read it
    from WORKING, through the tool's result, to COMPLETED with its answer artifact."""
    assert events[0].task.id == task_id
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    results = [d for d in statuses(events) if d["kind"] == "tooldeck.tool_result"]
    assert [(r["name"], r["output"]) for r in results] == [("slow_count", "counted to 3")]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    answer = [e for e in events if e.HasField("artifact_update")][-1].artifact_update.artifact
    assert answer.name == "answer"


async def assert_cancelled_where_it_runs(
    store: str, sim: ProviderSimulator, a: Any, b_client: Client, running: Task
) -> None:
    """Cancel ``running`` (a task server A runs, its tool 60 s long) with B's client, and
    assert: CANCELED at once; A's run stops within 20 s (the tool is not waited for) and lets
    the task go; the task stays CANCELED (A does not write over it); a next message in the
    context completes, the model reading why the run stopped. Inside ``servers``."""
    asked = time.monotonic()
    cancelled = await b_client.cancel_task(CancelTaskRequest(id=running.id))
    stopped = await committed(store, running.context_id, CANCELLED_BY_CLIENT, within_s=20)
    took_s = time.monotonic() - asked
    released = await runner_row_gone(store, running.id, within_s=5)
    after = await b_client.get_task(GetTaskRequest(id=running.id))
    _, later = await send(b_client, prompt("Did you count?", running.context_id))
    assert a.poll() is None  # server A runs on
    assert running.status.state == TaskState.TASK_STATE_WORKING
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stopped, "server A's run of the cancelled task did not end"
    assert released  # A let the task go
    assert took_s < 20, took_s  # the 60 s tool was stopped, not waited for
    assert after.status.state == TaskState.TASK_STATE_CANCELED  # A did not write over it
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert "error[cancelled]: the run was cancelled (the A2A client cancelled the task)" in (
        said(sim)
    )
