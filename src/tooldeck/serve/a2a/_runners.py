"""Which server process runs each task, so a server can tell a live run from a dead one.

Every server process on a store writes a row (table ``a2a_task_runners``, in the store's
database) when it starts a task's run: the task, its context, the task's owner (the SDK's
owner scope), and the process — its machine (host name and, on Linux, PID namespace) and
its pid with the process's start stamp (on Linux, the boot id and the start time in
``/proc/<pid>/stat``, so a reused pid is not taken for the old process). The row goes
when the run ends. A row left behind is a run whose server was killed: a server on the same
machine sees that the process is gone (``Runner.alive``) and fails the task; a row of a
process on another machine cannot be judged from here (``alive`` is None) and is left.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from a2a.auth.user import User
from a2a.helpers import new_text_message
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import TaskState, TaskStatus
from sqlalchemy import Column, Integer, MetaData, String, Table, delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

RUNNERS_TABLE = "a2a_task_runners"

_META = MetaData()
_RUNNERS = Table(
    RUNNERS_TABLE,
    _META,
    Column("task_id", String(255), primary_key=True),
    Column("context_id", String(255), nullable=False, index=True),
    Column("owner", String(255), nullable=False),
    Column("machine", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started", String(255), nullable=False),
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


class Runners:
    """The rows of ``a2a_task_runners`` on the task store's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._created = False
        self.me = this_process()

    async def _ready(self) -> None:
        if not self._created:
            async with self.engine.begin() as connection:
                await connection.run_sync(_META.create_all)
            self._created = True

    async def hold(self, task_id: str, context_id: str, owner: str) -> None:
        """Note that this process runs task ``task_id`` now."""
        await self._ready()
        async with self.engine.begin() as connection:
            await connection.execute(delete(_RUNNERS).where(_RUNNERS.c.task_id == task_id))
            await connection.execute(
                insert(_RUNNERS).values(
                    task_id=task_id, context_id=context_id, owner=owner, **asdict(self.me)
                )
            )

    async def claim(self, task_id: str, context_id: str, owner: str) -> Runner | None:
        """Take task ``task_id`` for this process unless another live process (or this one,
        for another message) holds it: None when taken, else who holds it. The row's
        primary key makes it one winner across the processes on a store; a row of a process
        that is gone is taken over."""
        await self._ready()
        row = {"task_id": task_id, "context_id": context_id, "owner": owner, **asdict(self.me)}
        for _ in range(3):
            try:
                async with self.engine.begin() as connection:
                    await connection.execute(insert(_RUNNERS).values(**row))
                return None
            except IntegrityError:
                holder = await self.runner(task_id)
                if holder is not None and holder.alive() is not False:
                    return holder
                if holder is not None:  # its process is gone: the row is stale
                    async with self.engine.begin() as connection:
                        await connection.execute(
                            delete(_RUNNERS).where(
                                _RUNNERS.c.task_id == task_id, _RUNNERS.c.pid == holder.pid
                            )
                        )
        return await self.runner(task_id) or self.me

    async def release(self, task_id: str) -> None:
        """The run of ``task_id`` ended here: forget its row."""
        await self._ready()
        async with self.engine.begin() as connection:
            await connection.execute(
                delete(_RUNNERS).where(_RUNNERS.c.task_id == task_id, _RUNNERS.c.pid == self.me.pid)
            )

    async def runner(self, task_id: str) -> Runner | None:
        """The process that runs (or ran, if it was killed) task ``task_id``."""
        await self._ready()
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    select(_RUNNERS.c.machine, _RUNNERS.c.pid, _RUNNERS.c.started).where(
                        _RUNNERS.c.task_id == task_id
                    )
                )
            ).first()
        return None if row is None else Runner(row.machine, row.pid, row.started)

    async def orphans(self, context_id: str | None = None) -> list[Orphan]:
        """The tasks (of ``context_id``, else all) whose process on this machine is gone;
        their rows are removed as they are returned."""
        await self._ready()
        query = select(_RUNNERS).where(_RUNNERS.c.machine == self.me.machine)
        if context_id is not None:
            query = query.where(_RUNNERS.c.context_id == context_id)
        async with self.engine.begin() as connection:
            rows = (await connection.execute(query)).all()
            gone = [r for r in rows if Runner(r.machine, r.pid, r.started).alive() is False]
            if gone:
                ids = [r.task_id for r in gone]
                await connection.execute(delete(_RUNNERS).where(_RUNNERS.c.task_id.in_(ids)))
        return [
            Orphan(
                r.task_id,
                r.context_id,
                ServerCallContext(user=_Owner(r.owner)),
                Runner(r.machine, r.pid, r.started),
            )
            for r in gone
        ]


_UNFINISHED = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


def stopped_text(orphan: Orphan) -> str:
    """The status message of a task whose server stopped mid-run."""
    return (
        f"The server running this task stopped ({orphan.runner}) before its run ended. "
        "What the run did is kept in the conversation: a new message in context "
        f"{orphan.context_id!r} goes on from it."
    )


async def fail_orphans(runners: Runners, tasks: TaskStore, context_id: str | None = None) -> int:
    """Mark ``FAILED`` the unfinished tasks (of ``context_id``, else all) whose server
    process on this machine is gone; how many were."""
    failed = 0
    for orphan in await runners.orphans(context_id):
        task = await tasks.get(orphan.task_id, orphan.call_context)
        if task is None or task.status.state not in _UNFINISHED:
            continue
        message = new_text_message(
            stopped_text(orphan), context_id=task.context_id, task_id=task.id
        )
        status = TaskStatus(state=TaskState.TASK_STATE_FAILED, message=message)
        status.timestamp.FromDatetime(datetime.now(UTC))
        task.status.CopyFrom(status)
        await tasks.save(task, orphan.call_context)
        failed += 1
    return failed
