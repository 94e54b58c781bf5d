"""A separate process for the tool-search tests: a shop agent whose refund tool is deferred,
its model the provider simulator (``OPENAI_BASE_URL``: fresh call ids in every response).

    python tests/_search_child.py SCENARIO WORKDIR

- ``pause``: "Refund order A1": the model searches, the refund (revealed; needs approval)
  pauses the run; the signed checkpoint goes to WORKDIR/checkpoint.json.
- ``resume``: the agent built afresh resumes that checkpoint, the refund approved.
- ``journal``: the same prompt in the SQLite session WORKDIR/shop.db (run id ``run-1``);
  the refund (revealed, no approval) writes WORKDIR/hanging and sleeps, to be killed.
- ``journal-again``: the same run met again in that session, the refund not hanging.
- ``durable``: the prompt as the durable run ``run-1`` (DBOS on the SQLite system database
  WORKDIR/system.sqlite); the refund (revealed) writes WORKDIR/hanging and sleeps, to be
  killed.
- ``durable-again``: DBOS launched again on that database recovers ``run-1`` (the refund not
  hanging); its result.

The outcome is printed as JSON on the last line: the answer, the stop reason, what the
tools answered.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from helpers import launched_shop, recovered_result, simulated_model, tool_messages
from tooldeck import Agent, Approve, tool
from tooldeck.run.events import FinalAnswer, RunRecovered
from tooldeck.search import ToolSearch
from tooldeck.sessions import SQLiteSession

scenario, workdir_text = sys.argv[1:3]
workdir = Path(workdir_text)
KEY = b"search-tests-key"


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid, not refunded"


@tool(defer_loading=True, requires_approval=scenario in ("pause", "resume"))
def refund_order(order_id: str) -> str:
    """Refund an order's payment to the customer."""
    if scenario in ("journal", "durable"):
        (workdir / "hanging").write_text("refund")
        time.sleep(600)
    with (workdir / "effects").open("a") as file:
        file.write(f"refund {order_id}\n")
    return f"refunded {order_id}"


@tool(defer_loading=True)
def track_parcel(parcel_id: str) -> str:
    """Track a parcel in transit."""
    return "in transit"


def agent() -> Agent[None, str]:
    model = simulated_model()
    tools = [lookup_order, refund_order, track_parcel]
    return Agent(model, tools=tools, capabilities=[ToolSearch()], checkpoint_key=KEY)


async def durable_run(shop: Agent[None, str]) -> Any:
    """The prompt as the durable run ``run-1``, or (``durable-again``) that run recovered."""
    async with launched_shop(workdir, "tooldeck-search-tests", shop) as durable:
        if scenario == "durable":
            return await durable.run("Refund order A1", run_id="run-1")
        return await recovered_result("run-1")


async def main() -> None:
    shop = agent()
    checkpoint = workdir / "checkpoint.json"
    recovered = False
    if scenario.startswith("durable"):
        result = await durable_run(shop)
    elif scenario == "pause":
        result = await shop.run("Refund order A1")
        assert result.checkpoint is not None
        checkpoint.write_text(result.checkpoint.to_json(), encoding="utf-8")
        (workdir / "pending").write_text(result.pending[0].id, encoding="utf-8")
    elif scenario == "resume":
        stored = checkpoint.read_text(encoding="utf-8")
        pending = (workdir / "pending").read_text(encoding="utf-8")
        result = await shop.resume(stored, {pending: Approve()})
    else:
        session = SQLiteSession(str(workdir / "shop.db"), "shop")
        try:
            events = [
                e async for e in shop.stream("Refund order A1", session=session, run_id="run-1")
            ]
        finally:
            await session.aclose()
        recovered = any(isinstance(event, RunRecovered) for event in events)
        final = events[-1]
        assert isinstance(final, FinalAnswer)
        result = final.result
    outcome = {
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "read": tool_messages(result.messages),
        "recovered": recovered,
    }
    print(json.dumps(outcome))


asyncio.run(main())
