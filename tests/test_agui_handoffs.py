"""A handoff over AG-UI: a CUSTOM event names who handed the run to whom (every event
validated by tests/_agui.py), and the answer is the agent handed to's."""

from __future__ import annotations

from pathlib import Path

import httpx
from ag_ui.core import CustomEvent, RunFinishedEvent

from _agui import new_input, of_type, post
from helpers import answer, call, calls
from tooldeck import Agent, ScriptedModel
from tooldeck.serve.agui import app


async def test_a_handoff_is_a_custom_event_and_the_agent_handed_to_answers(
    tmp_path: Path,
) -> None:
    billing = Agent(ScriptedModel([answer("Billing here.")]), name="billing")
    triage = Agent(
        ScriptedModel([calls(call("transfer_to_billing", "t1"))]),
        name="triage",
        handoffs=[billing],
    )
    transport = httpx.ASGITransport(app=app(triage, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        events = await post(client, new_input("t1", "Refund please"))
    (handed,) = of_type(events, CustomEvent)
    assert (handed.name, handed.value) == (
        "tooldeck.handoff",
        {"source": "triage", "target": "billing", "toolCallId": "t1"},
    )
    done = events[-1]
    assert isinstance(done, RunFinishedEvent)
    assert done.result == "Billing here."
