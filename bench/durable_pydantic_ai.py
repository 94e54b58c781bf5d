"""Pydantic AI's DBOS integration on the workload of bench/durable.py, for the side-by-side.

Run with Pydantic AI's own interpreter (bench/setup_venvs.sh makes it, with dbos 3.4.0):

    $BENCH_VENVS/pydantic_ai_dbos/bin/python bench/durable_pydantic_ai.py [--runs 40] [--rounds 5]

The same 4 requests and 3 calls of an async ``add`` tool, from a ``FunctionModel``; the
durable run is ``agent.run`` inside a ``@DBOS.workflow`` with the ``DBOSDurability``
capability (Pydantic AI's current integration; its ``DBOSAgent`` wrapper is deprecated).
Also prints the steps DBOS recorded for one run, to show which parts are steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

CALLS = 3


async def loop_model(messages: list[Any], info: AgentInfo) -> ModelResponse:
    returns = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    usage = RequestUsage(input_tokens=10, output_tokens=10)
    if len(returns) >= CALLS:
        return ModelResponse(parts=[TextPart(f"done {returns[-1].content}")], usage=usage)
    previous = int(returns[-1].content) if returns else 0
    call = ToolCallPart("add", {"a": previous, "b": 1}, tool_call_id=f"c{len(returns)}")
    return ModelResponse(parts=[call], usage=usage)


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@DBOS.step(name="bench.noop")
async def noop() -> int:
    return 1


@DBOS.workflow(name="bench.steps")
async def bare_steps(count: int) -> int:
    for _ in range(count):
        await noop()
    return count


plain = Agent(FunctionModel(loop_model), tools=[add], name="plain")
durable = Agent(
    FunctionModel(loop_model), tools=[add], name="bench", capabilities=[DBOSDurability()]
)


@DBOS.workflow(name="bench.durable")
async def durable_run(prompt: str) -> str:
    result = await durable.run(prompt)
    return str(result.output)


async def timed(run: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, float]:
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        await run()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu) * 1e3, statistics.median(wall) * 1e3


async def workflow(func: Any, *args: Any) -> Any:
    handle = await DBOS.start_workflow_async(func, *args)
    return await handle.get_result()


async def bench(runs: int, rounds: int) -> dict[str, Any]:
    DBOS.launch()
    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "plain": lambda: plain.run("go"),
        "workflow+0": lambda: workflow(bare_steps, 0),
        "workflow+7": lambda: workflow(bare_steps, 7),
        "durable": lambda: workflow(durable_run, "go"),
    }
    handle = await DBOS.start_workflow_async(durable_run, "go")
    assert await handle.get_result() == "done 3"
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(handle.workflow_id)]
    for run in cases.values():
        await run()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            samples[name].append(await timed(run, runs))
    medians = {
        name: (statistics.median(c for c, _ in s), statistics.median(w for _, w in s))
        for name, s in samples.items()
    }
    return {"medians_ms": medians, "steps_of_one_run": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        url = f"sqlite:///{Path(root) / 'bench.sqlite'}"
        DBOS(config={"name": "pydantic-ai-bench", "system_database_url": url, "log_level": "ERROR"})
        try:
            figures = asyncio.run(bench(args.runs, args.rounds))
        finally:
            DBOS.destroy()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
