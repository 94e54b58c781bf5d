"""A spending budget shared by many runs: ``agent.run(..., budget=b)``.

Every run given the same ``Budget`` draws on it: before each model request the run takes
one request from it (refused when the budget is spent: the run stops with stop reason
``budget``), after each response it adds the response's tokens and cost. A store for many
processes (``tooldeck.sessions.SQLiteBudget``, ``PostgresBudget``) keeps the same counts in
a database and inherits the rules.

This is where users import it from; the class is defined in ``tooldeck._budget``, below the
tools room, so that a tool's ``RunContext.budget`` is typed with it. That module's docstring
says which file holds what of a run's spending (this one's limits per run are ``Limits`` in
``run/policy.py``; ``max_cost_usd`` means the same in both, for one run or for all).
"""

from __future__ import annotations

from tooldeck._budget import Budget, BudgetLeft, BudgetSpent, Counts

__all__ = ["Budget", "BudgetLeft", "BudgetSpent", "Counts"]
