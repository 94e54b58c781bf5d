"""The promise matrix's durable door for budgets and cancellation (tests/test_promises.py):
the shop's agent as a DurableAgent on DBOS with the PostgreSQL the suite starts, its model the
provider simulator (a fresh call id in every response), in real processes killed with
SIGKILL (tests/_promise_doors.py's ``DurableDoor``, tests/_durable_shop.py).

Budgets (docs/run-control.md, docs/durable.md): a run recovered in a new process counts what
the killed worker spent (its recorded model requests, charged again as they are replayed)
and a spent budget lets no request out; the same run id started again after its commit asks
nothing and spends nothing; a paused run approved from another process keeps drawing on its
budget. Cancellation: a cancel reaches a sync tool polling ``ctx.cancelled`` in the agent the
run was handed to, and in an agent tool's inner run; the workflow ends cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _promise_doors import PROMPT, DurableDoor, Shop, interrupted, shop_rules
from tooldeck.testing import ProviderSimulator

HERE = Path(__file__).parent
LOOKED_UP = "order A1: paid, not refunded"
CANCELLED = (
    "error[cancelled]: the run was cancelled (the customer left) before this call finished: it "
    "had started, so it may have done its work. Check whether it happened before calling it again"
)


@pytest.fixture
def shop(tmp_path: Path, provider: Callable[..., ProviderSimulator]) -> Shop:
    return Shop(tmp_path, provider([], rules=shop_rules()))


@pytest.fixture
def door(shop: Shop, postgres_server: str) -> Iterator[DurableDoor]:
    runs = DurableDoor(shop, postgres_server)
    yield runs
    runs.close()


@pytest.fixture(params=["in each process", "in PostgreSQL"])
def budgeted(request: pytest.FixtureRequest, door: DurableDoor) -> DurableDoor:
    """The door, its runs drawing on the budget ``shop``: a ``Budget`` each process declares
    (a new process counts what the run spent by replaying it), or one ``PostgresBudget`` for
    every process (it holds what the killed worker charged: a replay charges nothing again)."""
    if request.param == "in PostgreSQL":
        door.budget_dsn = door.db
    return door


# --- budgets ----------------------------------------------------------------------------


def test_a_durable_run_recovered_after_a_kill_once_the_turn_came_counts_that_request(
    shop: Shop, budgeted: DurableDoor
) -> None:
    shop.max_requests = 2
    # the model's turn came (one request spent), its lookup ran
    budgeted.killed("lookup", prompt=PROMPT, run_id="run-7")
    assert len(shop.sim.requests) == 1

    # worker-1 again: DBOS recovers the run, replaying its turn
    told = budgeted.told("serve", run_id="run-7")

    assert told["budget_spent"] == 2  # the killed worker's request, counted once, and one more
    assert len(shop.sim.requests) == 2  # the budget's second request was its last
    assert (told["stop_reason"], told["answer"]) == ("budget", "")
    assert shop.refunds() == []  # the turn that spent the budget: its refund did not run
    assert told["tool_messages"] == [
        LOOKED_UP,
        "error[call_limit]: not run: the shared budget is spent: 2 requests (max_requests=2)",
    ]
    assert ("tool", LOOKED_UP) in shop.model_read()  # the second request read the lookup


def test_a_durable_run_recovered_after_a_kill_in_its_refund_counts_what_the_worker_spent(
    shop: Shop, budgeted: DurableDoor
) -> None:
    shop.max_requests = 3
    # two requests spent, the refund made, then the worker killed
    budgeted.killed("refund", prompt=PROMPT, run_id="run-7")
    assert (len(shop.sim.requests), len(shop.refunds())) == (2, 1)

    told = budgeted.told("serve", run_id="run-7")

    assert told["budget_spent"] == 3  # the killed worker's two, counted once, and the answer's
    assert len(shop.sim.requests) == 3  # none past the budget
    assert (told["stop_reason"], told["answer"]) == ("answer", "Refunded.")
    assert len(shop.refunds()) == 1  # settled from its record, not made again
    assert interrupted(shop.model_read()[-1])  # the model read that it may have happened


def test_the_same_durable_run_started_again_after_its_commit_asks_and_spends_nothing(
    shop: Shop, budgeted: DurableDoor
) -> None:
    shop.max_requests = 3
    first = budgeted.told("run", prompt=PROMPT, run_id="run-7")
    assert (first["answer"], first["budget_spent"]) == ("Refunded.", 3)

    # another process: the caller could not tell it had committed
    again = budgeted.told("run", prompt=PROMPT, run_id="run-7")

    assert again["answer"] == "Refunded."
    assert again["tool_messages"] == first["tool_messages"]
    assert again["budget_spent"] == (3 if budgeted.budget_dsn else 0)  # nothing drawn on
    assert len(shop.sim.requests) == 3  # nothing asked
    assert len(shop.refunds()) == 1


def test_a_paused_durable_run_approved_from_another_process_keeps_drawing_on_its_budget(
    shop: Shop, budgeted: DurableDoor
) -> None:
    shop.approval = True
    shop.max_requests = 3
    # the refund waits; the worker that ran it exits
    paused = budgeted.told("run", prompt=PROMPT, run_id="run-7")
    assert (paused["stop_reason"], paused["pending"]) == ("paused", ["refund_order"])
    assert paused["budget_spent"] == 2

    approved = budgeted.told("approve", executor="web", run_id="run-7")  # a client: runs nothing
    assert approved["approved"] == ["refund_order"]
    assert shop.refunds() == []
    # worker-1 recovers the run, which reads the decision
    told = budgeted.told("serve", run_id="run-7")

    assert (told["stop_reason"], told["answer"]) == ("answer", "Refunded.")
    assert told["budget_spent"] == 3  # the requests before the pause, and the answer's
    assert len(shop.sim.requests) == 3
    assert len(shop.refunds()) == 1
    assert ("tool", "refunded A1") in shop.model_read()


# --- cancellation ------------------------------------------------------------------------


def test_a_durable_run_is_cancelled_while_the_agent_handed_to_is_in_a_sync_tool(
    shop: Shop, door: DurableDoor
) -> None:
    shop.handoff = True

    # billing's refund polls its cancel
    told = door.told("cancel", hang="refund-until-cancelled", prompt=PROMPT, run_id="run-7")

    assert told["cancel_returned"] == [True]
    assert (shop.workdir / "effects.told").exists()  # billing's sync tool was told
    assert (told["stop_reason"], told["agent"]) == ("cancelled", "billing")
    assert told["tool_messages"] == [LOOKED_UP, "Transferred to 'billing'.", CANCELLED]  # kept
    assert len(shop.refunds()) == 1
    assert len(shop.sim.requests) == 3  # nothing asked after the cancel
    assert [t["function"]["name"] for t in shop.sim.requests[-1]["tools"]] == ["refund_order"]
    recorded = told["recorded"]  # the workflow's own end is the cancelled run
    assert (recorded["stop_reason"], recorded["tool_messages"]) == (
        "cancelled",
        told["tool_messages"],
    )
    assert told["status"] == "SUCCESS"


def test_a_durable_run_is_cancelled_while_an_agent_tools_inner_run_is_in_a_sync_tool(
    shop: Shop, door: DurableDoor
) -> None:
    shop.agent_tool = True

    # billing's refund, as a tool
    told = door.told("cancel", hang="refund-until-cancelled", prompt=PROMPT, run_id="run-7")

    assert told["cancel_returned"] == [True]
    assert (shop.workdir / "effects.told").exists()  # the inner run's sync tool was told
    assert (told["stop_reason"], told["agent"]) == ("cancelled", "agent")
    assert told["tool_messages"] == [LOOKED_UP, CANCELLED]  # the lookup kept; ask_billing cut
    assert len(shop.refunds()) == 1
    assert len(shop.sim.requests) == 3  # the shop's two, billing's one: none after the cancel
    assert shop.sim.requests[-1]["messages"][-1]["content"] == "Refund order A1."  # billing's
    recorded = told["recorded"]
    assert (recorded["stop_reason"], recorded["tool_messages"]) == (
        "cancelled",
        told["tool_messages"],
    )
    assert told["status"] == "SUCCESS"
