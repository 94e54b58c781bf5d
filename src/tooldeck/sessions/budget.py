"""A spending budget kept in a SQLite file, shared by the runs of many processes.

``SQLiteBudget(path, "tenant-42/2026-12-02", max_cost_usd=5)`` is a ``Budget`` whose counts
live in the file's ``budgets`` table, one row per budget name: every change is one
``BEGIN IMMEDIATE`` transaction (read, check, write), so processes drawing on the same
name never lose an update. The limits are the object's: processes may give different ones.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tooldeck.errors import SessionError
from tooldeck.sessions._budget import StoredBudget

_TABLE = (
    "CREATE TABLE IF NOT EXISTS budgets (name TEXT PRIMARY KEY, requests INTEGER NOT NULL,"
    " total_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL)"
)


class SQLiteBudget(StoredBudget):
    """A ``Budget`` (``tooldeck.run.budget``) whose counts are kept in a SQLite file.

    Args:
        path: The database file (created if missing; a sessions file may hold it too).
        name: Which budget of the file: e.g. one per tenant and day.
        max_cost_usd: US dollars the runs may spend together.
        max_total_tokens: Tokens the runs may spend together.
        max_requests: Model requests the runs may start together.
        busy_timeout_s: How long a change waits for another process's change.

    Each check and each count is a short transaction on the caller's thread.
    """

    _errors = sqlite3.Error
    _connection: sqlite3.Connection

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        max_requests: int | None = None,
        busy_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(
            name,
            max_cost_usd=max_cost_usd,
            max_total_tokens=max_total_tokens,
            max_requests=max_requests,
        )
        self.path = Path(path)
        self._where = f"budget {name!r} in SQLite database {str(self.path)!r}"
        try:
            self._connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False
            )
            self._connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self._connection.execute("PRAGMA journal_mode = WAL")
            self._connection.execute(_TABLE)
        except sqlite3.Error as error:
            raise SessionError(f"cannot open the {self._where}: {error}") from error

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def _read(self) -> tuple[int, int, float] | None:
        row: tuple[int, int, float] | None = self._connection.execute(
            "SELECT requests, total_tokens, cost_usd FROM budgets WHERE name = ?", (self.name,)
        ).fetchone()
        return row

    def _write(self, counts: tuple[int, int, float]) -> None:
        self._connection.execute(
            "INSERT INTO budgets VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
            " requests = excluded.requests, total_tokens = excluded.total_tokens,"
            " cost_usd = excluded.cost_usd",
            (self.name, *counts),
        )
