"""A separate process for the run-journal tests: a shop-support run in a session, its
outcome as JSON on the last line of stdout.

    python tests/_journal_child.py KIND WHERE WORKDIR SCENARIO RUN_ID HANG

KIND/WHERE name the database (``sqlite PATH`` or ``postgres DSN``); the session is
``shop``. The model answers what the conversation calls for, each call with a fresh id (as a
hosted provider does): it looks the order up, refunds it, then answers. SCENARIO:

- ``run``: the prompt "Did my refund go through? If not, refund it." (RUN_ID, or "-" for a
  new id); ``run-checked``: the same with a refund tool that can reconcile;
- ``ask``: the same, the refund needing approval: the run pauses (the pending call's id is
  written to WORKDIR/pending);
- ``resume``: the session's paused run resumed, the refund approved;
- ``next``: the next prompt, "Thanks.";
- ``run-counted``: as ``run``, the agent with a capability that counts the run's calls in
  its state and says the count in each result.

HANG says where the process stops to be killed (it writes WORKDIR/hanging, then sleeps):
``refund`` (in the refund, after its effect), ``before-refund`` (in it, before), ``lookup``
(in the lookup), ``request`` (in the model's second request), ``commit`` (just after the
run's commit), ``none``. Each refund appends ``refund <idempotency key>`` to WORKDIR/effects.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from helpers import answer, call, calls, reading_model, tool_messages
from tooldeck import Agent, Approve, RunContext, ToolResult, tool
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import FinalAnswer, RunRecovered
from tooldeck.sessions import PostgresSession, Session, SQLiteSession

kind, where, workdir_text, scenario, run_id, hang = sys.argv[1:7]
workdir = Path(workdir_text)
effects = workdir / "effects"
PROMPT = "Did my refund go through? If not, refund it."


def hang_here(point: str) -> None:
    if hang == point:
        (workdir / "hanging").write_text(point)
        time.sleep(600)


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    hang_here("lookup")
    return f"order {order_id}: paid, not refunded"


def refund(ctx: RunContext[None], order_id: str) -> str:
    hang_here("before-refund")
    with effects.open("a") as file:
        file.write(f"refund {ctx.idempotency_key}\n")
    hang_here("refund")
    return f"refunded {order_id}"


@tool(side_effects=True, requires_approval=scenario in ("ask", "resume"))
def refund_order(ctx: RunContext[None], order_id: str) -> str:
    """Refund an order."""
    return refund(ctx, order_id)


def refunded_already(ctx: RunContext[None]) -> ToolResult | None:
    lines = effects.read_text().splitlines() if effects.exists() else []
    if f"refund {ctx.idempotency_key}" in lines:
        return ToolResult.success("refunded (found by reconcile)")
    return None


@tool(name="refund_order", side_effects=True, reconcile=refunded_already)
def refund_order_checked(ctx: RunContext[None], order_id: str) -> str:
    """Refund an order."""
    return refund(ctx, order_id)


class Counted(Capability):
    def initial_state(self) -> dict[str, Any]:
        return {"calls": 0}

    async def wrap_call(self, call: Any, ctx: Any, call_next: Any) -> ToolResult:
        state = self.state(ctx)
        state["calls"] += 1
        result = await call_next(call)
        return ToolResult.success(f"{result.output} (call {state['calls']} of the run)")


def open_session() -> Session:
    if kind == "sqlite":
        return SQLiteSession(where, "shop")
    return PostgresSession(where, "shop")


def shop_agent() -> tuple[Agent[None, str], Any]:
    turns = [
        calls(call("lookup_order", "c1", order_id="A1")),
        calls(call("refund_order", "c2", order_id="A1")),
        answer("Refunded."),
    ]
    if scenario == "next":
        turns = [answer("You're welcome.")]
    model = reading_model(turns)
    if hang == "request":
        hanging = model._outputs[0]

        def second_hangs(request: Any) -> Any:
            if len(model.requests) == 2:
                hang_here("request")
            return hanging(request)

        model._outputs = [second_hangs] * len(model._outputs)
    refunder = refund_order_checked if scenario == "run-checked" else refund_order
    counted = [Counted()] if scenario == "run-counted" else []
    return Agent(model, tools=[lookup_order, refunder], capabilities=counted), model


def hang_after_commit(session: Session) -> None:
    appended = session.append

    async def append_then_hang(*args: Any, **kwargs: Any) -> int:
        head = await appended(*args, **kwargs)
        hang_here("commit")
        return head

    session.append = append_then_hang  # type: ignore[method-assign]


async def main() -> None:
    agent, model = shop_agent()
    session = open_session()
    hang_after_commit(session)
    given = None if run_id == "-" else run_id
    try:
        if scenario == "resume":
            pending = (workdir / "pending").read_text()
            stream = agent.resume_stream(session=session, decisions={pending: Approve()})
        else:
            prompt = "Thanks." if scenario == "next" else PROMPT  # run, run-counted, ask
            stream = agent.stream(prompt, session=session, run_id=given)
        events = [event async for event in stream]
    finally:
        await session.aclose()
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    result = final.result
    if result.pending:
        (workdir / "pending").write_text(result.pending[0].id)
    recovered = [
        {
            "how": event.how,
            "run_id": event.run_id,
            "rounds": event.rounds,
            "settled": [trace.result.output for trace in event.settled],
        }
        for event in events
        if isinstance(event, RunRecovered)
    ]
    first_request = [m.content for m in model.requests[0].messages] if model.requests else []
    outcome = {
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "run_id": result.run_id,
        "read": tool_messages(result.messages),
        "recovered": recovered,
        "requests": len(model.requests),
        "first_request": first_request,
    }
    print(json.dumps(outcome))


asyncio.run(main())
