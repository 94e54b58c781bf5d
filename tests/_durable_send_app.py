"""A durable agent the tests of ``DurableAgent.send`` start as real processes, kill (SIGKILL)
and start again: tests/test_durable_send_crash.py.

    python tests/_durable_send_app.py MODE --db URL --log PATH --executor ID --base-url URL
        [--schema S] [--run-id ID] [--text TEXT]

Its model is the provider simulator at ``--base-url`` (OpenAI Chat Completions); its tool
``survey(bay)`` logs ``start survey <bay>``, then waits until the file ``go-<bay>`` exists
beside the log (the test creates it), and returns ``bay <bay>: calm``.

Modes: ``run`` (start the run ``--run-id`` and print how it ends), ``serve`` (launch, so
DBOS recovers this executor's unfinished runs, and print how ``--run-id`` ends), ``send``
(a client that runs nothing: send ``--text`` to ``--run-id`` and print what happened). The
last line of stdout is JSON: the run's answer and conversation, or ``{"sent": ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from tooldeck import Agent, tool
from tooldeck.durable import DurableAgent
from tooldeck.errors import RunEnded
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.testing.simulator import API_KEY


def declare(args: argparse.Namespace) -> DurableAgent[Any, Any]:
    log, folder = Path(args.log), Path(args.log).parent

    def note(line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    @tool
    async def survey(bay: str) -> str:
        """Survey a bay (waits until the test lets it finish)."""
        note(f"start survey {bay}")
        while not (folder / f"go-{bay}").exists():
            await asyncio.sleep(0.05)
        note(f"done survey {bay}")
        return f"bay {bay}: calm"

    config: DBOSConfig = {
        "name": "tooldeck-durable-send-tests",
        "system_database_url": args.db,
        "executor_id": args.executor,
        "application_version": "tests",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }
    if args.schema:
        config["dbos_system_schema"] = args.schema
    DBOS(config=config)
    if args.mode == "send":
        DBOS.listen_queues([])  # a client: it takes no runs
    model = OpenAIChatModel("gpt-4.1-mini", base_url=args.base_url, api_key=API_KEY, max_retries=0)
    return DurableAgent(Agent(model, [survey]), name="harbour")


def ended(result: Any) -> dict[str, Any]:
    return {
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "messages": [[m.role, m.content] for m in result.messages],
    }


async def run(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    print(json.dumps(ended(await durable.run("Survey the bays.", run_id=args.run_id))))


async def serve(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    handle = await DBOS.retrieve_workflow_async(args.run_id)
    print(json.dumps(ended(await handle.get_result(polling_interval_sec=0.1))))


async def send(durable: DurableAgent[Any, Any], args: argparse.Namespace) -> None:
    try:
        await durable.send(args.run_id, args.text)
    except RunEnded as refused:
        print(json.dumps({"sent": False, "refused": str(refused)}))
        return
    print(json.dumps({"sent": True}))


MODES = {"run": run, "serve": serve, "send": send}


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
    parser.add_argument("--db", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--executor", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--text", default="")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
