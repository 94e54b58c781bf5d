"""A durable run's shared budget, when its counts outlive a process (a store).

A store (``SQLiteBudget``, ``PostgresBudget``: ``Budget.kept_in_process`` False) already
holds what a killed worker charged: a recovered run that charged its replayed requests again
would count them twice, and could then stop at a replayed turn whose calls had run — telling
the model and the person ``not run`` of a refund that was made. So each charge of such a
budget is a step of the workflow (``<agent>.budget``): charged once, its answer (granted, or
the stop) read back in a replay, and the replay makes the decisions the first execution made.
A budget kept in the process is charged again by a replay, which is how a new process counts
what the dead one spent.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dbos import DBOS, StepOptions

from tooldeck.errors import LimitExceeded
from tooldeck.messages import Usage
from tooldeck.run.budget import Budget, BudgetLeft, BudgetSpent


@dataclass(frozen=True, slots=True)
class _Stop:
    """A budget's stop as a step records it (plain data, pickled)."""

    message: str
    limit: str


def _recordable(stop: LimitExceeded | None) -> _Stop | None:
    return None if stop is None else _Stop(str(stop), stop.limit)


def _read_back(stop: _Stop | None) -> LimitExceeded | None:
    return None if stop is None else LimitExceeded(stop.message, stop.limit)


class StepBudget(Budget):
    """``inner`` (a store) charged once per request of a durable run (see the module)."""

    kept_in_process = False

    def __init__(self, inner: Budget, agent_name: str) -> None:
        super().__init__(
            max_cost_usd=inner.max_cost_usd,
            max_total_tokens=inner.max_total_tokens,
            max_requests=inner.max_requests,
        )
        self.inner = inner
        self._options: StepOptions = {"name": f"{agent_name}.budget"}

    @property
    def spent(self) -> BudgetSpent:
        return self.inner.spent

    @property
    def left(self) -> BudgetLeft:
        return self.inner.left

    def take_request(self) -> LimitExceeded | None:
        return _read_back(self._step(self._take_once))

    def record(self, usage: Usage | None) -> LimitExceeded | None:
        return _read_back(self._step(functools.partial(self._record_once, usage)))

    def _step(self, charge: Callable[[], _Stop | None]) -> _Stop | None:
        """``charge`` as the workflow's next step. The run asks its budget synchronously, on
        the workflow's event loop, where DBOS takes no synchronous step: the step runs on a
        thread of its own, in the workflow's context, while the loop waits for it (as it
        waits for the store's transaction itself)."""
        context = contextvars.copy_context()

        def step() -> _Stop | None:
            return DBOS.run_step(self._options, charge)

        with ThreadPoolExecutor(1, thread_name_prefix="tooldeck-budget-step") as thread:
            return thread.submit(context.run, step).result()

    def exhausted(self) -> LimitExceeded | None:
        return self.inner.exhausted()

    def _take_once(self) -> _Stop | None:
        return _recordable(self.inner.take_request())

    def _record_once(self, usage: Usage | None) -> _Stop | None:
        return _recordable(self.inner.record(usage))


def durable_budget(budget: Budget | None, agent_name: str) -> Budget | None:
    """The budget a durable run draws on: a store's charges as steps, else ``budget``."""
    if budget is None or budget.kept_in_process:
        return budget
    return StepBudget(budget, agent_name)
