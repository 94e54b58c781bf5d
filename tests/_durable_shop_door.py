"""The durable front door of the promise matrix: the shop's agent (tests/_promise_doors.py) as
a DurableAgent, on DBOS with the PostgreSQL the suite starts, in a process of its own.

    python tests/_durable_shop_door.py MODE WORKDIR BASE_URL DB SCHEMA RUN_ID

The shop's tools, handoffs and agent tools come from WORKDIR/shop.py under the same env
switches as the other doors (``Shop.env()``); its model is the provider simulator at
BASE_URL. Every process is the executor ``worker-1`` on the system database DB (schema
SCHEMA). With SHOP_MAX_REQUESTS set, the runs draw on the named budget ``shop``: a
``Budget`` of that many requests in this process, as ``DurableAgent(budgets=...)`` declares
it in each process.

Modes: ``run`` (start the run RUN_ID of the shop's prompt and print how it stops), ``serve``
(launch, so DBOS recovers this executor's runs, and print how RUN_ID ends), ``decide``
(approve every call RUN_ID waits on, as a client: it runs nothing), ``cancel`` (start
RUN_ID, cancel it from another thread once a shop tool waits for its cancel, print how it
ends and what its workflow recorded). The last line of stdout is JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from tooldeck import Agent, Approve
from tooldeck.durable import DurableAgent
from tooldeck.errors import RunStopped
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.results import RunResult
from tooldeck.run.budget import Budget
from tooldeck.sessions import PostgresBudget
from tooldeck.testing.simulator import API_KEY

PROMPT = "Did my refund go through? If not, refund it."

mode, workdir, base_url, db, schema, run_id = sys.argv[1:7]
spec = importlib.util.spec_from_file_location("shop", Path(workdir) / "shop.py")
assert spec is not None
assert spec.loader is not None
shop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shop)

config: DBOSConfig = {
    "name": "tooldeck-durable-shop",
    "system_database_url": db,
    "dbos_system_schema": schema,
    "executor_id": "worker-1",
    "application_version": "tests",
    "log_level": "WARNING",
    "notification_listener_polling_interval_sec": 0.05,
}
DBOS(config=config)
if mode == "decide":
    DBOS.listen_queues([])  # a client: it takes no runs

model = OpenAIChatModel("gpt-4.1-mini", base_url=base_url, api_key=API_KEY, max_retries=0)
tools = [getattr(shop, name) for name in getattr(shop, "__all__", ["lookup_order", "refund_order"])]
agent = Agent(model, tools=tools, handoffs=getattr(shop, "handoffs", []))
allowed = os.environ.get("SHOP_MAX_REQUESTS")
budget: Budget | None = None
if allowed and os.environ.get("SHOP_BUDGET_DSN"):  # one budget for every process: a store
    budget = PostgresBudget(os.environ["SHOP_BUDGET_DSN"], schema, max_requests=int(allowed))
elif allowed:
    budget = Budget(max_requests=int(allowed))
durable = DurableAgent(agent, name="shop", budgets={"shop": budget} if budget else None)


def summary(result: RunResult[Any], how: str) -> dict[str, Any]:
    """What the person's code read of the run, and what this process's budget counted."""
    return {
        "how": how,
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "agent": result.agent,
        "pending": [waiting.call.name for waiting in result.pending],
        "tool_messages": [m.content for m in result.messages if m.role == "tool"],
        "budget_spent": None if budget is None else budget.spent.requests,
    }


async def ended(awaited: Any) -> tuple[RunResult[Any], str]:
    """The run's result, or the partial result its stop carries."""
    try:
        return await awaited, "returned"
    except RunStopped as stopped:
        if not isinstance(stopped.result, RunResult):
            raise
        return stopped.result, f"{type(stopped).__name__}: {stopped}"


async def run() -> dict[str, Any]:
    options: dict[str, Any] = {"budget": "shop"} if budget else {}
    return summary(*await ended(durable.run(PROMPT, run_id=run_id, **options)))


async def serve() -> dict[str, Any]:
    handle = await DBOS.retrieve_workflow_async(run_id)
    return summary(*await ended(handle.get_result(polling_interval_sec=0.1)))


async def decide() -> dict[str, Any]:
    paused = await durable.paused(run_id)
    assert paused is not None, "the run is not paused"
    decisions = {waiting.call.id: Approve(by="approver") for waiting in paused.pending}
    pause = await durable.send_decisions(run_id, decisions)
    return {"pause": pause, "decided": [waiting.call.name for waiting in paused.pending]}


async def cancel() -> dict[str, Any]:
    running = asyncio.ensure_future(ended(durable.run(PROMPT, run_id=run_id)))
    hanging = Path(os.environ["SHOP_EFFECTS"] + ".hanging")
    for _ in range(12_000):  # a shop tool waits for its cancel (a minute, on a busy machine)
        if hanging.exists() or running.done():
            break
        await asyncio.sleep(0.01)
    assert hanging.exists(), "no shop tool came to wait for its cancel"
    told: list[bool] = []
    canceller = threading.Thread(
        target=lambda: told.append(durable.cancel(run_id, reason="the customer left"))
    )
    canceller.start()
    canceller.join()
    result, how = await asyncio.wait_for(running, 60)
    handle = await DBOS.retrieve_workflow_async(run_id)
    recorded, _ = await ended(handle.get_result())
    return {
        **summary(result, how),
        "cancel_returned": told,
        "recorded": summary(recorded, "recorded"),
        "status": (await handle.get_status()).status,
    }


MODES = {"run": run, "serve": serve, "decide": decide, "cancel": cancel}


async def main() -> None:
    DBOS.launch()
    try:
        print(json.dumps(await MODES[mode]()), flush=True)
    finally:
        DBOS.destroy()


asyncio.run(main())
