"""Where a served agent keeps its tasks and conversations: one database every process shares.

A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL, or a psycopg
connection string ``host=... dbname=...``) holds both: the
A2A tasks, in the SDK's own cluster store (``VersionedDatabaseTaskStore``: table
``a2a_tasks``, with each write's version in ``task_versions`` and its event in
``task_events``, which ``DatabaseTaskEventStream`` reads so that any server process streams
a task another one runs), and each context's
conversation, a tooldeck session (``SQLiteSession`` / ``PostgresSession``) named by the
context id, with the checkpoint of a paused run (signed when the agent has a
``checkpoint_key``). Any server process given the same store goes on with any task.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from pathlib import Path

from a2a.server.cluster import DatabaseTaskEventStream, StoredTask, VersionedDatabaseTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.models import create_task_model
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tooldeck.run.session import Session

TASKS_TABLE = "a2a_tasks"
_CONNINFO = re.compile(r"^\s*\w+\s*=")


class _VersionedStore(VersionedDatabaseTaskStore):
    """The SDK's cluster store, making its tables before its first read too (the SDK's
    makes the version and event tables only before a write)."""

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        await self.initialize()  # once: later calls return at once
        return await super().get(task_id, context)


@cache
def _task_model() -> type:
    """The SDK's task model on table ``a2a_tasks``, made once per process: the SDK makes a
    class (and a table of its metadata) each time a store is given a table name, and a
    second table of one name is refused, so a second ``Store`` in a process would fail."""
    with warnings.catch_warnings():  # SQLAlchemy's note that the SDK maps its model class
        warnings.simplefilter("ignore")  # again under another table's name
        return create_task_model(TASKS_TABLE)


class Store:
    """A database for tasks and sessions: ``Store("served.db")`` or
    ``Store("postgresql://user@host/db")``."""

    def __init__(self, where: str | Path) -> None:
        text = str(where)
        self.postgres = text.startswith(("postgresql://", "postgres://")) or bool(
            _CONNINFO.match(text)
        )
        self.where = text
        if not self.postgres:
            path = Path(where).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            self.where = str(path.resolve())
        self._tasks: VersionedDatabaseTaskStore | None = None

    def __repr__(self) -> str:
        return f"Store({self.where!r})"

    def versioned(self) -> VersionedDatabaseTaskStore:
        """The SDK's cluster task store on this database (one per Store): every write
        checks the version it was read at, and logs its event for other processes."""
        if self._tasks is None:
            self._tasks = _VersionedStore(self._engine())
            self._tasks.as_task_store.task_model = _task_model()  # type: ignore[attr-defined]
        return self._tasks

    def task_store(self) -> DatabaseTaskStore:
        """The plain task store under ``versioned()``, for reads."""
        tasks = self.versioned().as_task_store
        assert isinstance(tasks, DatabaseTaskStore)
        return tasks

    def event_stream(self, poll_s: float) -> DatabaseTaskEventStream:
        """The SDK's stream of the events ``versioned()`` logs, read every ``poll_s``
        seconds while a client follows a task another process runs."""
        return DatabaseTaskEventStream(self.task_store().engine, poll_interval_s=poll_s)

    def _engine(self) -> AsyncEngine:
        """SQLAlchemy's engine: aiosqlite on the file, or psycopg (the postgres extra's
        driver, the sessions' own) on what psycopg connects to."""
        if not self.postgres:
            return create_async_engine(f"sqlite+aiosqlite:///{self.where}")
        import psycopg

        conninfo = self.where
        return create_async_engine(
            "postgresql+psycopg://",
            async_creator=lambda: psycopg.AsyncConnection.connect(conninfo),
        )

    def session(self, context_id: str) -> Session:
        """The conversation of ``context_id`` (close it with ``aclose()``)."""
        if self.postgres:
            from tooldeck.sessions.postgres import PostgresSession

            return PostgresSession(self.where, context_id, max_connections=2)
        from tooldeck.sessions import SQLiteSession

        return SQLiteSession(self.where, context_id)

    async def aclose(self) -> None:
        """Release the task store's connections."""
        if self._tasks is not None:
            await self.task_store().engine.dispose()
