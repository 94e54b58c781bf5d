"""A durable-run application the tests start as real processes, kill, and start again.

Its model and tools append what they do to a log file (``start note a``, ``done note a``,
``model start 1``...), so a test counts how often each call and each model request really
ran across processes. The model answers from the conversation (how many tool results it
has seen), not from a position in a script, so a recovered run in a new process gets the
same turns.

    python tests/_durable_app.py MODE --db URL --log PATH --executor ID [options]

Modes: ``run`` (start the run ``--run-id`` and print how it stops), ``serve`` (launch, so
DBOS recovers this executor's runs, and print the results of ``--run-id``), ``decide``
(approve every pending call of ``--run-id`` from this process), ``worker`` (take runs from
the queue until stopped), ``enqueue`` (put ``--runs`` runs on the queue), ``recover``
(hand the runs of the dead worker ``--dead`` to the others). ``decide``, ``enqueue`` and
``recover`` are clients: they take no runs from the queue.
Knobs: ``SLOW_S`` (how long the ``slow`` tool sleeps), ``NOTE_S`` (how long ``note`` takes),
``BLOCK_MODEL_AT`` (the model request, counted in tool results seen, that blocks a minute),
``HANG_CHARGE`` (``before`` or ``after`` its effect: where a ``charge`` call sleeps 10
minutes, to be killed; ``effect charge 5 <key>`` in the log is the side effect),
``APPROVE_SCOPE`` (the scope ``decide`` approves with: ``once``, ``run``, ``session``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig
from pydantic import BaseModel

from tooldeck import Agent, Approve, AssistantOutput, RunContext, ToolCall, ToolResult, tool
from tooldeck.durable import DurableAgent, recover_runs
from tooldeck.models.base import Model, ModelSettings

QUEUE = "tooldeck-test-runs"
SCENARIOS = {
    "parallel": [[("note", "a"), ("note", "b"), ("slow", "c")]],
    "sequential": [[("note", "a")]],
    "approval": [[("note", "a"), ("pay", "5")]],
    "approval_run": [[("pay", "5")], [("charge", "6")], [("pay", "7")]],
    "queue": [[("note", "x")]],
    "nested": [[("helper", "x")]],
    "charge": [[("note", "a"), ("charge", "5")], [("slow", "c")]],
    "charge_checked": [[("note", "a"), ("charge_checked", "5")], [("slow", "c")]],
}
"""Per scenario, the calls of each tool turn (tool name, argument); then the model answers.
``helper`` is an agent tool whose inner agent runs ``INNER``."""
INNER = [[("note", "a"), ("slow", "c")]]


class HelperInput(BaseModel):
    what: str


class Log:
    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


class ConversationModel(Model):
    """Answers each request from the tool results so far: the next scripted turn of calls,
    then ``answer: <results>``."""

    name = "conversation"

    def __init__(self, log: Log, turns: list[list[tuple[str, str]]], label: str = "model") -> None:
        self.log = log
        self.turns = turns
        self.label = label
        """Starts its log lines (``model start 1``; ``inner start 1`` for the inner agent)."""

    async def complete(
        self,
        messages: Any,
        tools: Any,
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        results = [m.content for m in messages if m.role == "tool"]
        self.log.write(f"{self.label} start {len(results)}")
        if os.environ.get("BLOCK_MODEL_AT") == str(len(results)):
            await asyncio.sleep(60)
        done = 0
        for index, turn in enumerate(self.turns):
            if len(results) == done:
                calls = tuple(
                    ToolCall(id=f"call_{index}_{arg}", name=name, arguments={"what": arg})
                    for name, arg in turn
                )
                self.log.write(f"{self.label} done {len(results)}")
                return AssistantOutput(tool_calls=calls)
            done += len(turn)
        self.log.write(f"{self.label} done {len(results)}")
        return AssistantOutput(content="answer: " + ",".join(results))


def build_tools(log: Log) -> list[Any]:
    @tool
    async def note(ctx: RunContext[Any], what: str) -> str:
        """Note something down."""
        log.write(f"start note {what} {ctx.run_id}")
        await asyncio.sleep(float(os.environ.get("NOTE_S", "0")))
        log.write(f"done note {what} {ctx.run_id}")
        return what

    @tool
    async def slow(what: str) -> str:
        """Take a while."""
        log.write(f"start slow {what}")
        await asyncio.sleep(float(os.environ.get("SLOW_S", "0")))
        log.write(f"done slow {what}")
        return what

    @tool(requires_approval=True)
    def pay(what: str) -> str:
        """Pay an amount (a person approves it first)."""
        log.write(f"start pay {what}")
        log.write(f"done pay {what}")
        return f"paid {what}"

    def charge_once(ctx: RunContext[Any], what: str) -> str:
        log.write(f"start charge {what}")
        if os.environ.get("HANG_CHARGE") == "before":
            time.sleep(600)
        log.write(f"effect charge {what} {ctx.idempotency_key}")
        if os.environ.get("HANG_CHARGE") == "after":
            time.sleep(600)
        return f"charged {what}"

    @tool(side_effects=True)
    def charge(ctx: RunContext[Any], what: str) -> str:
        """Charge an amount (at most once)."""
        return charge_once(ctx, what)

    def already_charged(ctx: RunContext[Any]) -> ToolResult | None:
        for line in Path(log.path).read_text().splitlines():
            if line.startswith("effect charge") and line.endswith(f" {ctx.idempotency_key}"):
                return ToolResult.success("charged (found by reconcile)")
        return None

    @tool(side_effects=True, reconcile=already_charged)
    def charge_checked(ctx: RunContext[Any], what: str) -> str:
        """Charge an amount (at most once; the log says whether it happened)."""
        return charge_once(ctx, what)

    return [note, slow, pay, charge, charge_checked]


def declare(args: argparse.Namespace) -> DurableAgent[Any, Any]:
    log = Log(args.log)
    config: DBOSConfig = {
        "name": "tooldeck-durable-tests",
        "system_database_url": args.db,
        "executor_id": args.executor,
        "application_version": "tests",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }
    if args.schema:
        config["dbos_system_schema"] = args.schema
    DBOS(config=config)
    if args.mode in ("decide", "enqueue", "recover"):
        DBOS.listen_queues([])  # a client, not a worker: it takes no runs from the queues
    model = ConversationModel(log, SCENARIOS[args.scenario])
    tools = build_tools(log)
    inner = Agent(ConversationModel(log, INNER, "inner"), tools)
    tools.append(inner.as_tool(name="helper", description="Helps.", parameters=HelperInput))
    return DurableAgent(Agent(model, tools), name=f"app-{args.scenario}")


def summary(result: Any) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "pending": [p.call.id for p in result.pending],
    }


async def main(args: argparse.Namespace) -> None:
    durable = declare(args)
    DBOS.launch()
    try:
        await MODES[args.mode](durable, args)
    finally:
        DBOS.destroy()


async def run(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    result = await durable.run("Go.", run_id=args.run_id)
    print(json.dumps(summary(result)), flush=True)


async def serve(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    handle = await DBOS.retrieve_workflow_async(args.run_id)
    result = await handle.get_result(polling_interval_sec=0.1)
    print(json.dumps(summary(result)), flush=True)


async def decide(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    paused = await durable.paused(args.run_id)
    assert paused is not None, "the run is not paused"
    scope = os.environ.get("APPROVE_SCOPE", "once")
    decisions = {p.call.id: Approve(by="approver", scope=scope) for p in paused.pending}  # type: ignore[arg-type]
    pause = await durable.send_decisions(args.run_id, decisions)
    print(json.dumps({"pause": pause, "decided": sorted(decisions)}), flush=True)


async def worker(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    await DBOS.register_queue_async(QUEUE, worker_concurrency=args.concurrency)
    print(json.dumps({"serving": args.executor}), flush=True)
    await asyncio.Event().wait()  # until the test stops this process


async def enqueue(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    await DBOS.register_queue_async(QUEUE, worker_concurrency=args.concurrency)
    ids = [f"{args.run_id}-{index:03d}" for index in range(args.runs)]
    for run_id in ids:
        await durable.start_async("Go.", run_id=run_id, queue=QUEUE)
    print(json.dumps({"enqueued": len(ids)}), flush=True)


async def recover(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    recovered = await recover_runs(args.dead, queue=QUEUE)
    print(json.dumps({"recovered": sorted(recovered)}), flush=True)


MODES = {
    "run": run,
    "serve": serve,
    "decide": decide,
    "worker": worker,
    "enqueue": enqueue,
    "recover": recover,
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--db", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--executor", required=True)
    parser.add_argument("--scenario", default="parallel", choices=sorted(SCENARIOS))
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--schema", default=None, help="DBOS system schema (PostgreSQL)")
    parser.add_argument("--runs", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--dead", default=None, help="recover: the dead worker's executor id")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
