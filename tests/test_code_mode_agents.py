"""Code mode calling agent tools (issue 38): a program's call of ``agent.as_tool()`` streams
the inner run's events nested under that call, as a model's direct call of it does, and a
call inside the agent tool that needs a person's decision pauses the whole run — the
program's state and the inner run's checkpoint in the signed checkpoint — and the program
goes on where it stopped once it is decided, through as many pauses as the inner run makes.

Through the provider simulator (fresh call ids): one for the outer model, one for the
agent tool's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from test_code_mode import price, ran, read, refund, run_code
from tooldeck import Agent, Approve, Reject
from tooldeck.code import CodeMode
from tooldeck.errors import CheckpointError
from tooldeck.results import RunResult
from tooldeck.run.events import Event, FinalAnswer, NestedEvent
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call

Provider = Callable[..., ProviderSimulator]
KEY = b"code-agents-key"

UNIT_THEN_CLERK = """
    unit = await price(item="apple")
    print("unit", unit)
    said = await clerk(input=f"refund {unit * 2} on o1")
    print(said)
    unit * 2
"""


@pytest.fixture(autouse=True)
def _clean() -> None:
    ran.clear()


def nested(events: list[Event]) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """(path, call ids, event type) of each event of a run inside a call."""
    return [
        (e.path, e.call_ids, type(e.event).__name__) for e in events if isinstance(e, NestedEvent)
    ]


def shop(outer: ProviderSimulator, inner: ProviderSimulator, code_mode: bool = True) -> Agent:
    """The outer agent: ``price`` and the agent tool ``clerk`` (which may ``price`` and
    ``refund``), through a program with ``code_mode``, else called directly."""
    clerk = Agent(inner.model(), tools=[price, refund], name="clerk", checkpoint_key=KEY)
    tools = [price, clerk.as_tool(name="clerk", description="Handles an order's refunds.")]
    capabilities = [CodeMode()] if code_mode else []
    return Agent(outer.model(), tools=tools, capabilities=capabilities, checkpoint_key=KEY)


async def paused_in_the_clerk(
    provider: Provider, clerk_says: str, answer: str
) -> tuple[ProviderSimulator, ProviderSimulator, RunResult[str]]:
    """The outer model's program (UNIT_THEN_CLERK) asks the clerk, whose refund waits for a
    decision; the clerk then says ``clerk_says``, the outer model ``answer``: (outer
    simulator, clerk's simulator, the paused run)."""
    inner = provider([sim_call("refund", {"order_id": "o1", "amount": 1.0}), reply(clerk_says)])
    outer = provider([run_code(UNIT_THEN_CLERK), reply(answer)])
    paused = await shop(outer, inner).run("refund twice the apple's price on o1")
    return outer, inner, paused


async def test_a_programs_agent_tool_call_streams_the_inner_run_as_a_direct_call_does(
    provider: Provider,
) -> None:
    asked = [sim_call("price", {"item": "fig"}), reply("A fig costs 2.0.")]
    direct_inner = provider(asked)
    direct_outer = provider([sim_call("clerk", {"input": "the fig"}), reply("2.0")])
    direct = shop(direct_outer, direct_inner, code_mode=False)
    direct_events = [event async for event in direct.stream("fig?")]
    inner = provider(asked)
    outer = provider([run_code('await clerk(input="the fig")'), reply("2.0")])

    events = [event async for event in shop(outer, inner).stream("fig?")]

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    (run_code_trace,) = final.result.tool_trace
    program_call = f"{run_code_trace.call.id}.1"
    (direct_call,) = direct_events[-1].result.tool_trace  # type: ignore[attr-defined]
    seen, direct_seen = nested(events), nested(direct_events)
    assert seen, "the agent tool's inner events reached the caller's stream"
    assert [kind for *_, kind in seen] == [kind for *_, kind in direct_seen]
    assert {(path, ids) for path, ids, _ in seen} == {(("clerk",), (program_call,))}
    assert {(path, ids) for path, ids, _ in direct_seen} == {(("clerk",), (direct_call.call.id,))}
    assert read(outer.requests[1]) == "result: A fig costs 2.0."
    assert final.result.usage.requests == 4  # the clerk's two requests counted in the run's
    assert ran == ["price(fig)", "price(fig)"]  # once a run, inside the clerk


async def test_a_pause_inside_a_programs_agent_tool_pauses_the_run_and_the_program_goes_on(
    provider: Provider,
) -> None:
    outer, inner, paused = await paused_in_the_clerk(
        provider, "Refunded 1.00 on o1.", "Refunded 1.00."
    )
    assert paused.checkpoint is not None
    (pending,) = paused.pending
    run_code_id = paused.checkpoint.turn.pending[0].call.id
    assert (pending.call.name, pending.kind) == ("refund", "approval")
    assert pending.path == ("run_code", "clerk")
    assert pending.call_ids == (run_code_id, f"{run_code_id}.2")
    assert pending.id == f"{run_code_id}/{run_code_id}.2/{pending.call.id}"
    assert ran == ["price(apple)"]

    stored = paused.checkpoint.to_json()  # resumed by agents built afresh
    events = [e async for e in shop(outer, inner).resume_stream(stored, {pending.id: Approve()})]

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.result.answer == "Refunded 1.00."
    assert read(outer.requests[1]) == "unit 0.5\nRefunded 1.00 on o1.\nresult: 1.0"
    assert ran == ["price(apple)", "refund(o1, 1.0)"]  # the price not asked again
    assert (("clerk",), (f"{run_code_id}.2",), "ToolCallFinished") in nested(events)


async def test_a_call_rejected_inside_a_programs_agent_tool_is_what_the_inner_agent_reads(
    provider: Provider,
) -> None:
    outer, inner, paused = await paused_in_the_clerk(
        provider, "I could not refund.", "Not refunded."
    )
    (pending,) = paused.pending

    decided = {pending.id: Reject("not this month")}
    result = await shop(outer, inner).resume(paused.checkpoint, decided)

    assert result.answer == "Not refunded."
    assert read(inner.requests[1]) == "error[rejected]: not this month"
    assert read(outer.requests[1]) == "unit 0.5\nI could not refund.\nresult: 1.0"
    assert ran == ["price(apple)"]


async def test_an_agent_tool_that_pauses_again_pauses_the_program_again(
    provider: Provider,
) -> None:
    inner = provider(
        [
            sim_call("refund", {"order_id": "o1", "amount": 1.0}),
            sim_call("refund", {"order_id": "o2", "amount": 2.0}),
            reply("Both refunded."),
        ]
    )
    outer = provider([run_code('print(await clerk(input="o1 and o2"))\n"done"'), reply("Done.")])
    agent = shop(outer, inner)
    first = await agent.run("refund o1 and o2")
    (one,) = first.pending

    second = await agent.resume(first.checkpoint, {one.id: Approve()})

    (two,) = second.pending
    assert two.call.arguments == {"order_id": "o2", "amount": 2.0}
    assert two.path == ("run_code", "clerk")
    assert two.call_ids == one.call_ids
    assert ran == ["refund(o1, 1.0)"]
    assert len(outer.requests) == 1  # the outer model was not asked meanwhile
    result = await agent.resume(second.checkpoint, {two.id: Approve()})
    assert result.answer == "Done."
    assert read(outer.requests[1]) == "Both refunded.\nresult: done"
    assert ran == ["refund(o1, 1.0)", "refund(o2, 2.0)"]


async def test_a_clerk_that_lost_the_waiting_tool_is_refused_before_anything_runs(
    provider: Provider,
) -> None:
    outer, inner, paused = await paused_in_the_clerk(provider, "Refunded.", "Refunded.")
    clerk = Agent(inner.model(), tools=[price], name="clerk", checkpoint_key=KEY)
    tools = [price, clerk.as_tool(name="clerk", description="Handles an order's refunds.")]
    agent = Agent(outer.model(), tools=tools, capabilities=[CodeMode()], checkpoint_key=KEY)

    with pytest.raises(CheckpointError) as refused:
        await agent.resume(paused.checkpoint, {paused.pending[0].id: Approve()})

    assert str(refused.value) == (
        "cannot resume: the agent has no tool named 'refund' any more (pending calls need it)"
    )
    assert ran == ["price(apple)"]
    assert len(outer.requests) == len(inner.requests) == 1
