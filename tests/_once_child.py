"""A separate process for the at-most-once tests: one run in a session, its outcome as JSON.

    python tests/_once_child.py KIND WHERE WORKDIR RUN_ID TOOL HANG

KIND/WHERE name the database (``sqlite PATH`` or ``postgres DSN``). The run (id RUN_ID, in
session ``orders``; its model answers what the conversation calls for, with fresh call ids)
calls TOOL (``charge``: side_effects; ``charge_checked``: side_effects
with a reconcile that reads WORKDIR/effects), then ``wait``, then answers. Each side effect
is a line appended to WORKDIR/effects (``<idempotency key> charged``). HANG says where the
process stops to be killed: ``before`` (in the call, before its effect), ``after`` (in the
call, after its effect), ``later`` (in ``wait``, after the charge reported), ``none``. A
hanging process writes WORKDIR/hanging and sleeps. Prints the tool messages the model read.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from helpers import answer, call, calls, reading_model, tool_messages
from tooldeck import Agent, RunContext, ToolResult, tool
from tooldeck.sessions import PostgresSession, Session, SQLiteSession

kind, where, workdir_text, run_id, tool_name, hang = sys.argv[1:7]
workdir = Path(workdir_text)
effects = workdir / "effects"


def hang_here(point: str) -> None:
    if hang == point:
        (workdir / "hanging").write_text(point)
        time.sleep(600)


def charge_once(ctx: RunContext[None], amount: int) -> str:
    hang_here("before")
    with effects.open("a") as file:
        file.write(f"{ctx.idempotency_key} charged {amount}\n")
    hang_here("after")
    return f"charged {amount}"


@tool(side_effects=True)
def charge(ctx: RunContext[None], amount: int) -> str:
    """Charge the customer."""
    return charge_once(ctx, amount)


def already_charged(ctx: RunContext[None]) -> ToolResult | None:
    """Ask 'the bank' (the effects file) whether this call's charge went through."""
    done = effects.read_text().splitlines() if effects.exists() else []
    for line in done:
        if line.startswith(f"{ctx.idempotency_key} "):
            return ToolResult.success(f"{line.split(' ', 1)[1]} (found by reconcile)")
    return None


@tool(side_effects=True, reconcile=already_charged)
def charge_checked(ctx: RunContext[None], amount: int) -> str:
    """Charge the customer (the bank can be asked whether a charge went through)."""
    return charge_once(ctx, amount)


@tool
def wait() -> str:
    """Wait for the shop."""
    hang_here("later")
    return "waited"


def open_session() -> Session:
    if kind == "sqlite":
        return SQLiteSession(where, "orders")
    return PostgresSession(where, "orders")


async def main() -> None:
    model = reading_model(
        [calls(call(tool_name, "c1", amount=5)), calls(call("wait", "c2")), answer("done")]
    )
    agent = Agent(model, tools=[charge, charge_checked, wait])
    session = open_session()
    try:
        result = await agent.run("charge 5", session=session, run_id=run_id)
    finally:
        await session.aclose()
    print(json.dumps({"read": tool_messages(result.messages), "answer": result.output}))


asyncio.run(main())
