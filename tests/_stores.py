"""The session stores the shared session tests run against: SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tooldeck.sessions import PostgresSession, Session, SessionInfo, SQLiteSession


@dataclass
class Store:
    """One empty database of one kind; ``session(id)`` opens a session in it."""

    kind: str
    """``sqlite`` or ``postgres``."""
    where: str
    """The SQLite file's path, or the PostgreSQL connection string."""
    opened: list[Session] = field(default_factory=list)

    def session(self, session_id: str = "chat", **options: Any) -> Session:
        made: Session
        if self.kind == "sqlite":
            made = SQLiteSession(self.where, session_id, **options)
        else:
            made = PostgresSession(self.where, session_id, **options)
        self.opened.append(made)
        return made

    async def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        if self.kind == "sqlite":
            return await SQLiteSession.list_sessions(self.where, limit=limit)
        return await PostgresSession.list_sessions(self.where, limit=limit)

    def args(self) -> list[str]:
        """How a child process (tests/_session_child.py) finds this database."""
        return [self.kind, self.where]

    async def aclose(self) -> None:
        for session in self.opened:
            await session.aclose()


def execute(store: Store, sql: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run SQL on the store's database directly (``?`` placeholders), as another program would."""
    if store.kind == "sqlite":
        import sqlite3

        with sqlite3.connect(store.where) as db:
            return db.execute(sql, parameters).fetchall()
    import psycopg

    with psycopg.connect(store.where, autocommit=True) as db:
        cursor = db.execute(sql.replace("?", "%s"), parameters)
        return cursor.fetchall() if cursor.description else []
