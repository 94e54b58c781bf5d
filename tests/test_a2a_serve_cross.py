"""Two ``tooldeck a2a serve`` processes on one store act as one server, driven by a2a-sdk's
own client: a cancel sent to server B cancels the run of a task server A runs; a message to
B joins A's run (and the task's history, as the SDK keeps messages); SubscribeToTask on B
streams A's updates; and a server whose heartbeat stops (SIGSTOP: alive, as a process on
another machine looks, but silent) is taken for stopped once its lease runs out — its task
FAILED, saying why — and, woken, it stops the run it had. SQLite and PostgreSQL alike; and
on PostgreSQL leases are written and judged on the database's clock, whatever a server's
own clock says. (The same paths over HTTP+JSON: test_a2a_serve_cross_rest.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import get_text_parts
from a2a.types import (
    GetTaskRequest,
    Role,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError
from sqlalchemy import text, update

from _a2a import prompt, send, status_text, to_task
from _a2a_cross import (
    ADDED,
    assert_cancelled_where_it_runs,
    assert_followed_to_the_end,
    committed,
    runner_row_gone,
    said,
    silence,
    sqlite_writable,
    statuses,
    store,
    two_servers,
)
from tooldeck.serve.a2a._beat import FAILED_ELSEWHERE
from tooldeck.serve.a2a._runners import RUNNERS, Runner, Runners, this_process
from tooldeck.serve.a2a._store import Store
from tooldeck.testing import call, reply

__all__ = ["store"]  # the fixture, defined with the other helpers

SHORT_LEASE_S = 3
"""The lease of the tests of a silent server; the others' is long enough (30 s) that a server
starved of CPU on a busy machine is not taken for stopped."""


def _lease_end(store: str, task_id: str) -> float | None:
    """The end of the task's lease (seconds since the epoch), read once a write lock on the
    database (SQLite) or under one on the task's runner row (PostgreSQL) is had; None if it
    is not within half a second (a stopped server holds it)."""
    query = "SELECT expires FROM a2a_task_runners WHERE task_id = "
    if Path(store).suffix == ".db":
        if sqlite_writable(store) is None:
            return None
        with contextlib.closing(sqlite3.connect(store, timeout=5)) as db:
            found = db.execute(query + "?", [task_id]).fetchone()
            assert found, db.execute("SELECT * FROM a2a_task_runners").fetchall()
            return float(found[0])
    import psycopg

    with psycopg.connect(store) as db:
        db.execute("SET lock_timeout = '500ms'")
        try:
            row = db.execute(query + "%s FOR UPDATE", [task_id]).fetchone()
        except psycopg.errors.LockNotAvailable:
            return None
        db.rollback()
        assert row is not None
        return float(row[0])


async def test_a_cancel_sent_to_another_server_cancels_the_run_where_it_runs(
    tmp_path: Path, provider, store: str
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Cancelled, as you asked.")])
    async with two_servers(tmp_path, sim, store, slow_s=60) as (a, _, _, b_client, running):
        await assert_cancelled_where_it_runs(store, sim, a, b_client, running)
    assert "counted to 3" not in said(sim)


async def test_a_message_sent_to_another_server_joins_the_run_and_the_task_history(
    tmp_path: Path, provider, store: str
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3; 5 next.")])
    async with two_servers(tmp_path, sim, store, slow_s=4) as (_, _, _, b_client, running):
        message = to_task(running, ADDED)
        events, done = await send(b_client, message)  # B streams A's updates to the end
        seen = await b_client.get_task(GetTaskRequest(id=running.id))
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert {"kind": "tooldeck.message_joined", "texts": [ADDED], "round": 2.0} in statuses(events)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Counted to 3; 5 next."
    said = [(m["role"], str(m.get("content") or "")) for m in sim.requests[1]["messages"]]
    assert said[-2:] == [("tool", "counted to 3"), ("user", ADDED)]
    users = [m for m in seen.history if m.role == Role.ROLE_USER]
    assert ["".join(get_text_parts(m.parts)) for m in users] == ["Count to 3.", ADDED]
    assert users[1].message_id == message.message.message_id  # the client's own message
    assert users[1].task_id == running.id


async def test_subscribing_at_another_server_streams_the_task_from_where_it_stands(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3.")])
    store = str(tmp_path / "tasks.db")
    async with two_servers(tmp_path, sim, store, slow_s=3) as (_, _, _, b_client, running):
        stream = b_client.subscribe(SubscribeToTaskRequest(id=running.id))
        events = [event async for event in stream]
    assert_followed_to_the_end(events, running.id)


async def test_a_server_whose_heartbeat_stops_is_taken_for_stopped_after_its_lease(
    tmp_path: Path, provider, store: str
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counting was cut off.")])
    async with two_servers(tmp_path, sim, store, 120, SHORT_LEASE_S) as (
        a,
        _,
        _,
        b_client,
        running,
    ):
        follower = b_client.subscribe(SubscribeToTaskRequest(id=running.id))
        first = await anext(follower)
        # A is alive, but silent: no more renewals
        lease_end = silence(a, lambda: _lease_end(store, running.id))
        try:
            rest = [event async for event in follower]  # B's stream ends with the failure
            judged_at = time.time()
            failed = await b_client.get_task(GetTaskRequest(id=running.id))
        finally:
            a.send_signal(signal.SIGCONT)
        stopped = await runner_row_gone(store, running.id, within_s=1)
        woke = await committed(store, running.context_id, FAILED_ELSEWHERE, within_s=20)
        _, later = await send(b_client, prompt("Did you finish?", running.context_id))
        after = await b_client.get_task(GetTaskRequest(id=running.id))
    assert first.task.status.state == TaskState.TASK_STATE_WORKING
    assert lease_end <= judged_at < lease_end + 20  # not before the lease ran out
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_FAILED
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert status_text(failed).startswith(f"The server running this task (pid {a.pid} on "), (
        status_text(failed)
    )
    assert "stopped renewing its lease (it ran out at " in status_text(failed)
    assert status_text(failed).endswith(
        f"a new message in context {running.context_id!r} goes on from it."
    )
    assert stopped  # B took the row when it failed the task
    assert woke, "server A, woken, did not stop the run of its failed task"
    assert after.status.state == TaskState.TASK_STATE_FAILED  # A did not write over it
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert (
        "error[cancelled]: the run was cancelled (another A2A server took this one for "
        "stopped (its lease ran out))" in said(sim)
    )


async def test_a_message_for_a_silent_server_is_refused_after_its_lease_and_never_added(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counting was cut off.")])
    store = str(tmp_path / "tasks.db")
    async with two_servers(tmp_path, sim, store, 120, SHORT_LEASE_S) as (
        a,
        _,
        _,
        b_client,
        running,
    ):
        silence(a, lambda: _lease_end(store, running.id))
        try:
            with pytest.raises(A2AError) as refused:
                await send(b_client, to_task(running, ADDED))
        finally:
            a.send_signal(signal.SIGCONT)
        woke = await committed(store, running.context_id, FAILED_ELSEWHERE, within_s=20)
    assert str(refused.value) == (
        f"task {running.id!r} is working in another server process (pid {a.pid} on "
        f"{_host()}), which did not take the message within its lease (3 s): the message "
        "was not added"
    )
    assert woke
    assert ADDED not in said(sim)  # A, woken, did not take the message back up


def _host() -> str:
    return this_process().machine.split()[0]


async def test_a_runner_on_another_machine_is_judged_by_its_lease_alone(store: str) -> None:
    """A row of a process on another machine (its pid means nothing here) holds while its
    lease does, and is failed once it runs out, on SQLite and PostgreSQL alike."""
    where = Store(store)
    runners = Runners(where.task_store().engine, lease=30)
    elsewhere = Runner("another-host pid:[4026531836]", 4242, "boot/1")
    try:
        await runners.hold("task-far", "context-far", "")
        await runners.renew()
        async with where.task_store().engine.begin() as connection:  # as that host wrote it
            await connection.execute(
                update(RUNNERS).values(
                    machine=elsewhere.machine, pid=elsewhere.pid, started=elsewhere.started
                )
            )
        holding = await runners.orphans()
        async with where.task_store().engine.begin() as connection:  # it stopped beating
            await connection.execute(update(RUNNERS).values(expires=time.time() - 1))
        [ran_out] = await runners.orphans()
        gone = await runners.runner("task-far")
    finally:
        await where.aclose()
    assert elsewhere.alive() is None  # not judged by its pid
    assert holding == []
    assert (ran_out.task_id, ran_out.runner) == ("task-far", elsewhere)
    assert ran_out.why.startswith(
        "The server running this task (pid 4242 on another-host) stopped renewing its lease "
        "(it ran out at "
    )
    assert gone is None  # one server fails it: the row is taken


SKEW_S = 3600.0
"""How far off a server's own clock is in the clock tests: an hour."""
ELSEWHERE = Runner("another-host pid:[4026531836]", 4242, "boot/1")
"""A server on another machine, judged by its lease alone."""


def _clock_off_by(skew_s: float) -> Callable[[], float]:
    return lambda: time.time() + skew_s


async def _lease_row(where: Store) -> tuple[float, float]:
    """The stored lease's end and the database's time now (seconds since the epoch)."""
    now = "SELECT expires, CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"
    if not where.postgres:
        now = "SELECT expires, 0.0"
    async with where.task_store().engine.connect() as connection:
        row = (await connection.execute(text(f"{now} FROM a2a_task_runners"))).one()
    return float(row[0]), float(row[1])


@pytest.mark.parametrize("skew_s", [-SKEW_S, SKEW_S], ids=["holder-behind", "holder-ahead"])
async def test_on_postgresql_a_lease_is_written_and_judged_on_the_databases_clock(
    postgres_dsn: str, skew_s: float
) -> None:
    """A server whose clock is an hour behind is not taken for stopped at once, nor one an
    hour ahead kept alive for an hour once it stops renewing, though the server judging it
    has a clock off the other way: PostgreSQL's clock writes and judges the lease."""
    where = Store(postgres_dsn)
    holder = Runners(where.task_store().engine, lease=2, clock=_clock_off_by(skew_s))
    holder.me = ELSEWHERE
    judge = Runners(where.task_store().engine, lease=2, clock=_clock_off_by(-skew_s))
    try:
        await holder.hold("task-skewed", "context-skewed", "")
        await holder.renew()  # its last renewal
        renewed = time.monotonic()
        expires, database_now = await _lease_row(where)
        holding = await judge.orphans()
        ran_out: list[Any] = []
        while not ran_out and time.monotonic() - renewed < 20:
            await asyncio.sleep(0.1)
            ran_out = await judge.orphans()
        judged_after_s = time.monotonic() - renewed
    finally:
        await where.aclose()
    assert holding == []  # not taken for stopped early
    assert 0 < expires - database_now <= 2  # the lease's end, on the database's clock
    assert [orphan.task_id for orphan in ran_out] == ["task-skewed"]  # nor kept alive late
    assert 1.5 <= judged_after_s < 20
    assert ran_out[0].why.startswith(f"The server running this task ({ELSEWHERE}) stopped")


async def test_on_sqlite_a_lease_is_written_on_this_machines_clock(tmp_path: Path) -> None:
    """Servers on a SQLite file share one machine, so its clock is the one clock: the lease
    is written with it (moved by the clock seam, it moves)."""
    where = Store(tmp_path / "tasks.db")
    holder = Runners(where.task_store().engine, lease=2, clock=_clock_off_by(SKEW_S))
    try:
        await holder.hold("task-here", "context-here", "")
        expires, _ = await _lease_row(where)
    finally:
        await where.aclose()
    assert SKEW_S < expires - time.time() <= SKEW_S + 2
