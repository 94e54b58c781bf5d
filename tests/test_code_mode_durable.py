"""Code mode in durable (DBOS) runs (issue 38): each call a program makes is a step of the
run's workflow, as the model's own calls are — a side-effect call its marker step and its
call step — so a run recovered after its process was killed re-runs the program with the
calls that completed answered from their records, not made again, and a side-effect call
killed mid-way settled (``error[interrupted]``), never run twice. A call that needs approval
pauses the durable run with the program's state; killed while it waits, the run is recovered
in another process, where the decision arrives and the program goes on.

Real processes (tests/_code_child.py), DBOS on a SQLite system database, the model the
provider simulator (fresh call ids in every response); the runs without a kill in this
process (DBOS launched for the module).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from _durable_harness import DurableApp
from helpers import kill_when_written
from test_code_mode import (
    PRICE_THEN_SHIP,
    REFUND_PROGRAM,
    finished,
    killed_and_met_again,
    price,
    ran,
    read,
    refund,
    run_code,
    started,
    stock,
)
from test_code_mode_agents import UNIT_THEN_CLERK
from tooldeck import Agent, Approve
from tooldeck.code import CodeMode
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call

Provider = Callable[..., ProviderSimulator]


def _effects(workdir: Path) -> list[tuple[str, str]]:
    """(pid, what) of each tool call that ran, in order."""
    lines = (workdir / "effects").read_text().splitlines()
    return [(pid, what) for pid, what in (line.split(" ", 1) for line in lines)]


def _steps(workdir: Path, run_id: str) -> list[str]:
    return DurableApp(workdir, db=f"sqlite:///{workdir / 'system.sqlite'}").steps(run_id)


def test_a_killed_durable_run_answers_the_programs_done_calls_from_their_records(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider([run_code(PRICE_THEN_SHIP), reply("Checked.")])

    again = killed_and_met_again("durable", tmp_path, sim)

    # the price was read back from its step, the shipping (killed mid-way) not run again
    assert [what for _, what in _effects(tmp_path)] == ["price apple", "ship o1"]
    (text,) = again["read"]
    assert text.startswith("ship failed: error[interrupted]: the call may have completed: ")
    assert "idempotency key 'run-1:1:0.2'" in text
    assert text.endswith("result: 0.5")
    assert again["answer"] == "Checked."
    assert len(sim.requests) == 2  # the program's turn read back, not asked again
    run_code_id = sim.requests[1]["messages"][-2]["tool_calls"][0]["id"]
    assert _steps(tmp_path, "run-1") == [
        "shop.model",
        f"shop.tool:price:{run_code_id}.1",  # each nested call a step of its own
        f"shop.started:ship:{run_code_id}.2",
        f"shop.tool:ship:{run_code_id}.2",
        "shop.model",
    ]


def test_a_durable_run_paused_in_a_program_is_decided_after_a_kill_and_the_program_goes_on(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider([run_code(REFUND_PROGRAM), reply("Refunded 1.00 on o1.")])
    kill_when_written(started("durable-pause", tmp_path, sim), tmp_path / "hanging", "the pause")
    pending = (tmp_path / "pending").read_text()

    decided = finished("durable-decide", tmp_path, sim)

    assert decided["stop_reason"] == "answer"
    assert decided["answer"] == "Refunded 1.00 on o1."
    assert decided["read"] == ["unit 0.5\nrefunded 1.00 on o1\nresult: 1.0"]
    (priced, refunded) = _effects(tmp_path)  # the price once, before the kill
    assert (priced[1], refunded[1]) == ("price apple", "refund o1 1.0")
    assert priced[0] != refunded[0]  # the refund ran in the process that recovered the run
    run_code_id = pending.split("/")[0]
    assert pending == f"{run_code_id}/{run_code_id}.2"
    steps = _steps(tmp_path, "run-2")
    assert steps.count(f"shop.tool:price:{run_code_id}.1") == 1
    assert steps.count(f"shop.tool:refund:{run_code_id}.2") == 1
    assert len(sim.requests) == 2


@pytest.mark.usefixtures("launched_dbos")
async def test_two_programs_in_one_durable_turn_take_their_steps_one_after_the_other(
    launched_dbos: str, tmp_path: Path, provider: Provider
) -> None:
    """A program's calls take the workflow's next steps (the model's turn reserved none for
    them), so ``run_code`` runs alone: two programs at once would interleave their steps in
    an order a recovery could not repeat."""
    from tooldeck.durable import DurableAgent

    both = sim_call(
        ("run_code", {"code": 'await price(item="apple") + await price(item="pear")'}),
        ("run_code", {"code": 'await stock(item="apple") + await stock(item="pear")'}),
    )
    sim = provider([both, reply("1.25 and 14.")])
    agent = Agent(sim.model(), tools=[price, stock], capabilities=[CodeMode()])
    durable = DurableAgent(agent, name="two-programs")

    result = await durable.run("prices and stock", run_id="two-programs-1")

    assert result.answer == "1.25 and 14."
    first, second = (t.call.id for t in result.tool_trace)
    assert [t.result.output for t in result.tool_trace] == ["result: 1.25", "result: 14"]
    steps = DurableApp(tmp_path, db=launched_dbos).steps("two-programs-1")
    assert steps == [
        "two-programs.model",
        f"two-programs.tool:price:{first}.1",
        f"two-programs.tool:price:{first}.2",
        f"two-programs.tool:stock:{second}.1",
        f"two-programs.tool:stock:{second}.2",
        "two-programs.model",
    ]


@pytest.mark.usefixtures("launched_dbos")
async def test_a_programs_agent_tool_call_in_a_durable_run_runs_its_inner_run_as_steps(
    launched_dbos: str, tmp_path: Path, provider: Provider
) -> None:
    from tooldeck.durable import DurableAgent

    inner = provider([sim_call("price", {"item": "pear"}), reply("A pear costs 0.75.")])
    clerk = Agent(inner.model(), tools=[price], name="clerk")
    outer = provider([run_code('await clerk(input="the pear")'), reply("0.75")])
    tools = [clerk.as_tool(name="clerk", description="Knows the prices.")]
    agent = Agent(outer.model(), tools=tools, capabilities=[CodeMode()])
    durable = DurableAgent(agent, name="nesting")

    result = await durable.run("pear?", run_id="nesting-1")

    assert result.answer == "0.75"
    assert result.tool_trace[0].result.output == "result: A pear costs 0.75."
    program_call = f"{result.tool_trace[0].call.id}.1"
    steps = DurableApp(tmp_path, db=launched_dbos).steps("nesting-1")
    assert len(steps) == 5, steps
    model_steps = [steps[0], steps[1], steps[3], steps[4]]
    assert model_steps == ["nesting.model", *["nesting/clerk.model"] * 2, "nesting.model"]
    assert steps[2].startswith("nesting/clerk.tool:price:")  # the clerk's call, its step
    (clerk_trace,) = result.tool_trace[0].inner_trace or ()
    assert clerk_trace.call.id == program_call


@pytest.mark.usefixtures("launched_dbos")
async def test_a_pause_inside_a_programs_agent_tool_in_a_durable_run_goes_on_after_the_decision(
    launched_dbos: str, tmp_path: Path, provider: Provider
) -> None:
    from tooldeck.durable import DurableAgent

    ran.clear()
    inner = provider([sim_call("refund", {"order_id": "o1", "amount": 1.0}), reply("Refunded.")])
    clerk = Agent(inner.model(), tools=[refund], name="clerk")
    outer = provider([run_code(UNIT_THEN_CLERK), reply("Refunded 1.00.")])
    tools = [price, clerk.as_tool(name="clerk", description="Handles an order's refunds.")]
    durable = DurableAgent(
        Agent(outer.model(), tools=tools, capabilities=[CodeMode()]), name="desk"
    )

    paused = await durable.run("refund twice the apple's price on o1", run_id="desk-1")
    (pending,) = paused.pending
    assert pending.path == ("run_code", "clerk")
    result = await durable.resume("desk-1", {pending.id: Approve()})

    assert result.answer == "Refunded 1.00."
    assert read(outer.requests[1]) == "unit 0.5\nRefunded.\nresult: 1.0"
    steps = DurableApp(tmp_path, db=launched_dbos).steps("desk-1")
    program = pending.call_ids[0]
    assert steps.count(f"desk.tool:price:{program}.1") == 1  # not run again after the pause
    assert sum(step.startswith("desk/clerk.tool:refund:") for step in steps) == 1
    assert ran == ["price(apple)", "refund(o1, 1.0)"]
