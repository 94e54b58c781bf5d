"""Handoffs in durable runs: the transfer call is a recorded step, and the agent handed to
makes its requests and calls as steps of the same workflow (a pause in it too)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from dbos import DBOS

from helpers import answer, call, calls
from tooldeck import Agent, Approve, AssistantOutput, ScriptedModel, StopReason, tool
from tooldeck.durable import DurableAgent
from tooldeck.errors import GuardrailTripped
from tooldeck.run.guardrails import GuardrailResult

pytestmark = pytest.mark.usefixtures("launched_dbos")

refunded: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order, once a person approved it."""
    refunded.append(order)
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def steps(run_id: str) -> list[str]:
    return [step["function_name"] for step in await DBOS.list_workflow_steps_async(run_id)]


def support(
    billing_outputs: list[AssistantOutput], triage_outputs: list[AssistantOutput]
) -> tuple[DurableAgent[Any, Any], ScriptedModel]:
    billing_model = ScriptedModel(billing_outputs)
    billing = Agent(billing_model, [lookup, refund], name="billing", instructions="Billing.")
    triage = Agent(ScriptedModel(triage_outputs), name="triage", handoffs=[billing])
    return DurableAgent(triage, name=unique("support")), billing_model


async def test_a_handoff_and_the_next_agents_work_are_steps_of_the_run() -> None:
    agent, billing_model = support(
        [calls(call("lookup", "l1", order="7")), answer("Order 7 is paid.")],
        [calls(call("transfer_to_billing", "t1"))],
    )
    result = await agent.run("Is order 7 paid?")
    assert (result.agent, result.answer) == ("billing", "Order 7 is paid.")
    assert billing_model.requests[0].instructions == "Billing."
    name = agent.name
    assert await steps(result.run_id) == [
        f"{name}.model",
        f"{name}.tool:transfer_to_billing:t1",
        f"{name}.model",
        f"{name}.tool:lookup:l1",
        f"{name}.model",
    ]


async def test_a_durable_run_paused_in_the_agent_handed_to_resumes_there() -> None:
    agent, billing_model = support(
        [calls(call("refund", "r1", order="9")), answer("Refunded order 9.")],
        [calls(call("transfer_to_billing", "t1"))],
    )
    run_id = unique("paused")
    paused = await agent.run("Refund order 9", run_id=run_id)
    assert paused.stop_reason == StopReason.PAUSED
    assert paused.agent == "billing"
    assert paused.checkpoint is not None
    assert paused.checkpoint.agent == "billing"
    done = await agent.resume(run_id, {"r1": Approve()})
    assert (done.agent, done.answer) == ("billing", "Refunded order 9.")
    assert refunded[-1] == "9"
    assert len(billing_model.requests) == 2
    assert f"{agent.name}.tool:refund:r1" in await steps(run_id)


async def test_the_starting_agents_guardrails_judge_the_agent_handed_to_in_a_durable_run() -> None:
    def no_keys(ctx: Any, answer_text: Any) -> GuardrailResult:
        if "sk-" in str(answer_text):
            return GuardrailResult.tripped("do not show API keys")
        return GuardrailResult.passed()

    billing = Agent(ScriptedModel([answer("Your key is sk-123")]), name="billing")
    triage = Agent(
        ScriptedModel([calls(call("transfer_to_billing", "t1"))]),
        name="triage",
        handoffs=[billing],
        output_guardrails=[no_keys],
    )
    agent = DurableAgent(triage, name=unique("guarded"))
    with pytest.raises(GuardrailTripped) as stopped:
        await agent.run("What is my key?")
    result = stopped.value.result
    assert result is not None
    assert (result.stop_reason, result.agent) == ("guardrail", "billing")
    assert [(d.stage, d.name, d.verdict) for d in result.guardrails] == [
        ("output", "no_keys", "tripped")
    ]
