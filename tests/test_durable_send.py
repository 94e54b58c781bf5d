"""``DurableAgent.send`` in one process (a real SQLite DBOS system database, the provider
simulator's recorded request bodies, fresh call ids): a message sent to a durable run joins
its conversation before its next model request, once; sent as the model answers, it makes
the run ask again; sent while it waits at a pause, it joins after the pause; a run sent
nothing records exactly what it recorded before; sending to a run that ended, that does not
exist or that is another agent's is refused. The runs killed and recovered in other
processes are in tests/test_durable_send_crash.py."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

import pytest
from dbos import DBOS

from helpers import said
from tooldeck import Agent, Approve, tool
from tooldeck.durable import DurableAgent
from tooldeck.errors import RunEnded
from tooldeck.messages import Message
from tooldeck.run.capabilities import Capability
from tooldeck.testing import ProviderSimulator, call, fail, reply

pytestmark = pytest.mark.usefixtures("launched_dbos")

gate = threading.Event()
"""Holds ``survey`` until the test lets it finish."""
surveying = threading.Event()
"""Set as ``survey`` starts."""


@tool
async def survey(bay: str) -> str:
    """Survey a bay (waits until the test lets it finish)."""
    surveying.set()
    if not await asyncio.to_thread(gate.wait, 30):
        raise TimeoutError("never released")
    return f"bay {bay}: calm"


@tool(requires_approval=True)
def close_bay(bay: str) -> str:
    """Close a bay (a person approves it first)."""
    return f"bay {bay} closed"


@pytest.fixture(autouse=True)
def _gated() -> Any:
    gate.clear()
    surveying.clear()
    yield
    gate.set()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def durable(sim: ProviderSimulator) -> DurableAgent[Any, Any]:
    return DurableAgent(Agent(sim.model(), [survey, close_bay]), name=unique("harbour"))


async def started(sim: ProviderSimulator, requests: int) -> None:
    await asyncio.to_thread(sim.wait_for_requests, requests, 30.0)


async def recorded_turns(run_id: str) -> list[dict[str, Any]]:
    """The model steps' recorded outputs, as JSON objects."""
    steps = await DBOS.list_workflow_steps_async(run_id)
    return [json.loads(s["output"]) for s in steps if s["function_name"].endswith(".model")]


async def test_a_message_sent_while_a_durable_run_waits_on_a_tool_reaches_the_next_request(
    provider: Any,
) -> None:
    sim = provider([call("survey", {"bay": "north"}), reply("North is calm; keeping it brief.")])
    agent, run_id = durable(sim), unique("run")
    handle = await agent.start_async("Survey the north bay.", run_id=run_id)
    await asyncio.to_thread(surveying.wait, 30)  # the turn recorded, the survey under way

    await agent.send(run_id, "Keep it brief.")
    gate.set()
    result = await handle.get_result()

    assert result.answer == "North is calm; keeping it brief."
    assert said(sim.requests[1]) == [
        ("user", "Survey the north bay."),
        ("assistant", "survey"),
        ("tool", "bay north: calm"),
        ("user", "Keep it brief."),
    ]
    assert [(m.role, m.content) for m in result.messages][-2:] == [
        ("user", "Keep it brief."),
        ("assistant", "North is calm; keeping it brief."),
    ]
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run_id)]
    name = agent.name
    assert steps == [f"{name}.model", f"{name}.tool:survey:{sim.call_ids[0]}", f"{name}.model"]
    assert [set(turn) for turn in await recorded_turns(run_id)] == [{"turn", "called"}] * 2


async def recorded(run_id: str, call_id: str, agent: str) -> list[list[Any]]:
    """The run's steps as the database keeps them (id, name, output, error), with the
    simulator's fresh call id and the agent's name written as placeholders."""
    steps = await DBOS.list_workflow_steps_async(run_id)
    rows = [[s["function_id"], s["function_name"], s["output"], s["error"]] for s in steps]
    text = json.dumps(rows).replace(call_id, "<call>").replace(agent, "<agent>")
    return list(json.loads(text))


async def test_a_durable_run_sent_nothing_records_what_it_recorded_before(
    provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [call("survey", {"bay": "east"}), reply("East is calm.")]
    sim = provider(script * 2)
    agent = durable(sim)
    gate.set()
    with monkeypatch.context() as before:  # the run without the mailbox: as before send()
        before.setattr("tooldeck.durable._agent.SentMessages", lambda run_id: Capability())
        unsent = await agent.run("Survey the east bay.", run_id=unique("run"))

    result = await agent.run("Survey the east bay.", run_id=unique("run"))

    assert result.answer == unsent.answer == "East is calm."
    before_ids, now_ids = sim.call_ids
    now = await recorded(result.run_id, now_ids, agent.name)
    model, survey_step = "<agent>.model", "<agent>.tool:survey:<call>"
    assert [name for _, name, _, _ in now] == [model, survey_step, model]
    assert now == await recorded(unsent.run_id, before_ids, agent.name)  # ids, outputs, errors
    assert [set(turn) for turn in await recorded_turns(result.run_id)] == [{"turn", "called"}] * 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_message_sent_as_a_durable_run_answers_makes_it_ask_again(provider: Any) -> None:
    slow = fail.slow_first_byte(1.5, answer=reply("The tides are lunar."))
    sim = provider([slow, reply("Under 50 words: lunar.")])
    agent, run_id = durable(sim), unique("run")
    handle = await agent.start_async("Explain tides.", run_id=run_id)
    await started(sim, 1)

    await agent.send(run_id, "Keep it under 50 words.")
    result = await handle.get_result()

    assert result.answer == "Under 50 words: lunar."
    assert len(sim.requests) == 2
    assert said(sim.requests[1]) == [
        ("user", "Explain tides."),
        ("assistant", "The tides are lunar."),
        ("user", "Keep it under 50 words."),
    ]
    assert (
        len(await DBOS.list_workflow_steps_async(run_id)) == 2
    )  # two requests: no step of its own


async def test_a_message_sent_while_a_durable_run_is_paused_joins_after_the_pause(
    provider: Any,
) -> None:
    sim = provider([call("close_bay", {"bay": "west"}), reply("West is closed, as asked.")])
    agent, run_id = durable(sim), unique("run")
    paused = await agent.run("Close the west bay.", run_id=run_id)
    assert paused.stop_reason == "paused"

    await agent.send(run_id, "Tell the harbour master.")
    result = await agent.resume(run_id, {paused.pending[0].call.id: Approve()})

    assert result.answer == "West is closed, as asked."
    assert said(sim.requests[1])[2:] == [
        ("tool", "bay west closed"),
        ("user", "Tell the harbour master."),
    ]


async def test_sending_to_a_durable_run_that_ended_is_refused_and_nothing_joins(
    provider: Any,
) -> None:
    sim = provider([reply("Hello.")])
    agent, run_id = durable(sim), unique("run")
    await agent.run("Hi.", run_id=run_id)

    with pytest.raises(RunEnded) as refused:
        await agent.send(run_id, "Are you there?")

    assert str(refused.value) == (
        f"cannot send a message to durable run {run_id!r}: it has ended (status SUCCESS); "
        "it was not added"
    )
    with pytest.raises(RunEnded):
        await asyncio.to_thread(agent.send_sync, run_id, "Still there?")
    assert len(sim.requests) == 1


async def test_sending_to_a_durable_run_that_does_not_exist_is_refused(provider: Any) -> None:
    agent = durable(provider([]))

    with pytest.raises(LookupError) as refused:
        await agent.send("no-such-run", "Hello?")

    assert str(refused.value) == (
        "cannot send a message to durable run 'no-such-run': no run has that id (in this DBOS "
        "system database)"
    )


async def test_sending_to_another_agents_run_is_refused(provider: Any) -> None:
    first, run_id = durable(provider([])), unique("run")
    waiting = durable(provider([call("close_bay", {"bay": "south"})]))
    await waiting.run("Close the south bay.", run_id=run_id)

    with pytest.raises(ValueError, match="it is not a run of this agent") as refused:
        await first.send(run_id, "Hello?")

    assert str(refused.value) == (
        f"cannot send a message to durable run {run_id!r}: it is not a run of this agent (its "
        f"workflow is 'tooldeck.run:{waiting.name}', this agent's is "
        f"'tooldeck.run:{first.name}'); send it with the DurableAgent that runs it"
    )
    assert await waiting.cancel_paused(run_id)
    handle = await DBOS.retrieve_workflow_async(run_id)
    assert (await handle.get_result()).stop_reason == "cancelled"


async def test_send_takes_only_text_or_a_user_message(provider: Any) -> None:
    agent = durable(provider([]))

    with pytest.raises(TypeError) as refused:
        await agent.send("any-run", Message(role="assistant", content="Hi"))

    assert "send() takes text or a user Message" in str(refused.value)
