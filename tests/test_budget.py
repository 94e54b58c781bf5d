"""A Budget shared by many runs (``agent.run(..., budget=b)``): in memory across tasks and
threads, and in a SQLite file across processes; a run that would go past it stops with stop
reason ``budget``, and the budget says what is left."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers import call, tool_messages
from tooldeck import Agent, AssistantOutput, ModelSettings, RunResult, ScriptedModel, tool
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Message, ToolSpec, Usage
from tooldeck.models import Model, ModelPrices
from tooldeck.models.base import ModelSettings as Settings
from tooldeck.run.budget import Budget, BudgetLeft
from tooldeck.sessions import SQLiteBudget

PRICES = ModelPrices(input_per_million=1_000.0, output_per_million=1_000.0)


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


class Answering(Model):
    """Answers every request at once, with 100 tokens; counts the requests (any thread)."""

    name = "answering"

    def __init__(self) -> None:
        self.requests = 0
        self._lock = threading.Lock()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: Settings,
        instructions: str = "",
    ) -> AssistantOutput:
        with self._lock:
            self.requests += 1
        return AssistantOutput(content="ok", usage=Usage(input_tokens=90, output_tokens=10))


def adding(count: int) -> list[AssistantOutput]:
    usage = Usage(input_tokens=400, output_tokens=100)
    return [
        AssistantOutput(tool_calls=(call("add_numbers", f"c{i}", left=i, right=1),), usage=usage)
        for i in range(count)
    ]


def test_runs_share_a_budget_and_the_one_that_would_pass_it_stops() -> None:
    budget = Budget(max_requests=3)
    first = Agent(ScriptedModel([*adding(1), AssistantOutput(content="1")]), [add_numbers])
    assert first.run_sync("one", budget=budget).answer == "1"
    assert budget.left == BudgetLeft(requests=1, total_tokens=None, cost_usd=None)
    second_model = ScriptedModel(adding(5))
    second = Agent(second_model, [add_numbers])

    with pytest.raises(LimitExceeded) as raised:
        second.run_sync("two", budget=budget)

    assert str(raised.value) == "the shared budget is spent: 3 requests (max_requests=3)"
    assert raised.value.result is not None
    assert raised.value.result.stop_reason == "budget"
    assert len(second_model.requests) == 1  # the second request was never sent
    assert budget.left.requests == 0
    assert budget.spent.requests == 3


def test_a_cost_budget_stops_before_the_calls_of_the_turn_that_spent_it() -> None:
    budget = Budget(max_cost_usd=0.9)
    model = ScriptedModel(adding(5))
    agent = Agent(model, [add_numbers], settings=ModelSettings(prices=PRICES))

    with pytest.raises(LimitExceeded, match=r"shared budget is spent: 1 dollars") as raised:
        agent.run_sync("Count", budget=budget)

    result = raised.value.result
    assert result is not None
    assert tool_messages(result.messages)[-1] == (
        "error[call_limit]: not run: the shared budget is spent: 1 dollars (max_cost_usd=0.9)"
    )
    assert len(model.requests) == 2
    assert budget.left.cost_usd == pytest.approx(-0.1)  # overspent by the response in flight
    assert budget.spent.cost_usd == pytest.approx(1.0)


def test_a_cost_budget_will_not_be_kept_blind() -> None:
    budget = Budget(max_cost_usd=1.0)
    agent = Agent(ScriptedModel(adding(2)), [add_numbers])  # no price: the cost is unknown
    with pytest.raises(LimitExceeded, match=r"a response's cost is unknown, so the budget's"):
        agent.run_sync("Count", budget=budget)


async def test_concurrent_runs_never_pass_a_request_budget() -> None:
    model = Answering()
    agent = Agent(model)
    budget = Budget(max_requests=10, max_total_tokens=10_000)

    outcomes = await asyncio.gather(
        *(agent.run(f"run {i}", budget=budget) for i in range(25)), return_exceptions=True
    )

    answered = [o for o in outcomes if isinstance(o, RunResult)]
    stopped = [o for o in outcomes if isinstance(o, LimitExceeded)]
    assert (len(answered), len(stopped), model.requests) == (10, 15, 10)
    assert budget.spent.total_tokens == 1000
    assert budget.left.total_tokens == 9000


def test_runs_in_threads_never_pass_a_request_budget() -> None:
    model = Answering()
    agent = Agent(model)
    budget = Budget(max_requests=7)
    stops: list[str] = []

    def work() -> None:
        for i in range(5):
            try:
                agent.run_sync(f"run {i}", budget=budget)
            except LimitExceeded as error:
                stops.append(error.limit)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert model.requests == 7
    assert stops == ["budget"] * 13


def test_a_budget_needs_a_limit_and_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="Budget needs a limit: max_cost_usd"):
        Budget()
    with pytest.raises(ValueError, match=r"Budget.max_requests must be positive, got 0"):
        Budget(max_requests=0)
    agent = Agent(ScriptedModel([]))
    with pytest.raises(TypeError, match=r"budget= takes a Budget .* got float: 5.0"):
        agent.run_sync("Hi", budget=5.0)  # type: ignore[typeddict-item]


def test_an_sqlite_budget_keeps_its_counts_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "budgets.db"
    first = SQLiteBudget(path, "tenant-1", max_requests=2)
    Agent(Answering()).run_sync("Hi", budget=first)
    other_tenant = SQLiteBudget(path, "tenant-2", max_requests=2)
    again = SQLiteBudget(path, "tenant-1", max_requests=2)

    assert (again.spent.requests, again.spent.total_tokens) == (1, 100)
    assert other_tenant.spent.requests == 0
    Agent(Answering()).run_sync("Hi", budget=again)
    with pytest.raises(LimitExceeded, match=r"max_requests=2"):
        Agent(Answering()).run_sync("Hi", budget=first)
    first.reset()
    assert first.left.requests == 2
    for budget in (first, other_tenant, again):
        budget.close()


_WORKER = textwrap.dedent(
    """
    import sys
    from tooldeck import Agent, AssistantOutput, ScriptedModel
    from tooldeck.errors import LimitExceeded
    from tooldeck.sessions import SQLiteBudget

    budget = SQLiteBudget(sys.argv[1], "shared", max_requests=int(sys.argv[2]))
    answered = 0
    for _ in range(int(sys.argv[3])):
        try:
            Agent(ScriptedModel([AssistantOutput(content="ok")])).run_sync("Hi", budget=budget)
            answered += 1
        except LimitExceeded:
            pass
    print(answered)
    """
)


def test_runs_in_many_processes_never_pass_an_sqlite_budget(tmp_path: Path) -> None:
    path = tmp_path / "budgets.db"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), "30", "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    answered = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        answered.append(int(out))

    assert sum(answered) == 30
    assert SQLiteBudget(path, "shared", max_requests=30).left.requests == 0


def test_a_postgres_budget_is_shared_by_its_objects_and_never_passed(postgres_dsn: str) -> None:
    from tooldeck.sessions import PostgresBudget

    budgets = [PostgresBudget(postgres_dsn, "tenant-pg", max_requests=9) for _ in range(3)]
    budgets[0].reset()
    model = Answering()
    stops: list[str] = []

    def work(budget: Budget) -> None:
        for i in range(6):
            try:
                Agent(model).run_sync(f"run {i}", budget=budget)
            except LimitExceeded as error:
                stops.append(error.limit)

    threads = [threading.Thread(target=work, args=(budget,)) for budget in budgets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert (model.requests, len(stops)) == (9, 9)
    assert budgets[1].spent.total_tokens == 900
    assert budgets[2].left.requests == 0
    for budget in budgets:
        budget.close()
