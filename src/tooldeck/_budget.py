"""The shared budget's class, kept below the rooms so a tool's ``RunContext.budget`` can name it.

Users import it from ``tooldeck.run.budget`` (or ``tooldeck``), which re-exports what is
here; it lives at the bottom because the tools room (layer 2) may not import the run
(layer 3), and a tool's context carries the budget its agent tools' inner runs draw on.

Every run given the same ``Budget`` draws on it: before each model request the run takes
one request from it (refused when the budget is spent: the run stops with stop reason
``budget``), after each response it adds the response's tokens and cost. ``Budget`` keeps
its counts in memory, safe across tasks and threads; a store for many processes
(``tooldeck.sessions.SQLiteBudget``) keeps the same counts in a database, changed in one
transaction each, and inherits the rules from here.

Which file holds what, of a run's spending: ``run/policy.py`` the limits of one run
(``Limits``) and the decisions built on them; ``run/_engine/spending.py`` the token and cost
limits among those, and what is left of them for the runs made inside a round's calls;
this file the budget many runs share (``Budget``); ``sessions/budget*.py`` the stores that
keep its counts in a database; ``durable/_budget.py`` a store's charges as workflow steps.
``max_cost_usd`` means the same in ``Limits`` and in ``Budget``: the US dollars the
responses may cost before no more requests are sent; a ``Limits`` counts one run's (its
agent tools' inner runs included), a ``Budget`` every run that draws on it.

May import: ``tooldeck.errors``, ``tooldeck.messages``, ``tooldeck.results``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from tooldeck.errors import LimitExceeded, SessionError
from tooldeck.messages import Usage
from tooldeck.results import StopReason

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BudgetSpent:
    """What the runs drawing on a budget have spent so far."""

    requests: int = 0
    """Model requests started."""
    total_tokens: int = 0
    """Input and output tokens of the responses."""
    cost_usd: float = 0.0
    """US dollars of the responses whose cost is known."""


@dataclass(frozen=True, slots=True)
class BudgetLeft:
    """What is left of a budget; None where it has no limit. Negative where it was
    overspent: a response is counted whole, even the one that passed the limit."""

    requests: int | None
    total_tokens: int | None
    cost_usd: float | None


class Budget:
    """A budget shared by many runs, in this process (safe across tasks and threads).

    Args:
        max_cost_usd: US dollars the responses of all the runs drawing on it may cost
            together (``Limits.max_cost_usd`` is the same bound for one run). A response
            whose cost is unknown stops its run: the budget cannot be kept blind.
        max_total_tokens: Input and output tokens the runs may spend together.
        max_requests: Model requests the runs may start together.

    A run checks the budget before each request, so the runs going on when it is spent may
    each finish the request they started: the budget can be passed by what is in flight.

    Example:
        >>> budget = Budget(max_requests=100)
        >>> budget.left.requests
        100
    """

    kept_in_process: ClassVar[bool] = True
    """Whether the counts live in this process only (a store's outlive it: False)."""

    def __init__(
        self,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        max_requests: int | None = None,
    ) -> None:
        limits = {
            "max_cost_usd": max_cost_usd,
            "max_total_tokens": max_total_tokens,
            "max_requests": max_requests,
        }
        for name, value in limits.items():
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ValueError(f"{type(self).__name__}.{name} must be positive, got {value!r}")
        if all(value is None for value in limits.values()):
            raise ValueError(
                f"{type(self).__name__} needs a limit: max_cost_usd, max_total_tokens or "
                "max_requests"
            )
        self.max_cost_usd = max_cost_usd
        self.max_total_tokens = max_total_tokens
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._counts = Counts()
        self._owed_lock = threading.Lock()
        self._owed = (0, 0.0)
        """Tokens and dollars of responses a failed store could not count: added to the
        next count that succeeds (a store that comes back has them all)."""

    @property
    def spent(self) -> BudgetSpent:
        """What the runs have spent so far (what a failed store still owes included)."""
        spent = self._change(Counts.snapshot)
        owed_tokens, owed_cost = self._owed
        if not owed_tokens and not owed_cost:
            return spent
        return BudgetSpent(
            spent.requests, spent.total_tokens + owed_tokens, spent.cost_usd + owed_cost
        )

    @property
    def left(self) -> BudgetLeft:
        """What is left: below 0 by what was overspent (the responses of the requests in
        flight when the budget ran out are counted in full), never clamped to 0."""
        spent = self.spent
        return BudgetLeft(
            None if self.max_requests is None else self.max_requests - spent.requests,
            None if self.max_total_tokens is None else self.max_total_tokens - spent.total_tokens,
            None if self.max_cost_usd is None else self.max_cost_usd - spent.cost_usd,
        )

    def take_request(self) -> LimitExceeded | None:
        """Count one request about to start; the stop when the budget is spent (then
        nothing is counted)."""
        return self._change(self._take)

    def record(self, usage: Usage | None) -> LimitExceeded | None:
        """Add a response's tokens and cost; the stop when the budget is now spent, or when
        the cost is unknown under ``max_cost_usd``.

        Raises:
            SessionError: The store failed (a database locked or gone): the response is
                owed, and counted with the next response the store takes.
        """
        tokens = 0 if usage is None else usage.input_tokens + usage.output_tokens
        cost = None if usage is None else usage.cost_usd
        with self._owed_lock:
            owed_tokens, owed_cost = self._owed
            self._owed = (0, 0.0)

        def add(counts: Counts) -> LimitExceeded | None:
            counts.total_tokens += tokens + owed_tokens
            counts.cost_usd += (cost or 0.0) + owed_cost
            return self._reached(counts)

        try:
            spent = self._change(add)
        except SessionError:
            with self._owed_lock:
                more_tokens, more_cost = self._owed
                self._owed = (
                    more_tokens + owed_tokens + tokens,
                    more_cost + owed_cost + (cost or 0),
                )
            raise
        if cost is None and self.max_cost_usd is not None:
            return LimitExceeded(
                f"a response's cost is unknown, so the budget's max_cost_usd={self.max_cost_usd} "
                "cannot be kept: give the model's prices (ModelSettings(prices=ModelPrices(...)), "
                "or --price IN,OUT at the command line)",
                StopReason.BUDGET,
            )
        return spent

    def exhausted(self) -> LimitExceeded | None:
        """The stop when the budget is spent, else None."""
        return self._change(self._reached)

    def _take(self, counts: Counts) -> LimitExceeded | None:
        reached = self._reached(counts)
        if reached is None:
            counts.requests += 1
        return reached

    def _reached(self, counts: Counts) -> LimitExceeded | None:
        owed_tokens, owed_cost = self._owed  # what a failed store could not count yet
        tokens, cost = counts.total_tokens + owed_tokens, counts.cost_usd + owed_cost
        if self.max_requests is not None and counts.requests >= self.max_requests:
            return _spent("max_requests", self.max_requests, counts.requests, "requests")
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            return _spent("max_total_tokens", self.max_total_tokens, tokens, "tokens")
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            return _spent("max_cost_usd", self.max_cost_usd, cost, "dollars")
        return None

    def _change(self, change: Callable[[Counts], T]) -> T:
        """Apply ``change`` to the counts atomically (it changes them in place); what it
        returns. A store for many processes overrides this (one transaction)."""
        with self._lock:
            return change(self._counts)


@dataclass(slots=True)
class Counts:
    """A budget's counts while a change holds them (``Budget._change``)."""

    requests: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0

    def snapshot(self) -> BudgetSpent:
        """What has been spent so far, as a value."""
        return BudgetSpent(self.requests, self.total_tokens, self.cost_usd)

    def reset(self) -> None:
        """Forget what was spent (a new period of the budget)."""
        self.requests, self.total_tokens, self.cost_usd = 0, 0, 0.0


def _spent(name: str, limit: float, used: float, unit: str) -> LimitExceeded:
    return LimitExceeded(
        f"the shared budget is spent: {used:g} {unit} ({name}={limit})", StopReason.BUDGET
    )
