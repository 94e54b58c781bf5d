"""The shop of the promise matrix as a durable run: the durable door, a process of its own.

    python tests/_durable_shop.py MODE WORKDIR --db URL --schema S --base-url URL [options]

The shop's agent (WORKDIR/shop.py, tests/_promise_doors.py: its tools, handoffs, guardrails
and untrusted policy, read as ``tooldeck run`` reads them) on the provider simulator
(``OPENAI_BASE_URL``), wrapped in a DurableAgent on DBOS (the system database ``--db``, a
PostgreSQL the suite starts, in the schema ``--schema``), as the executor ``--executor``
(``worker-1`` unless told). Its conversations, when a run names one (``--session``), are
PostgresSessions in ``--sessions-dsn``. With SHOP_MAX_REQUESTS set, its runs draw on the named
budget ``shop``: a ``Budget`` of that many requests in this process, as
``DurableAgent(budgets=...)`` declares it in each process, or, with SHOP_BUDGET_DSN, one
``PostgresBudget`` there for every process.

Modes:
- ``run``: start ``--prompt`` as the run ``--run-id`` (``--session``) and print its first
  stop: its end, a guardrail's trip, or its pause (the process then exits; the run waits,
  durably). ``--prompts P,Q`` with ``--sessions S,T``: one run per pair, each started from
  a thread of its own at once, as a web server's threads would (with ``--run-id``: each
  thread starts that one run; what each was told is printed as a list).
- ``serve``: launch (DBOS recovers this executor's unfinished runs, a killed process's) and
  print the next stop of ``--run-id``: its end, or a pause other than the one decided
  (WORKDIR/decided.json).
- ``approve``: a client (it executes no run): approve every call the run waits on, and
  keep their ids in WORKDIR/decided.json.
- ``cancel``: start ``--prompt`` as ``--run-id``, cancel it from another thread once a shop
  tool waits for its cancel, and print how it ends and what its workflow recorded.

The last line of stdout is what the person's code read, as JSON (with ``tool_messages``, the
tool results the run kept, and ``budget_spent``, what this process's budget counted).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from tooldeck import Agent, Approve
from tooldeck.durable import DurableAgent
from tooldeck.errors import RunStopped
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.results import RunResult
from tooldeck.run.budget import Budget
from tooldeck.sessions import PostgresBudget, PostgresSession
from tooldeck.testing.simulator import API_KEY

WAIT_S = 120.0
ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


def shop_agent(workdir: Path, base_url: str) -> Agent[Any, str]:
    """The shop's agent, from its module, as ``tooldeck run -t shop.py`` takes it."""
    spec = importlib.util.spec_from_file_location("shop", workdir / "shop.py")
    assert spec is not None
    assert spec.loader is not None
    shop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shop)
    names = getattr(shop, "__all__", ["lookup_order", "refund_order"])
    model = OpenAIChatModel("gpt-4.1-mini", base_url=base_url, api_key=API_KEY, max_retries=0)
    return Agent(
        model,
        tools=[getattr(shop, name) for name in names],
        handoffs=getattr(shop, "handoffs", []),
        output_guardrails=getattr(shop, "output_guardrails", []),
        after_untrusted=getattr(shop, "after_untrusted", "allow"),
    )


def shop_budget(schema: str) -> Budget | None:
    """The budget ``shop`` the runs draw on, if SHOP_MAX_REQUESTS sets one."""
    allowed = os.environ.get("SHOP_MAX_REQUESTS")
    if not allowed:
        return None
    if os.environ.get("SHOP_BUDGET_DSN"):  # one budget for every process: a store
        return PostgresBudget(os.environ["SHOP_BUDGET_DSN"], schema, max_requests=int(allowed))
    return Budget(max_requests=int(allowed))


BUDGET: Budget | None = None
"""The budget ``shop`` of this process (``declare`` sets it)."""


def declare(args: argparse.Namespace) -> DurableAgent[Any, str]:
    global BUDGET
    config: DBOSConfig = {
        "name": "tooldeck-durable-shop",
        "system_database_url": args.db,
        "dbos_system_schema": args.schema,
        "executor_id": args.executor,
        "application_version": "tests",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }
    DBOS(config=config)
    if args.mode == "approve":
        DBOS.listen_queues([])  # a client: it takes no runs
    agent = shop_agent(Path(args.workdir), args.base_url)

    def session(session_id: str) -> PostgresSession:
        return PostgresSession(args.sessions_dsn, session_id)

    BUDGET = shop_budget(args.schema)
    budgets = {"shop": BUDGET} if BUDGET else None
    return DurableAgent(agent, name="shop", sessions=session, budgets=budgets)


def options(session: str | None = None) -> dict[str, Any]:
    """A run's options: its conversation, and the budget ``shop`` if this process has one."""
    return {"session": session or None, **({"budget": "shop"} if BUDGET else {})}


def told(result: RunResult[Any] | None, stopped: RunStopped | None = None) -> dict[str, Any]:
    """What the person's code read of a run's stop."""
    if result is None:
        return {"stopped_by": f"{type(stopped).__name__}: {stopped}", "answer": None}
    return {
        "run_id": result.run_id,
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "agent": result.agent,
        "pending": [waiting.call.name for waiting in result.pending],
        "pending_ids": [waiting.id for waiting in result.pending],
        "asked_because": [waiting.reason for waiting in result.pending],
        "tainted_by": result.tainted_by.tool_name if result.tainted_by else None,
        "guardrails": [(d.stage, d.name, d.verdict, d.message) for d in result.guardrails],
        "stopped_by": f"{type(stopped).__name__}: {stopped}" if stopped else "",
        "tool_messages": [m.content for m in result.messages if m.role == "tool"],
        "budget_spent": None if BUDGET is None else BUDGET.spent.requests,
    }


async def outcome(waiting: Any) -> dict[str, Any]:
    """``await waiting`` (a run's result), told as the person's code reads it."""
    try:
        result = await waiting
    except RunStopped as stopped:
        partial = stopped.result if isinstance(stopped.result, RunResult) else None
        return told(partial, stopped)
    return told(result)


async def run(durable: DurableAgent[Any, str], args: argparse.Namespace) -> None:
    if args.prompts is None:
        running = durable.run(args.prompt, run_id=args.run_id, **options(args.session))
        print(json.dumps(await outcome(running)))
        return
    pairs = list(zip(args.prompts.split(","), args.sessions.split(","), strict=True))

    def one(prompt: str, session: str) -> dict[str, Any]:  # a thread of a web server, say
        try:
            run_id = args.run_id or f"{session}-run"  # --run-id: every thread starts that run
            result = durable.run_sync(prompt, run_id=run_id, **options(session))
        except RunStopped as stopped:
            partial = stopped.result if isinstance(stopped.result, RunResult) else None
            return told(partial, stopped)
        return told(result)

    said = await asyncio.gather(*(asyncio.to_thread(one, *pair) for pair in pairs))
    if args.run_id:  # the same run from each thread: what each was told, in order
        print(json.dumps(said))
        return
    print(json.dumps({session: outcome for (_, session), outcome in zip(pairs, said, strict=True)}))


def decided(workdir: Path) -> set[str]:
    kept = workdir / "decided.json"
    return set(json.loads(kept.read_text())) if kept.exists() else set()


async def serve(durable: DurableAgent[Any, str], args: argparse.Namespace) -> None:
    handle = await DBOS.retrieve_workflow_async(args.run_id)
    known = decided(Path(args.workdir))
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        status = await handle.get_status()
        if status.status in ENDED:
            print(json.dumps(await outcome(handle.get_result())))
            return
        paused = await durable.paused(args.run_id)
        if paused is not None and not {w.id for w in paused.pending} <= known:
            print(json.dumps(told(paused)))
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"run {args.run_id} neither ended nor paused in {WAIT_S} s")


async def approve(durable: DurableAgent[Any, str], args: argparse.Namespace) -> None:
    paused = await durable.paused(args.run_id)
    assert paused is not None, "the run is not paused"
    ids = [waiting.id for waiting in paused.pending]
    pause = await durable.send_decisions(args.run_id, dict.fromkeys(ids, Approve(by="person")))
    (Path(args.workdir) / "decided.json").write_text(json.dumps(ids))
    print(json.dumps({"pause": pause, "approved": [w.call.name for w in paused.pending]}))


async def cancel(durable: DurableAgent[Any, str], args: argparse.Namespace) -> None:
    running = asyncio.ensure_future(outcome(durable.run(args.prompt, run_id=args.run_id)))
    hanging = Path(os.environ["SHOP_EFFECTS"] + ".hanging")
    deadline = time.monotonic() + WAIT_S  # a shop tool waits for its cancel
    while not (hanging.exists() or running.done()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert hanging.exists(), "no shop tool came to wait for its cancel"
    returned: list[bool] = []
    canceller = threading.Thread(
        target=lambda: returned.append(durable.cancel(args.run_id, reason="the customer left"))
    )
    canceller.start()
    canceller.join()
    said = await asyncio.wait_for(running, 60)
    handle = await DBOS.retrieve_workflow_async(args.run_id)
    recorded = await outcome(handle.get_result())
    status = (await handle.get_status()).status
    print(json.dumps({**said, "cancel_returned": returned, "recorded": recorded, "status": status}))


MODES = {"run": run, "serve": serve, "approve": approve, "cancel": cancel}


async def main(args: argparse.Namespace) -> None:
    durable = declare(args)
    DBOS.launch()
    try:
        await MODES[args.mode](durable, args)
    finally:
        DBOS.destroy()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("workdir")
    parser.add_argument("--db", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--sessions-dsn", default="")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--executor", default="worker-1")
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--prompt", default="")
    parser.add_argument("--session", default="")
    parser.add_argument("--prompts", default=None)
    parser.add_argument("--sessions", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
