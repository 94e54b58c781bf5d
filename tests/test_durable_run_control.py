"""Run control in durable runs (one process, a real SQLite DBOS system database): token and
cost limits and a shared Budget stop a durable run with the stop reason a plain run gets,
and a durable run is cancelled as a plain one is."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from dbos import DBOS

from helpers import MAY_HAVE_RUN, call, tool_messages
from tooldeck import Agent, AssistantOutput, ModelSettings, ScriptedModel, tool
from tooldeck.durable import DurableAgent
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Usage
from tooldeck.models import ModelPrices
from tooldeck.run.budget import Budget
from tooldeck.run.policy import Limits

pytestmark = pytest.mark.usefixtures("launched_dbos")

PRICES = ModelPrices(input_per_million=1_000.0, output_per_million=1_000.0)
"""A dollar per thousand tokens: easy sums."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


def adding(count: int) -> list[AssistantOutput]:
    """Turns of 500 tokens ($0.50 at PRICES), each asking for one call."""
    usage = Usage(input_tokens=400, output_tokens=100)
    return [
        AssistantOutput(tool_calls=(call("add_numbers", f"c{i}", left=i, right=1),), usage=usage)
        for i in range(count)
    ]


def durable(
    model: ScriptedModel, budgets: dict[str, Budget] | None = None, **options: Any
) -> DurableAgent[Any, Any]:
    agent = Agent(model, [add_numbers], settings=ModelSettings(prices=PRICES), **options)
    return DurableAgent(agent, name=unique("metered"), budgets=budgets)


async def stopped_by(agent: DurableAgent[Any, Any], **options: Any) -> LimitExceeded:
    run_id = unique("run")
    with pytest.raises(LimitExceeded) as raised:
        await agent.run("Count", run_id=run_id, **options)
    handle = await DBOS.retrieve_workflow_async(run_id)
    with pytest.raises(LimitExceeded) as read_back:  # the workflow's recorded end says the same
        await handle.get_result()
    assert str(read_back.value) == str(raised.value)
    return raised.value


@pytest.mark.parametrize(
    ("limits", "reason", "message"),
    [
        (
            Limits(max_total_tokens=1000),
            "max_tokens",
            "the run spent 1000 total tokens (max_total_tokens=1000)",
        ),
        (Limits(max_cost_usd=0.9), "max_cost", "the run spent $1.000000 (max_cost_usd=0.9)"),
    ],
)
async def test_a_durable_run_stops_at_its_token_or_cost_limit(
    limits: Limits, reason: str, message: str
) -> None:
    model = ScriptedModel(adding(5))
    stop = await stopped_by(durable(model, limits=limits))

    assert str(stop) == message
    assert stop.result is not None
    assert stop.result.stop_reason == reason
    assert stop.result.usage.cost_usd == pytest.approx(1.0)
    assert len(model.requests) == 2
    assert tool_messages(stop.result.messages) == ["1", f"error[call_limit]: not run: {message}"]


async def test_a_durable_run_draws_on_a_named_budget_and_stops_when_it_is_spent() -> None:
    team = Budget(max_requests=3)
    first = durable(ScriptedModel([*adding(1), AssistantOutput(content="1")]), {"team": team})
    assert (await first.run("one", budget="team")).answer == "1"
    assert team.spent.requests == 2

    model = ScriptedModel(adding(5))
    second = durable(model, {"team": team})
    stop = await stopped_by(second, budget="team")

    assert str(stop) == "the shared budget is spent: 3 requests (max_requests=3)"
    assert stop.result is not None
    assert stop.result.stop_reason == "budget"
    assert len(model.requests) == 1  # the second request was never sent
    assert team.left.requests == 0


async def test_an_agent_tools_inner_run_draws_on_the_durable_runs_budget() -> None:
    team = Budget(max_requests=3)
    inner = ScriptedModel([*adding(5), AssistantOutput(content="done")])
    counter = Agent(inner, [add_numbers]).as_tool(name="counter", description="Counts.")
    outer = ScriptedModel(
        [AssistantOutput(tool_calls=(call("counter", "o1", input="Count"),)), *adding(1)]
    )
    agent = DurableAgent(Agent(outer, [counter]), name=unique("nested"), budgets={"team": team})

    stop = await stopped_by(agent, budget="team")

    assert str(stop) == "the shared budget is spent: 3 requests (max_requests=3)"
    assert stop.result is not None
    assert stop.result.stop_reason == "budget"
    assert (len(outer.requests), len(inner.requests)) == (1, 2)  # 3 together, none past it
    assert tool_messages(stop.result.messages) == [
        "error[tool_error]: the agent 'counter' stopped without an answer (stop reason: "
        f"budget): {stop}"
    ]


async def test_a_budget_name_is_checked_before_the_run_starts_and_where_it_executes() -> None:
    agent = durable(ScriptedModel([]))
    with pytest.raises(TypeError, match=r"takes its budget by name .* got Budget"):
        await agent.run("one", budget=Budget(max_requests=1))  # type: ignore[typeddict-item]
    with pytest.raises(LookupError, match=r"asks for budget 'team', but DurableAgent .* has none"):
        await agent.run("one", budget="team")
    known = durable(ScriptedModel([]), {"ops": Budget(max_requests=1)})
    with pytest.raises(KeyError, match=r"has no budget named 'team'; known: 'ops'"):
        await known.run("one", budget="team")


async def test_a_durable_run_is_cancelled_in_its_call_and_its_workflow_ends_cancelled() -> None:
    started = asyncio.Event()

    @tool
    async def crawl(site: str) -> str:
        """Crawl a whole site."""
        started.set()
        await asyncio.sleep(600)
        return "crawled"

    model = ScriptedModel([AssistantOutput(tool_calls=(call("crawl", site="example.org"),))])
    agent = DurableAgent(Agent(model, [crawl]), name=unique("cancelled"))
    run_id = unique("run")
    running = asyncio.create_task(agent.run("Crawl.", run_id=run_id))
    await asyncio.wait_for(started.wait(), 60)
    assert agent.cancel(run_id, reason="the user pressed stop")
    result = await asyncio.wait_for(running, 60)

    assert result.stop_reason == "cancelled"
    assert tool_messages(result.messages) == [
        "error[cancelled]: the run was cancelled (the user pressed stop) before this call finished"
        + MAY_HAVE_RUN
    ]
    handle = await DBOS.retrieve_workflow_async(run_id)
    recorded = await handle.get_result()  # the workflow's own end is the cancelled run
    assert (recorded.stop_reason, recorded.messages) == ("cancelled", result.messages)
    assert not agent.cancel(run_id)  # it ended: nothing runs here to cancel


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money (a person approves it first)."""
    return f"moved {amount}"


async def test_a_durable_run_waiting_for_decisions_is_cancelled_and_nothing_runs() -> None:
    model = ScriptedModel([AssistantOutput(tool_calls=(call("transfer", "t1", amount=5),))])
    agent = DurableAgent(Agent(model, [transfer]), name=unique("paused"))
    run_id = unique("run")
    paused = await agent.run("Move 5.", run_id=run_id)
    assert paused.stop_reason == "paused"
    assert not agent.cancel(run_id)  # nothing of it runs in this process: it waits

    assert await agent.cancel_paused(run_id, reason="the order was withdrawn")
    handle = await DBOS.retrieve_workflow_async(run_id)
    result = await asyncio.wait_for(handle.get_result(), 60)

    assert result.stop_reason == "cancelled"
    assert tool_messages(result.messages) == [
        "error[cancelled]: the run was cancelled (the order was withdrawn) before this call "
        "ran: it did not run"  # it waited for a decision: it never started
    ]
    assert len(model.requests) == 1  # the model was not asked again
    assert await agent.paused(run_id) is None
    assert not await agent.cancel_paused(run_id)  # it no longer waits
