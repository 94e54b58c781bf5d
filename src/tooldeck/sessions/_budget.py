"""What the budgets kept in a database share (``SQLiteBudget``, ``PostgresBudget``).

A change to the counts is one transaction of the store's, taken under the object's lock:
read the budget's row, apply the change, write the row if it changed. A database error is
raised as SessionError naming the budget.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import ClassVar, Protocol, TypeVar

from tooldeck.errors import SessionError
from tooldeck.run.budget import Budget, Counts

T = TypeVar("T")


class _Closing(Protocol):
    def close(self) -> None: ...


class StoredBudget(Budget):
    """A ``Budget`` whose counts a database keeps, one row per budget name."""

    kept_in_process = False
    _errors: ClassVar[type[Exception]]
    """The database driver's error class."""
    _connection: _Closing
    _where: str
    """The budget as an error names it: its name and its database."""

    def __init__(
        self,
        name: str,
        *,
        max_cost_usd: float | None,
        max_total_tokens: int | None,
        max_requests: int | None,
    ) -> None:
        super().__init__(
            max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens, max_requests=max_requests
        )
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__} name must be a non-empty string, got {name!r}")
        self.name = name

    def close(self) -> None:
        """Close the database connection."""
        self._connection.close()

    def reset(self) -> None:
        """Start the budget again from nothing spent (nothing owed either)."""
        self._change(Counts.reset)
        with self._owed_lock:
            self._owed = (0, 0.0)

    def _change(self, change: Callable[[Counts], T]) -> T:
        with self._lock:
            try:
                with self._transaction():
                    row = self._read()
                    counts = Counts() if row is None else Counts(*row)
                    answer = change(counts)
                    changed = (counts.requests, counts.total_tokens, counts.cost_usd)
                    if row is None or changed != tuple(row):
                        self._write(changed)
            except self._errors as error:
                raise SessionError(f"cannot use the {self._where}: {error}") from error
        return answer

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[object]:
        """One transaction around a read and a write: committed whole, or rolled back."""

    @abstractmethod
    def _read(self) -> tuple[int, int, float] | None:
        """The budget's row (requests, tokens, dollars), locked for this transaction; None
        when there is none yet."""

    @abstractmethod
    def _write(self, counts: tuple[int, int, float]) -> None:
        """Keep the budget's row as ``counts``."""
