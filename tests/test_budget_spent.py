"""A spent budget lets no request out, shared or not, whatever ``on_limit`` says: proved
against the provider simulator, whose ledger (``sim.requests``) must not grow once the
budget is spent. ``on_limit="final_answer"`` then ends the run without asking again: no
answer (``output`` None), the spending limit as its stop reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tooldeck import Agent, Approve, Limits, ModelSettings, tool
from tooldeck.errors import LimitExceeded
from tooldeck.models import ModelPrices
from tooldeck.run.budget import Budget
from tooldeck.testing import ProviderSimulator, call, reply

Provider = Callable[..., ProviderSimulator]

DEAR = ModelSettings(prices=ModelPrices(input_per_million=10_000.0, output_per_million=10_000.0))
"""A cent a token: any response costs more than $0.10."""


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"


def answering(text: str) -> Any:
    """A step that answers every request it is asked (for ``rule``-less scripts)."""
    return [reply(text) for _ in range(8)]


@pytest.mark.parametrize("on_limit", ["final_answer", "raise"])
def test_a_spent_shared_budget_sends_no_request_whatever_on_limit_says(
    provider: Provider, on_limit: Any
) -> None:
    sim = provider(answering("Your order is on its way."))
    agent = Agent(sim.model(), settings=DEAR, on_limit=on_limit)
    budget = Budget(max_cost_usd=0.10)
    first = agent.run_sync("Where is my order A1?", budget=budget)
    assert first.answer == "Your order is on its way."
    spent = budget.spent.cost_usd
    assert spent > 0.10  # the one request in flight when it ran out is counted whole
    assert len(sim.requests) == 1

    for attempt in range(3):
        if on_limit == "raise":
            with pytest.raises(LimitExceeded) as raised:
                agent.run_sync(f"And now? ({attempt})", budget=budget)
            result = raised.value.result
            assert str(raised.value).startswith("the shared budget is spent:")
        else:
            result = agent.run_sync(f"And now? ({attempt})", budget=budget)
        assert result is not None
        assert (result.stop_reason, result.answer, result.output) == ("budget", "", None)
        assert result.usage.requests == 0
        assert result.messages[-1].content == f"And now? ({attempt})"  # nothing answered it

    assert len(sim.requests) == 1  # the simulator's ledger: no request once spent
    assert budget.spent.cost_usd == pytest.approx(spent)
    left = budget.left.cost_usd
    assert left is not None
    assert left == pytest.approx(0.10 - spent)
    assert left < 0


def test_the_last_answer_at_max_rounds_must_fit_the_shared_budget(provider: Provider) -> None:
    def shop_with(budget: Budget) -> Agent[Any, Any]:
        @tool
        def lookup_order(order_id: str) -> str:
            """Look an order up."""
            assert budget.take_request() is None  # another run takes a request meanwhile
            return f"order {order_id}: paid"

        limits = Limits(max_rounds=1)
        return Agent(sim.model(), [lookup_order], limits=limits, on_limit="final_answer")

    sim = provider([call("lookup_order", {"order_id": "A1"})])
    spent_budget = Budget(max_requests=2)

    result = shop_with(spent_budget).run_sync("Is A1 paid?", budget=spent_budget)

    assert (result.stop_reason, result.answer, result.output) == ("budget", "", None)
    assert len(sim.requests) == 1  # the last answer was not asked for: it had no room
    assert [t.result.output for t in result.tool_trace] == ["order A1: paid"]
    assert spent_budget.left.requests == 0

    roomy = Budget(max_requests=3)
    sim.add(call("lookup_order", {"order_id": "A1"}), reply("Paid."))
    forced = shop_with(roomy).run_sync("Is A1 paid?", budget=roomy)

    assert (forced.stop_reason, forced.answer, forced.output) == ("max_rounds", "Paid.", "Paid.")
    assert len(sim.requests) == 3
    assert not sim.requests[-1].get("tools")  # asked once more, without tools
    assert roomy.spent.requests == 3  # the last request was taken from the budget


def test_a_turn_of_calls_that_spends_the_run_cost_limit_ends_it_unasked(
    provider: Provider,
) -> None:
    sim = provider([call("lookup_order", {"order_id": "A1"}, text="Let me look.")])
    agent = Agent(
        sim.model(),
        [lookup_order],
        settings=DEAR,
        limits=Limits(max_cost_usd=0.10),
        on_limit="final_answer",
    )

    result = agent.run_sync("Is A1 paid?")

    assert (result.stop_reason, result.output) == ("max_cost", None)
    assert result.answer == "Let me look."  # the turn's text is kept, as no answer
    assert len(sim.requests) == 1
    (trace,) = result.tool_trace
    assert trace.result.output.startswith("error[call_limit]: not run: the run spent $")


def test_a_resumed_run_past_its_token_limit_is_not_asked_for_a_last_answer(
    provider: Provider,
) -> None:
    @tool(requires_approval=True)
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    sim = provider([call("refund_order", {"order_id": "A1"})])
    paused = Agent(sim.model(), [refund_order]).run_sync("Refund A1 " + "please " * 200)
    assert paused.checkpoint is not None
    used = paused.usage.input_tokens + paused.usage.output_tokens
    limited = Agent(
        sim.model(),
        [refund_order],
        limits=Limits(max_total_tokens=used),
        on_limit="final_answer",
    )

    result = limited.resume_sync(paused.checkpoint, {paused.pending[0].id: Approve()})

    assert (result.stop_reason, result.answer, result.output) == ("max_tokens", "", None)
    assert len(sim.requests) == 1  # the approved call ran; nothing more was asked
    assert result.messages[-1].content == "refunded A1"


def test_an_agent_tool_whose_run_the_budget_stopped_reads_as_failed(
    provider: Provider,
) -> None:
    outer_sim = provider([call("clerk", {"input": "Is A1 paid?"})])
    inner_sim = provider([call("lookup_order", {"order_id": "A1"})])
    clerk = Agent(inner_sim.model(), [lookup_order], on_limit="final_answer")
    outer = Agent(outer_sim.model(), [clerk.as_tool(name="clerk", description="Knows orders.")])

    with pytest.raises(LimitExceeded, match="the shared budget is spent") as raised:
        outer.run_sync("Is A1 paid?", budget=Budget(max_requests=2))

    result = raised.value.result
    assert result is not None
    (trace,) = result.tool_trace
    assert trace.result.output == (
        "error[tool_error]: the agent 'clerk' stopped without an answer (stop reason: "
        "budget): its budget was spent, so it was not asked again"
    )
    assert (len(outer_sim.requests), len(inner_sim.requests)) == (1, 1)
    inner = [t.result.output for t in trace.inner_trace or ()]
    assert inner == [
        "error[call_limit]: not run: the shared budget is spent: 2 requests (max_requests=2)"
    ]
