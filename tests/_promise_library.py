"""The library front door of the promise matrix: one prompt's run in a process of its own.

    python tests/_promise_library.py WORKDIR BASE_URL PROMPT RUN_ID DECIDE

The shop's agent (WORKDIR/shop.py's tools, the provider simulator at BASE_URL) runs PROMPT
in the SQLite session ``crash1`` of WORKDIR/home/sessions.db (where ``tooldeck run`` and
``tooldeck web`` keep it when ``TOOLDECK_HOME`` is WORKDIR/home) with RUN_ID ("-": a new one), or, when
DECIDE is ``approve``/``reject``, resumes the session's paused run with that decision for
each call it waited on (their ids kept in WORKDIR/pending.json when it paused, as the
person's code would keep them). With SHOP_MAX_REQUESTS set, its runs share a budget of that
many requests (an SQLiteBudget in WORKDIR/budget.db); with SHOP_MAX_COST, each run may spend
that many dollars, each output token priced a dollar (as ``tooldeck run`` is given them). The last line of stdout is what the person's code read, as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path

from tooldeck import Agent, Approve, Limits, ModelSettings, Reject
from tooldeck.errors import RunStopped
from tooldeck.models import ModelPrices
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.results import RunResult
from tooldeck.run.events import FinalAnswer, RunRecovered
from tooldeck.sessions import SQLiteBudget, SQLiteSession
from tooldeck.testing.simulator import API_KEY

workdir, base_url, prompt, run_id, decide = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("shop", Path(workdir) / "shop.py")
assert spec is not None
assert spec.loader is not None
shop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shop)

model = OpenAIChatModel("gpt-4.1-mini", base_url=base_url, api_key=API_KEY, max_retries=0)
# what tooldeck run takes of a tools module: its tools (__all__), handoffs, guardrails, policy
tools = [getattr(shop, name) for name in getattr(shop, "__all__", ["lookup_order", "refund_order"])]
# SHOP_MAX_COST: what tooldeck run's --max-cost N --price 0,1000000 --on-limit final-answer give
max_cost = os.environ.get("SHOP_MAX_COST")
agent = Agent(
    model,
    tools=tools,
    handoffs=getattr(shop, "handoffs", []),
    output_guardrails=getattr(shop, "output_guardrails", []),
    after_untrusted=getattr(shop, "after_untrusted", "allow"),
    settings=ModelSettings(prices=ModelPrices(0, 1_000_000)) if max_cost else None,
    limits=Limits(max_cost_usd=float(max_cost)) if max_cost else Limits(),
    on_limit="final_answer" if max_cost else "raise",
)


# SHOP_MAX_REQUESTS: the runs share a budget of that many model requests, kept in a file
allowed = os.environ.get("SHOP_MAX_REQUESTS")
shared = (
    SQLiteBudget(Path(workdir) / "budget.db", "shop", max_requests=int(allowed))
    if allowed
    else None
)


events: list[object] = []
stopped_by: list[str] = []


async def run() -> RunResult[str]:
    """The run's result (a stop's partial result): its events kept in ``events``."""
    session = SQLiteSession(Path(workdir) / "home" / "sessions.db", "crash1")
    try:
        if decide == "-":
            given = None if run_id == "-" else run_id
            stream = agent.stream(prompt, session=session, run_id=given, budget=shared)
        else:
            decision = Approve() if decide == "approve" else Reject("not today")
            waiting = json.loads((Path(workdir) / "pending.json").read_text())
            decisions = dict.fromkeys(waiting["ids"], decision)
            stream = agent.resume_stream(session=session, decisions=decisions)
        async for event in stream:
            events.append(event)
    except RunStopped as stopped:
        if not isinstance(stopped.result, RunResult):
            raise
        stopped_by.append(f"{type(stopped).__name__}: {stopped}")
        return stopped.result
    finally:
        await session.aclose()
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    return final.result


result = asyncio.run(run())
if result.pending:  # the person's code keeps what waits, to decide later
    waiting = {
        "ids": [pending.id for pending in result.pending],
        "digests": [pending.digest for pending in result.pending],  # AG-UI interrupt ids
    }
    (Path(workdir) / "pending.json").write_text(json.dumps(waiting))
print(
    json.dumps(
        {
            "answer": result.answer,
            "stop_reason": str(result.stop_reason),
            "pending": [waiting.call.name for waiting in result.pending],
            "asked_because": [waiting.reason for waiting in result.pending],
            "recovered": [e.how for e in events if isinstance(e, RunRecovered)],
            "stopped_by": stopped_by,
            "settled": [
                t.result.output for e in events if isinstance(e, RunRecovered) for t in e.settled
            ],
        }
    )
)
