"""The library front door of the promise matrix: one prompt's run in a process of its own.

    python tests/_promise_library.py WORKDIR BASE_URL PROMPT RUN_ID DECIDE

The shop's agent (WORKDIR/shop.py's tools, the provider simulator at BASE_URL) runs PROMPT
in the SQLite session ``crash1`` of WORKDIR/home/sessions.db (where ``tooldeck run`` and
``tooldeck web`` keep it when ``TOOLDECK_HOME`` is WORKDIR/home) with RUN_ID ("-": a new one), or, when
DECIDE is ``approve``/``reject``, resumes the session's paused run with that decision for
each call it waited on (their ids kept in WORKDIR/pending.json when it paused, as the
person's code would keep them). The last line of stdout is what the person's code read, as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

from tooldeck import Agent, Approve, Reject
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.run.events import FinalAnswer, RunRecovered
from tooldeck.sessions import SQLiteSession
from tooldeck.testing.simulator import API_KEY

workdir, base_url, prompt, run_id, decide = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("shop", Path(workdir) / "shop.py")
assert spec is not None
assert spec.loader is not None
shop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shop)

model = OpenAIChatModel("gpt-4.1-mini", base_url=base_url, api_key=API_KEY, max_retries=0)
# what tooldeck run takes of a tools module: its tools (__all__), its handoffs
tools = [getattr(shop, name) for name in getattr(shop, "__all__", ["lookup_order", "refund_order"])]
agent = Agent(model, tools=tools, handoffs=getattr(shop, "handoffs", []))


async def run() -> list[object]:
    session = SQLiteSession(Path(workdir) / "home" / "sessions.db", "crash1")
    try:
        if decide == "-":
            given = None if run_id == "-" else run_id
            return [event async for event in agent.stream(prompt, session=session, run_id=given)]
        decision = Approve() if decide == "approve" else Reject("not today")
        waiting = json.loads((Path(workdir) / "pending.json").read_text())
        decisions = dict.fromkeys(waiting["ids"], decision)
        stream = agent.resume_stream(session=session, decisions=decisions)
        return [event async for event in stream]
    finally:
        await session.aclose()


events = asyncio.run(run())
final = events[-1]
assert isinstance(final, FinalAnswer)
if final.result.pending:  # the person's code keeps what waits, to decide later
    waiting = {
        "ids": [pending.id for pending in final.result.pending],
        "digests": [pending.digest for pending in final.result.pending],  # AG-UI interrupt ids
    }
    (Path(workdir) / "pending.json").write_text(json.dumps(waiting))
print(
    json.dumps(
        {
            "answer": final.result.answer,
            "stop_reason": str(final.result.stop_reason),
            "pending": [waiting.call.name for waiting in final.result.pending],
            "recovered": [e.how for e in events if isinstance(e, RunRecovered)],
            "settled": [
                t.result.output for e in events if isinstance(e, RunRecovered) for t in e.settled
            ],
        }
    )
)
