"""A spending budget kept in PostgreSQL, shared by the runs of many processes and machines.

``PostgresBudget(dsn, "tenant-42/2026-12-02", max_cost_usd=5)`` is a ``Budget`` whose counts
live in the database's ``budgets`` table, one row per name: every change is one transaction
that locks the row (``SELECT ... FOR UPDATE``), so no update is lost.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import psycopg
from psycopg.rows import TupleRow

from tooldeck.errors import SessionError
from tooldeck.sessions._budget import StoredBudget

_TABLE = (
    "CREATE TABLE IF NOT EXISTS budgets (name TEXT PRIMARY KEY, requests BIGINT NOT NULL,"
    " total_tokens BIGINT NOT NULL, cost_usd DOUBLE PRECISION NOT NULL)"
)


class PostgresBudget(StoredBudget):
    """A ``Budget`` (``tooldeck.run.budget``) whose counts are kept in PostgreSQL.

    Args:
        dsn: The database, as psycopg takes it (``postgresql://user@host/db``).
        name: Which budget: e.g. one per tenant and day.
        max_cost_usd: US dollars the runs may spend together.
        max_total_tokens: Tokens the runs may spend together.
        max_requests: Model requests the runs may start together.

    Each check and each count is a short transaction on the caller's thread, on one
    connection the object keeps (``close()`` it).
    """

    _errors = psycopg.Error
    _connection: psycopg.Connection[TupleRow]

    def __init__(
        self,
        dsn: str,
        name: str,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        max_requests: int | None = None,
    ) -> None:
        super().__init__(
            name,
            max_cost_usd=max_cost_usd,
            max_total_tokens=max_total_tokens,
            max_requests=max_requests,
        )
        self._where = f"budget {name!r} in PostgreSQL"
        try:
            self._connection = psycopg.connect(dsn)
            with self._connection.transaction():
                self._connection.execute(_TABLE)
                self._connection.execute(
                    "INSERT INTO budgets VALUES (%s, 0, 0, 0) ON CONFLICT (name) DO NOTHING",
                    (name,),
                )
        except psycopg.Error as error:
            raise SessionError(f"cannot open the {self._where}: {error}") from error

    def _transaction(self) -> AbstractContextManager[object]:
        return self._connection.transaction()

    def _read(self) -> tuple[int, int, float] | None:
        row: tuple[int, int, float] | None = self._connection.execute(
            "SELECT requests, total_tokens, cost_usd FROM budgets WHERE name = %s FOR UPDATE",
            (self.name,),
        ).fetchone()
        return row

    def _write(self, counts: tuple[int, int, float]) -> None:
        self._connection.execute(
            "UPDATE budgets SET requests = %s, total_tokens = %s, cost_usd = %s WHERE name = %s",
            (*counts, self.name),
        )
