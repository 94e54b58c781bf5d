"""A separate process for the code-mode tests: a shop agent whose ``run_code`` program looks
a price up, then refunds (which needs approval), its model the provider simulator
(``OPENAI_BASE_URL``: fresh call ids in every response).

    python tests/_code_child.py SCENARIO WORKDIR

- ``pause``: the program's refund waits: the run pauses; the signed checkpoint goes to
  WORKDIR/checkpoint.json, the pending call's id to WORKDIR/pending.
- ``resume``: the agent built afresh in this process resumes it, the refund approved.
- ``journal``: a program that prices, then ships (``side_effects``) in the SQLite session
  WORKDIR/shop.db (run id ``run-1``); the shipping writes WORKDIR/hanging and sleeps, to be
  killed.
- ``journal-again``: the same run met again in that session.
- ``durable``: that program as the durable run ``run-1`` (DBOS on the SQLite system database
  WORKDIR/system.sqlite); the shipping writes WORKDIR/hanging and sleeps, to be killed.
- ``durable-again``: DBOS launched again on that database recovers ``run-1``; its result.
- ``durable-pause``: the refund program as the durable run ``run-2``: it pauses; the pending
  call's id goes to WORKDIR/pending, then the process waits (WORKDIR/hanging), to be killed.
- ``durable-decide``: DBOS launched again recovers ``run-2`` (waiting at its pause again);
  the refund approved from this process, the run goes on here.

Each tool call appends to WORKDIR/effects. The outcome is printed as JSON on the last
line: the answer, the stop reason, what the tools answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from helpers import launched_shop, recovered_result, simulated_model
from tooldeck import Agent, Approve, tool
from tooldeck.code import CodeMode
from tooldeck.sessions import SQLiteSession

scenario, workdir_text = sys.argv[1:3]
workdir = Path(workdir_text)
KEY = b"code-tests-key"


def _effect(text: str) -> None:
    with (workdir / "effects").open("a") as file:
        file.write(f"{os.getpid()} {text}\n")


@tool
def price(item: str) -> float:
    """The price of one unit of an item, in euros."""
    _effect(f"price {item}")
    return 0.5


@tool(requires_approval=True, side_effects=True)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order to the customer."""
    _effect(f"refund {order_id} {amount}")
    return f"refunded {amount:.2f} on {order_id}"


@tool(side_effects=True)
def ship(order_id: str) -> str:
    """Ship an order."""
    _effect(f"ship {order_id}")
    if scenario in ("journal", "durable"):
        (workdir / "hanging").write_text("ship")
        time.sleep(600)
    return f"shipped {order_id}"


def agent() -> Agent[None, str]:
    model = simulated_model()
    return Agent(model, tools=[price, refund, ship], capabilities=[CodeMode()], checkpoint_key=KEY)


async def durable_run(shop: Agent[None, str]) -> Any:
    """The scenario's durable run, started or (met again) recovered by DBOS as it launches."""
    async with launched_shop(workdir, "tooldeck-code-tests", shop) as durable:
        if scenario == "durable":
            return await durable.run("Ship o1", run_id="run-1")
        if scenario == "durable-pause":
            paused = await durable.run("Refund twice the apple's price on o1", run_id="run-2")
            (workdir / "pending").write_text(paused.pending[0].id, encoding="utf-8")
            (workdir / "hanging").write_text("paused")
            await asyncio.sleep(600)
        if scenario == "durable-decide":
            pending = (workdir / "pending").read_text(encoding="utf-8")
            return await durable.resume("run-2", {pending: Approve()})
        return await recovered_result("run-1")


async def main() -> None:
    shop = agent()
    checkpoint = workdir / "checkpoint.json"
    if scenario.startswith("durable"):
        result = await durable_run(shop)
    elif scenario == "pause":
        result = await shop.run("Refund twice the apple's price on o1")
        assert result.checkpoint is not None
        checkpoint.write_text(result.checkpoint.to_json(), encoding="utf-8")
        (workdir / "pending").write_text(result.pending[0].id, encoding="utf-8")
    elif scenario.startswith("journal"):
        async with SQLiteSession(str(workdir / "shop.db"), "shop") as session:
            result = await shop.run("Ship o1", session=session, run_id="run-1")
    else:
        stored = checkpoint.read_text(encoding="utf-8")
        pending = (workdir / "pending").read_text(encoding="utf-8")
        result = await shop.resume(stored, {pending: Approve()})
    read = [message.content for message in result.messages if message.role == "tool"]
    print(
        json.dumps({"answer": result.answer, "stop_reason": str(result.stop_reason), "read": read})
    )


asyncio.run(main())
