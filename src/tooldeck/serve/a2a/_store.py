"""Where a served agent keeps its tasks and conversations: one database every process shares.

A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL, or a psycopg
connection string ``host=... dbname=...``) holds both: the
A2A tasks, in the SDK's own ``DatabaseTaskStore`` (table ``a2a_tasks``), and each context's
conversation, a tooldeck session (``SQLiteSession`` / ``PostgresSession``) named by the
context id, with the checkpoint of a paused run (signed when the agent has a
``checkpoint_key``). Any server process given the same store goes on with any task.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tooldeck.run.session import Session

TASKS_TABLE = "a2a_tasks"
_CONNINFO = re.compile(r"^\s*\w+\s*=")


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
        self._tasks: DatabaseTaskStore | None = None

    def __repr__(self) -> str:
        return f"Store({self.where!r})"

    def task_store(self) -> DatabaseTaskStore:
        """The SDK's task store on this database (one per Store)."""
        if self._tasks is None:
            engine = self._engine()
            with warnings.catch_warnings():  # SQLAlchemy's note that the SDK maps its table
                warnings.simplefilter("ignore")  # class again under our table's name
                self._tasks = DatabaseTaskStore(engine, table_name=TASKS_TABLE)
        return self._tasks

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
            await self._tasks.engine.dispose()
