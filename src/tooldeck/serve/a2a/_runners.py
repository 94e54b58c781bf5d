"""Which server process runs each task, so a server can tell a live run from a dead one.

Every server process on a store writes a row (table ``a2a_task_runners``, in the store's
database) when it starts a task's run: the task, its context, the task's owner (the SDK's
owner scope), and the process — its machine (host name and, on Linux, PID namespace) and
its pid with the process's start stamp (on Linux, the boot id and the start time in
``/proc/<pid>/stat``, so a reused pid is not taken for the old process) — and a lease: the
time until which the row holds (``expires``), which the process renews at each heartbeat
(``renew``). Leases are written and judged on the store's one clock (``_clock``: the
database's on PostgreSQL). The row goes when the run ends. A row left behind is a run
whose server stopped: a server on the same machine sees at once that the process is gone
(``Runner.alive``); a server anywhere sees the lease run out (a process killed on another
machine, or one that stopped beating). Either way the task is failed, saying why.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from a2a.auth.user import User
from a2a.helpers import new_text_message
from a2a.server.cluster import ConcurrentTaskModificationError, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from sqlalchemy import (
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from tooldeck.serve.a2a._clock import StoreClock

RUNNERS_TABLE = "a2a_task_runners"

_META = MetaData()
RUNNERS = Table(
    RUNNERS_TABLE,
    _META,
    Column("task_id", String(255), primary_key=True),
    Column("context_id", String(255), nullable=False, index=True),
    Column("owner", String(255), nullable=False),
    Column("machine", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started", String(255), nullable=False),
    Column("expires", Float, nullable=True),
)


@dataclass(frozen=True, slots=True)
class Runner:
    """A server process, as a row names it."""

    machine: str
    pid: int
    started: str

    def alive(self) -> bool | None:
        """Whether the process still runs; None when it is on another machine."""
        if self.machine != _MACHINE:
            return None
        if self.started:
            return start_stamp(self.pid) == self.started
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.machine.split()[0]}"


class Orphan(NamedTuple):
    """A task whose runner row names a process that is gone."""

    task_id: str
    context_id: str
    call_context: ServerCallContext
    runner: Runner
    why: str
    """The status message the task fails with."""


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def start_stamp(pid: int) -> str:
    """The process's start stamp on Linux (boot id + start time), "" if it is gone (or a
    zombie: killed, not yet reaped by its parent) or the system has no ``/proc``."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return ""
    fields = stat.rsplit(")", 1)[1].split()  # from field 3, the state
    if fields[0] in ("Z", "X"):
        return ""
    start_ticks = fields[19]
    return f"{_read('/proc/sys/kernel/random/boot_id')}/{start_ticks}"


def _machine() -> str:
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()} {namespace}".strip()


_MACHINE = _machine()


def this_process() -> Runner:
    """The process this code runs in."""
    return Runner(_MACHINE, os.getpid(), start_stamp(os.getpid()))


class _Owner(User):
    """The SDK's owner scope of a task, as a user the task store reads it for."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


def _add_lease(connection: Connection) -> None:
    """Give a table made before leases its ``expires`` column (its rows never run out)."""
    columns = {column["name"] for column in inspect(connection).get_columns(RUNNERS_TABLE)}
    if "expires" not in columns:
        connection.execute(text(f"ALTER TABLE {RUNNERS_TABLE} ADD COLUMN expires FLOAT"))


class Runners:
    """The rows of ``a2a_task_runners`` on the task store's engine; this process's rows
    hold for ``lease`` seconds from their last renewal, on the store's clock (``clock``
    is this machine's, used on SQLite)."""

    def __init__(
        self, engine: AsyncEngine, lease: float = 15.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.engine = engine
        self.lease = lease
        self.time = StoreClock(engine, clock)
        self._created = False
        self.me = this_process()

    async def _ready(self) -> None:
        if not self._created:
            async with self.engine.begin() as connection:
                await connection.run_sync(_META.create_all)
                await connection.run_sync(_add_lease)
            self._created = True

    def _lease_end(self) -> ColumnElement[Any]:
        """When a lease renewed now runs out, as SQL (on the store's clock)."""
        return self.time.now() + self.lease

    def _mine(self) -> Any:
        return (RUNNERS.c.machine == self.me.machine) & (RUNNERS.c.pid == self.me.pid)

    async def hold(self, task_id: str, context_id: str, owner: str) -> None:
        """Note that this process runs task ``task_id`` now."""
        await self._ready()
        async with self.engine.begin() as connection:
            await connection.execute(delete(RUNNERS).where(RUNNERS.c.task_id == task_id))
            await connection.execute(
                insert(RUNNERS).values(
                    task_id=task_id,
                    context_id=context_id,
                    owner=owner,
                    expires=self._lease_end(),
                    **asdict(self.me),
                )
            )

    async def claim(self, task_id: str, context_id: str, owner: str) -> Runner | None:
        """Take task ``task_id`` for this process unless another live process (or this one,
        for another message) holds it: None when taken, else who holds it. The row's
        primary key makes it one winner across the processes on a store; a row of a process
        that is gone is taken over."""
        await self._ready()
        row = {
            "task_id": task_id,
            "context_id": context_id,
            "owner": owner,
            "expires": self._lease_end(),
            **asdict(self.me),
        }
        for _ in range(3):
            try:
                async with self.engine.begin() as connection:
                    await connection.execute(insert(RUNNERS).values(**row))
                return None
            except IntegrityError:
                holder = await self.runner(task_id)
                if holder is not None and holder.alive() is not False:
                    return holder
                if holder is not None:  # its process is gone: the row is stale
                    async with self.engine.begin() as connection:
                        await connection.execute(
                            delete(RUNNERS).where(
                                RUNNERS.c.task_id == task_id, RUNNERS.c.pid == holder.pid
                            )
                        )
        return await self.runner(task_id) or self.me

    async def renew(self) -> None:
        """The heartbeat: this process's rows hold for another ``lease`` seconds."""
        await self._ready()
        async with self.engine.begin() as connection:
            await connection.execute(
                update(RUNNERS).where(self._mine()).values(expires=self._lease_end())
            )

    async def release(self, task_id: str) -> None:
        """The run of ``task_id`` ended here: forget its row."""
        await self._ready()
        async with self.engine.begin() as connection:
            await connection.execute(
                delete(RUNNERS).where(RUNNERS.c.task_id == task_id, self._mine())
            )

    async def runner(self, task_id: str) -> Runner | None:
        """The process that runs (or ran, if it was killed) task ``task_id``."""
        await self._ready()
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    select(RUNNERS.c.machine, RUNNERS.c.pid, RUNNERS.c.started).where(
                        RUNNERS.c.task_id == task_id
                    )
                )
            ).first()
        return None if row is None else Runner(row.machine, row.pid, row.started)

    async def orphans(self, context_id: str | None = None) -> list[Orphan]:
        """The tasks (of ``context_id``, else all) whose process is gone from this machine
        or whose lease ran out; each row is removed as it is returned (by one server only)."""
        await self._ready()
        now = self.time.now()
        query = select(RUNNERS, now.label("now")).where(
            or_(RUNNERS.c.machine == self.me.machine, RUNNERS.c.expires < now), ~self._mine()
        )
        if context_id is not None:
            query = query.where(RUNNERS.c.context_id == context_id)
        found = []
        async with self.engine.begin() as connection:
            for row in (await connection.execute(query)).all():
                runner = Runner(row.machine, row.pid, row.started)
                why = _why_gone(runner, row.expires, float(row.now), row.context_id)
                if not why:
                    continue
                claimed = await connection.execute(  # one server fails it, not two
                    delete(RUNNERS).where(
                        RUNNERS.c.task_id == row.task_id,
                        RUNNERS.c.pid == row.pid,
                        RUNNERS.c.machine == row.machine,
                    )
                )
                if claimed.rowcount:
                    owner = ServerCallContext(user=_Owner(row.owner))
                    found.append(Orphan(row.task_id, row.context_id, owner, runner, why))
        return found


def _why_gone(runner: Runner, expires: float | None, now: float, context_id: str) -> str:
    """The status message of a task whose runner is gone, "" if it is not."""
    if runner.alive() is False:
        cause = f"stopped ({runner})"
    elif expires is not None and expires < now:
        ran_out = datetime.fromtimestamp(expires, UTC).strftime("%H:%M:%S UTC")
        cause = f"({runner}) stopped renewing its lease (it ran out at {ran_out})"
    else:
        return ""
    return (
        f"The server running this task {cause} before its run ended. What the run did is "
        f"kept in the conversation: a new message in context {context_id!r} goes on from it."
    )


_UNFINISHED = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


async def fail_orphans(
    runners: Runners, tasks: VersionedTaskStore, context_id: str | None = None
) -> int:
    """Mark ``FAILED`` the unfinished tasks (of ``context_id``, else all) whose server
    process is gone (``Runners.orphans``); how many were. The write is logged as the task's
    event, so a client following the task from any server hears it."""
    failed = 0
    for orphan in await runners.orphans(context_id):
        stored = await tasks.get(orphan.task_id, orphan.call_context)
        if stored is None or stored.task.status.state not in _UNFINISHED:
            continue
        task = stored.task
        message = new_text_message(orphan.why, context_id=task.context_id, task_id=task.id)
        status = TaskStatus(state=TaskState.TASK_STATE_FAILED, message=message)
        status.timestamp.FromDatetime(datetime.now(UTC))
        event = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
        failed_task = Task()
        failed_task.CopyFrom(task)
        if task.status.HasField("message"):
            failed_task.history.append(task.status.message)
        failed_task.status.CopyFrom(status)
        try:
            await tasks.save(
                failed_task,
                event=event,
                prev=task,
                prev_version=stored.version,
                context=orphan.call_context,
            )
        except ConcurrentTaskModificationError:
            continue  # written meanwhile (its runner came back and ended it): theirs stands
        failed += 1
    return failed
